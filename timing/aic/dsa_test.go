package aic

import (
	"github.com/mocker-sim/mocker/hardware"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// glm5 builds GLM-5 at TP 8 with fp8_block linear layers and experts on SGLang, the deployment of
// its silicon rows, with the given tables version and KV cache dtype.
func glm5(tb testing.TB, version, kv string) (*Model, error) {
	tb.Helper()
	return onH200(tb, "glm-5", Options{Backend: "sglang", Version: version, TP: 8, GEMMQuant: "fp8_block", MoEQuant: "fp8_block", KVCacheDtype: kv})
}

// TestDSATablePoints: at the tables' grid points GLM-5's attention is the measured DSA module of
// h200_sxm/sparse_attention/sglang/0.5.10 (GlmMoeDsaForCausalLM, gemm_type fp8_block, num_heads 8 =
// 64 heads / TP 8, kernel_source dsa_nsa), by KV cache dtype; a decode over c cached tokens reads
// the row of s = isl + step = c + 1.
func TestDSATablePoints(t *testing.T) {
	for _, tc := range []struct {
		kv                    string
		ctx1k, ctx8k, ctx8kB4 float64 // context, batch 1 at isl 1,024 and 8,192, batch 4 at 8,192
		gen1k, gen4k          float64 // generation, batch 16, isl 1, step 1,024 and 4,096
	}{
		{"bf16", 0.7549, 5.9487, 23.0404, 0.0937, 0.112},
		{"fp8", 0.851, 8.1868, 31.0604, 0.111, 0.1262},
	} {
		mdl, err := glm5(t, "0.5.10", tc.kv)
		if err != nil {
			t.Fatal(err)
		}
		if len(mdl.attn) != 1 || mdl.attn[0].layers != 78 || !mdl.attn[0].module {
			t.Fatalf("%s: attention layers %+v, want one module kind of 78", tc.kv, mdl.attn)
		}
		a := &mdl.attn[0]
		for _, p := range []struct {
			name      string
			got, want float64
		}{
			{"context b1 isl 1024", a.ctx.at(1, 1024), tc.ctx1k},
			{"context b1 isl 8192", a.ctx.at(1, 8192), tc.ctx8k},
			{"context b4 isl 8192", a.ctx.at(4, 8192), tc.ctx8kB4},
			{"generation b16 cached 1024", a.gen.at(16, 1024), tc.gen1k},
			{"generation b16 cached 4096", a.gen.at(16, 4096), tc.gen4k},
		} {
			if !near(p.got, p.want, 1e-12) {
				t.Errorf("%s KV: %s: %.12g ms, want %.12g", tc.kv, p.name, p.got, p.want)
			}
		}
	}
}

// TestDSAComposition: the DSA module holds every attention projection, so a pass is the per-token
// work without them (norms, all-reduces, dense MLPs, router, MoE, shared expert, embedding) + 78 ×
// the module + the LM head, with no kv_b_proj or decode-BMM term (deepseek_v32.py). A decode step
// of 16 requests at 1,024 cached tokens: perTokenDec(16) + 78 × generation module (batch 16,
// s 1,025) + LM head for 16; a lone 1,024-token prompt: perToken(1,024) + 78 × context module
// (batch 1, isl 1,024) + LM head for 1; a 1,024-token chunk over 1,024 cached: 78 × the module at
// isl 2,048 scaled by its share of the causal pairs, (2048² − 1024²)/2048² = 3/4.
func TestDSAComposition(t *testing.T) {
	mdl, err := glm5(t, "0.5.10", "bf16")
	if err != nil {
		t.Fatal(err)
	}
	if len(mdl.preTok.x) != 0 || len(mdl.decTok.x) != 0 {
		t.Errorf("kv_b_proj / decode BMM curves present (%d, %d knots): the module holds them", len(mdl.preTok.x), len(mdl.decTok.x))
	}
	for _, p := range mdl.tokenParts {
		if p.op == "attention_projections" && p.f(1024) != 0 {
			t.Errorf("attention projections at 1,024 tokens: %g ms, want 0 (in the module)", p.f(1024))
		}
	}
	seqs := make([]timing.Seq, 16)
	for i := range seqs {
		seqs[i] = timing.Seq{New: 1, Cached: 1024, Samples: true}
	}
	got := mdl.Cost(&timing.Batch{Seqs: seqs})
	want := mdl.perTokenDec.at(16) + 78*0.0937 + mdl.lmHead.at(16)
	if got.Prefill != 0 || math.Abs(ms(got.Decode)-want) > 2e-6 {
		t.Errorf("decode step: %+v, want decode %.6f ms", got, want)
	}
	got = mdl.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 1024, Prefill: true, Samples: true}}})
	wantPre := mdl.perToken.at(1024) + 78*0.7549
	if math.Abs(ms(got.Prefill)-wantPre) > 2e-6 || math.Abs(ms(got.Decode)-mdl.lmHead.at(1)) > 2e-6 {
		t.Errorf("prefill: %+v, want prefill %.6f ms, decode %.6f ms", got, wantPre, mdl.lmHead.at(1))
	}
	got = mdl.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 1024, Cached: 1024, Prefill: true}}})
	// context module, batch 1, isl 2,048: 0.77 ms.
	if wantChunk := mdl.perToken.at(1024) + 78*0.77*0.75; math.Abs(ms(got.Prefill)-wantChunk) > 2e-6 {
		t.Errorf("chunk over a cached prefix: %+v, want prefill %.6f ms", got, wantChunk)
	}
	var names []string
	for _, p := range mdl.Parts(&timing.Batch{Seqs: []timing.Seq{{New: 1024, Prefill: true, Samples: true}}}) {
		names = append(names, p.Op)
	}
	if !slices.Contains(names, "dsa_context_module") || slices.Contains(names, "attention_projections") {
		t.Errorf("prefill parts %v, want dsa_context_module and no attention_projections", names)
	}
	t.Logf("glm-5 sglang 0.5.10 TP 8 fp8_block: prefill 1k %.2f ms, 16 decodes at 1k %.2f ms", wantPre, want)
}

