package aic

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/timing"
)

// kimi builds Kimi-K2.5 at TP 8 on vLLM 0.19.0's tables as its silicon rows run: bf16 GEMMs,
// int4_wo (Marlin W4A16) routed experts, bf16 KV cache.
func kimi(tb testing.TB) *Model {
	tb.Helper()
	mdl, err := onH200(tb, "moonshotai/Kimi-K2.5", Options{Backend: "vllm", Version: "0.19.0", TP: 8, GEMMQuant: "bf16", MoEQuant: "int4_wo"})
	if err != nil {
		tb.Fatal(err)
	}
	return mdl
}

// TestMLAModuleTablePoints: at the module tables' points the ops return the measured latencies
// (h200_sxm/mla/vllm/0.19.0, gemm_type bfloat16, kv bfloat16, num_heads 8 = 64 heads / TP 8),
// and no kv_b or BMM term is added beside them.
func TestMLAModuleTablePoints(t *testing.T) {
	mdl := kimi(t)
	if len(mdl.attn) != 1 || !mdl.attn[0].module || mdl.attn[0].layers != 61 {
		t.Fatalf("attention %+v, want one module kind of 61 layers", mdl.attn)
	}
	if len(mdl.preTok.x) != 0 || len(mdl.decTok.x) != 0 {
		t.Errorf("module model has kv_b / BMM terms: the module includes them")
	}
	a := &mdl.attn[0]
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"context module b1 isl 1024", a.ctx.at(1, 1024), 0.193},
		{"context module b1 isl 2048", a.ctx.at(1, 2048), 0.2954},
		{"generation module b16 step 1024", a.gen.at(16, 1024), 0.1037},
		{"generation module b16 step 2048", a.gen.at(16, 2048), 0.1087},
	} {
		if !near(tc.got, tc.want, 1e-12) {
			t.Errorf("%s: %.12g ms, want %.12g", tc.name, tc.got, tc.want)
		}
	}
}

// TestMLAModuleComposition: a lone prompt is the per-token curve (no attention projections: the
// module has them) + 61 × the context module; a chunk of 1,024 over 1,024 cached tokens is the
// module at 2,048 × (2,048² − 1,024²)/2,048² (AIConfigurator's prefix correction); a decode step is
// the overlapped decode curve + 61 × the generation module + the LM head.
func TestMLAModuleComposition(t *testing.T) {
	mdl := kimi(t)
	got := mdl.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 1024, Prefill: true}}})
	if want := mdl.perToken.at(1024) + 61*0.193; math.Abs(ms(got.Prefill)-want) > 2e-6 {
		t.Errorf("lone prompt: prefill %.6f ms, want %.6f", ms(got.Prefill), want)
	}
	got = mdl.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 1024, Cached: 1024, Prefill: true}}})
	if want := mdl.perToken.at(1024) + 61*0.2954*0.75; math.Abs(ms(got.Prefill)-want) > 2e-6 {
		t.Errorf("chunk over a prefix: prefill %.6f ms, want %.6f", ms(got.Prefill), want)
	}
	seqs := make([]timing.Seq, 16)
	for i := range seqs {
		seqs[i] = timing.Seq{New: 1, Cached: 1024, Samples: true}
	}
	got = mdl.Cost(&timing.Batch{Seqs: seqs})
	if want := mdl.perTokenDec.at(16) + 61*0.1037 + mdl.lmHead.at(16); got.Prefill != 0 || math.Abs(ms(got.Decode)-want) > 2e-6 {
		t.Errorf("decode step: %+v, want decode %.6f ms", got, want)
	}

	// The MoE: power_law_1.01 (DeepSeek family), int4_wo at moe_tp 8. 0.19.0's rows time vLLM's WNA16
	// kernels (0.3840640068… ms at 16 tokens), so the experts are priced from the nearest version with
	// Marlin rows, 0.24.0: 0.16435199975… ms (h200_sxm/moe/vllm/0.24.0, kernel_source
	// vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts). On vLLM the all-reduces stay
	// outside the overlap, so decode saves 60 MoE layers × the bf16 shared expert (gate_up 512 from
	// 7,168; down 7,168 from 256).
	rf := h200Roofline(t)
	k := moeKey{dtype: "int4_wo", dist: "power_law_1.01", topk: 8, experts: 384, hidden: 7168, inter: 2048, tp: 8, ep: 1}
	flops, _ := rf.flopsOf("int4_wo")
	for _, tc := range []struct {
		version, kernel string
		at16            float64
	}{
		{"0.19.0", vllmWNA16Kernel, 0.3840640068054199},
		{"0.24.0", "vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts", 0.16435199975967407},
	} {
		moe, kernels, err := loadMoE([]string{aicRoot + "/h200_sxm/moe/vllm/" + tc.version + "/moe_perf.parquet"}, k, rf)
		if err != nil {
			t.Fatal(err)
		}
		if v := moe.at(16, rf.moeSOL(16, k, flops)); !near(v, tc.at16, 1e-12) || !slices.Equal(kernels, []string{tc.kernel}) {
			t.Errorf("%s int4_wo MoE at 16 tokens: %.12g ms from %v, want %.12g from %s", tc.version, v, kernels, tc.at16, tc.kernel)
		}
	}
	var experts float64
	for _, p := range mdl.Parts(&timing.Batch{Seqs: seqs}) {
		if p.Op == "moe_experts" {
			experts = p.Ms
		}
	}
	if want := 60 * 0.16435199975967407; !near(experts, want, 1e-9) {
		t.Errorf("decode step's experts: %.9g ms, want 60 × 0.24.0's Marlin row at 16 tokens = %.9g", experts, want)
	}
	if src := strings.Join(mdl.Sources(), " "); !strings.Contains(src, "moe/vllm/0.24.0/moe_perf") || strings.Contains(src, "moe/vllm/0.19.0") {
		t.Errorf("sources %s: want 0.24.0's MoE table in place of 0.19.0's", src)
	}
	g, err := loadGEMM([]string{aicRoot + "/h200_sxm/gemm/vllm/0.19.0/gemm_perf.parquet"}, "bfloat16", rf)
	if err != nil {
		t.Fatal(err)
	}
	shared := g.latency(16, 512, 7168) + rf.memOp(16*(512+256)*2) + g.latency(16, 7168, 256)
	if d := mdl.perToken.at(16) - mdl.perTokenDec.at(16); !near(d, 60*shared, 1e-9) {
		t.Errorf("decode overlap saves %.9g ms, want 60 × shared = %.9g", d, 60*shared)
	}
	t.Logf("kimi-k2.5 vllm 0.19.0 TP 8: 1,024-token prompt %.2f ms, 16 decodes at 1,024 %.2f ms", ms(mdl.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 1024, Prefill: true, Samples: true}}}).Total()), ms(got.Decode))
}

