package main

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

func TestQuantFor(t *testing.T) {
	for _, tc := range []struct{ model, gemm, moe, quant, moeQuant string }{
		// What vLLM runs on Hopper for the MXFP4 checkpoint: bf16 GEMMs, w4a16_mxfp4 experts.
		{"openai/gpt-oss-120b", "nvfp4", "nvfp4", "mxfp4", ""},
		// Kimi-K2.5's int4 checkpoint: bf16 GEMMs, int4_wo (Marlin W4A16) routed experts.
		{"moonshotai/Kimi-K2.5", "int4_wo", "int4_wo", "bf16", "int4_wo"},
		{"Qwen/Qwen3-235B-A22B-FP8", "fp8", "fp8", "fp8", ""},
		{"Qwen/Qwen3-235B-A22B", "fp8_block", "fp8_block", "fp8_block", ""},
		{"meta-llama/Llama-3.1-70B", "bfloat16", "", "bf16", ""},
		{"Qwen/Qwen3-235B-A22B", "fp8", "bfloat16", "fp8", "bfloat16"},
		// Other models keep the label, which the configuration rejects by name.
		{"Qwen/Qwen3-235B-A22B", "nvfp4", "nvfp4", "nvfp4", ""},
	} {
		m, err := model.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		q, mq := quantFor(m, tc.gemm, tc.moe)
		if q != tc.quant || mq != tc.moeQuant {
			t.Errorf("%s %s/%s: %q, %q; want %q, %q", tc.model, tc.gemm, tc.moe, q, mq, tc.quant, tc.moeQuant)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"0.18.0", "0.19.0", -1}, {"0.24.0", "0.19.0", 1}, {"0.9.0", "0.14.0", -1}, {"0.14.0", "0.14.0", 0}, {"1.0", "0.24.0", 1},
	} {
		if got := compareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestNewerVersions(t *testing.T) {
	const db = "../../../shared/data/aiconfigurator"
	got := newerVersions(db, "h200_sxm", "vllm", "0.18.0")
	if len(got) == 0 {
		t.Skip("shared AIConfigurator data not present")
	}
	// 0.22.0 reuses 0.24.0's GEMM and MoE tables and has no all-reduce table of its own.
	if want := []string{"0.19.0", "0.24.0"}; !slices.Equal(got, want) {
		t.Errorf("newer than 0.18.0: %v, want %v", got, want)
	}
}

func TestPooledPrompts(t *testing.T) {
	const gap = "source_file=/Users/harrli/projects/aic-auto-gap-analysis/data/h200_sxm/vllm/0.12.0/nvidia_Llama-3.1-8B-Instruct-FP8.csv; silicon_concurrency=112"
	for _, tc := range []struct {
		backend, source string
		want            bool
	}{
		{"vllm", gap, true},
		{"sglang", "source_file=/Users/harrli/projects/aic-auto-gap-analysis/data/h200_sxm/sglang/0.5.6.post2/meta-llama_Llama-3.1-8B-Instruct.csv", false},
		{"vllm", "source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=4", false},
	} {
		if got := pooledPrompts(row{backend: tc.backend, source: tc.source}); got != tc.want {
			t.Errorf("pooledPrompts(%s, %q) = %v, want %v", tc.backend, tc.source, got, tc.want)
		}
	}
}
