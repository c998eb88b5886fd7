package main

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

func TestQuantFor(t *testing.T) {
	for _, tc := range []struct{ model, gemm, moe, quant, moeQuant string }{
		// Labels no H200 table holds: the checkpoint's format ("", ""): for gpt-oss-120b bf16 GEMMs and
		// w4a16_mxfp4 experts, what vLLM runs on Hopper.
		{"openai/gpt-oss-120b", "nvfp4", "nvfp4", "", ""},
		// Kimi-K2.5's int4 checkpoint: bf16 GEMMs, int4_wo (Marlin W4A16) routed experts.
		{"moonshotai/Kimi-K2.5", "int4_wo", "int4_wo", "", ""},
		{"Qwen/Qwen3-235B-A22B-FP8", "fp8", "fp8", "fp8", ""},
		{"Qwen/Qwen3-235B-A22B", "fp8_block", "fp8_block", "fp8_block", ""},
		{"meta-llama/Llama-3.1-70B", "bfloat16", "", "bf16", ""},
		{"Qwen/Qwen3-235B-A22B", "fp8", "bfloat16", "fp8", "bfloat16"},
		// A model whose checkpoint is not quantized keeps the label, which the configuration rejects by name.
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

func TestHarness(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{"source_file=/Users/harrli/projects/aic-auto-gap-analysis/data/h200_sxm/vllm/0.12.0/nvidia_Llama-3.1-8B-Instruct-FP8.csv; silicon_concurrency=112", "aic-auto-gap-analysis"},
		{"source_file=/Users/harrli/projects/aic-auto-gap-analysis/data/h200_sxm/sglang/0.5.6.post2/meta-llama_Llama-3.1-8B-Instruct.csv", "aic-auto-gap-analysis"},
		{"source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=4", "2026-04-06.csv"},
		{"db-dump/2026-04-27; config_id=81; silicon_concurrency=16; lmsysorg/sglang:v0.5.9-cu130", "db-dump/2026-04-27"},
		{"source_file=kimi-k2.5-gap-analysis.csv; silicon_concurrency=4", "kimi-k2.5-gap-analysis.csv"},
	} {
		if got := harness(tc.source); got != tc.want {
			t.Errorf("harness(%q) = %q, want %q", tc.source, got, tc.want)
		}
	}
}

// TestChoose: the grid point chosen without a harness is the one that fits the other rows, judged per
// backend. Two grid points; harness a's SGLang row fits only point 1, harness b's only point 0, and the
// vLLM row (harness c) is the same at both; without it, the SGLang rows' TTFT errors are 50 and 0 % at
// point 0 (median 25) and 0 and 40 % at point 1 (median 20).
func TestChoose(t *testing.T) {
	grid := []calibration{{sglangHostUs: 0}, {sglangHostUs: 16}}
	rows := []row{
		{source: "source_file=a.csv", backend: "sglang", ttft: 100, tpot: 10},
		{source: "source_file=b.csv", backend: "sglang", ttft: 100, tpot: 10},
		{source: "source_file=c.csv", backend: "vllm", ttft: 100, tpot: 10},
	}
	res := func(pred ...float64) []result {
		var out []result
		for i, r := range rows {
			out = append(out, result{row: r, ttft: pred[i], tpot: 10})
		}
		return out
	}
	results := [][]result{res(150, 100, 120), res(100, 140, 120)}
	for _, tc := range []struct {
		without string
		want    int
	}{{"a.csv", 0}, {"b.csv", 1}, {"c.csv", 1}} {
		if got := choose(grid, results, func(r row) bool { return harness(r.source) != tc.without }); got != tc.want {
			t.Errorf("without %s: grid point %d, want %d", tc.without, got, tc.want)
		}
	}
}
