package vllm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// refOpts is the reference tests' typical configuration (dynamo-mocker.md §13): block size 4, 6 blocks,
// a budget of 8 tokens, 3 sequences.
func refOpts() Options {
	return Options{BlockSize: 4, NumBlocks: 6, MaxNumSeqs: 3, MaxBatchedTokens: 8, ChunkedPrefill: true, PrefixCaching: true, Events: true}
}

func newHarness(t *testing.T, o Options) *schedtest.Harness[*Scheduler] {
	t.Helper()
	s, err := New(o)
	return schedtest.NewHarness(t, s, err)
}

func (s *Scheduler) req(id uint64) *request { return s.book.Live[id] }

func TestZeroOutputRequestCompletesAfterPrefill(t *testing.T) {
	h := newHarness(t, refOpts())
	h.Enqueue(1, schedtest.Prompt(0, 8), 0)
	p := h.Step()
	if got := schedtest.Outputs(p); !slices.Equal(got, []string{"1:0:done"}) {
		t.Fatalf("outputs %v, want one completion without a token", got)
	}
	if p.FPM.NumDecodeRequests != 0 || p.FPM.NumPrefillRequests != 1 || p.FPM.SumPrefillTokens != 8 {
		t.Fatalf("FPM %+v, want 1 prefill of 8 tokens and no decode", p.FPM)
	}
	if n, _ := p.Batch.Sampling(); n != 0 {
		t.Fatalf("%d sampling requests, want 0", n)
	}
	if h.S.Pool().Active() != 0 || !h.S.Idle() {
		t.Fatalf("active %d, idle %v after completion", h.S.Pool().Active(), h.S.Idle())
	}
}

func TestFullyCachedZeroOutputRequestIsNotDecodeWork(t *testing.T) {
	h := newHarness(t, refOpts())
	h.Enqueue(1, schedtest.Prompt(0, 8), 0)
	h.Step()
	h.Enqueue(2, schedtest.Prompt(0, 8), 0)
	p := h.Step()
	// Fully cached: the last block is recomputed (4 new tokens over a 4-token cached prefix).
	if len(p.Admitted) != 1 || p.Admitted[0].Cached != 4 {
		t.Fatalf("admissions %+v, want 4 cached tokens", p.Admitted)
	}
	if f := p.FPM; f.NumDecodeRequests != 0 || f.NumPrefillRequests != 1 || f.SumPrefillTokens != 4 || f.SumPrefillKVTokens != 4 {
		t.Fatalf("FPM %+v, want one prefill of 4 new tokens over 4 cached, no decode", f)
	}
	if got := schedtest.Outputs(p); !slices.Equal(got, []string{"2:0:done"}) {
		t.Fatalf("outputs %v", got)
	}
}

func TestUnifiedPassKeepsPartialPrefillInRunning(t *testing.T) {
	o := refOpts()
	o.MaxBatchedTokens = 12
	h := newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 8), 4)
	h.Enqueue(2, schedtest.Prompt(100, 8), 4)
	p := h.Step()
	if r1, r2 := h.S.req(1), h.S.req(2); r1.Computed != 8 || r2.Computed != 4 {
		t.Fatalf("computed %d/%d, want 8/4", r1.Computed, r2.Computed)
	}
	if got := schedtest.Outputs(p); !slices.Equal(got, []string{"1:1"}) {
		t.Fatalf("outputs %v, want r1's first token only", got)
	}
	if len(h.S.running) != 2 || h.S.waiting.len() != 0 || h.S.Pool().Active() != 3 {
		t.Fatalf("running %d, waiting %d, active %d; want 2, 0, 3", len(h.S.running), h.S.waiting.len(), h.S.Pool().Active())
	}
}

