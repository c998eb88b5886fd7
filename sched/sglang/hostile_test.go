package sglang

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/radix"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// TestHugeMaxTokensIsRejected: max_tokens near 2^63 used to overflow prompt + max_tokens into a negative
// total that passed every limit, and admission panicked in slices.Grow.
func TestHugeMaxTokensIsRejected(t *testing.T) {
	for _, maxLen := range []int{0, 100} {
		o := opts(4, 16)
		o.MaxModelLen = maxLen
		h := newHarness(t, o)
		for i, m := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - 3, math.MaxInt - 16, 1 << 62} {
			err := h.S.Enqueue(&sched.Request{ID: uint64(i + 1), Prompt: schedtest.Prompt(0, 2), MaxTokens: m})
			var rej *sched.RejectError
			if !errors.As(err, &rej) || rej.ID != uint64(i+1) {
				t.Errorf("max-model-len %d: Enqueue(max_tokens %d) = %v, want a RejectError", maxLen, m, err)
			}
			if _, ok, err := h.S.Reserve(&sched.Request{ID: uint64(i + 50), Prompt: schedtest.Prompt(0, 2), MaxTokens: m}); ok || !errors.As(err, &rej) {
				t.Errorf("max-model-len %d: Reserve(max_tokens %d) = %v, %v, want a RejectError", maxLen, m, ok, err)
			}
		}
		h.Enqueue(100, schedtest.Prompt(0, 4), 1)
		if p := h.Step(); !slices.Equal(schedtest.Outputs(p), []string{"100:1:done"}) {
			t.Fatalf("follower outputs %v", schedtest.Outputs(p))
		}
	}
}

// TestPageListGrowsWithUse: admission used to size a request's page list for its whole max_tokens, and
// the reuse pool kept it; 250 requests with max_tokens 880,000 held 920 MB. The list now holds what the
// request really uses, and the reuse pool does not keep a long one.
func TestPageListGrowsWithUse(t *testing.T) {
	h := newHarness(t, opts(1, 1<<20))
	h.Enqueue(1, schedtest.Prompt(0, 4), 880_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.Step()
	runtime.ReadMemStats(&after)
	r := h.S.book.Live[1]
	if c := cap(r.pages); c > 64 {
		t.Fatalf("a 4-token prompt's page list has capacity %d after admission, want at most 64", c)
	}
	if c := cap(r.pages); c < 5 {
		t.Fatalf("a 4-token prompt's page list has capacity %d after admission, want room for its 4 pages and its first decode step's", c)
	}
	// Its leaf in the tree keeps room for the pages it will add, but no more than a pass's prefill budget
	// (16,384 pages of 20 bytes here, where room for its max_tokens would take 17.6 MB).
	if grew := after.TotalAlloc - before.TotalAlloc; r.locked != 4 || grew > 2<<20 {
		t.Fatalf("admission and prefill: %d pages cached, %d bytes allocated; want 4 and at most 2 MiB", r.locked, grew)
	}
	h.S.Cancel(1)
	h.Step() // the cancelled request reaches the reuse pool
	if got := h.S.newRequest(false); got != r {
		t.Fatalf("a new request is %p, want the cancelled one (%p) reused", got, r)
	}

	// A long request's list is dropped by the free lists rather than handed on; a short one is kept.
	s := h.S
	for s.pageLists.Len() > 0 {
		s.pageLists.Take()
	}
	s.freeBuffers(&request{pages: make([]radix.PageID, 0, maxSparePages+1)})
	s.freeBuffers(&request{pages: make([]radix.PageID, 0, maxSparePages)})
	next := &request{}
	s.buffers(next)
	if c := cap(next.pages); c != maxSparePages || s.pageLists.Len() != 0 {
		t.Errorf("a new request got a page list of capacity %d, %d more kept; want %d (the short one) and none", c, s.pageLists.Len(), maxSparePages)
	}
}

// TestPageListSizedOnce: a prompt admitted in chunks and decoded to its end appends its pages to the one
// array its admission gave it, not one grown chunk by chunk and step by step. With prefix caching the
// list holds only the pages not yet cached (a chunk's, a decode step's: the tree takes each page as it
// fills), so it is sized for the first chunk; without, it holds every page, its prompt's and its
// output's.
func TestPageListSizedOnce(t *testing.T) {
	for _, caching := range []bool{true, false} {
		o := opts(1, 4096)
		o.ChunkedPrefillSize, o.MaxPrefillTokens, o.PrefixCaching = 300, 300, caching
		h := newHarness(t, o)
		h.Enqueue(1, schedtest.Prompt(0, 1000), 40)
		h.Step()
		r := h.S.book.Live[1]
		first, held := cap(r.pages), 0
		for step := 0; h.S.book.Live[1] != nil && step < 100; step++ {
			if c := cap(r.pages); c != first {
				t.Fatalf("caching %v, step %d: page list capacity %d, %d after admission", caching, step, c, first)
			}
			held = max(held, len(r.pages))
			h.Step()
		}
		if h.S.book.Live[1] != nil {
			t.Fatalf("caching %v: not done after 100 steps", caching)
		}
		// Room for the first chunk's 300 pages and a decode step's (with caching, every computed page
		// moves to the tree: none stays listed), or for its 1,040 tokens; at most a size class above.
		lo, hi, most := 301, 400, 0
		if !caching {
			lo, hi, most = 1040, 1300, 1038
		}
		if first < lo || first > hi || held != most {
			t.Fatalf("caching %v: page list of capacity %d after admission held at most %d pages, want room for %d (at most %d) and %d held", caching, first, held, lo, hi, most)
		}
	}
}
