package sglang

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

func opts(page, pages int) Options {
	return Options{PageSize: page, NumPages: pages, MaxRunning: 8, MaxPrefillTokens: 16384, ChunkedPrefillSize: 8192,
		ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true, Events: true}
}

func newHarness(t *testing.T, o Options) *schedtest.Harness[*Scheduler] {
	t.Helper()
	s, err := New(o)
	return schedtest.NewHarness(t, s, err)
}

// TestDecodeAllocationIsPageAware ports test_decode_allocation_is_page_aware: with 4-token pages, a
// 7-token prompt holds 8 slots, still 8 after its first decode, and 12 once its tokens cross into page 3.
func TestDecodeAllocationIsPageAware(t *testing.T) {
	h := newHarness(t, opts(4, 16))
	h.Enqueue(1, schedtest.Prompt(0, 7), 4)
	var slots []int
	for range 3 {
		h.Step()
		slots = append(slots, h.S.book.Live[1].held()*4)
	}
	if !slices.Equal(slots, []int{8, 8, 12}) {
		t.Fatalf("allocated slots %v, want [8 8 12]", slots)
	}
}

// TestActiveBlocksTrackPageOccupancy ports test_active_decode_blocks_tracks_page_reserved_occupancy: a
// 6-token prompt on 4-token pages occupies 2 blocks.
func TestActiveBlocksTrackPageOccupancy(t *testing.T) {
	h := newHarness(t, opts(4, 16))
	h.Enqueue(1, schedtest.Prompt(0, 6), 4)
	h.Step()
	if m := h.S.Metrics(); m.ActiveBlocks != 2 || m.TotalBlocks != 16 {
		t.Fatalf("metrics %+v, want 2 active of 16", m)
	}
}

// TestFinishedRequestStaysCached ports ordinary_completion_keeps_default_cleanup: the 8 tokens of a
// finished request stay in the tree, and the same prompt hits them (all but the recomputed last page).
func TestFinishedRequestStaysCached(t *testing.T) {
	h := newHarness(t, opts(4, 16))
	h.Enqueue(1, schedtest.Prompt(0, 8), 1)
	if p := h.Step(); !slices.Equal(schedtest.Outputs(p), []string{"1:1:done"}) {
		t.Fatalf("outputs %v", schedtest.Outputs(p))
	}
	if c := h.S.Cache(); c.CachedPages() != 2 || c.EvictablePages() != 2 || h.S.Metrics().ActiveBlocks != 0 {
		t.Fatalf("cached %d evictable %d active %d, want 2, 2, 0", c.CachedPages(), c.EvictablePages(), h.S.Metrics().ActiveBlocks)
	}
	h.Enqueue(2, schedtest.Prompt(0, 8), 1)
	if p := h.Step(); p.Admitted[0].Cached != 4 {
		t.Fatalf("admission %+v, want 4 cached tokens", p.Admitted)
	}
}

// TestUnfinishedDecodeRequestIsCached ports test_unfinished_decode_request_is_cached_after_output: the
// pages a running request completes go into the tree while it runs.
func TestUnfinishedDecodeRequestIsCached(t *testing.T) {
	h := newHarness(t, opts(4, 16))
	h.Enqueue(1, schedtest.Prompt(0, 6), 10)
	h.Step() // prefill: 6 computed, 1 page full
	if got := h.S.Cache().CachedPages(); got != 1 {
		t.Fatalf("after prefill %d pages cached, want 1", got)
	}
	h.Step()
	h.Step() // positions 6 and 7 computed: page 2 full
	if got, r := h.S.Cache().CachedPages(), h.S.book.Live[1]; got != 2 || r.locked != 2 {
		t.Fatalf("%d pages cached, request locks %d; want 2, 2", got, r.locked)
	}
}