func TestRunningRequestsConsumeBudgetBeforeWaiting(t *testing.T) {
	o := refOpts()
	o.MaxBatchedTokens = 4
	h := newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 8), 5)
	h.Enqueue(2, schedtest.Prompt(100, 4), 5)
	for i, want := range []struct{ c1, c2 int }{{4, 0}, {8, 0}, {9, 3}} {
		h.Step()
		c2 := 0
		if r := h.S.req(2); r != nil {
			c2 = r.Computed
		}
		if h.S.req(1).Computed != want.c1 || c2 != want.c2 {
			t.Fatalf("pass %d: computed %d/%d, want %d/%d", i+1, h.S.req(1).Computed, c2, want.c1, want.c2)
		}
	}
}

func TestTwoReadyRequestsBatchTogether(t *testing.T) {
	h := newHarness(t, refOpts())
	h.Enqueue(1, schedtest.Prompt(0, 4), 3)
	h.Enqueue(2, schedtest.Prompt(100, 4), 3)
	p := h.Step()
	if len(p.Admitted) != 2 || !slices.Equal(schedtest.Outputs(p), []string{"1:1", "2:1"}) {
		t.Fatalf("admitted %+v, outputs %v: want both admitted with a first token in the same pass", p.Admitted, schedtest.Outputs(p))
	}
	if n, ctx := p.Batch.Sampling(); n != 2 || ctx != 8 {
		t.Fatalf("sampling %d with context %d, want 2 and 8", n, ctx)
	}
}

func TestFirstTokenOnPromptCompletionPass(t *testing.T) {
	h := newHarness(t, refOpts())
	h.Enqueue(1, schedtest.Prompt(0, 12), 2) // 8 + 4 tokens over two passes
	if p := h.Step(); len(p.Outputs) != 0 {
		t.Fatalf("first chunk emitted %v", schedtest.Outputs(p))
	}
	p := h.Step()
	if !slices.Equal(schedtest.Outputs(p), []string{"1:1"}) {
		t.Fatalf("completing pass outputs %v, want the first token", schedtest.Outputs(p))
	}
	if s := p.Batch.Seqs; len(s) != 1 || s[0] != (struct {
		New, Cached      int
		Prefill, Samples bool
	}{4, 8, true, true}) {
		t.Fatalf("batch %+v", s)
	}
	p = h.Step()
	if !slices.Equal(schedtest.Outputs(p), []string{"1:1:done"}) || p.Batch.Seqs[0].Prefill || p.Batch.Seqs[0].New != 1 || p.Batch.Seqs[0].Cached != 12 {
		t.Fatalf("decode pass outputs %v batch %+v", schedtest.Outputs(p), p.Batch.Seqs)
	}
}

// preemptionSetup fills a 4-block pool with two running requests; in the third pass request 1 needs a
// third block for its next token.
func preemptionSetup(t *testing.T, mode Preemption) *schedtest.Harness[*Scheduler] {
	o := refOpts()
	o.NumBlocks = 4
	o.Preemption = mode
	h := newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 7), 3)
	h.Enqueue(2, schedtest.Prompt(100, 7), 9)
	if p := h.Step(); len(p.Admitted) != 2 { // r1 whole prompt, r2 one token of its prompt
		t.Fatalf("pass 1 admitted %+v", p.Admitted)
	}
	if p := h.Step(); !slices.Equal(schedtest.Outputs(p), []string{"1:1", "2:1"}) || h.S.Pool().Free() != 0 {
		t.Fatalf("pass 2 outputs %v, free %d", schedtest.Outputs(p), h.S.Pool().Free())
	}
	return h
}

