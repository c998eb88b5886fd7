package vllm

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// TestGuaranteedNoEvictAdmission: TensorRT-LLM admits a request only if its prompt and whole output fit
// beside what the running requests may still claim; vLLM admits on the prompt alone.
func TestGuaranteedNoEvictAdmission(t *testing.T) {
	for _, tc := range []struct {
		capacity Capacity
		admitted []uint64
	}{
		{MaxUtilization, []uint64{1, 2, 3}},
		{GuaranteedNoEvict, []uint64{1, 2}}, // 8 + 8 of 16 blocks reserved: request 3 (2 blocks) waits
	} {
		h := newHarness(t, Options{BlockSize: 4, NumBlocks: 16, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true, Capacity: tc.capacity})
		h.Enqueue(1, schedtest.Prompt(0, 8), 24) // at most 32 tokens: 8 blocks
		h.Enqueue(2, schedtest.Prompt(100, 8), 24)
		h.Enqueue(3, schedtest.Prompt(200, 4), 4)
		var admitted []uint64
		for _, a := range h.Step().Admitted {
			admitted = append(admitted, a.ID)
		}
		if !slices.Equal(admitted, tc.admitted) {
			t.Errorf("capacity %d: admitted %v, want %v", tc.capacity, admitted, tc.admitted)
		}
	}
}

// TestGuaranteedNoEvictNeverPreempts: a workload that makes vLLM preempt runs without preemption under
// TensorRT-LLM's policy, at the price of lower concurrency.
func TestGuaranteedNoEvictNeverPreempts(t *testing.T) {
	run := func(c Capacity) (preemptions int64, maxRunning, passes int) {
		h := newHarness(t, Options{BlockSize: 4, NumBlocks: 40, MaxNumSeqs: 16, MaxBatchedTokens: 256, ChunkedPrefill: true, PrefixCaching: true, Capacity: c})
		for i := range 12 {
			h.Enqueue(uint64(i), schedtest.Prompt(1000*i, 20+i), 40)
		}
		for ; !h.S.Idle(); passes++ {
			h.Step()
			maxRunning = max(maxRunning, h.S.Metrics().Running)
		}
		return h.S.Metrics().Preemptions, maxRunning, passes
	}
	vp, vmax, vpasses := run(MaxUtilization)
	tp, tmax, tpasses := run(GuaranteedNoEvict)
	t.Logf("vLLM: %d preemptions, %d running at most, %d passes; TRT-LLM: %d, %d, %d", vp, vmax, vpasses, tp, tmax, tpasses)
	if vp == 0 || tp != 0 || tmax >= vmax {
		t.Fatalf("vLLM: %d preemptions, %d running at most, %d passes; TRT-LLM: %d, %d, %d", vp, vmax, vpasses, tp, tmax, tpasses)
	}
}

func specHarness(t *testing.T, k int, rates []float64, seed uint64) *schedtest.Harness[*Scheduler] {
	return newHarness(t, Options{BlockSize: 4, NumBlocks: 4096, MaxBatchedTokens: 8192, ChunkedPrefill: true, PrefixCaching: true,
		Spec: sched.Spec{Tokens: k, AcceptRates: rates, Seed: seed}})
}

// bursts runs the scheduler to idle and returns each pass's tokens per request, by request.
func bursts(h *schedtest.Harness[*Scheduler]) map[uint64][]int {
	out := map[uint64][]int{}
	for !h.S.Idle() {
		for _, o := range h.Step().Outputs {
			out[o.ID] = append(out[o.ID], len(o.Tokens))
		}
	}
	return out
}

func TestSpeculativeBurstsExact(t *testing.T) {
	for _, tc := range []struct {
		rates []float64
		want  []int
	}{
		{[]float64{0, 0}, []int{1, 1, 1, 1, 1, 1, 1}},
		{[]float64{1, 1}, []int{1, 3, 3}},             // first token from the prefill, then 1 + 2 drafts
		{[]float64{0, 1}, []int{1, 1, 1, 1, 1, 1, 1}}, // stop at the first rejection
		{[]float64{1}, []int{1, 2, 2, 2}},             // missing rates are 0
	} {
		h := specHarness(t, 2, tc.rates, 1)
		h.Enqueue(1, schedtest.Prompt(0, 6), 7)
		if got := bursts(h)[1]; !slices.Equal(got, tc.want) {
			t.Errorf("rates %v: bursts %v, want %v", tc.rates, got, tc.want)
		}
		if h.S.Pool().Active() != 0 {
			t.Errorf("rates %v: %d blocks still active", tc.rates, h.S.Pool().Active())
		}
	}
}

