package schedtest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"
)

// StepAt runs the pass starting at ms, checking the invariants after it: the scheduler's SetNow prices
// its lower KV tiers' transfers.
func (h *Harness[S]) StepAt(ms int) *sched.Pass {
	h.T.Helper()
	c, ok := any(h.S).(interface{ SetNow(time.Duration) })
	if !ok {
		h.T.Fatalf("%T has no clock (SetNow)", h.S)
	}
	c.SetNow(time.Duration(ms) * time.Millisecond)
	return h.Step()
}

// Events describes KV events as "medium kind blocks; ", naming the full blocks of each prompt (of
// blockSize tokens) by its name and index: "a0", "a1"...
func Events(evs []kvcache.Event, blockSize int, prompts map[string][]uint32) string {
	m := map[uint64]string{}
	for name, p := range prompts {
		s := tokens.NewSequence(blockSize)
		s.Append(p...)
		for i, b := range s.Blocks() {
			m[b.Hash] = fmt.Sprintf("%s%d", name, i)
		}
	}
	var b strings.Builder
	for _, ev := range evs {
		var hs []string
		for _, blk := range ev.Blocks {
			hs = append(hs, m[blk.Hash])
		}
		for _, h := range ev.Hashes {
			hs = append(hs, m[h])
		}
		fmt.Fprintf(&b, "%s %s %s; ", ev.Medium, ev.Kind, strings.Join(hs, ","))
	}
	return b.String()
}

// LoadBack runs a lower KV tier's hit on a scheduler over 4 blocks of 4 tokens with a CPU tier whose link
// moves a block in 1 ms (and no other request's KV events): a prompt a (9 tokens) runs at 0 ms; b (15),
// which needs the whole pool, sends a's blocks to the CPU tier at 10 ms; at 20 ms a again starts loading
// its 2 blocks back while c (3 tokens) runs, making room for the copies (evicted: that pass's events);
// at 21 ms the pass waits for the copies until 22 ms, when they are announced on the GPU and a is
// admitted with them as cached and finishes. The test fails unless each pass does that, and the tiers
// end with stats.
func (h *Harness[S]) LoadBack(evicted string, stats kvcache.TierStats) {
	h.T.Helper()
	a, b, c := Prompt(0, 9), Prompt(100, 15), Prompt(200, 3)
	prompts := map[string][]uint32{"a": a, "b": b}
	events := func(p *sched.Pass) string { return Events(p.Events, 4, prompts) }

	h.Enqueue(1, a, 1)
	if got, want := events(h.StepAt(0)), "GPU stored a0,a1; "; got != want {
		h.T.Fatalf("pass 0: events %q, want %q", got, want)
	}
	h.Enqueue(2, b, 1)
	if got, want := events(h.StepAt(10)), "GPU removed a1,a0; CPU stored a1,a0; GPU stored b0,b1,b2; "; got != want {
		h.T.Fatalf("pass 10: events %q, want %q", got, want)
	}
	h.Enqueue(3, a, 1)
	h.Enqueue(4, c, 1)
	p := h.StepAt(20)
	if got := events(p); got != evicted {
		h.T.Fatalf("pass 20: events %q, want %q", got, evicted)
	}
	if want := []sched.Admission{{ID: 4}}; !slices.Equal(p.Admitted, want) || p.Until != 0 {
		h.T.Fatalf("pass 20: admitted %+v until %v, want %+v and no wait", p.Admitted, p.Until, want)
	}
	p = h.StepAt(21)
	if len(p.Admitted) != 0 || len(p.Batch.Seqs) != 0 || len(p.Events) != 0 || p.Until != 22*time.Millisecond {
		h.T.Fatalf("pass 21: admitted %+v, %d seqs, events %+v, until %v; want a wait until 22ms", p.Admitted, len(p.Batch.Seqs), p.Events, p.Until)
	}
	p = h.StepAt(22)
	if got, want := events(p), "GPU stored a0,a1; "; got != want {
		h.T.Fatalf("pass 22: events %q, want %q", got, want)
	}
	if want := []sched.Admission{{ID: 3, Cached: 8}}; !slices.Equal(p.Admitted, want) {
		h.T.Fatalf("pass 22: admitted %+v, want %+v", p.Admitted, want)
	}
	if o := p.Outputs; len(o) != 1 || o[0].ID != 3 || len(o[0].Tokens) != 1 || !o[0].Done {
		h.T.Fatalf("pass 22: outputs %+v, want request 3's one token, done", p.Outputs)
	}
	m := h.S.Metrics()
	if m.Tiers != stats {
		h.T.Fatalf("tier stats %+v, want %+v", m.Tiers, stats)
	}
	if m.PrefixQueries != 9+15+9+3 || m.PrefixHits != 8 {
		h.T.Fatalf("prefix queries %d, hits %d; want 36, 8", m.PrefixQueries, m.PrefixHits)
	}
}

// StartLoadBack brings the scheduler of LoadBack to where request 3 (a) loads its 2 blocks back from the
// CPU tier, until 22 ms, with nothing else live.
func (h *Harness[S]) StartLoadBack() {
	h.T.Helper()
	h.Enqueue(1, Prompt(0, 9), 1)
	h.StepAt(0)
	h.Enqueue(2, Prompt(100, 15), 1)
	h.StepAt(10)
	h.Enqueue(3, Prompt(0, 9), 1)
	if p := h.StepAt(20); p.Until != 22*time.Millisecond || h.S.Idle() {
		h.T.Fatalf("request 3 is not loading until 22ms: until %v", p.Until)
	}
}