func TestPreemptionRequeuesNewestRunningRequest(t *testing.T) {
	h := preemptionSetup(t, LIFO)
	p := h.Step()
	if !slices.Equal(p.Preempted, []uint64{2}) {
		t.Fatalf("preempted %v, want the newest [2]", p.Preempted)
	}
	r2 := h.S.req(2)
	if r2.Computed != 0 || r2.Preemptions != 1 || h.S.waiting.front() != r2 || h.S.Metrics().Preemptions != 1 {
		t.Fatalf("victim computed %d preemptions %d front %v", r2.Computed, r2.Preemptions, h.S.waiting.front() == r2)
	}
	if len(p.Admitted) != 0 || !slices.Equal(schedtest.Outputs(p), []string{"1:1:done"}) {
		t.Fatalf("admitted %+v outputs %v: want no admission in a pass that preempted", p.Admitted, schedtest.Outputs(p))
	}
	// The victim keeps its generated token; resumed, it recomputes prompt + output and hits its own blocks.
	if r2.Generated != 1 || r2.Seq.Len() != 8 {
		t.Fatalf("victim generated %d, len %d; want 1, 8", r2.Generated, r2.Seq.Len())
	}
	if f := p.FPM; f.NumQueuedDecode != 1 || f.SumQueuedDecodeTokens != 8 {
		t.Fatalf("FPM %+v: the preempted request is queued decode work of 8 tokens", f)
	}
	for !h.S.Idle() {
		p = h.Step()
		for _, a := range p.Admitted {
			if a.ID == 2 && (!a.Resumed || a.Cached != 4) {
				t.Fatalf("resumed admission %+v, want Resumed with its first block cached", a)
			}
		}
	}
}

func TestFIFOPreemptsOldest(t *testing.T) {
	h := preemptionSetup(t, FIFO)
	p := h.Step()
	if !slices.Equal(p.Preempted, []uint64{1}) {
		t.Fatalf("preempted %v, want the oldest [1]", p.Preempted)
	}
	// Request 1 preempted itself; request 2 still decodes in this pass.
	if !slices.Equal(schedtest.Outputs(p), []string{"2:1"}) {
		t.Fatalf("outputs %v", schedtest.Outputs(p))
	}
}

func TestWaitingFullISLGateBlocksWithoutPreemption(t *testing.T) {
	o := refOpts()
	o.MaxBatchedTokens = 32
	h := newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 16), 2) // 4 of 6 blocks
	h.Step()
	h.Enqueue(2, schedtest.Prompt(100, 12), 1) // needs 3 blocks: does not fit beside 4
	h.Enqueue(3, schedtest.Prompt(200, 4), 1)  // would fit, but must not overtake the head
	p := h.Step()
	if len(p.Admitted) != 0 || len(p.Preempted) != 0 {
		t.Fatalf("admitted %+v preempted %v; want the head to wait and nobody to overtake", p.Admitted, p.Preempted)
	}
	if !slices.Equal(schedtest.Outputs(p), []string{"1:1:done"}) {
		t.Fatalf("outputs %v", schedtest.Outputs(p))
	}
	p = h.Step()
	if len(p.Admitted) != 2 || p.Admitted[0].ID != 2 || p.Admitted[1].ID != 3 {
		t.Fatalf("after the holder finished: admitted %+v, want 2 then 3", p.Admitted)
	}
}