// TestRetractionKeepsOutput ports test_check_decode_mem_preserves_generated_output_on_retract: when the
// pool cannot hold the running requests' next pages, the one with fewer output tokens is retracted, keeps
// its output, and resumes later.
func TestRetractionKeepsOutput(t *testing.T) {
	o := opts(4, 6)
	o.ClipMaxNewTokens = 1 // admit the second request despite both long outputs
	h := newHarness(t, o)
	tokens := map[uint64]int{}
	step := func() *sched.Pass {
		p := h.Step()
		for _, o := range p.Outputs {
			tokens[o.ID] += len(o.Tokens)
		}
		return p
	}
	h.Enqueue(1, schedtest.Prompt(0, 8), 10)
	step()
	step() // request 1 is one output ahead
	h.Enqueue(2, schedtest.Prompt(100, 8), 10)
	if p := step(); len(p.Admitted) != 1 {
		t.Fatalf("request 2 not admitted: %+v", p.Admitted)
	}
	var p *sched.Pass
	for range 10 {
		if p = step(); len(p.Preempted) > 0 {
			break
		}
	}
	if !slices.Equal(p.Preempted, []uint64{2}) {
		t.Fatalf("retracted %v, want request 2 (fewer outputs)", p.Preempted)
	}
	r2 := h.S.book.Live[2]
	if r2.Generated == 0 || r2.Generated != tokens[2] || r2.Computed != 0 || h.S.waiting[0] != r2 || h.S.NewTokenRatio() >= 0.7 {
		t.Fatalf("retracted request: generated %d (delivered %d) computed %d front %v ratio %v",
			r2.Generated, tokens[2], r2.Computed, h.S.waiting[0] == r2, h.S.NewTokenRatio())
	}
	for !h.S.Idle() {
		step()
	}
	if tokens[1] != 10 || tokens[2] != 10 || h.S.Metrics().Preemptions == 0 {
		t.Fatalf("tokens %v, want 10 each", tokens)
	}
}

// TestPrefillHasPriority: in an extend pass the running requests do not decode, unless mixed chunk is on.
func TestPrefillHasPriority(t *testing.T) {
	for _, mixed := range []bool{false, true} {
		o := opts(1, 256)
		o.MixedChunk = mixed
		h := newHarness(t, o)
		h.Enqueue(1, schedtest.Prompt(0, 10), 5)
		h.Step()
		h.Enqueue(2, schedtest.Prompt(100, 10), 5)
		p := h.Step()
		want := []string{"2:1"}
		if mixed {
			want = []string{"1:1", "2:1"}
		}
		if got := schedtest.Outputs(p); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Errorf("mixed=%v: outputs %v, want %v", mixed, got, want)
		}
	}
}

// TestMixedChunkBudgetsForDecodeTokens: with mixed chunk the running requests' decode tokens share the
// pass, so SGLang takes one token per running request off the chunk and prefill budgets.
func TestMixedChunkBudgetsForDecodeTokens(t *testing.T) {
	for _, tc := range []struct {
		mixed             bool
		chunk, maxPrefill int
		want              []string
	}{
		// Three running requests: a 16-token chunk budget leaves 13 for the prompt.
		{true, 16, 16384, []string{"admit 4", "0+13"}},
		{false, 16, 16384, []string{"admit 4", "0+16"}},
		// A 20-token prefill budget less 3 fits the 12-token prompt of 4 but not then 5's 6 tokens.
		{true, 8192, 20, []string{"admit 4", "0+12"}},
		{false, 8192, 20, []string{"admit 4", "admit 5", "0+12", "0+6"}},
	} {
		o := opts(1, 4096)
		o.MixedChunk = tc.mixed
		o.ChunkedPrefillSize, o.MaxPrefillTokens = tc.chunk, tc.maxPrefill
		h := newHarness(t, o)
		for id := range uint64(3) {
			h.Enqueue(id+1, schedtest.Prompt(int(id)*100, 4), 50)
		}
		h.Step()
		long := 40
		if tc.chunk > 16 {
			long = 12
		}
		h.Enqueue(4, schedtest.Prompt(1000, long), 5)
		h.Enqueue(5, schedtest.Prompt(2000, 6), 5)
		got := prefillLog(nil, h.Step(), "")
		if !slices.Equal(got, tc.want) {
			t.Errorf("mixed %v, chunk %d, max prefill %d: prefill %v, want %v", tc.mixed, tc.chunk, tc.maxPrefill, got, tc.want)
		}
	}
}

// prefillLog appends a pass's admissions ("admit ID") and prefill chunks (prefix + "cached+new") to log.
func prefillLog(log []string, p *sched.Pass, prefix string) []string {
	for _, a := range p.Admitted {
		log = append(log, fmt.Sprint("admit ", a.ID))
	}
	for _, q := range p.Batch.Seqs {
		if q.Prefill {
			log = append(log, fmt.Sprintf("%s%d+%d", prefix, q.Cached, q.New))
		}
	}
	return log
}

