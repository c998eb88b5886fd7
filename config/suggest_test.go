package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSuggest: a typo's nearest known name within two edits, or one it extends or cuts short; nothing
// for a name far from all; ties to the first in sorted order.
func TestSuggest(t *testing.T) {
	known := []string{"workers", "num-requests", "max-model-len", "tp", "ep", "port", "prefill-workers"}
	for name, want := range map[string]string{
		"num-request":      "num-requests",  // one dropped
		"workrs":           "workers",       // one dropped
		"wrokers":          "workers",       // two changed
		"max-model-length": "max-model-len", // extends it
		"max-model":        "max-model-len", // cuts it short
		"tpp":              "tp",
		"xp":               "ep", // tp and ep are one edit away: the first sorted
		"prt":              "port",
		"xyzzy":            "",
		"workers":          "", // known: nothing to suggest
		"t":                "tp",
	} {
		if got := Suggest(name, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestUnknownKeySuggests: a mistyped key in a --config file, top level or a pool's, names the key it
// most likely meant.
func TestUnknownKeySuggests(t *testing.T) {
	for body, want := range map[string]string{
		"num-request: 5\n":      `line 1: unknown key "num-request" (did you mean "num-requests"?)`,
		"decode:\n  tpp: 2\n":   `line 2: decode: unknown key "tpp" (did you mean "tp"?) (a pool sets [tp ep `, // the list goes on
		"prefil:\n  tp: 2\n":    `line 1: unknown key "prefil" (did you mean "prefill"?)`,
		"tp-size: 2\n":          `line 1: unknown key "tp-size" (did you mean "tp"?)`, // SGLang's name, one edit from dp-size
		"qqqqqqqqqqqqq: true\n": `line 1: unknown key "qqqqqqqqqqqqq"`,
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := Default()
		err := c.Load(path)
		want = "config " + path + " " + want
		if err == nil || err.Error() != want && !(strings.HasSuffix(want, " ") && strings.HasPrefix(err.Error(), want)) {
			t.Errorf("%q: %v, want %s", body, err, want)
		}
	}
}