// With ChunkFit a waiting request needs room for its first chunk only, as in vLLM v1, and pays for it
// with preemption when the rest of its prompt does not fit. Six blocks of 4, a budget of 8: request 1
// (8 tokens, 3 outputs) holds 3 blocks from its first decode on; request 2 (20 tokens, 5 blocks) waits
// under the whole-prompt gate, while ChunkFit admits its 7-token chunk into the 3 free blocks (2 of
// them) and preempts it in the next pass, when its second chunk needs 2 more blocks and 1 is free.
func TestChunkFitAdmitsOnTheChunk(t *testing.T) {
	for _, c := range []struct {
		capacity Capacity
		admitted []uint64 // in the second pass
	}{
		{MaxUtilization, nil},
		{ChunkFit, []uint64{2}},
	} {
		o := refOpts()
		o.Capacity = c.capacity
		h := newHarness(t, o)
		h.Enqueue(1, schedtest.Prompt(0, 8), 3)
		h.Enqueue(2, schedtest.Prompt(100, 20), 1)
		if p := h.Step(); !slices.Equal(schedtest.Outputs(p), []string{"1:1"}) {
			t.Fatalf("capacity %d: first pass outputs %v", c.capacity, schedtest.Outputs(p))
		}
		p := h.Step()
		var ids []uint64
		for _, a := range p.Admitted {
			ids = append(ids, a.ID)
		}
		if !slices.Equal(ids, c.admitted) {
			t.Fatalf("capacity %d: second pass admitted %v, want %v", c.capacity, ids, c.admitted)
		}
		p = h.Step()
		if c.capacity == ChunkFit && !slices.Equal(p.Preempted, []uint64{2}) {
			t.Fatalf("ChunkFit: third pass preempted %v, want [2]", p.Preempted)
		}
		if c.capacity == MaxUtilization && len(p.Preempted) != 0 {
			t.Fatalf("whole-prompt gate: third pass preempted %v", p.Preempted)
		}
		if !slices.Equal(schedtest.Outputs(p), []string{"1:1:done"}) {
			t.Fatalf("capacity %d: third pass outputs %v", c.capacity, schedtest.Outputs(p))
		}
		for n := 0; !h.S.Idle(); n++ {
			if n == 10 {
				t.Fatalf("capacity %d: request 2 never finished", c.capacity)
			}
			h.Step()
		}
	}
	if c, err := ParseCapacity("chunk"); c != ChunkFit || err != nil {
		t.Errorf(`ParseCapacity("chunk") = %d, %v`, c, err)
	}
	if _, err := ParseCapacity("half"); err == nil {
		t.Error(`ParseCapacity("half") accepted`)
	}
}

func TestRequestLargerThanPoolIsRejected(t *testing.T) {
	h := newHarness(t, refOpts())
	err := h.S.Enqueue(&sched.Request{ID: 1, Prompt: schedtest.Prompt(0, 25), MaxTokens: 1})
	var rej *sched.RejectError
	if !errors.As(err, &rej) || rej.ID != 1 {
		t.Fatalf("Enqueue = %v, want a RejectError", err)
	}
	// Prompt fits but prompt + output cannot: it would preempt itself forever.
	if err := h.S.Enqueue(&sched.Request{ID: 2, Prompt: schedtest.Prompt(0, 20), MaxTokens: 5}); !errors.As(err, &rej) {
		t.Fatalf("Enqueue = %v, want a RejectError", err)
	}
	h.Enqueue(3, schedtest.Prompt(0, 4), 1)
	if p := h.Step(); !slices.Equal(schedtest.Outputs(p), []string{"3:1:done"}) {
		t.Fatalf("follower outputs %v", schedtest.Outputs(p))
	}
}

func TestRejections(t *testing.T) {
	o := refOpts()
	o.MaxModelLen = 10
	h := newHarness(t, o)
	for _, r := range []*sched.Request{
		{ID: 1, Prompt: schedtest.Prompt(0, 8), MaxTokens: 3},
		{ID: 2, Prompt: nil, MaxTokens: 1},
		{ID: 3, Prompt: schedtest.Prompt(0, 2), MaxTokens: -1},
	} {
		if err := h.S.Enqueue(r); err == nil {
			t.Errorf("request %d accepted", r.ID)
		}
	}
	h.Enqueue(4, schedtest.Prompt(0, 8), 2)
	if err := h.S.Enqueue(&sched.Request{ID: 4, Prompt: schedtest.Prompt(0, 2), MaxTokens: 1}); err == nil {
		t.Error("duplicate id accepted")
	}
	if !h.S.Idle() && h.S.waiting.len() != 1 {
		t.Fatal("rejected requests were queued")
	}
}

