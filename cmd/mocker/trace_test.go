package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPredictPeerTraces: predict replays AIPerf's and Dynamo's trace variants, tokenising text rows with
// the built-in tokenizer and the catalog model's BOS (as serve), giving rows without output_length
// --default-max-tokens through --output-length-dist, and warning once about the fields it ignores.
func TestPredictPeerTraces(t *testing.T) {
	dir := t.TempDir()
	peer := filepath.Join("..", "..", "workload", "testdata", "peer")
	base := []string{"predict", "--timing", "fixed", "--prefill-ms", "10", "--decode-ms", "5",
		"--block-size", "4", "--num-gpu-blocks", "256"}
	tests := []struct {
		file    string
		in, out []int // by request id
		warn    string
	}{
		// Llama-3.1-8B's tokenizer adds BOS: one token more than the built-in tokenizer's count.
		{"aiperf_text.jsonl", []int{8, 9, 8}, []int{20, 100, 50}, ""},
		{"dynamo_priority.jsonl", []int{8, 8, 4}, []int{2, 3, 1},
			"warning: trace " + filepath.Join(peer, "dynamo_priority.jsonl") + ": ignoring fields the replay does not read: model (line 1), tenant (line 2)\n"},
		{"agentic_mooncake.jsonl", []int{8, 4, 12, 16}, []int{2, 1, 1, 1}, ""},
		{"agentic_subagents.jsonl", []int{8, 8, 4, 12, 12}, []int{2, 4, 1, 1, 1}, ""},
		{"bailian.jsonl", []int{40, 20, 70}, []int{13, 5, 8}, ""},
		{"applied_compute_agentic.jsonl", []int{16, 5, 28, 44}, []int{4, 2, 6, 3},
			"warning: trace " + filepath.Join(peer, "applied_compute_agentic.jsonl") + ": ignoring fields the replay does not read: task (line 2)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var first []byte
			for range 2 {
				jsonl := filepath.Join(dir, "r.jsonl")
				args := append(base, "--trace", filepath.Join(peer, tt.file), "--requests-jsonl", jsonl)
				// Each flag only where some row reads it (elsewhere it would be refused, unread).
				switch tt.file {
				case "aiperf_text.jsonl": // rows of text, some without output_length
					args = append(args, "--default-max-tokens", "50", "--output-length-dist", "fixed")
				case "applied_compute_agentic.jsonl": // lengths, no hash ids
				case "bailian.jsonl":
					args = append(args, "--trace-block-size", "16") // the published traces'
				default:
					args = append(args, "--trace-block-size", "4")
				}
				_, stderr, err := mocker(t, args...)
				if err != nil {
					t.Fatalf("%v\n%s", err, stderr)
				}
				var warn []string
				for _, l := range strings.SplitAfter(stderr, "\n") {
					if strings.HasPrefix(l, "warning:") {
						warn = append(warn, l)
					}
				}
				if strings.Join(warn, "") != tt.warn {
					t.Errorf("warnings %q, want %q", warn, tt.warn)
				}
				data, err := os.ReadFile(jsonl)
				if err != nil {
					t.Fatal(err)
				}
				if first != nil && !bytes.Equal(data, first) {
					t.Fatal("a second run wrote different records")
				}
				first = data
				var in, out []int
				for dec := json.NewDecoder(bytes.NewReader(data)); dec.More(); {
					var r struct {
						In  int `json:"input_tokens"`
						Out int `json:"output_tokens"`
					}
					if err := dec.Decode(&r); err != nil {
						t.Fatal(err)
					}
					in, out = append(in, r.In), append(out, r.Out)
				}
				if !slices.Equal(in, tt.in) || !slices.Equal(out, tt.out) {
					t.Fatalf("input tokens %v output tokens %v, want %v and %v", in, out, tt.in, tt.out)
				}
			}
		})
	}
}

// TestPredictPeerTraceBad: a bad row fails predict naming the file, line and field.
func TestPredictPeerTraceBad(t *testing.T) {
	path := filepath.Join("..", "..", "workload", "testdata", "peer", "bad_agentic_subagents.jsonl")
	_, _, err := mocker(t, "predict", "--trace", path, "--trace-block-size", "4", "--timing", "fixed")
	want := "trace " + path + ` line 2: wait_for: "parent-2" is the request_id of no earlier row`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