// TestChunkedPrefillKeepsFIFOOrder: one chunked request at a time, continued first; requests behind it
// wait their turn.
func TestChunkedPrefillKeepsFIFOOrder(t *testing.T) {
	o := opts(4, 256)
	o.ChunkedPrefillSize = 16
	h := newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 40), 2)
	h.Enqueue(2, schedtest.Prompt(1000, 8), 2)
	var order []string
	for range 6 {
		order = prefillLog(order, h.Step(), "chunk ")
	}
	// Pass 3 finishes request 1's prompt first, then admits request 2 with the chunk budget left.
	want := []string{"admit 1", "chunk 0+16", "chunk 16+16", "admit 2", "chunk 32+8", "chunk 0+8"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}

// TestLPMServesLongestPrefixFirst: lpm puts the request with the longest cached prefix first and
// deprioritises one whose first 32 tokens repeat an earlier waiting request's.
func TestLPMServesLongestPrefixFirst(t *testing.T) {
	o := opts(1, 4096)
	o.Policy = LPM
	o.MaxRunning = 1
	h := newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 100), 1)
	h.Step()                                    // prefix 0..99 cached
	h.Enqueue(2, schedtest.Prompt(5000, 40), 1) // no match
	h.Enqueue(3, schedtest.Prompt(5000, 50), 1) // same first 32 tokens as 2: demoted behind 4
	h.Enqueue(4, schedtest.Prompt(9000, 40), 1) // no match
	h.Enqueue(5, schedtest.Prompt(0, 120), 1)   // 99 tokens cached: first
	var admitted []uint64
	var cached []int
	for !h.S.Idle() {
		for _, a := range h.Step().Admitted {
			admitted = append(admitted, a.ID)
			cached = append(cached, a.Cached)
		}
		if len(admitted) == 1 {
			var order []uint64
			for _, r := range h.S.waiting {
				order = append(order, r.ID)
			}
			if !slices.Equal(order, []uint64{2, 4, 3}) {
				t.Fatalf("queue after the first pass %v, want [2 4 3]", order)
			}
		}
	}
	// Once 2 has computed the shared prefix, 3 matches 40 tokens and goes before 4.
	if want := []uint64{5, 2, 3, 4}; !slices.Equal(admitted, want) || cached[2] != 40 {
		t.Fatalf("admission order %v (cached %v), want %v with 40 cached for 3", admitted, cached, want)
	}
}

func TestNewTokenRatioDecays(t *testing.T) {
	o := opts(1, 4096)
	o.Conservativeness = 0.5
	h := newHarness(t, o)
	init := 0.35
	if h.S.NewTokenRatio() != init {
		t.Fatalf("initial ratio %v, want 0.7 × 0.5", h.S.NewTokenRatio())
	}
	h.Enqueue(1, schedtest.Prompt(0, 4), 700)
	h.Step() // extend pass: no decay
	for range 10 {
		h.Step()
	}
	step := (init - 0.14*init) / 600
	if got := h.S.NewTokenRatio(); math.Abs(got-(init-10*step)) > 1e-12 {
		t.Fatalf("after 10 decode steps ratio %v, want %v", got, init-10*step)
	}
	for !h.S.Idle() {
		h.Step()
	}
	if got := h.S.NewTokenRatio(); math.Abs(got-0.14*init) > 1e-12 {
		t.Fatalf("after 699 decode steps ratio %v, want the floor %v", got, 0.14*init)
	}
}

// TestEventsAreConsistent: an indexer fed only the pass events holds exactly the cached pages.
func TestEventsAreConsistent(t *testing.T) {
	h := newHarness(t, opts(2, 40))
	for i := range 10 {
		h.Enqueue(uint64(i), append(schedtest.Prompt(0, 6), schedtest.Prompt(100*i, 5)...), 6)
	}
	indexed := map[uint64]bool{}
	for !h.S.Idle() {
		for _, ev := range h.Step().Events {
			switch ev.Kind {
			case kvcache.Stored:
				for _, b := range ev.Blocks {
					if indexed[b.Hash] {
						t.Fatalf("%x stored twice", b.Hash)
					}
					indexed[b.Hash] = true
				}
			case kvcache.Removed:
				for _, hash := range ev.Hashes {
					if !indexed[hash] {
						t.Fatalf("%x removed, never stored", hash)
					}
					delete(indexed, hash)
				}
			}
		}
	}
	if len(indexed) != h.S.Cache().CachedPages() {
		t.Fatalf("indexer holds %d pages, cache %d", len(indexed), h.S.Cache().CachedPages())
	}
}

