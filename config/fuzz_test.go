package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoad: whatever the file holds, Load and Validate return a settings value or an error that
// names the file (and, for a value from it, its line); never a panic. Loading is deterministic. Run
// it with go test -run='^$' -fuzz='^FuzzLoad$' -fuzztime=45s ./config/
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"# comment\nblock-size: 64\nenable-prefix-caching: false\nrequest-rate: .inf\n",
		"num-gpu-blocks: auto\nconcurrency: 4\nconcurrency-desync-ms: auto\nnum-requests: 40\n",
		"spec-num-tokens: 2\nspec-accept-rates: [1, 0.5]\nseed: 18446744073709551615\n",
		"workers: 2.9\n",
		"workers: 0\n",
		"workers: 10000\n",
		"prefill-workers: 1\ndecode-workers: 1\nworkers: 1\n",
		"kv-hash-seed: notanumber\n",
		"seed: 1\n---\nseed: 2\n",
		"- 1\n",
		"backend: sglang\npage-size: 4\nblock-size: 16\n",
		"a: &a [*a, *a]\n",
		"\"\": 1\n",
		"block-size: !!int 0x10\nmax-model-len: 1_000\n",
		"prefill-workers: 1\ndecode-workers: 2\nprefill: {tp: 2, max-num-batched-tokens: 16384}\ndecode:\n  tp: 4\n  num-gpu-blocks: auto\n",
		"prefill:\n  tp: 2\n",
		"prefill-workers: 1\ndecode-workers: 1\ndecode: {dp-size: 99999999999, enable-chunked-prefill: yes}\n",
		"decode: [1]\nprefill: {tp: null}\n",
		"max-num-seqs: auto\nsynthetic-lengths: fixed\nconcurrency: 4\nbackend: sglang\n",
		"synthetic-lengths: even\nmax-num-seqs: -1\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c := Default()
		if err := c.Load(path); err != nil {
			if !strings.HasPrefix(err.Error(), "config "+path) {
				t.Fatalf("Load error %q does not name the file", err)
			}
			return
		}
		again := Default()
		if err := again.Load(path); err != nil || !reflect.DeepEqual(normal(c), normal(again)) {
			t.Fatalf("second Load differs: %v", err)
		}
		err := c.Validate()
		if se := (*settingError)(nil); err != nil && errors.As(err, &se) && c.given[se.key] != "" &&
			!strings.HasPrefix(err.Error(), "config "+path+" line ") {
			t.Fatalf("Validate error %q about %s from the file does not name the file and line", err, se.key)
		}
	})
}

// normal makes NaN settings (auto) comparable.
func normal(c Config) Config {
	if c.DesyncAuto() {
		c.ConcurrencyDesyncMs = -1
	}
	return c
}
