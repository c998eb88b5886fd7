package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScalingJSONLNeedsPlanner: --scaling-jsonl without --planner-config has nothing to write, so it is
// refused before the run rather than leaving an empty file.
func TestScalingJSONLNeedsPlanner(t *testing.T) {
	dir := t.TempDir()
	s := filepath.Join(dir, "s.jsonl")
	out, stderr, err := mocker(t, "predict", "--num-requests", "5", "--scaling-jsonl", s)
	if want := `scaling-jsonl "` + s + `": applies to --planner-config, which is not given`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if out != "" || strings.Contains(stderr, "simulated") {
		t.Errorf("ran before failing:\n%s%s", out, stderr)
	}
	if _, err := os.Stat(s); err == nil {
		t.Errorf("left %s behind", s)
	}
}

// TestMaxModelLenHelp: --help says what 0 means where it is not unlimited: a live server takes the
// model's context length (liveOptions), as vLLM does.
func TestMaxModelLenHelp(t *testing.T) {
	for _, cmd := range []string{"predict", "serve"} {
		out, _, err := mocker(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(out, "--max-model-len")
		line, _, _ := strings.Cut(out[i:], "\n")
		if !strings.Contains(line, "0: unlimited in predict and recommend; serve, worker and frontend take the model's max_position_embeddings") {
			t.Errorf("%s --help: %s", cmd, line)
		}
	}
}

// TestEstimateRefusesAnEmptyPass: estimate with no batch, or only cached prompt tokens, has nothing to
// price; it printed a pass of 0 ms.
func TestEstimateRefusesAnEmptyPass(t *testing.T) {
	for _, args := range [][]string{{}, {"--prefill-cached", "100"}, {"--decode-context", "100"}} {
		out, _, err := mocker(t, append([]string{"estimate", "--timing", "polynomial"}, args...)...)
		if want := "estimate: an empty pass: give --prefill-tokens (a prompt chunk) or --decode-requests and --decode-context (decodes), or both"; err == nil || err.Error() != want {
			t.Errorf("%v: %q, error %v; want %q", args, out, err, want)
		}
	}
}

// TestModelTooLargeSaysWhatToChange: a model whose weights leave no KV room on one GPU is refused with
// the numbers and the flag that fixes it; at TP 2 the same model runs.
func TestModelTooLargeSaysWhatToChange(t *testing.T) {
	_, _, err := mocker(t, "estimate", "--model", "llama-3.1-70b", "--prefill-tokens", "10")
	if err == nil || !strings.HasPrefix(err.Error(), "num-gpu-blocks auto (llama-3.1-70b on h200_sxm, tp 1): hardware: model does not fit") ||
		!strings.HasSuffix(err.Error(), "; a larger --tp spreads the weights over more GPUs") {
		t.Errorf("TP 1: error %v", err)
	}
	if _, _, err := mocker(t, "estimate", "--model", "llama-3.1-70b", "--tp", "2", "--prefill-tokens", "10"); err != nil {
		t.Errorf("TP 2: %v", err)
	}
}

// TestMaxNumSeqsListWithConfig: --max-num-seqs-list given beside a --config file is set again after
// the file is read; it failed to parse its own printed form ("[auto,256]") and would have doubled.
func TestMaxNumSeqsListWithConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("num-requests: 20\ntiming: fixed\nprefill-ms: 20\ndecode-ms: 5\n"), 0o644)
	out, _, err := mocker(t, "recommend", "--config", cfg, "--ttft-p90-ms", "500", "--max-num-seqs-list", "auto,256",
		"--tp-list", "1", "--max-workers", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Searched 2 shapes:", "1 × vllm agg tp1 seqs auto=1024 mbt 8192", "1 × vllm agg tp1 seqs 256 mbt 8192"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	help, _, _ := mocker(t, "recommend", "--help")
	if strings.Contains(help, "(default [])") {
		t.Errorf("help prints an empty list's default")
	}
}
