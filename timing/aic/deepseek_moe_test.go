package aic

import (
	"math"
	"testing"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// TestDeepSeekMoEDistribution: the DeepSeek family reads the MoE table at power_law_1.01
// (AIConfigurator's DeepSeekModel._power_law_alpha), other MoE models at power_law_1.2 (MOEModel),
// and an explicit distribution wins. At the table's points the curve is the measurement
// (h200_sxm/moe/sglang/0.5.9: fp8_block, 256 experts top 8, 7,168 → 2,048, moe_tp 8, ep 1).
func TestDeepSeekMoEDistribution(t *testing.T) {
	needData(t)
	sys, _ := hardware.Lookup("h200_sxm")
	for _, tc := range []struct {
		name, dist, want string
	}{
		{"deepseek-v3", "", "power_law_1.01"},
		{"deepseek-r1", "", "power_law_1.01"},
		{"deepseek-v3", "power_law_1.2", "power_law_1.2"},
		{"qwen3-235b-a22b", "", "power_law_1.2"},
		{"minimax-m2.5", "", "power_law_1.2"},
		{"gpt-oss-120b", "", "power_law_1.2"},
	} {
		m, err := model.Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := resolve(Options{Model: m, System: sys, Root: aicRoot, Backend: "sglang", TP: 8, MoEDistribution: tc.dist})
		if err != nil {
			t.Fatal(err)
		}
		if c.dist != tc.want {
			t.Errorf("%s (MoEDistribution %q): distribution %s, want %s", tc.name, tc.dist, c.dist, tc.want)
		}
		if want := m.MLA(); c.overlapShared != want {
			t.Errorf("%s: overlapShared %v, want %v", tc.name, c.overlapShared, want)
		}
	}

	rf, err := newRoofline(sys)
	if err != nil {
		t.Fatal(err)
	}
	k := moeKey{dtype: "fp8_block", dist: "power_law_1.01", topk: 8, experts: 256, hidden: 7168, inter: 2048, tp: 8, ep: 1}
	moe, _, err := loadMoE([]string{aicRoot + "/h200_sxm/moe/sglang/0.5.9/moe_perf.parquet"}, k, rf)
	if err != nil {
		t.Fatal(err)
	}
	flops, _ := rf.flopsOf("fp8_block")
	for _, p := range [][2]float64{{1, 0.05162112236022949}, {16, 0.20774784088134765}, {64, 0.36097343444824215}} {
		if got := moe.at(p[0], rf.moeSOL(p[0], k, flops)); !near(got, p[1], 1e-12) {
			t.Errorf("power_law_1.01 MoE at %g tokens: %.12g ms, want %.12g", p[0], got, p[1])
		}
	}
}

// TestDeepSeekDecodeOverlap: in a decode pass each of DeepSeek-V3's 58 MoE layers pays
// max(routed, shared) instead of their sum (AIConfigurator's OverlapOp), so the decode curve is the
// sequential one less 58 × the shared expert (which is the smaller: at 16 tokens the routed group's
// fused MoE alone is 0.208 ms); prefill and mixed passes stay sequential; models outside the
// family have no decode curve.
func TestDeepSeekDecodeOverlap(t *testing.T) {
	mdl, err := deepSeek(t, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	rf := h200Roofline(t)
	g, err := loadGEMM([]string{aicRoot + "/h200_sxm/gemm/sglang/0.5.9/gemm_perf.parquet"}, "fp8", rf)
	if err != nil {
		t.Fatal(err)
	}
	// The shared expert at TP 8: gate_up 2 × 2,048/8 = 512 outputs from 7,168, SiLU·mul over
	// (512 in + 256 out) bf16 per token, down 7,168 from 256.
	shared := func(T float64) float64 {
		return g.latency(T, 512, 7168) + rf.memOp(T*(512+256)*2) + g.latency(T, 7168, 256)
	}
	for _, T := range []float64{1, 16, 64, 256} {
		got := mdl.perToken.at(T) - mdl.perTokenDec.at(T)
		if want := 58 * shared(T); !near(got, want, 1e-9) {
			t.Errorf("T = %g: sequential − overlapped = %.9g ms, want 58 × shared = %.9g", T, got, want)
		}
		if s := shared(T); s >= 0.2 {
			t.Errorf("T = %g: shared expert %.4f ms, expected well under the routed group", T, s)
		}
	}

	seqs := make([]timing.Seq, 16)
	for i := range seqs {
		seqs[i] = timing.Seq{New: 1, Cached: 1023, Samples: true}
	}
	dec := mdl.Cost(&timing.Batch{Seqs: seqs})
	want := mdl.perTokenDec.at(16) + mdl.decTok.at(16) + 61*mdl.attn[0].gen.at(16, 1023) + mdl.lmHead.at(16)
	if dec.Prefill != 0 || math.Abs(ms(dec.Decode)-want) > 2e-6 {
		t.Errorf("decode step: %+v, want decode %.6f ms", dec, want)
	}
	// A mixed pass (a 16-token chunk beside 16 decodes) runs the MoE block sequentially.
	mixed := append(seqs, timing.Seq{New: 16, Prefill: true})
	got := mdl.Cost(&timing.Batch{Seqs: mixed})
	lin := mdl.perToken.at(32)
	if math.Abs(ms(got.Decode)-(lin/2+mdl.decTok.at(16)+61*mdl.attn[0].gen.at(16, 1023)+mdl.lmHead.at(16))) > 2e-6 {
		t.Errorf("mixed pass decode share %.6f ms: want the sequential curve's", ms(got.Decode))
	}

	qm, err := onH200(t, "qwen3-235b-a22b", Options{Backend: "sglang", Version: "0.5.9", TP: 4, GEMMQuant: "fp8_block"})
	if err != nil {
		t.Fatal(err)
	}
	if len(qm.perTokenDec.x) != 0 {
		t.Errorf("qwen3-235b-a22b has a decode curve; only the DeepSeek family overlaps its shared expert")
	}
	t.Logf("deepseek-v3 TP 8: 16 decodes at 1,023: %.3f ms (sequential MoE block: %.3f ms)", ms(dec.Decode), want-mdl.perTokenDec.at(16)+mdl.perToken.at(16))
}
