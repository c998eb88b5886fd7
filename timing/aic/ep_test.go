package aic

import (
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/timing"
)

// TestExpertParallel: with --ep the fused MoE is read at moe_tp_size = TP/EP, moe_ep_size = EP and
// nothing else changes (attention DP 1: the dispatch and combine stay the layer's two TP
// all-reduces, AIConfigurator's MoEDispatch without DeepEP). So an EP pass costs the EP-1 pass plus,
// in each of Qwen3-30B-A3B's 48 MoE layers, the difference of the two table rows at the pass's token
// count (bf16, power_law_1.2, 128 experts top 8, hidden 2048, inter 768; the rows below are the
// moe_perf.parquet latencies at num_tokens 16 and 2048).
func TestExpertParallel(t *testing.T) {
	decode := timing.Batch{Seqs: make([]timing.Seq, 16)}
	for i := range decode.Seqs {
		decode.Seqs[i] = timing.Seq{New: 1, Cached: 1000 + 50*i, Samples: true}
	}
	prefill := timing.Batch{Seqs: []timing.Seq{{New: 2048, Prefill: true, Samples: true}}}
	for _, tc := range []struct {
		backend, version string
		ep               int
		// moe rows at moe_tp 8/ep 1 and at moe_tp 8/EP, moe_ep EP: 16 tokens, 2048 tokens
		tp16, ep16, tp2048, ep2048 float64
	}{
		{"sglang", "0.5.14", 4, 0.04466815948486328, 0.045015678405761719, 0.16679616928100588, 0.21267967224121093},
		{"sglang", "0.5.14", 8, 0.04466815948486328, 0.049939842224121095, 0.16679616928100588, 0.24155839920043945},
		{"vllm", "0.24.0", 8, 0.048486399650573733, 0.056729602813720706, 0.20604159832000732, 0.21684479713439941},
	} {
		o := Options{Backend: tc.backend, Version: tc.version, TP: 8}
		base, err := onH200(t, "qwen3-30b-a3b", o)
		if err != nil {
			t.Fatal(err)
		}
		o.EP = tc.ep
		ep, err := onH200(t, "qwen3-30b-a3b", o)
		if err != nil {
			t.Fatalf("%s EP %d: %v", tc.backend, tc.ep, err)
		}
		check := func(what string, got, want time.Duration, rows float64) {
			t.Helper()
			// Each side is rounded to the nanosecond once.
			if d := got - want - msDuration(48*rows); d < -1 || d > 1 {
				t.Errorf("%s EP %d %s: %v, want %v + 48 × %.6f ms", tc.backend, tc.ep, what, got, want, rows)
			}
		}
		bd, ed := base.Cost(&decode), ep.Cost(&decode)
		check("decode", ed.Decode, bd.Decode, tc.ep16-tc.tp16)
		if ed.Prefill != 0 || bd.Prefill != 0 {
			t.Errorf("%s EP %d: decode batch has prefill %v / %v", tc.backend, tc.ep, bd.Prefill, ed.Prefill)
		}
		bp, epp := base.Cost(&prefill), ep.Cost(&prefill)
		check("prefill", epp.Prefill, bp.Prefill, tc.ep2048-tc.tp2048)
		if epp.Decode != bp.Decode {
			t.Errorf("%s EP %d: prefill chunk's LM head %v, want %v as at EP 1", tc.backend, tc.ep, epp.Decode, bp.Decode)
		}
	}
}

// TestExpertParallelOne: EP 0 and EP 1 are the TP-only model.
func TestExpertParallelOne(t *testing.T) {
	o := Options{Backend: "sglang", Version: "0.5.14", TP: 4}
	zero, err := onH200(t, "qwen3-30b-a3b", o)
	if err != nil {
		t.Fatal(err)
	}
	o.EP = 1
	one, err := onH200(t, "qwen3-30b-a3b", o)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range parityBatches() {
		if z, w := zero.Cost(&b), one.Cost(&b); z != w {
			t.Errorf("batch %+v: EP 0 %+v, EP 1 %+v", b.Seqs, z, w)
		}
	}
}

// TestExpertParallelErrors: EP needs routed experts, must divide TP (and the experts), and on vLLM
// must be 1 or TP.
func TestExpertParallelErrors(t *testing.T) {
	for _, tc := range []struct {
		model, backend string
		tp, ep         int
		want           string
	}{
		{"llama-3.1-8b", "vllm", 2, 2, "expert parallelism 2: model llama-3.1-8b has no routed experts"},
		{"qwen3-30b-a3b", "sglang", 8, 3, "expert parallelism 3 does not divide tensor parallelism 8"},
		{"qwen3-30b-a3b", "sglang", 2, 4, "expert parallelism 4 does not divide tensor parallelism 2"},
		{"qwen3-30b-a3b", "vllm", 8, 4, "vLLM shards the experts over all TP GPUs (EP 1 or 8)"},
		{"qwen3-30b-a3b", "sglang", 8, -1, "expert parallelism -1 is negative"},
	} {
		_, err := onH200(t, tc.model, Options{Backend: tc.backend, TP: tc.tp, EP: tc.ep})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s TP %d EP %d: err = %v, want %q", tc.model, tc.backend, tc.tp, tc.ep, err, tc.want)
		}
	}
}
