package main

import (
	"strings"
	"testing"
)

// TestEstimateDeepSeek: `mocker estimate` prices DeepSeek-V3 (multi-head latent attention) with the
// op-level model on SGLang's MLA op tables, as the accuracy benchmark's rows deploy it (TP 8, fp8
// GEMMs, fp8_block experts, 0.5.9), and the same deployment on vLLM, whose MLA tables are whole
// modules, is an error naming them.
func TestEstimateDeepSeek(t *testing.T) {
	db := sharedData(t, "aiconfigurator")
	args := func(backend, version string) []string {
		return []string{"estimate", "--timing", "default", "--perf-db", db, "--model", "deepseek-ai/DeepSeek-V3",
			"--backend", backend, "--backend-version", version, "--quantization", "fp8", "--moe-quantization", "fp8_block", "--tp", "8",
			"--prefill-tokens", "1024", "--decode-requests", "16", "--decode-context", "1500"}
	}
	out, _, err := mocker(t, args("sglang", "0.5.9")...)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := estimateJSON(t, out)
	if !(got["prefill_ms"] > got["decode_ms"] && got["decode_ms"] > 0) {
		t.Errorf("%s, want prefill > decode > 0", out)
	}
	if _, _, err := mocker(t, args("vllm", "0.24.0")...); err == nil || !strings.Contains(err.Error(), "mla_context_module_perf") {
		t.Errorf("vllm: err = %v, want one naming the MLA module tables", err)
	}
}
