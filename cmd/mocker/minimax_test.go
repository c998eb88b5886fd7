package main

import (
	"encoding/json"
	"testing"
)

// TestEstimateMiniMax: `mocker estimate` prices MiniMax-M2.5 with the op-level model on the shared
// AIConfigurator tables, as the accuracy benchmark's vLLM rows deploy it (fp8, TP 4 and 8, 0.18.0).
func TestEstimateMiniMax(t *testing.T) {
	db := sharedData(t, "aiconfigurator")
	for _, tp := range []string{"4", "8"} {
		out, _, err := mocker(t, "estimate", "--timing", "default", "--perf-db", db, "--model", "MiniMaxAI/MiniMax-M2.5",
			"--backend", "vllm", "--backend-version", "0.18.0", "--quantization", "fp8", "--tp", tp,
			"--prefill-tokens", "1024", "--decode-requests", "16", "--decode-context", "1500")
		if err != nil {
			t.Fatalf("TP %s: %v", tp, err)
		}
		var got map[string]float64
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("TP %s: %v: %q", tp, err, out)
		}
		if !(got["prefill_ms"] > got["decode_ms"] && got["decode_ms"] > 0) {
			t.Errorf("TP %s: %s, want prefill > decode > 0", tp, out)
		}
	}
}
