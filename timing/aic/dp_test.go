package aic

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/timing"
)

// decodeRank is one rank's decode pass: 16 requests, one token each.
func decodeRank() timing.Batch {
	b := timing.Batch{Seqs: make([]timing.Seq, 16)}
	for i := range b.Seqs {
		b.Seqs[i] = timing.Seq{New: 1, Cached: 1000 + 50*i, Samples: true}
	}
	return b
}

// TestAttentionDP: with attention data parallelism 4 over TP 2 (8 GPUs, moe_tp_size 8), a rank's pass
// is the TP 2 pass with, in each of Qwen3-30B-A3B's 48 MoE layers, the fused MoE of moe_tp_size 2 at
// the rank's 16 tokens replaced by the MoE of moe_tp_size 8 at the group's tokens, plus the NCCL
// all_gather and reduce_scatter of the group's tokens × hidden 2048 over the 8 GPUs (AIConfigurator's
// MoE op at num_tokens × attention_dp_size and its MoEDispatch ops), and the layer's two all-reduces
// over the rank's TP 2 replaced by a reduce_scatter and an all_gather of its 16 tokens there
// (TestAttentionDPSGLangTPHalves). The rows: SGLang 0.5.14's moe_perf (bf16, power_law_1.2, 128
// experts top 8, hidden 2048, inter 768) and custom all-reduce, NCCL 2.26.2's half-precision rows on
// 8 GPUs (messages of 16 × 2048 and 64 × 2048 elements) and 2 GPUs (16 × 2048).
func TestAttentionDP(t *testing.T) {
	const (
		moeTP2At16 = 0.08963711738586426
		moeTP8At16 = 0.04466815948486328
		moeTP8At64 = 0.0638431978225708
		gather16   = 0.01482 // all_gather, 32768 elements
		scatter16  = 0.01366 // reduce_scatter, 32768 elements
		gather64   = 0.01771 // all_gather, 131072 elements
		scatter64  = 0.01295 // reduce_scatter, 131072 elements
		// Within the rank's TP 2, at 32768 elements: a reduce_scatter and an all_gather instead of
		// two custom all-reduces.
		tpHalves = 0.006 + 0.00624 - 2*0.0028591999411582947
	)
	o := Options{Backend: "sglang", Version: "0.5.14", TP: 2}
	tp, err := onH200(t, "qwen3-30b-a3b", o)
	if err != nil {
		t.Fatal(err)
	}
	o.AttentionDP = 4
	dp, err := onH200(t, "qwen3-30b-a3b", o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		group timing.Group
		rows  float64 // the MoE layer's change, ms
	}{
		// Every rank decodes 16 requests: the experts see 64 tokens.
		{"four busy ranks", timing.Group{Ranks: 4, Tokens: 64, MaxTokens: 16}, moeTP8At64 + gather64 + scatter64 + tpHalves - moeTP2At16},
		// Priced without its group, the batch stands for every rank's: the same.
		{"no group", timing.Group{}, moeTP8At64 + gather64 + scatter64 + tpHalves - moeTP2At16},
		// The other three ranks are idle: they still join every MoE layer, with no tokens of their own.
		{"three idle ranks", timing.Group{Ranks: 4, Tokens: 16, MaxTokens: 16}, moeTP8At16 + gather16 + scatter16 + tpHalves - moeTP2At16},
	} {
		b := decodeRank()
		base := tp.Cost(&b)
		b.Group = tc.group
		got := dp.Cost(&b)
		if got.Prefill != 0 || base.Prefill != 0 {
			t.Errorf("%s: a decode pass has prefill %v / %v", tc.name, base.Prefill, got.Prefill)
		}
		// Each side is rounded to the nanosecond once.
		if d := got.Decode - base.Decode - time.Duration(math.Round(48*tc.rows*1e6)); d < -1 || d > 1 {
			t.Errorf("%s: %v, want the TP 2 pass %v + 48 × %.8f ms (off by %v)", tc.name, got.Decode, base.Decode, tc.rows, d)
		}
		var sum float64
		for _, p := range dp.Parts(&b) {
			sum += p.Ms
		}
		if d := sum - float64(got.Total())/float64(time.Millisecond); d < -1e-6 || d > 1e-6 {
			t.Errorf("%s: parts sum to %.6f ms, the pass is %v", tc.name, sum, got.Total())
		}
	}
}