func TestSpeculativeSeedDeterminism(t *testing.T) {
	draw := func(seed uint64) string {
		h := specHarness(t, 3, []float64{0.7, 0.5, 0.2}, seed)
		for i := range 8 {
			h.Enqueue(uint64(i), schedtest.Prompt(100*i, 10), 30)
		}
		b := bursts(h)
		return fmt.Sprint(b[0], b[3], b[7])
	}
	if a, b := draw(1), draw(1); a != b {
		t.Fatalf("same seed, different bursts:\n%s\n%s", a, b)
	}
	if draw(1) == draw(2) {
		t.Fatal("different seeds, same bursts")
	}
}

// TestSpeculativeMeanAcceptedLength: with conditional rates 0.7, 0.5, 0.2 a step emits
// 1 + 0.7 + 0.7·0.5 + 0.7·0.5·0.2 = 2.12 tokens on average.
func TestSpeculativeMeanAcceptedLength(t *testing.T) {
	h := specHarness(t, 3, []float64{0.7, 0.5, 0.2}, 42)
	for i := range 200 {
		h.Enqueue(uint64(i), schedtest.Prompt(1000*i, 16), 400)
	}
	bursts(h)
	m := h.S.Metrics()
	mean := float64(m.SpecTokens) / float64(m.SpecSteps)
	if math.Abs(mean-2.12) > 0.02 || m.SpecSteps < 20000 {
		t.Fatalf("mean accepted length %.4f over %d steps, want 2.12", mean, m.SpecSteps)
	}
}

// TestSpeculativeReleasesUnusedReservations: blocks reserved for rejected drafts go back at the pass end.
func TestSpeculativeReleasesUnusedReservations(t *testing.T) {
	h := specHarness(t, 4, []float64{0}, 1)
	h.Enqueue(1, schedtest.Prompt(0, 4), 10)
	h.Step() // prefill: 4 tokens, the first output token
	p := h.Step()
	// The decode step computed the dangling token and 4 drafts (positions 4..8: blocks 1 and 2 reserved);
	// all drafts were rejected, so only position 4 is valid and block 2 goes back.
	if s := p.Batch.Seqs[0]; s.New != 5 || s.Cached != 4 || s.Prefill {
		t.Fatalf("batch %+v, want a decode of 1 + 4 drafts over 4 tokens", s)
	}
	if r := h.S.req(1); r.Computed != 5 || len(r.table) != 2 || h.S.Pool().Active() != 2 {
		t.Fatalf("computed %d, %d blocks held, %d active; want 5, 2, 2", r.Computed, len(r.table), h.S.Pool().Active())
	}
}

// TestSpeculativeRecomputesOneMorePrefixBlock ports test_mtp_recomputes_last_prefix_cache_block: an
// 8-token cached prefix of a 12-token prompt gives reuse/prefill/KV = 8/4/8 without MTP and 4/8/4 with it.
func TestSpeculativeRecomputesOneMorePrefixBlock(t *testing.T) {
	for _, tc := range []struct {
		k                  int
		reuse, prefill, kv int
	}{{0, 8, 4, 8}, {1, 4, 8, 4}} {
		h := specHarness(t, tc.k, []float64{0.5}, 1)
		h.Enqueue(1, schedtest.Prompt(0, 8), 1)
		bursts(h)
		toks := append(schedtest.Prompt(0, 8), schedtest.Prompt(500, 4)...)
		if err := h.S.Enqueue(&sched.Request{ID: 2, Prompt: toks, MaxTokens: 1}); err != nil {
			t.Fatal(err)
		}
		p := h.Step()
		if got := []int{p.Admitted[0].Cached, p.FPM.SumPrefillTokens, p.FPM.SumPrefillKVTokens}; !slices.Equal(got, []int{tc.reuse, tc.prefill, tc.kv}) {
			t.Errorf("spec tokens %d: reuse/prefill/kv = %v, want %d/%d/%d", tc.k, got, tc.reuse, tc.prefill, tc.kv)
		}
	}
}
