package aic

import (
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

// miniMax builds MiniMax-M2.5 with vLLM 0.18.0's tables (the version its silicon rows map to).
func miniMax(tb testing.TB, m *model.Model, quant string, tp int) (*Model, error) {
	tb.Helper()
	needData(tb)
	return New(Options{Model: m, System: h200(tb), Root: aicRoot, Backend: "vllm", Version: "0.18.0", GEMMQuant: quant, TP: tp})
}

// TestMiniMaxOnRealData: the 0.18.0 MoE table holds MiniMax-M2.5's experts (256, top 8, hidden
// 3072, 1536 each) in fp8 at moe_tp 4 and 8 (the silicon rows' deployments); fp8_block stops at
// moe_tp 4 (1536/8 = 192 columns per GPU is not a multiple of the 128-wide blocks), and asking for it
// at TP 8 names what is missing.
func TestMiniMaxOnRealData(t *testing.T) {
	m, err := model.Lookup("minimax-m2.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		quant string
		tp    int
		err   string
	}{
		{"fp8", 4, ""},
		{"fp8", 8, ""},
		{"fp8_block", 4, ""},
		{"fp8_block", 8, "moe_tp_size=8"},
	} {
		mdl, err := miniMax(t, m, tc.quant, tc.tp)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s TP %d: err = %v, want one naming %q", tc.quant, tc.tp, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s TP %d: %v", tc.quant, tc.tp, err)
			continue
		}
		pre, dec := prefillMs(mdl, 1024), decodeMs(mdl, 16, 1500)
		t.Logf("minimax-m2.5 vllm 0.18.0 %-9s TP %d: prefill 1k %6.2f ms, 16 decodes at 1.5k %5.2f ms", tc.quant, tc.tp, pre, dec)
		if !(pre > dec && dec > 0) {
			t.Errorf("%s TP %d: prefill %v ms, decode %v ms", tc.quant, tc.tp, pre, dec)
		}
	}
}

// TestQKNormAllReduce: a q/k norm over all heads adds one all-reduce per layer under tensor
// parallelism, of 8 bytes a token, held at the smallest measured message for small passes (so the
// same for 1 and 32 tokens), and nothing on one GPU.
func TestQKNormAllReduce(t *testing.T) {
	with, err := model.Lookup("minimax-m2.5")
	if err != nil {
		t.Fatal(err)
	}
	without := *with
	without.QKNormAllHeads = false
	for _, tp := range []int{1, 8} {
		a, err := miniMax(t, with, "fp8", tp)
		if err != nil {
			t.Fatal(err)
		}
		b, err := miniMax(t, &without, "fp8", tp)
		if err != nil {
			t.Fatal(err)
		}
		d1 := a.perToken.at(1) - b.perToken.at(1)
		d32 := a.perToken.at(32) - b.perToken.at(32)
		if tp == 1 {
			if d1 != 0 || d32 != 0 {
				t.Errorf("TP 1: the q/k norm costs %v / %v ms, want 0", d1, d32)
			}
			continue
		}
		// 62 layers × one launch-bound all-reduce: a few µs each on NVLink.
		perLayer := d1 / 62
		t.Logf("TP %d: q/k-norm all-reduce %.2f µs a layer", tp, perLayer*1e3)
		if perLayer < 0.002 || perLayer > 0.05 {
			t.Errorf("TP %d: q/k-norm all-reduce %v ms a layer, want 2–50 µs", tp, perLayer)
		}
		if diff := d32 - d1; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("TP %d: q/k-norm cost %v ms at 1 token, %v ms at 32: want it held below the smallest message", tp, d1, d32)
		}
	}
}