// partMs is the pass's part op, ms.
func partMs(mdl *Model, b *timing.Batch, op string) float64 {
	var v float64
	for _, p := range mdl.Parts(b) {
		if p.Op == op {
			v += p.Ms
		}
	}
	return v
}

// TestAttentionDPSGLangTPHalves: SGLang with attention TP 2 and DP 2 reduce-scatters each MoE layer's
// input over the rank's two attention TP GPUs and all-gathers its output there (AIConfigurator's
// MoEDispatch, combined_attention_tpdp), instead of the layer's two custom all-reduces. At 16 decode
// tokens (32768 elements) on Qwen3-30B-A3B (48 MoE layers): TP 2 alone pays 97 all-reduces (two a
// layer and the embedding's) of SGLang 0.5.14's graph custom all-reduce, 0.0028592 ms; with DP 2
// the embedding's all-reduce and 48 × (NCCL 2.26.2's half reduce_scatter 0.006 + all_gather 0.00624).
func TestAttentionDPSGLangTPHalves(t *testing.T) {
	const (
		ar2      = 0.0028591999411582947
		scatter2 = 0.006
		gather2  = 0.00624
	)
	o := Options{Backend: "sglang", Version: "0.5.14", TP: 2}
	tp, err := onH200(t, "qwen3-30b-a3b", o)
	if err != nil {
		t.Fatal(err)
	}
	o.AttentionDP = 2
	dp, err := onH200(t, "qwen3-30b-a3b", o)
	if err != nil {
		t.Fatal(err)
	}
	b := decodeRank()
	b.Group = timing.Group{Ranks: 2, Tokens: 32, MaxTokens: 16}
	for _, tc := range []struct {
		name string
		mdl  *Model
		want float64
	}{
		{"tp 2", tp, 97 * ar2},
		{"tp 2 dp 2", dp, ar2 + 48*(scatter2+gather2)},
	} {
		if got := partMs(tc.mdl, &b, "tp_allreduce"); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: tp_allreduce %.9f ms, want %.9f", tc.name, got, tc.want)
		}
	}
}

// TestAttentionDPPadsToLargest: vLLM pads every rank's batch to the group's largest, so a rank's MoE
// layers cost the same whether the other ranks decode as many requests or idle (a dummy batch of the
// same shape), and 40 tokens over 4 ranks, at most 25 on one, cost what 4 × 25 do; SGLang gathers
// only the tokens the ranks have where that is the cheaper gather.
func TestAttentionDPPadsToLargest(t *testing.T) {
	for _, backend := range []string{"vllm", "sglang"} {
		mdl, err := onH200(t, "qwen3-30b-a3b", Options{Backend: backend, TP: 2, AttentionDP: 4})
		if err != nil {
			t.Fatal(err)
		}
		for _, pair := range [][2]timing.Group{
			{{Ranks: 4, Tokens: 64, MaxTokens: 16}, {Ranks: 4, Tokens: 16, MaxTokens: 16}},
			{{Ranks: 4, Tokens: 40, MaxTokens: 25}, {Ranks: 4, Tokens: 100, MaxTokens: 25}},
		} {
			b := decodeRank()
			b.Group = pair[0]
			first := mdl.Cost(&b)
			b.Group = pair[1]
			second := mdl.Cost(&b)
			if same := first == second; same != (backend == "vllm") {
				t.Errorf("%s: group %+v %v, %+v %v; want equal only for vllm", backend, pair[0], first, pair[1], second)
			}
		}
	}
}

