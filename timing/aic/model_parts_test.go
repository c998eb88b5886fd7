package aic

import (
	"math"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/model"
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

// TestSubstitutionsTraced: every table a model prices from in place of its version's own reaches
// traceSubstitute, which Generate embeds: 0.18.0's fp8_block GEMMs from 0.19.0's table
// (blockGEMMSource), 0.19.0's context attention from 0.22.0's (ctxAttnSource), 0.19.0's int4_wo
// experts from 0.22.0's MoE table (its Marlin rows are 0.24.0's, reused: marlinMoE) and 0.14.0's
// DeepGEMM experts from 0.22.0's GEMM table (with 0.24.0's rows: deepGEMMExperts). A version's own
// tables, where they serve, are no substitution.
func TestSubstitutionsTraced(t *testing.T) {
	needData(t)
	t.Cleanup(func() { traceSubstitute = nil }) // a failure below must not leave the hook to later tests
	for _, tc := range []struct {
		name string
		o    Options
		want []string
	}{
		{"minimax-m2.5", Options{Backend: "vllm", Version: "0.18.0", TP: 8, EP: 8, GEMMQuant: "fp8_block"}, []string{"gemm/vllm/0.19.0"}},
		{"gpt-oss-120b", Options{Backend: "vllm", Version: "0.19.0", TP: 2, GEMMQuant: "bf16", MoEQuant: "mxfp4"}, []string{"attention/vllm/0.22.0"}},
		{"moonshotai/Kimi-K2.5", Options{Backend: "vllm", Version: "0.19.0", TP: 8, GEMMQuant: "bf16", MoEQuant: "int4_wo"}, []string{"moe/vllm/0.22.0"}},
		{"qwen3-235b-a22b", Options{Backend: "vllm", Version: "0.14.0", TP: 2, GEMMQuant: "fp8_block"}, []string{"gemm/vllm/0.22.0"}},
		{"qwen3-235b-a22b", Options{Backend: "vllm", Version: "0.24.0", TP: 2, GEMMQuant: "bf16"}, nil},
	} {
		var got []string
		traceSubstitute = func(ref tableRef, version string, paths []string) {
			got = append(got, ref.op+"/"+ref.backend+"/"+version)
		}
		m, err := model.Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		o := tc.o
		o.Model, o.System, o.Root = m, h200(t), aicRoot
		_, err = newModel(o) // not New: a model cached by an earlier test would trace nothing
		traceSubstitute = nil
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s on vllm %s: substitutions traced %v, want %v", tc.name, tc.o.Version, got, tc.want)
		}
	}
}
