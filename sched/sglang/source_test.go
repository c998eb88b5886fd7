package sglang

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mocker-sim/mocker/radix"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/internal/book"
	"github.com/mocker-sim/mocker/sched/schedtest"
	"github.com/mocker-sim/mocker/tokens"
)

// TestWaitingRequestsHoldOnlyTheirSource: a request enqueued with a prompt source holds no sequence and
// no page list while it waits, unless LPM matches it: SGLang's calc_priority matches every waiting
// request's prefix while at most 128 wait, and serves them first come, first served beyond. 140 requests
// on a scheduler that runs one at a time: after each pass no waiting request holds a prompt (FCFS, or LPM
// behind more than 128), or every one does (LPM, at most 128); each prompt is made exactly once.
func TestWaitingRequestsHoldOnlyTheirSource(t *testing.T) {
	for _, policy := range []Policy{FCFS, LPM} {
		o := opts(1, 4096)
		o.MaxRunning, o.Policy = 1, policy
		h := newHarness(t, o)
		srcs := make([]*schedtest.CountingSource, lpmFallbackThreshold+12)
		for i := range srcs {
			srcs[i] = &schedtest.CountingSource{Toks: schedtest.Prompt(100*i, 6)}
			if err := h.S.Enqueue(&sched.Request{ID: uint64(i), Source: srcs[i], MaxTokens: 2}); err != nil {
				t.Fatal(err)
			}
		}
		matched := 0 // passes in which LPM matched the queue
		for pass := 0; !h.S.Idle(); pass++ {
			before := len(h.S.waiting)
			h.Step()
			if policy == LPM && before >= 2 && before <= lpmFallbackThreshold {
				matched++
			}
			want := 0
			if matched > 0 { // once matched, a prompt stays made
				want = len(h.S.waiting)
			}
			made := 0
			for _, r := range h.S.waiting {
				src := srcs[r.ID]
				if r.Seq != nil || src.Calls != 0 {
					made++
					if r.Seq == nil || src.Calls != 1 || r.Seq.Len() != 6 {
						t.Fatalf("policy %d, pass %d: waiting request %d holds a sequence %v, its prompt made %d times", policy, pass, r.ID, r.Seq != nil, src.Calls)
					}
				}
				if cap(r.pages) != 0 && r.Seq == nil {
					t.Fatalf("policy %d, pass %d: waiting request %d holds a page list of %d and no prompt", policy, pass, r.ID, cap(r.pages))
				}
			}
			if made != want {
				t.Fatalf("policy %d, pass %d (%d waited before it): %d waiting requests hold their prompt, want %d", policy, pass, before, made, want)
			}
			if pass > 1000 {
				t.Fatal("not idle after 1000 passes")
			}
		}
		for i, src := range srcs {
			if src.Calls != 1 {
				t.Errorf("policy %d: request %d: prompt made %d times, want 1", policy, i, src.Calls)
			}
		}
		// A request takes two passes (its extend, its decode); LPM matches from 128 waiting down to 2.
		if want := map[Policy]int{FCFS: 0, LPM: 2 * (lpmFallbackThreshold - 1)}[policy]; matched != want {
			t.Errorf("policy %d: LPM matched the queue in %d passes, want %d", policy, matched, want)
		}
	}
}

// TestSourceEqualsPrompt: a request given by its source (alone, or with its sequence) is scheduled exactly
// as the same request given by its tokens, whatever the policy (LPM past and under its fallback), overlap,
// page size and adapters, through retractions and arrivals while others wait: passes, events, outputs and
// metrics match.
func TestSourceEqualsPrompt(t *testing.T) {
	const (
		byPrompt = iota
		bySource
		bySeqAndSource
	)
	retractions := int64(0)
	trace := func(o Options, mode int) string {
		h := newHarness(t, o)
		var b bytes.Buffer
		enqueue := func(i int) {
			toks := schedtest.Prompt(7*(i%5), 5+i%9) // shared prefixes
			r := &sched.Request{ID: uint64(i), Prompt: toks, MaxTokens: 3 + i*7%50}
			if i%3 == 0 {
				r.LoRA = fmt.Sprintf("a%d", i%4)
			}
			switch mode {
			case bySeqAndSource:
				r.Seq = tokens.NewSequence(o.PageSize)
				if r.LoRA != "" {
					r.Seq.SetSeed(tokens.LoRASeed(r.LoRA))
				}
				r.Seq.Append(toks...)
				fallthrough
			case bySource:
				r.Prompt, r.Source = nil, &schedtest.CountingSource{Toks: toks}
			}
			if err := h.S.Enqueue(r); err != nil {
				t.Fatal(err)
			}
		}
		const upfront, total = lpmFallbackThreshold + 20, lpmFallbackThreshold + 60
		for i := range upfront {
			enqueue(i)
		}
		for pass, i := 0, upfront; !h.S.Idle() || i < total; pass++ {
			if i < total {
				enqueue(i)
				i++
			}
			p := h.Step()
			fmt.Fprintf(&b, "%v %v %v %v %v %v %+v %d\n", p.Batch, p.SeqIDs, p.Admitted, p.Preempted, p.Events, schedtest.Outputs(p), p.FPM, p.LoRALoads)
			if pass > 5000 {
				t.Fatal("not idle after 5000 passes")
			}
		}
		m := h.S.Metrics()
		fmt.Fprintf(&b, "%+v\n", m)
		if mode == byPrompt {
			retractions += m.Preemptions
		}
		return b.String()
	}
	for _, policy := range []Policy{FCFS, LPM} {
		for _, overlap := range []bool{false, true} {
			for _, page := range []int{1, 4} {
				o := opts(page, 96/page)
				o.Policy, o.Overlap, o.MaxLoRAsPerBatch, o.ChunkedPrefillSize, o.Conservativeness = policy, overlap, 2, 8, 0.3
				want := trace(o, byPrompt)
				for _, mode := range []int{bySource, bySeqAndSource} {
					if got := trace(o, mode); got != want {
						t.Fatalf("policy %d, overlap %v, page %d, mode %d: by prompt:\n%s\nby source:\n%s", policy, overlap, page, mode, want, got)
					}
				}
			}
		}
	}
	if retractions == 0 {
		t.Error("no request was retracted: the test does not cover retraction")
	}
}