// TestMLAModuleErrors: the module tables hold bfloat16 and fp8_block projections only, and vLLM
// versions without module tables (0.14.0 measured the kernels alone) name what is missing.
func TestMLAModuleErrors(t *testing.T) {
	needData(t)
	_, err := onH200(t, "kimi-k2.5", Options{Backend: "vllm", Version: "0.19.0", TP: 8, GEMMQuant: "fp8", MoEQuant: "int4_wo"})
	if err == nil || !strings.Contains(err.Error(), "per-tensor fp8") {
		t.Errorf("fp8: err = %v, want one naming the module tables' gemm types", err)
	}
	_, err = onH200(t, "kimi-k2.5", Options{Backend: "vllm", Version: "0.14.0", TP: 8, GEMMQuant: "bf16", MoEQuant: "int4_wo"})
	if err == nil || !strings.Contains(err.Error(), "mla_context_module_perf") {
		t.Errorf("0.14.0: err = %v, want one naming the missing module table", err)
	}
}

// TestMarlinMoEChoice: marlinMoE takes the oldest newer version with Marlin rows, else the newest
// older one, skipping versions whose rows time the WNA16 kernels too, and names what is missing when
// no version has Marlin rows. Databases of moe tables only, linked from the shared one.
func TestMarlinMoEChoice(t *testing.T) {
	needData(t)
	rf := h200Roofline(t)
	k := moeKey{dtype: "int4_wo", dist: "power_law_1.01", topk: 8, experts: 384, hidden: 7168, inter: 2048, tp: 8, ep: 1}
	flops, _ := rf.flopsOf("int4_wo")
	abs, err := filepath.Abs(aicRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		versions []string
		want     float64 // at 16 tokens; 0: an error
	}{
		{"newer first", []string{"0.14.0", "0.18.0", "0.19.0", "0.24.0"}, 0.16435199975967407},
		{"older when no newer", []string{"0.14.0", "0.18.0", "0.19.0"}, 0.1417855978012085},
		{"none", []string{"0.18.0", "0.19.0"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, v := range tc.versions {
				dir := filepath.Join(root, "h200_sxm", "moe", "vllm", v)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(abs, "h200_sxm/moe/vllm", v, "moe_perf.parquet"), filepath.Join(dir, "moe_perf.parquet")); err != nil {
					t.Fatal(err)
				}
			}
			d := db{root: root, system: "h200_sxm"}
			own := []string{filepath.Join(root, "h200_sxm/moe/vllm/0.19.0/moe_perf.parquet")}
			mdl := &Model{sources: append([]string{"gemm"}, own...)}
			moe, err := mdl.marlinMoE(d, "0.19.0", own, k, rf)
			if tc.want == 0 {
				if err == nil || !strings.Contains(err.Error(), "no other vLLM version has Marlin rows") || !strings.Contains(err.Error(), vllmWNA16Kernel) {
					t.Fatalf("err = %v, want one naming the WNA16 rows and the missing Marlin rows", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v := moe.at(16, rf.moeSOL(16, k, flops)); !near(v, tc.want, 1e-12) {
				t.Errorf("16 tokens: %.12g ms, want %.12g", v, tc.want)
			}
			if len(mdl.sources) != 2 || mdl.sources[0] != "gemm" || strings.Contains(mdl.sources[1], "0.19.0") {
				t.Errorf("sources %v: want 0.19.0's MoE table replaced", mdl.sources)
			}
		})
	}
}
