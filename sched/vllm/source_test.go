package vllm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/internal/book"
	"github.com/mocker-sim/mocker/sched/schedtest"
	"github.com/mocker-sim/mocker/tokens"
)

// TestWaitingRequestsHoldOnlyTheirSource: a request enqueued with a prompt source holds no sequence and
// no block table while it waits; its prompt is made once, when it reaches the front of the queue.
func TestWaitingRequestsHoldOnlyTheirSource(t *testing.T) {
	o := refOpts()
	o.NumBlocks, o.MaxNumSeqs = 64, 1
	h := newHarness(t, o)
	srcs := make([]*schedtest.CountingSource, 6)
	for i := range srcs {
		srcs[i] = &schedtest.CountingSource{Toks: schedtest.Prompt(100*i, 6)}
		if err := h.S.Enqueue(&sched.Request{ID: uint64(i), Source: srcs[i], MaxTokens: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for pass := 0; !h.S.Idle(); pass++ {
		h.Step()
		for i, src := range srcs {
			r := h.S.req(uint64(i))
			if r == nil {
				continue // finished
			}
			front := h.S.waiting.len() > 0 && h.S.waiting.front() == r
			running := !front && r.Computed > 0
			if !running && !front && (r.Seq != nil || r.table != nil || src.Calls != 0) {
				t.Fatalf("pass %d: waiting request %d holds a sequence (%v), a table of %d, its prompt made %d times",
					pass, i, r.Seq != nil, cap(r.table), src.Calls)
			}
		}
		if pass > 100 {
			t.Fatal("not idle after 100 passes")
		}
	}
	for i, src := range srcs {
		if src.Calls != 1 {
			t.Errorf("request %d: prompt made %d times, want 1", i, src.Calls)
		}
	}
}

// TestSourceEqualsPrompt: a request given by its source is scheduled exactly as the same request given
// by its tokens: passes, events and outputs match.
func TestSourceEqualsPrompt(t *testing.T) {
	trace := func(bySource bool) string {
		h := newHarness(t, refOpts())
		var b bytes.Buffer
		for i := range 8 {
			toks := schedtest.Prompt(10*(i%3), 5+i) // shared prefixes
			r := &sched.Request{ID: uint64(i), Prompt: toks, MaxTokens: 3}
			if bySource {
				r.Prompt, r.Source = nil, &schedtest.CountingSource{Toks: toks}
			}
			if err := h.S.Enqueue(r); err != nil {
				t.Fatal(err)
			}
		}
		for pass := 0; !h.S.Idle() && pass < 200; pass++ {
			p := h.Step()
			fmt.Fprintf(&b, "%v %v %v %v %v\n", p.Batch.Seqs, p.Admitted, p.Preempted, p.Events, schedtest.Outputs(p))
		}
		return b.String()
	}
	if a, b := trace(false), trace(true); a != b {
		t.Fatalf("by prompt:\n%s\nby source:\n%s", a, b)
	}
}

// TestShortQueueCopiesTheSequence: a request given with both its sequence and its source copies the
// sequence while fewer than lazyQueue requests wait (no hashing again), and waits as its source behind a
// longer queue.
func TestShortQueueCopiesTheSequence(t *testing.T) {
	o := refOpts()
	o.MaxNumSeqs = 1
	h := newHarness(t, o)
	for i := range lazyQueue + 5 {
		toks := schedtest.Prompt(100*i, 6)
		seq := tokens.NewSequence(o.BlockSize)
		seq.Append(toks...)
		src := &schedtest.CountingSource{Toks: toks}
		if err := h.S.Enqueue(&sched.Request{ID: uint64(i), Seq: seq, Source: src, MaxTokens: 2}); err != nil {
			t.Fatal(err)
		}
		r := h.S.req(uint64(i))
		if lazy := i >= lazyQueue; (r.Seq == nil) != lazy || (r.Src != nil) != lazy || src.Calls != 0 {
			t.Fatalf("request %d behind %d waiting: holds a sequence %v, its source %v, made %d times; want lazy %v",
				i, i, r.Seq != nil, r.Src != nil, src.Calls, lazy)
		}
	}
}

// TestSpareSequencesBoundedInBlocks: a finished request's sequence with room for more than
// book.MaxSeqBlocks blocks is dropped, not kept for the prompts to come (vLLM keeps any number of spares,
// but not a huge prompt's room for every short one after it); one with room for exactly that is kept.
func TestSpareSequencesBoundedInBlocks(t *testing.T) {
	h := newHarness(t, refOpts())
	long := func(blocks int) *request {
		s := tokens.NewSequence(1)
		s.Grow(blocks)
		return &request{Request: book.Request{Seq: s}}
	}
	h.S.freeBuffers(long(book.MaxSeqBlocks + 1))
	if n := h.S.seqs.Len(); n != 0 {
		t.Fatalf("%d sequences kept, want none", n)
	}
	h.S.freeBuffers(long(book.MaxSeqBlocks))
	if n := h.S.seqs.Len(); n != 1 {
		t.Fatalf("%d sequences kept, want 1", n)
	}
}
