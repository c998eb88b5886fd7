package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSuggest: a typo's nearest known name within two edits, or one it extends or cuts short; a name
// that extends it before an edit as near; nothing for a name far from all, too short to guess from, or
// as near to two names.
func TestSuggest(t *testing.T) {
	known := []string{"workers", "worker-ports", "num-requests", "max-model-len", "model", "tp", "ep", "port",
		"prefill-workers", "prefill-tp", "html", "itl-p90-ms"}
	for name, want := range map[string]string{
		"num-request":          "num-requests",  // one dropped
		"workrs":               "workers",       // one dropped
		"wrokers":              "workers",       // two changed
		"max-model-length":     "max-model-len", // lengthens its last word
		"max-model":            "max-model-len", // cuts it short
		"tpp":                  "tp",
		"prt":                  "port",
		"xyzzy":                "",
		"workers":              "",           // known: nothing to suggest
		"t":                    "",           // one letter: too short to guess from
		"h":                    "",           // two edits from tp, ep
		"itl":                  "itl-p90-ms", // not html, two edits from a three-letter name
		"work":                 "",           // workers and worker-ports extend it: which?
		"worke":                "",
		"workerz":              "workers",
		"prefill":              "", // as many prefill-* flags
		"xp":                   "", // tp and ep are one edit away
		"model-len":            "", // adds a word to model; four edits from max-model-len
		"tp-size":              "tp",
		"tensor-parallel-size": "tp",
		"dp":                   "", // dp-size is not known here
	} {
		if got := Suggest(name, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
	// A prefix before an edit as near, whichever comes first.
	for _, known := range [][]string{{"port", "workers"}, {"workers", "port"}} {
		if got := Suggest("work", known); got != "workers" {
			t.Errorf("Suggest(work, %q) = %q, want workers", known, got)
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