func TestCompletionReturnsToIdleAndPlannedTokens(t *testing.T) {
	h := newHarness(t, refOpts())
	planned := []uint32{7, 8, 9}
	if err := h.S.Enqueue(&sched.Request{ID: 1, Prompt: schedtest.Prompt(0, 5), MaxTokens: 3, OutputTokens: planned}); err != nil {
		t.Fatal(err)
	}
	var got []uint32
	for i := 0; !h.S.Idle(); i++ {
		if i > 10 {
			t.Fatal("did not finish")
		}
		for _, o := range h.Step().Outputs {
			got = append(got, o.Tokens...)
		}
	}
	if !slices.Equal(got, planned) {
		t.Fatalf("tokens %v, want the planned %v", got, planned)
	}
	// 7 of 8 tokens were computed: only the prompt's first block was full, and it stays cached.
	if m := h.S.Metrics(); m.Running != 0 || m.Waiting != 0 || m.ActiveBlocks != 0 || m.InactiveBlocks != 1 {
		t.Fatalf("metrics %+v after completion", m)
	}
	if p := h.Step(); !p.Empty() {
		t.Fatal("idle scheduler did work")
	}
}

func TestFPMMixedBatchAndQueue(t *testing.T) {
	o := refOpts()
	o.MaxNumSeqs = 2
	h := newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 4), 5)
	h.Step()
	h.Enqueue(2, schedtest.Prompt(100, 6), 5)
	h.Enqueue(3, schedtest.Prompt(200, 3), 5)
	p := h.Step()
	f := p.FPM
	want := sched.ForwardPass{
		NumPrefillRequests: 1, SumPrefillTokens: 6, SumPrefillKVTokens: 0,
		NumDecodeRequests: 1, SumDecodeKVTokens: 5,
		NumQueuedPrefill: 1, SumQueuedPrefillTokens: 3,
	}
	if f != want {
		t.Fatalf("FPM\n got %+v\nwant %+v", f, want)
	}
}

