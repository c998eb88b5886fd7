package vllm

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// TestHugeMaxTokensIsRejected: max_tokens near 2^63 used to overflow prompt + max_tokens into a negative
// total that passed every limit; the request then filled the pool (vLLM) or held all of it (TRT-LLM).
func TestHugeMaxTokensIsRejected(t *testing.T) {
	for _, c := range []Capacity{MaxUtilization, GuaranteedNoEvict} {
		for _, maxLen := range []int{0, 100} {
			for _, chunked := range []bool{true, false} {
				o := refOpts()
				o.Capacity, o.MaxModelLen, o.ChunkedPrefill = c, maxLen, chunked
				h := newHarness(t, o)
				for i, m := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - 3, math.MaxInt - 16, 1 << 62} {
					err := h.S.Enqueue(&sched.Request{ID: uint64(i + 1), Prompt: schedtest.Prompt(0, 2), MaxTokens: m})
					var rej *sched.RejectError
					if !errors.As(err, &rej) || rej.ID != uint64(i+1) {
						t.Errorf("capacity %d, max-model-len %d, chunked %v: Enqueue(max_tokens %d) = %v, want a RejectError", c, maxLen, chunked, m, err)
					}
				}
				if !h.S.Idle() {
					t.Fatalf("capacity %d: rejected requests were queued", c)
				}
				// The engine still serves: a request that fits the 8-token budget runs to completion.
				h.Enqueue(100, schedtest.Prompt(0, 4), 1)
				if p := h.Step(); !slices.Equal(schedtest.Outputs(p), []string{"100:1:done"}) {
					t.Fatalf("capacity %d: follower outputs %v", c, schedtest.Outputs(p))
				}
			}
		}
	}
}

// TestLargestFittingMaxTokensIsAccepted pins the boundary of the overflow-safe comparison: a request
// that exactly fills the pool (6 blocks of 4 tokens) is accepted, one more token is not.
func TestLargestFittingMaxTokensIsAccepted(t *testing.T) {
	h := newHarness(t, refOpts())
	h.Enqueue(1, schedtest.Prompt(0, 4), 20)
	err := h.S.Enqueue(&sched.Request{ID: 2, Prompt: schedtest.Prompt(0, 4), MaxTokens: 21})
	if want := "request 2 rejected: needs 7 KV blocks for prompt (4 tokens) + max_tokens (21), the pool has 6"; err == nil || err.Error() != want {
		t.Fatalf("Enqueue = %v, want %q", err, want)
	}
}