// TestDSAKernelSource: the rows read are those of the kernels SGLang runs. With an fp8 KV cache on
// Hopper that is FlashMLA (flashmla_kv) and TensorRT-LLM's dense ragged prefill, not TensorRT-LLM's
// sparse kernels; with bf16 every row; 0.5.14's GLM-5 tables at bf16 time the dense FA3 prefill up
// to 2,048 tokens (batch 1, isl 1,024: 0.7652 ms) and the FlashMLA sparse kernels beyond (isl 8,192:
// 5.163 ms), the generation rows at fp8 FlashMLA's (sglang_dsa_indexer_flashmla_kv; batch 16,
// isl 1, step 1,024 — read at 1,024 cached tokens).
func TestDSAKernelSource(t *testing.T) {
	for _, tc := range []struct {
		kernel, kv, sub string
		want            bool
	}{
		{"sglang_dsa_indexer_flashmla_kv", "fp8", "flashmla_kv", true},
		{"sglang_dsa_indexer_trtllm", "fp8", "flashmla_kv", false},
		{"sglang_dsa_indexer_trtllm", "fp8", "trtllm", true},
		{"sglang_dsa_dense_mha_trtllm_ragged", "fp8", "flashmla_kv", true},
		{"sglang_dsa_dense_mha_fa3", "fp8", "trtllm", false},
		{"dsa_nsa", "fp8", "flashmla_kv", true},
		{"sglang_dsa_indexer_trtllm", "bfloat16", "flashmla_kv", true},
	} {
		if got := dsaRowRuns(tc.kernel, tc.kv, tc.sub); got != tc.want {
			t.Errorf("dsaRowRuns(%s, %s, %s) = %v, want %v", tc.kernel, tc.kv, tc.sub, got, tc.want)
		}
	}
	for _, tc := range []struct{ system, want string }{{"h200_sxm", "flashmla_kv"}, {"b200_sxm", "trtllm"}} {
		sys, err := hardware.Lookup(tc.system)
		if err != nil {
			t.Fatal(err)
		}
		if got := dsaSubBackend(sys); got != tc.want {
			t.Errorf("%s sub-backend %s, want %s", tc.system, got, tc.want)
		}
	}

	mdl, err := glm5(t, "0.5.14", "bf16")
	if err != nil {
		t.Fatal(err)
	}
	a := &mdl.attn[0]
	if got := a.ctx.at(1, 1024); !near(got, 0.7652, 1e-12) {
		t.Errorf("0.5.14 bf16 context b1 isl 1024: %.12g ms, want 0.7652 (sglang_dsa_dense_mha_fa3)", got)
	}
	if got := a.ctx.at(1, 8192); !near(got, 5.163, 1e-12) {
		t.Errorf("0.5.14 bf16 context b1 isl 8192: %.12g ms, want 5.163 (sglang_dsa_indexer_flashmla_sparse)", got)
	}
}