// TestTokenGenerationPatterns ports test_sglang_scheduler_token_generation_patterns: fcfs and lpm at page
// sizes 1 and 4, with and without a shared prefix, emit exactly the tokens asked for and go idle.
func TestTokenGenerationPatterns(t *testing.T) {
	for _, policy := range []Policy{FCFS, LPM} {
		for _, page := range []int{1, 4} {
			for _, shared := range []int{0, 120} {
				t.Run(fmt.Sprintf("policy%d/page%d/shared=%d", policy, page, shared), func(t *testing.T) {
					o := opts(page, 6000/page)
					o.Policy, o.MaxRunning, o.ChunkedPrefillSize, o.MaxPrefillTokens = policy, 32, 1024, 2048
					h := newHarness(t, o)
					h.EnqueueMany(100, 200, shared, 40)
					tokens, done := h.Drain()
					if tokens != 4000 || done != 100 {
						t.Fatalf("%d tokens, %d done; want 4000, 100", tokens, done)
					}
					if m := h.S.Metrics(); shared > 0 && m.PrefixHits == 0 {
						t.Fatal("shared prefix never hit")
					}
				})
			}
		}
	}
}

func TestRejections(t *testing.T) {
	h := newHarness(t, opts(4, 4))
	for _, r := range []*sched.Request{
		{ID: 1, Prompt: schedtest.Prompt(0, 14), MaxTokens: 3}, // 17 tokens > 16
		{ID: 2, Prompt: nil, MaxTokens: 1},
	} {
		if err := h.S.Enqueue(r); err == nil {
			t.Errorf("request %d accepted", r.ID)
		}
	}
}

