package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileFitsModelConfig: a built-in profile given by name prices a --model-config checkpoint
// whatever its folder is named, where the checkpoint's passes are those the profile was measured for:
// the run is the catalog model's. Of another architecture it is refused, naming the setting that gave
// the profile (a pool's own, a config file's line), both models and the number that differs. A search
// prices the checkpoint's trtllm shapes by the profile.
func TestProfileFitsModelConfig(t *testing.T) {
	dir, same, deeper := llamaCheckpoints(t)
	const p = "h200-llama-3.1-8b-bf16"
	catalog := sameRunAsCatalog(t, p, same)
	t.Logf("mean TTFT %.3f ms both", catalog["mean_ttft_ms"])

	for _, model := range [][]string{{"--model", "llama-3.1-8b"}, {"--model-config", same}} {
		out, _, err := mocker(t, append([]string{"recommend", "--num-requests", "20", "--request-rate", "100", "--input-tokens", "256", "--output-tokens", "4",
			"--ttft-p90-ms", "1000", "--tp-list", "1", "--max-workers", "1", "--backends", "vllm,trtllm", "--profile", p}, model...)...)
		if err != nil || !strings.Contains(out, "Searched 2 shapes:") || strings.Contains(out, "not a valid deployment") {
			t.Errorf("recommend %v: error %v; want both shapes searched:\n%s", model, err, out)
		}
	}

	conf := filepath.Join(dir, "c.yaml")
	os.WriteFile(conf, []byte("timing: profile\nprofile: "+p+"\n"), 0o644)
	why := ": measured for llama-3.1-8b bf16 on h200, and the deployment runs Llama-33 bf16 on h200_sxm (num_hidden_layers 33, not 32; give --profile PATH measured for it, or --timing polynomial)"
	for _, tc := range []struct{ args, want string }{
		{"predict --timing profile --profile " + p + " --model-config " + deeper, "--profile " + p + why},
		{"predict --prefill-workers 1 --decode-workers 1 --prefill-timing profile --prefill-profile " + p + " --model-config " + deeper,
			"prefill workers: --prefill-profile " + p + why},
		{"predict --config " + conf + " --model-config " + deeper, "config " + conf + " line 2: --profile " + p + why},
	} {
		if _, _, err := mocker(t, strings.Fields(tc.args)...); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.args, err, tc.want)
		}
	}
}

// TestStepsCSVFitsModelConfig: a step-time CSV given as --profile prices a --model-config checkpoint
// whose folder is named otherwise by the rows of the catalog model whose passes it computes: predict
// runs as on the catalog model, and recommend prices its trtllm shapes by it; of another architecture it
// is refused naming the rows' models and the number that differs.
func TestStepsCSVFitsModelConfig(t *testing.T) {
	_, same, deeper := llamaCheckpoints(t)
	const csv = "../../timing/profile/data/h200_bf16_dense.csv"
	sameRunAsCatalog(t, csv, same)
	out, _, err := mocker(t, "recommend", "--num-requests", "20", "--request-rate", "100", "--input-tokens", "256", "--output-tokens", "4",
		"--ttft-p90-ms", "1000", "--tp-list", "1", "--max-workers", "1", "--backends", "vllm,trtllm", "--profile", csv, "--model-config", same)
	if err != nil || !strings.Contains(out, "Searched 2 shapes:") || strings.Contains(out, "not a valid deployment") {
		t.Errorf("recommend: error %v; want both shapes searched:\n%s", err, out)
	}
	want := "--profile " + csv + ": no rows price model Llama-33 (rows of llama-3.1-8b (num_hidden_layers 33, not 32), qwen3-32b (num_hidden_layers 33, not 64)): write Llama-33 in the model column of rows measured for it"
	if _, _, err := mocker(t, "predict", "--timing", "profile", "--profile", csv, "--model-config", deeper); err == nil || err.Error() != want {
		t.Errorf("another architecture: %v, want %s", err, want)
	}
}

// llamaCheckpoints writes two --model-config folders in dir holding llama-3.1-8b's config.json: same, named
// otherwise, and deeper, Llama-33, with a layer more.
func llamaCheckpoints(t *testing.T) (dir, same, deeper string) {
	t.Helper()
	llama, err := os.ReadFile("../../model/testdata/llama-3.1-8b/config.json")
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	same, deeper = filepath.Join(dir, "Meta-Llama-3.1-8B-Instruct"), filepath.Join(dir, "Llama-33")
	for _, c := range []struct {
		dir  string
		body []byte
	}{{same, llama}, {deeper, []byte(strings.Replace(string(llama), `"num_hidden_layers": 32`, `"num_hidden_layers": 33`, 1))}} {
		if err := os.Mkdir(c.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.dir, "config.json"), c.body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, same, deeper
}

// sameRunAsCatalog checks that predict --timing profile --profile profile on the checkpoint folder same
// reports what it reports on --model llama-3.1-8b, and returns the catalog model's report.
func sameRunAsCatalog(t *testing.T, profile, same string) map[string]float64 {
	t.Helper()
	run := func(model ...string) map[string]float64 {
		path := filepath.Join(t.TempDir(), "report.json")
		args := append([]string{"predict", "--timing", "profile", "--profile", profile, "--num-requests", "20", "--report-json", path}, model...)
		if _, _, err := mocker(t, args...); err != nil {
			t.Fatalf("%v: %v", model, err)
		}
		return readReport(t, path)
	}
	catalog, checkpoint := run("--model", "llama-3.1-8b"), run("--model-config", same)
	for _, k := range []string{"mean_ttft_ms", "p90_itl_ms", "mean_e2e_ms"} {
		if catalog[k] != checkpoint[k] || catalog[k] == 0 {
			t.Errorf("%s: --model-config %s %v, --model llama-3.1-8b %v; want equal", k, same, checkpoint[k], catalog[k])
		}
	}
	return catalog
}
