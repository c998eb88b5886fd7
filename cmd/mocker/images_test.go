package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPredictImages replays four requests one at a time: an image, the same image in other text (an
// encoder-cache hit), the first text with another image (a prefix hit only before the image), and the
// first request again (its image's blocks cached: no encoding). The encoder's 32 × 0.5 ms is charged
// exactly to the two requests that encode.
func TestPredictImages(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "mm.jsonl")
	rows := `{"timestamp": 0, "input_length": 64, "output_length": 2, "hash_ids": [1, 2, 3, 4], "images": [{"id": "x", "tokens": 32, "offset": 16}]}
{"timestamp": 1000, "input_length": 64, "output_length": 2, "hash_ids": [5, 6, 7, 8], "images": [{"id": "x", "tokens": 32, "offset": 16}]}
{"timestamp": 2000, "input_length": 64, "output_length": 2, "hash_ids": [1, 2, 3, 4], "images": [{"id": "y", "tokens": 32, "offset": 16}]}
{"timestamp": 3000, "input_length": 64, "output_length": 2, "hash_ids": [1, 2, 3, 4], "images": [{"id": "x", "tokens": 32, "offset": 16}]}
`
	if err := os.WriteFile(trace, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "r.json")
	out, _, err := mocker(t, "predict", "--trace", trace, "--trace-block-size", "16", "--block-size", "16", "--timing", "fixed",
		"--prefill-ms", "10", "--decode-ms", "1", "--encoder-ms-per-image-token", "0.5", "--report-json", path)
	if err != nil {
		t.Fatal(err)
	}
	r := readReport(t, path)
	for k, want := range map[string]float64{
		"completed_requests": 4, "images_encoded": 2, "image_tokens_encoded": 64, "encoder_cache_hits": 1,
		"prefix_cache_reused_ratio": (16 + 48) / 256.0,
	} {
		if r[k] != want {
			t.Errorf("%s = %v, want %v", k, r[k], want)
		}
	}
	if got := r["max_ttft_ms"] - r["min_ttft_ms"]; got != 16 {
		t.Errorf("TTFT max − min = %v ms, want the encoder's 16", got)
	}
	if !strings.Contains(out, "Images encoded:") || !strings.Contains(out, "Encoder cache hits:") {
		t.Errorf("the table does not show the encoder:\n%s", out)
	}

	// Synthetic images: a pool of one image is encoded once per worker; without a pool every image is.
	for _, tc := range []struct {
		pool    string
		encoded float64
	}{{"1", 1}, {"0", 20}} {
		if _, _, err := mocker(t, "predict", "--num-requests", "20", "--input-tokens", "100", "--input-tokens-stddev", "0",
			"--output-tokens", "4", "--output-tokens-stddev", "0", "--shared-prefix-ratio", "0", "--request-rate", "4",
			"--images-per-request", "1", "--image-tokens", "70", "--image-pool", tc.pool, "--report-json", path); err != nil {
			t.Fatal(err)
		}
		r := readReport(t, path)
		if r["images_encoded"] != tc.encoded || r["image_tokens_encoded"] != 70*tc.encoded || r["total_input_tokens"] != 20*170 {
			t.Errorf("pool %s: %v images encoded (%v tokens), %v input tokens; want %v (%v), %v", tc.pool, r["images_encoded"],
				r["image_tokens_encoded"], r["total_input_tokens"], tc.encoded, 70*tc.encoded, 20*170)
		}
	}
	// Without images the report has no encoder keys.
	if _, _, err := mocker(t, "predict", "--num-requests", "5", "--report-json", path); err != nil {
		t.Fatal(err)
	}
	if _, ok := readReport(t, path)["images_encoded"]; ok {
		t.Error("a run without images reports images_encoded")
	}
}

func TestPredictImageFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-tokens", "0"}, "image-tokens 0: must be at least 1"},
		{[]string{"--encoder-cache-size", "-1"}, "encoder-cache-size -1: must be >= 0"},
		{[]string{"--encoder-ms-per-image-token", "-2"}, "encoder-ms-per-image-token -2: must be a finite number >= 0"},
		{[]string{"--images-per-request", "1", "--trace", "x.jsonl"}, "images-per-request 1: applies to the synthetic workload"},
		{[]string{"--image-pool", "3"}, "synthetic: image-pool: needs images-per-request >= 1"},
	} {
		args := []string{"predict", "--num-requests", "2"} // small, should a synthetic case run
		if slices.Contains(tc.args, "--trace") {
			args = args[:1] // --num-requests is refused with a trace
		}
		_, _, err := mocker(t, append(args, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestSyntheticOnlyWithTrace: --synthetic-lengths, the lengths' spread, --num-requests ... shape the
// synthetic workload only; given with a trace they would do nothing, so they are refused (config's
// syntheticOnly lists them all).
func TestSyntheticOnlyWithTrace(t *testing.T) {
	for _, tc := range [][]string{
		{"--synthetic-lengths", "fixed", "synthetic-lengths fixed: applies to the synthetic workload, not to a trace"},
		{"--input-tokens-stddev", "0", "input-tokens-stddev 0: applies to the synthetic workload, not to a trace (a row gives its prompt)"},
		{"--output-tokens-stddev", "4", "output-tokens-stddev 4: applies to the synthetic workload, not to a trace (a row gives its output length)"},
		{"--num-requests", "10", "num-requests 10: applies to the synthetic workload, not to a trace (a trace replays every row)"},
	} {
		_, _, err := mocker(t, "predict", "--trace", "x.jsonl", tc[0], tc[1])
		if err == nil || !strings.Contains(err.Error(), tc[2]) {
			t.Errorf("%s %s: got %v, want %q", tc[0], tc[1], err, tc[2])
		}
	}
}