func TestCancelReleasesPages(t *testing.T) {
	h := newHarness(t, opts(4, 32))
	h.Enqueue(1, schedtest.Prompt(0, 10), 10)
	h.Enqueue(2, schedtest.Prompt(100, 10), 10)
	h.Step()
	h.Step()
	if !h.S.Cancel(1) || !h.S.Cancel(2) || h.S.Cancel(3) {
		t.Fatal("Cancel reported wrongly")
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if m := h.S.Metrics(); m.ActiveBlocks != 0 || !h.S.Idle() {
		t.Fatalf("metrics %+v after cancelling everything", m)
	}
}

func TestSpeculativeDecoding(t *testing.T) {
	for _, tc := range []struct {
		rates []float64
		want  []int
	}{
		{[]float64{1, 1}, []int{1, 3, 3}},
		{[]float64{0, 1}, []int{1, 1, 1, 1, 1, 1, 1}},
	} {
		o := opts(4, 64)
		o.Spec = sched.Spec{Tokens: 2, AcceptRates: tc.rates, Seed: 1}
		h := newHarness(t, o)
		h.Enqueue(1, schedtest.Prompt(0, 6), 7)
		var got []int
		for !h.S.Idle() {
			for _, o := range h.Step().Outputs {
				got = append(got, len(o.Tokens))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("rates %v: bursts %v, want %v", tc.rates, got, tc.want)
		}
		if m := h.S.Metrics(); m.ActiveBlocks != 0 || m.SpecSteps != int64(len(tc.want)-1) {
			t.Errorf("rates %v: metrics %+v", tc.rates, m)
		}
	}
}

// TestOverlapSchedule: SGLang's overlap scheduler forms pass k+1 when pass k is launched (scheduler.py
// event_loop_overlap), so a request that arrives while pass k runs is first seen when pass k+2 is formed.
// Request 1 (4 prompt tokens, 3 output tokens) is prefilled alone in pass 1; request 2 arrives during pass
// 1. Without overlap, pass 2 prefills request 2 (prefill has priority: request 1 waits) and pass 3 decodes
// both. With overlap, pass 2 was formed before request 2 arrived: it decodes request 1 (one sequence, 4
// cached tokens); pass 3 prefills request 2; pass 4 decodes both. When nothing else would run, a deferred
// request is served at once, as SGLang's idle loop would.
func TestOverlapSchedule(t *testing.T) {
	for _, tc := range []struct {
		overlap bool
		want    []string
	}{
		{false, []string{"[1:1]", "[2:1]", "[1:1 2:1]", "[1:1:done 2:1:done]"}},
		{true, []string{"[1:1]", "[1:1]", "[2:1]", "[1:1:done 2:1]"}},
	} {
		o := opts(1, 64)
		o.Overlap = tc.overlap
		h := newHarness(t, o)
		h.Enqueue(1, schedtest.Prompt(0, 4), 3)
		var got []string
		p := h.Step()
		got = append(got, fmt.Sprint(schedtest.Outputs(p)))
		h.Enqueue(2, schedtest.Prompt(100, 4), 3)
		if w := h.S.Metrics().Waiting; w != 1 {
			t.Fatalf("overlap %v: %d waiting after the arrival, want 1", tc.overlap, w)
		}
		for i := range 3 {
			p = h.Step()
			got = append(got, fmt.Sprint(schedtest.Outputs(p)))
			if tc.overlap && i == 0 {
				if s := p.Batch.Seqs; len(s) != 1 || s[0].New != 1 || s[0].Cached != 4 || s[0].Prefill {
					t.Fatalf("overlap pass 2 batch %+v, want request 1's decode (1 new, 4 cached)", s)
				}
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("overlap %v: outputs %v, want %v", tc.overlap, got, tc.want)
		}
	}

	// Request 3 finishes in its prefill pass; request 4 arrives during it. The next pass has nothing else
	// to run, so it prefills request 4 rather than idling.
	o := opts(1, 64)
	o.Overlap = true
	h := newHarness(t, o)
	h.Enqueue(3, schedtest.Prompt(0, 4), 1)
	if got := schedtest.Outputs(h.Step()); !slices.Equal(got, []string{"3:1:done"}) {
		t.Fatalf("pass 1 outputs %v", got)
	}
	h.Enqueue(4, schedtest.Prompt(100, 4), 1)
	p := h.Step()
	if got := schedtest.Outputs(p); !slices.Equal(got, []string{"4:1:done"}) || len(p.Batch.Seqs) != 1 || p.Batch.Seqs[0].New != 4 {
		t.Fatalf("pass 2 outputs %v, batch %+v: want request 4 prefilled at once", got, p.Batch.Seqs)
	}
	if !h.S.Idle() {
		t.Fatal("not idle after both finished")
	}
}

// TestCancelDisaggregated: Cancel finds a reservation and a prefill worker's held request and frees their
// pages; full prompt pages stay cached.
func TestCancelDisaggregated(t *testing.T) {
	o := opts(4, 32)
	o.Role = sched.Decode
	h := newHarness(t, o)
	if _, ok, err := h.S.Reserve(&sched.Request{ID: 1, Prompt: schedtest.Prompt(0, 10), MaxTokens: 4}); !ok || err != nil {
		t.Fatalf("Reserve: %v %v", ok, err)
	}
	if m := h.S.Metrics(); m.ActiveBlocks != 3 {
		t.Fatalf("reserved: %+v; want 3 pages", m)
	}
	if !h.S.Cancel(1) || h.S.Unreserve(1) {
		t.Fatal("Cancel of a reservation did not take it")
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if m := h.S.Metrics(); m.ActiveBlocks != 0 || m.InactiveBlocks != 0 {
		t.Fatalf("after the cancel: %+v; want nothing held", m)
	}

	o.Role = sched.Prefill
	h = newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 10), 1)
	h.Step()
	if m := h.S.Metrics(); m.ActiveBlocks != 3 || !h.S.Idle() {
		t.Fatalf("after the prefill: %+v; want 3 pages held", m)
	}
	if !h.S.Cancel(1) || h.S.Release(1) {
		t.Fatal("Cancel of a held request did not take it")
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if m := h.S.Metrics(); m.ActiveBlocks != 0 || m.InactiveBlocks != 2 {
		t.Fatalf("after the cancel: %+v; want 0 active, 2 cached pages", m)
	}
}

// TestActivatedTransfersRespectMaxRunning: a decode worker's arrived transfers join the running requests
// only while max_running_requests allows (SGLang's prebuilt queue); the others wait, holding their
// prompts' pages, and a cancel there frees them.
func TestActivatedTransfersRespectMaxRunning(t *testing.T) {
	o := opts(4, 32)
	o.Role, o.MaxRunning = sched.Decode, 1
	h := newHarness(t, o)
	for id := range uint64(3) {
		if _, ok, err := h.S.Reserve(&sched.Request{ID: id + 1, Prompt: schedtest.Prompt(int(id)*100, 10), MaxTokens: 2}); !ok || err != nil {
			t.Fatalf("Reserve %d: %v %v", id+1, ok, err)
		}
		h.S.Activate(id + 1)
	}
	p := h.Step()
	if got := schedtest.Outputs(p); !slices.Equal(got, []string{"1:1"}) || len(p.Admitted) != 1 || p.Admitted[0] != (sched.Admission{ID: 1, Cached: 9}) {
		t.Fatalf("first pass: outputs %v, admitted %+v; want request 1 alone, admitted with 9 cached tokens", got, p.Admitted)
	}
	if m := h.S.Metrics(); m.Running != 1 || m.Waiting != 2 || m.ActiveBlocks != 9 {
		t.Fatalf("%+v; want 1 running, 2 waiting, 9 pages held", m)
	}
	if !h.S.Cancel(3) {
		t.Fatal("Cancel of a waiting transfer did not find it")
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if m := h.S.Metrics(); m.Waiting != 1 || m.ActiveBlocks != 6 || m.InactiveBlocks != 2 {
		t.Fatalf("after the cancel: %+v; want 1 waiting, 6 pages held, 3's 2 full pages cached", m)
	}
	if got := schedtest.Outputs(h.Step()); !slices.Equal(got, []string{"1:1:done"}) {
		t.Fatalf("second pass: %v; want request 1 done", got)
	}
	if got := schedtest.Outputs(h.Step()); !slices.Equal(got, []string{"2:1"}) {
		t.Fatalf("third pass: %v; want request 2 once 1 left", got)
	}
}

// TestDecodePreallocation: a decode worker takes a prompt only as SGLang's decode preallocation queue
// would (pop_preallocated): 16 pages of 4 tokens, ReservedDecode 16. Holding a reserved 20-token prompt
// (5 pages; 44 tokens free), it keeps 16 of them for that prompt's decode, so a 12-token prompt (12 + 16
// = 28 tokens) fits and a 13-token one does not, though its pages would. Once that request runs with 40
// output tokens at most (21 tokens, 20 computed in 5 pages; 44 tokens free), the room it needs to finish
// alone, 40 + 20 − 21 = 39 tokens, is kept instead, and not even an 8-token prompt fits; with 10
// output tokens (10 + 20 − 21 = 9 < 16) the reserve applies again: 12 tokens fit, 13 do not.
// ReservedDecode 0 takes whatever the pool holds.
func TestDecodePreallocation(t *testing.T) {
	for _, tc := range []struct {
		name          string
		reserved      int
		run, firstMax int // run: activate and step the first request
		prompt        int
		want          bool
	}{
		{"reserve per held request: fits", 16, 0, 4, 12, true},
		{"reserve per held request: one token over", 16, 0, 4, 13, false},
		{"rule off", 0, 0, 4, 40, true},
		{"running request must finish alone", 16, 1, 40, 8, false},
		{"running request's need below the reserve", 16, 1, 10, 12, true},
		{"running request's need below the reserve: one token over", 16, 1, 10, 13, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts(4, 16)
			o.Role, o.ReservedDecode = sched.Decode, tc.reserved
			h := newHarness(t, o)
			if _, ok, err := h.S.Reserve(&sched.Request{ID: 1, Prompt: schedtest.Prompt(0, 20), MaxTokens: tc.firstMax}); !ok || err != nil {
				t.Fatalf("Reserve 1 on an idle worker: %v %v", ok, err)
			}
			if tc.run > 0 {
				h.S.Activate(1)
				if got := schedtest.Outputs(h.Step()); !slices.Equal(got, []string{"1:1"}) {
					t.Fatalf("first step: %v", got)
				}
			}
			_, ok, err := h.S.Reserve(&sched.Request{ID: 2, Prompt: schedtest.Prompt(100, tc.prompt), MaxTokens: 1})
			if err != nil || ok != tc.want {
				t.Fatalf("Reserve of a %d-token prompt: ok %v, err %v; want ok %v (%d pages free)", tc.prompt, ok, err, tc.want, h.S.cache.FreePages())
			}
			if err := h.S.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