// TestGroupTokens: the tokens the group's MoE layers process. vLLM: ranks × the largest rank's.
// SGLang: the sum with a prompt chunk on any rank; decodes only, ranks × the largest where 2 × the
// sum exceeds it (all-gather mode), else the sum. Without a group: every rank as this one; a group of
// one rank: this one.
func TestGroupTokens(t *testing.T) {
	vllm, sglang := &Model{dp: 4, padToMax: true}, &Model{dp: 4}
	p := passShape{tokens: 16}
	for _, tc := range []struct {
		mdl  *Model
		g    timing.Group
		want float64
	}{
		{vllm, timing.Group{Ranks: 4, Tokens: 40, MaxTokens: 25}, 100},
		{vllm, timing.Group{Ranks: 4, Tokens: 52, MaxTokens: 16, Prefill: true}, 64},
		{vllm, timing.Group{}, 64},
		{sglang, timing.Group{Ranks: 4, Tokens: 40, MaxTokens: 25}, 40},                // 80 ≤ 100: sum
		{sglang, timing.Group{Ranks: 4, Tokens: 52, MaxTokens: 16}, 64},                // 104 > 64: padded
		{sglang, timing.Group{Ranks: 4, Tokens: 52, MaxTokens: 16, Prefill: true}, 52}, // a prompt chunk: sum
		{sglang, timing.Group{Ranks: 4, Tokens: 32, MaxTokens: 16}, 32},                // 64 = 64: sum
		{sglang, timing.Group{}, 64},
		// One rank: the group is the batch, whatever its other fields say (the engine leaves them zero).
		{vllm, timing.Group{Ranks: 1}, 16},
		{sglang, timing.Group{Ranks: 1}, 16},
		{sglang, timing.Group{Ranks: 1, Tokens: 16, MaxTokens: 16, Prefill: true}, 16},
	} {
		if got := tc.mdl.groupTokens(p, &tc.g); got != tc.want {
			t.Errorf("pad to max %v, group %+v: %v tokens, want %v", tc.mdl.padToMax, tc.g, got, tc.want)
		}
	}
}

// TestAttentionDPOne: AttentionDP 0 and 1 are the model without it, and such a model ignores a batch's
// group: its ranks are replicas.
func TestAttentionDPOne(t *testing.T) {
	o := Options{Backend: "sglang", Version: "0.5.14", TP: 2}
	zero, err := onH200(t, "qwen3-30b-a3b", o)
	if err != nil {
		t.Fatal(err)
	}
	o.AttentionDP = 1
	one, err := onH200(t, "qwen3-30b-a3b", o)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range parityBatches() {
		alone := zero.Cost(&b)
		b.Group = timing.Group{Ranks: 4, Tokens: 4096, MaxTokens: 2048}
		if z, w := zero.Cost(&b), one.Cost(&b); z != alone || w != alone {
			t.Errorf("batch %+v in a group: AttentionDP 0 %+v, 1 %+v; alone %+v", b.Seqs, z, w, alone)
		}
	}
}

// TestAttentionDPErrors: attention data parallelism needs routed experts to share, and EP divides the
// tp × dp GPUs the experts span (all of them or one on vLLM).
func TestAttentionDPErrors(t *testing.T) {
	for _, tc := range []struct {
		name, backend string
		tp, dp, ep    int
		want          string
	}{
		{"llama-3.1-8b", "vllm", 1, 2, 1, "attention data parallelism 2: model llama-3.1-8b has no routed experts"},
		{"qwen3-30b-a3b", "sglang", 2, 2, 8, "expert parallelism 8 does not divide the 4 GPUs of tp 2 × attention dp 2"},
		{"qwen3-30b-a3b", "vllm", 2, 4, 4, "expert parallelism 4 with the 8 GPUs of tp 2 × attention dp 4: vLLM shards the experts over all TP GPUs (EP 1 or 8)"},
		{"qwen3-30b-a3b", "sglang", 1, -1, 1, "attention data parallelism -1 is negative"},
	} {
		_, err := onH200(t, tc.name, Options{Backend: tc.backend, TP: tc.tp, AttentionDP: tc.dp, EP: tc.ep})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s TP %d DP %d EP %d: err = %v, want %q", tc.name, tc.backend, tc.tp, tc.dp, tc.ep, err, tc.want)
		}
	}
	// Expert parallelism over the whole group: 8 = TP 2 × DP 4 on vLLM.
	if _, err := onH200(t, "qwen3-30b-a3b", Options{Backend: "vllm", TP: 2, AttentionDP: 4, EP: 8}); err != nil {
		t.Errorf("vllm TP 2 DP 4 EP 8: %v", err)
	}
}
