package aic

import (
	"math"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/timing"
)

// TestPartsSumToCost: Parts itemizes exactly the pass Cost prices — a mixed vLLM pass of Llama-3.1-8B
// (dense: no MoE parts, no all-reduce at TP 1), a DeepSeek-V3 decode pass on SGLang (the shared expert
// overlapping the routed experts is credited back, negative) and prefill pass (no credit), and
// Kimi-K2.5 on vLLM (attention priced as whole MLA modules).
func TestPartsSumToCost(t *testing.T) {
	mixed := realisticBatch()
	decode := &timing.Batch{}
	for range 16 {
		decode.Seqs = append(decode.Seqs, timing.Seq{New: 1, Cached: 1500, Samples: true})
	}
	prefill := &timing.Batch{Seqs: []timing.Seq{{New: 1024, Prefill: true, Samples: true}}}
	ds, err := deepSeek(t, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		m     *Model
		b     *timing.Batch
		want  []string
		minus string // the one part allowed below zero
	}{
		{"llama mixed", llama8B(t, "fp8"), mixed,
			[]string{"norms", "attention_projections", "mlp", "embedding", "context_attention", "generation_attention", "lm_head"}, ""},
		{"deepseek decode", ds, decode,
			[]string{"norms", "attention_projections", "tp_allreduce", "mlp", "moe_router", "moe_experts", "shared_expert", "embedding",
				"shared_expert_overlap", "mla_decode_bmm", "generation_attention", "lm_head"}, "shared_expert_overlap"},
		{"deepseek prefill", ds, prefill,
			[]string{"norms", "attention_projections", "tp_allreduce", "mlp", "moe_router", "moe_experts", "shared_expert", "embedding",
				"context_attention", "mla_kv_b_proj", "lm_head"}, ""},
		{"kimi decode", kimi(t), decode,
			[]string{"norms", "tp_allreduce", "mlp", "moe_router", "moe_experts", "shared_expert", "embedding",
				"shared_expert_overlap", "generation_attention", "lm_head"}, "shared_expert_overlap"},
	} {
		parts := tc.m.Parts(tc.b)
		var ops []string
		var sum float64
		for _, p := range parts {
			ops = append(ops, p.Op)
			sum += p.Ms
			if p.Ms < 0 && p.Op != tc.minus || p.Ms >= 0 && p.Op == tc.minus {
				t.Errorf("%s: part %s = %v ms", tc.name, p.Op, p.Ms)
			}
		}
		if !slices.Equal(ops, tc.want) {
			t.Errorf("%s: ops %v, want %v", tc.name, ops, tc.want)
		}
		if total := ms(tc.m.Cost(tc.b).Total()); math.Abs(sum-total) > 1e-5 {
			t.Errorf("%s: parts sum to %.6f ms, Cost %.6f ms", tc.name, sum, total)
		}
	}
}