func TestCancelReleasesBlocks(t *testing.T) {
	h := newHarness(t, refOpts())
	h.Enqueue(1, schedtest.Prompt(0, 8), 10)
	h.Enqueue(2, schedtest.Prompt(100, 8), 10)
	h.Step()
	if !h.S.Cancel(1) || !h.S.Cancel(2) || h.S.Cancel(3) {
		t.Fatal("Cancel reported wrongly")
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if h.S.Pool().Active() != 0 || !h.S.Idle() {
		t.Fatalf("active %d after cancelling everything", h.S.Pool().Active())
	}
}

// TestTokenGenerationPatterns ports the reference's test_scheduler_token_generation_patterns: 200
// requests of 1000 prompt tokens and 100 outputs on 500 blocks of 64 tokens produce exactly 20,000 tokens
// and then go idle, with and without a shared prefix, prefix caching and chunked prefill.
func TestTokenGenerationPatterns(t *testing.T) {
	for _, shared := range []int{0, 600} {
		for _, caching := range []bool{false, true} {
			for _, chunked := range []bool{false, true} {
				t.Run(fmt.Sprintf("shared=%d/caching=%v/chunked=%v", shared, caching, chunked), func(t *testing.T) {
					h := newHarness(t, Options{BlockSize: 64, NumBlocks: 500, MaxNumSeqs: 256, MaxBatchedTokens: 8192,
						ChunkedPrefill: chunked, PrefixCaching: caching})
					h.EnqueueMany(200, 1000, shared, 100)
					tokens, done := h.Drain()
					if tokens != 20000 || done != 200 {
						t.Fatalf("%d tokens, %d done; want 20000, 200", tokens, done)
					}
					m := h.S.Metrics()
					if shared > 0 && caching && m.PrefixHits == 0 {
						t.Fatal("shared prefix never hit")
					}
					if !caching && m.PrefixHits != 0 {
						t.Fatal("hits without prefix caching")
					}
				})
			}
		}
	}
}

func TestCacheHitRateWithIdenticalRequests(t *testing.T) {
	h := newHarness(t, Options{BlockSize: 16, NumBlocks: 1000, MaxBatchedTokens: 8192, ChunkedPrefill: true, PrefixCaching: true})
	toks := schedtest.Prompt(0, 160)
	for i := range 10 {
		h.Enqueue(uint64(i), toks, 1)
		for !h.S.Idle() {
			h.Step()
		}
	}
	// The first request misses; the nine others hit all but the recomputed last block.
	m := h.S.Metrics()
	if m.PrefixQueries != 1600 || m.PrefixHits != 9*144 {
		t.Fatalf("queries %d hits %d, want 1600 and %d", m.PrefixQueries, m.PrefixHits, 9*144)
	}
}

func TestChunkedPrefillOffWaitsForBudget(t *testing.T) {
	o := refOpts()
	o.ChunkedPrefill = false
	o.NumBlocks = 16
	h := newHarness(t, o)
	h.Enqueue(1, schedtest.Prompt(0, 4), 3)
	h.Enqueue(2, schedtest.Prompt(100, 5), 3)
	p := h.Step() // 4 + 5 > 8: request 2 waits for a pass with room for its whole prompt
	if len(p.Admitted) != 1 || h.S.req(2).Computed != 0 {
		t.Fatalf("admitted %+v", p.Admitted)
	}
	p = h.Step() // request 1 decodes (1 token), request 2's 5 tokens fit the remaining 7
	if len(p.Admitted) != 1 || p.Admitted[0].ID != 2 || h.S.req(2).Computed != 5 {
		t.Fatalf("pass 2 admitted %+v", p.Admitted)
	}
	// A request that could never be scheduled whole is rejected up front.
	if err := h.S.Enqueue(&sched.Request{ID: 3, Prompt: schedtest.Prompt(200, 8), MaxTokens: 1}); err == nil {
		t.Fatal("a 9-token request was accepted with an 8-token budget and chunking off")
	}
}

// TestEventsApplyCleanly ports test_live_pathological_load_no_router_event_errors: 8 identical requests on
// a tiny pool (constant eviction and preemption). An indexer fed only the events must never see a block
// stored twice or a removal of something it does not hold, and must end holding exactly what is resident.
func TestEventsApplyCleanly(t *testing.T) {
	for _, mode := range []Preemption{LIFO, FIFO} {
		o := Options{BlockSize: 4, NumBlocks: 10, MaxNumSeqs: 8, MaxBatchedTokens: 16, ChunkedPrefill: true, PrefixCaching: true, Events: true, Preemption: mode}
		h := newHarness(t, o)
		for i := range 8 {
			h.Enqueue(uint64(i), schedtest.Prompt(0, 14), 12)
		}
		indexed := map[uint64]bool{}
		var lastID uint64
		first := true
		for passes := 0; !h.S.Idle(); passes++ {
			if passes > 1000 {
				t.Fatal("no progress")
			}
			for _, ev := range h.Step().Events {
				if !first && ev.ID != lastID+1 {
					t.Fatalf("event id %d after %d", ev.ID, lastID)
				}
				first, lastID = false, ev.ID
				for _, b := range ev.Blocks {
					if indexed[b.Hash] {
						t.Fatalf("event %d stores %x twice", ev.ID, b.Hash)
					}
					indexed[b.Hash] = true
				}
				for _, hash := range ev.Hashes {
					if !indexed[hash] {
						t.Fatalf("event %d removes %x, never stored", ev.ID, hash)
					}
					delete(indexed, hash)
				}
			}
		}
		if h.S.Metrics().Preemptions == 0 {
			t.Fatal("the pool was not small enough to preempt")
		}
		if len(indexed) != h.S.Pool().Inactive() {
			t.Fatalf("indexer holds %d hashes, pool has %d cached blocks", len(indexed), h.S.Pool().Inactive())
		}
	}
}

// TestCancelDisaggregated: Cancel finds a request in a decode worker's states and frees its blocks: an
// activated transfer still waiting for a slot (it holds its prompt's blocks) and a reservation (a prefill
// worker's held request: schedtest.Prefill).
func TestCancelDisaggregated(t *testing.T) {
	o := refOpts()
	o.NumBlocks, o.MaxNumSeqs, o.Role = 16, 1, sched.Decode
	h := newHarness(t, o)
	for id := range uint64(2) {
		if _, ok, err := h.S.Reserve(&sched.Request{ID: id + 1, Prompt: schedtest.Prompt(int(id)*100, 10), MaxTokens: 4}); !ok || err != nil {
			t.Fatalf("Reserve %d: %v %v", id+1, ok, err)
		}
		h.S.Activate(id + 1)
	}
	h.Step() // 1 decodes; 2 waits for a slot with its 3 blocks
	if m := h.S.Metrics(); m.Running != 1 || m.Waiting != 1 || m.ActiveBlocks != 6 {
		t.Fatalf("%+v; want 1 running, 1 waiting, 6 blocks active", m)
	}
	if _, ok, _ := h.S.Reserve(&sched.Request{ID: 3, Prompt: schedtest.Prompt(200, 10), MaxTokens: 4}); !ok {
		t.Fatal("Reserve 3 failed")
	}
	for _, id := range []uint64{2, 3, 1} {
		if !h.S.Cancel(id) {
			t.Fatalf("Cancel(%d) did not find it", id)
		}
		if err := h.S.CheckInvariants(); err != nil {
			t.Fatalf("after Cancel(%d): %v", id, err)
		}
	}
	// 1 and 2 had their prompts' two full blocks cached; 3's blocks were never filled.
	if m := h.S.Metrics(); m.ActiveBlocks != 0 || m.InactiveBlocks != 4 || !h.S.Idle() {
		t.Fatalf("after cancelling everything: %+v; want 0 active, 4 inactive blocks", m)
	}
}

// TestDecodePassAgreesWithAdmission puts a request behind one that decodes into a fresh block (request 1:
// an 8-token prompt computed, its next token starts a third block of a 6-block pool, so 3 blocks stay
// free) and checks DecodePass's prediction, worked out by hand, and that Step then admits the request
// exactly when DecodePass said it might.
func TestDecodePassAgreesWithAdmission(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    func(*Options)
		prompt  []uint32
		max     int
		blocked bool
	}{
		{"prompt over the free blocks", nil, schedtest.Prompt(100, 16), 4, true},                                                // 4 > 3
		{"prompt within the free blocks", nil, schedtest.Prompt(100, 12), 4, false},                                             // 3 <= 3
		{"active prefix shared", nil, append(schedtest.Prompt(0, 8), schedtest.Prompt(100, 8)...), 4, false},                    // 4 - 2 active <= 3
		{"whole request over the room", func(o *Options) { o.Capacity = GuaranteedNoEvict }, schedtest.Prompt(100, 8), 8, true}, // 4 > 6 - 2 - 1 claimed
		{"whole request within the room", func(o *Options) { o.Capacity = GuaranteedNoEvict }, schedtest.Prompt(100, 4), 4, false},
		{"chunk only", func(o *Options) { o.Capacity = ChunkFit }, schedtest.Prompt(100, 16), 4, false},
		// Without chunked prefill a request's prompt and output fit the budget (Enqueue): 16 tokens here,
		// 15 left by request 1's decode, and 7 free blocks in a pool of 10.
		{"budget too small", noChunks, schedtest.Prompt(100, 16), 0, true},
		{"budget enough", noChunks, schedtest.Prompt(100, 15), 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := refOpts()
			if c.opts != nil {
				c.opts(&o)
			}
			h := newHarness(t, o)
			h.Enqueue(1, schedtest.Prompt(0, 8), 4)
			h.Step()
			h.Enqueue(2, c.prompt, c.max)
			if got := h.S.DecodePass(); got != c.blocked {
				t.Fatalf("DecodePass %v, want %v", got, c.blocked)
			}
			p := h.Step()
			if admitted := schedtest.Admitted(p); len(admitted) == 0 != c.blocked {
				t.Fatalf("Step admitted %v after DecodePass said %v", admitted, c.blocked)
			}
		})
	}
}

func noChunks(o *Options) { o.ChunkedPrefill, o.MaxBatchedTokens, o.NumBlocks = false, 16, 10 }
