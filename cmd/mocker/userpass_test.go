package main

import (
	"fmt"
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

// TestHelpSaysWhatZeroAndEmptyMean: --help says what a value that shows no default stands for: 0 for
// --max-model-len, which every command takes as the model's context length (Config.ContextLen), as vLLM does;
// empty for --lora-dist, which is uniform. --max-model-len's line, shared by every command, says what each
// does with a longer request.
func TestHelpSaysWhatZeroAndEmptyMean(t *testing.T) {
	for _, tc := range []struct{ cmd, flag, want string }{
		{"predict", "--max-model-len", "0: the model's max_position_embeddings"},
		{"serve", "--max-model-len", "0: the model's max_position_embeddings"},
		{"serve", "--max-model-len", "a live server (serve, frontend, worker) answers it with a 400, predict counts it, recommend refuses the workload"},
		{"predict", "--lora-dist", "uniform (empty: the default) or zipf"},
	} {
		out, _, err := mocker(t, tc.cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(out, tc.flag+" ")
		if i < 0 {
			t.Errorf("%s --help: no %s", tc.cmd, tc.flag)
			continue
		}
		if line, _, _ := strings.Cut(out[i:], "\n"); !strings.Contains(line, tc.want) {
			t.Errorf("%s --help: %s", tc.cmd, line)
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

// TestFlagOverridesFilesModel: --model and --model-config name the model two ways; one given on the
// command line wins over the --config file's other, which is dropped (flags win over the file).
func TestFlagOverridesFilesModel(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	withModel, withConfig := filepath.Join(dir, "m.yaml"), filepath.Join(dir, "mc.yaml")
	os.WriteFile(withModel, []byte("model: qwen3-32b\n"), 0o644)
	os.WriteFile(withConfig, []byte("model-config: "+missing+"\n"), 0o644)
	run := []string{"predict", "--num-requests", "2", "--timing", "fixed", "--prefill-ms", "1", "--decode-ms", "1"}
	_, _, err := mocker(t, append(run, "--config", withModel, "--model-config", missing)...)
	if want := "--model-config " + missing + ": no such file or directory"; fmt.Sprint(err) != want {
		t.Errorf("--model-config over the file's model: error %v, want %q", err, want)
	}
	// The file's missing model-config, read, would be an error.
	if _, _, err := mocker(t, append(run, "--config", withConfig, "--model", "qwen3-32b")...); err != nil {
		t.Errorf("--model over the file's model-config: error %v", err)
	}
	_, _, err = mocker(t, append(run, "--model-config", missing, "--model", "qwen3-32b")...)
	if want := "model qwen3-32b: contradicts --model-config"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("both on the command line: error %v, want %q", err, want)
	}
}