// TestFinishedRequestsKeepNoBuffers: a finished request gives its sequence and page list back at the next
// Step, for the prompts made next, rather than keeping them until an arrival reuses it (which waits
// without them): 100 requests of 2,000 tokens at page size 1, 4 running at a time, leave 100 bare
// requests to reuse and the 4 sequences and page lists the running ones held. The reused requests kept
// theirs, 3.2 MB of sequences here; behind the conversation trace's long queue, 1 GB.
func TestFinishedRequestsKeepNoBuffers(t *testing.T) {
	o := opts(1, 8192)
	o.MaxRunning = 4
	h := newHarness(t, o)
	const n = 100
	for i := range n {
		if err := h.S.Enqueue(&sched.Request{ID: uint64(i), Source: &schedtest.CountingSource{Toks: schedtest.Prompt(10_000*i, 2000)}, MaxTokens: 3}); err != nil {
			t.Fatal(err)
		}
	}
	for pass := 0; !h.S.Idle(); pass++ {
		h.Step()
		if pass > 1000 {
			t.Fatal("not idle after 1000 passes")
		}
	}
	h.Step() // the last finished requests become reusable
	reused := 0
	for r := h.S.book.Reuse(); r != nil; r = h.S.book.Reuse() {
		reused++
		if r.Seq != nil || cap(r.pages) != 0 {
			t.Fatalf("finished request %d holds a sequence %v and a page list of %d", r.ID, r.Seq != nil, cap(r.pages))
		}
	}
	if reused != n {
		t.Errorf("%d finished requests to reuse, want %d", reused, n)
	}
	if h.S.seqs.Len() != o.MaxRunning || h.S.pageLists.Len() != o.MaxRunning {
		t.Errorf("%d sequences and %d page lists kept, want %d each", h.S.seqs.Len(), h.S.pageLists.Len(), o.MaxRunning)
	}
}

// TestSpareBuffersAreBounded: at most maxSpare sequences and page lists wait for the prompts to come.
func TestSpareBuffersAreBounded(t *testing.T) {
	h := newHarness(t, opts(1, 16))
	for range maxSpare + 3 {
		h.S.freeBuffers(&request{Request: book.Request{Seq: tokens.NewSequence(1)}, pages: make([]radix.PageID, 0, 8)})
	}
	if h.S.seqs.Len() != maxSpare || h.S.pageLists.Len() != maxSpare {
		t.Fatalf("%d sequences and %d page lists kept, want %d each", h.S.seqs.Len(), h.S.pageLists.Len(), maxSpare)
	}
}

// TestSourcePromptSizedForOutput: a prompt made from its source at admission has room for its output (up
// to the clip, and to the prompt's length), so decoding appends to the array it was made in, which
// growing would copy; a clip shorter than the output bounds the room.
func TestSourcePromptSizedForOutput(t *testing.T) {
	for _, c := range []struct{ maxTokens, clip, room int }{{40, 4096, 40}, {40, 16, 16}, {5000, 4096, 300}} {
		o := opts(1, 8192)
		o.ClipMaxNewTokens = c.clip
		h := newHarness(t, o)
		if err := h.S.Enqueue(&sched.Request{ID: 1, Source: &schedtest.CountingSource{Toks: schedtest.Prompt(0, 300)}, MaxTokens: c.maxTokens}); err != nil {
			t.Fatal(err)
		}
		h.Step()
		r := h.S.book.Live[1]
		blocks := &r.Seq.Blocks()[0]
		if got := cap(r.Seq.Blocks()); got < 300+c.room || got > 300+c.room+64 {
			t.Fatalf("max tokens %d, clip %d: the prompt's sequence has room for %d blocks, want %d (and at most a size class more)", c.maxTokens, c.clip, got, 300+c.room)
		}
		for range min(c.room, c.maxTokens) - 1 {
			h.Step()
		}
		if r.Seq.Len() < 300+min(c.room, c.maxTokens)-1 || &r.Seq.Blocks()[0] != blocks {
			t.Fatalf("max tokens %d, clip %d: after %d tokens the sequence moved (%v)", c.maxTokens, c.clip, r.Seq.Len()-300, &r.Seq.Blocks()[0] != blocks)
		}
	}
}
