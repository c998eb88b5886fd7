package aic

import (
	"math"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// deepSeek builds DeepSeek-V3 at TP 8 in fp8 (fp8_block experts) on SGLang 0.5.9's tables, the
// deployment of its silicon rows.
func deepSeek(tb testing.TB, backend string) (*Model, error) {
	tb.Helper()
	version := "0.5.9"
	if backend != "sglang" {
		version = ""
	}
	return onH200(tb, "deepseek-v3", Options{Backend: backend, Version: version, TP: 8, GEMMQuant: "fp8", MoEQuant: "fp8_block"})
}

// TestMLATablePoints: at the tables' grid points the MLA ops return the measured latencies of
// SGLang 0.5.9 (h200_sxm/mla/sglang/0.5.9, mla_bmm/sglang/0.5.9), read in the DeepSeek family
// (num_heads 16 × tp_size 8 = 128 heads), bf16 KV cache, fp8 BMMs.
func TestMLATablePoints(t *testing.T) {
	mdl, err := deepSeek(t, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	if len(mdl.attn) != 1 || mdl.attn[0].layers != 61 {
		t.Fatalf("attention layers %+v, want one kind of 61", mdl.attn)
	}
	a := &mdl.attn[0]
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		// generation_mla_perf: num_heads 16, tp_size 8, kv bfloat16, batch 16, step 1023 / 2047.
		{"generation b16 step 1023", a.gen.at(16, 1023), 0.020483200252056123},
		{"generation b16 step 2047", a.gen.at(16, 2047), 0.024327999353408812},
		// context_mla_perf: num_heads 16, tp_size 8, kv bfloat16, batch 1, isl 1024.
		{"context b1 isl 1024", a.ctx.at(1, 1024), 0.04934079945087433},
		// mla_bmm_perf: fp8, num_heads 16, num_tokens 16: mla_gen_pre 0.007952…, mla_gen_post 0.008077…
		{"decode BMMs × 61 at 16 tokens", mdl.decTok.at(16), 61 * (0.007952000200748443 + 0.008076799660921096)},
	} {
		if !near(tc.got, tc.want, 1e-12) {
			t.Errorf("%s: %.12g ms, want %.12g", tc.name, tc.got, tc.want)
		}
	}
}

// TestMLAComposition: a pass is the sum of its parts. A decode step of 16 requests at 1,023 cached
// tokens is the decode token-linear part at T = 16 (down, q_b and o projections, norms, all-reduces,
// MoE, router, shared expert overlapped with the routed group, dense MLPs, embedding) + 61 × (the two absorbed-decode BMMs + generation
// MLA at batch 16, step 1023) + the LM head for 16; a lone 1,024-token prompt is the token-linear
// part at 1,024 + 61 × kv_b_proj at 1,024 tokens + 61 × context MLA at isl 1,024 + the LM head for 1.
func TestMLAComposition(t *testing.T) {
	mdl, err := deepSeek(t, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]timing.Seq, 16)
	for i := range seqs {
		seqs[i] = timing.Seq{New: 1, Cached: 1023, Samples: true}
	}
	got := mdl.Cost(&timing.Batch{Seqs: seqs})
	want := mdl.perTokenDec.at(16) + 61*(0.007952000200748443+0.008076799660921096) + 61*0.020483200252056123 + mdl.lmHead.at(16)
	if got.Prefill != 0 || math.Abs(ms(got.Decode)-want) > 2e-6 {
		t.Errorf("decode step: %+v, want decode %.6f ms", got, want)
	}

	got = mdl.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 1024, Prefill: true, Samples: true}}})
	wantPre := mdl.perToken.at(1024) + mdl.preTok.at(1024) + 61*0.04934079945087433
	if math.Abs(ms(got.Prefill)-wantPre) > 2e-6 || math.Abs(ms(got.Decode)-mdl.lmHead.at(1)) > 2e-6 {
		t.Errorf("prefill: %+v, want prefill %.6f ms, decode %.6f ms", got, wantPre, mdl.lmHead.at(1))
	}
	// kv_b_proj: 16 heads × (128 nope + 128 v) = 4,096 outputs from the 512-wide latent, fp8.
	g, err := loadGEMM([]string{aicRoot + "/h200_sxm/gemm/sglang/0.5.9/gemm_perf.parquet"}, "fp8", h200Roofline(t))
	if err != nil {
		t.Fatal(err)
	}
	if kvb := 61 * g.latency(1024, 4096, 512); !near(mdl.preTok.at(1024), kvb, 1e-12) {
		t.Errorf("kv_b_proj × 61 at 1,024 tokens: %.9g ms, want %.9g", mdl.preTok.at(1024), kvb)
	}
	t.Logf("deepseek-v3 sglang 0.5.9 TP 8 fp8: prefill 1k %.2f ms, 16 decodes at 1k %.2f ms", ms(got.Total()), want)
}

// TestMLAErrors: a GEMM precision vLLM's module tables lack, or a head family the SGLang tables
// lack, names the file.
func TestMLAErrors(t *testing.T) {
	// vLLM's module tables measured bfloat16 and fp8_block projections, not per-tensor fp8.
	if _, err := deepSeek(t, "vllm"); err == nil || !strings.Contains(err.Error(), "mla_context_module_perf") {
		t.Errorf("vllm fp8: err = %v, want one naming the module tables", err)
	}
	m, _ := model.Lookup("deepseek-v3")
	m.Heads = 96 // no 96-head family in the tables
	_, err := New(Options{Model: m, System: h200(t), Root: aicRoot, Backend: "sglang", Version: "0.5.9", TP: 8, GEMMQuant: "fp8"})
	if err == nil || !strings.Contains(err.Error(), "num_heads × tp_size = 96") {
		t.Errorf("96 heads: err = %v, want one naming the missing family", err)
	}
}
