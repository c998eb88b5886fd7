package main

import (
	"encoding/json"
	"math"
	"testing"
)

// TestEstimateMiniMax: `mocker estimate` prices MiniMax-M2.5 with the op-level model on the shared
// AIConfigurator tables, as the accuracy benchmark's vLLM rows deploy it (fp8, TP 4 and 8, 0.18.0), and
// --breakdown itemizes the pass: the experts and the all-reduces are parts of it, and the parts add up.
func TestEstimateMiniMax(t *testing.T) {
	db := sharedData(t, "aiconfigurator")
	for _, tp := range []string{"4", "8"} {
		out, _, err := mocker(t, "estimate", "--timing", "default", "--perf-db", db, "--model", "MiniMaxAI/MiniMax-M2.5",
			"--backend", "vllm", "--backend-version", "0.18.0", "--quantization", "fp8", "--tp", tp,
			"--prefill-tokens", "1024", "--decode-requests", "16", "--decode-context", "1500", "--breakdown")
		if err != nil {
			t.Fatalf("TP %s: %v", tp, err)
		}
		var got struct {
			Pass    float64 `json:"pass_ms"`
			Prefill float64 `json:"prefill_ms"`
			Decode  float64 `json:"decode_ms"`
			Ops     []struct {
				Op string
				Ms float64
			}
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("TP %s: %v: %q", tp, err, out)
		}
		if !(got.Prefill > got.Decode && got.Decode > 0) {
			t.Errorf("TP %s: %s, want prefill > decode > 0", tp, out)
		}
		var sum float64
		ops := map[string]float64{}
		for _, o := range got.Ops {
			sum += o.Ms
			ops[o.Op] = o.Ms
		}
		if math.Abs(sum-got.Pass) > 1e-4 || !(ops["moe_experts"] > 0 && ops["tp_allreduce"] > 0 && ops["context_attention"] > 0) {
			t.Errorf("TP %s: ops %v sum to %v, pass %v", tp, got.Ops, sum, got.Pass)
		}
	}
}