// TestDSAErrors: a model of no measured DSA geometry is an error naming it; per-tensor fp8
// projections read the fp8_block rows, the only fp8 the tables measured.
func TestDSAErrors(t *testing.T) {
	needData(t)
	m, _ := model.Lookup("glm-5")
	m.IndexHeads = 16
	_, err := New(Options{Model: m, System: h200(t), Root: aicRoot, Backend: "sglang", TP: 8, GEMMQuant: "fp8_block"})
	if err == nil || !strings.Contains(err.Error(), "no DSA module table measured its attention") {
		t.Errorf("16 indexer heads: err = %v, want one naming the geometry", err)
	}
	mdl, err := onH200(t, "glm-5", Options{Backend: "sglang", Version: "0.5.10", TP: 8, GEMMQuant: "fp8", MoEQuant: "fp8_block"})
	if err != nil {
		t.Fatal(err)
	}
	if got := mdl.attn[0].ctx.at(1, 1024); !near(got, 0.7549, 1e-12) {
		t.Errorf("fp8 projections: context b1 isl 1024 %.12g ms, want the fp8_block row's 0.7549", got)
	}
}

// TestDSARoofline: beyond index_topk a DSA query reads the latent of topK tokens only, while the
// indexer scans every token's key (AIConfigurator's DSA get_sol): a decode over 4,095 cached tokens
// at 8 heads is memory bound on 2,048 × 576 bf16 latents + 4,096 × 132 indexer bytes + the heads'
// output; a 4,096-token prefill computes 2,048²/2 + 2,048 × 2,048 query-key pairs.
func TestDSARoofline(t *testing.T) {
	a := attnShape{heads: 8, kvHeads: 1, kvBytes: 2, flops: 989e12, memBW: 4.8e12, qkDim: 256, vDim: 256,
		latent: 576, kvLoRA: 512, topK: 2048, indexerBytes: 132}
	if got, want := a.genSOL(4095), (2*2048*576+132*4096+4*8*576)/4.8e12*1e3; !near(got, want, 1e-12) {
		t.Errorf("genSOL(4095) = %.9g ms, want %.9g", got, want)
	}
	if got, want := a.ctxSOL(4096), 2*8*(2048.0*2048/2+2048*2048)*(576+512)/989e12*1e3; !near(got, want, 1e-12) {
		t.Errorf("ctxSOL(4096) = %.9g ms, want %.9g", got, want)
	}
	dense := a
	dense.topK = 0
	if a.genSOL(16383) >= dense.genSOL(16383)/2 {
		t.Errorf("decode over 16,383 tokens: sparse %.6g ms, not under half the dense %.6g", a.genSOL(16383), dense.genSOL(16383))
	}
}
