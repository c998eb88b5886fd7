package vllm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
	"github.com/mocker-sim/mocker/tokens"
)

// tierHarness drives a scheduler over 4 blocks of 4 tokens with a CPU tier of 8 blocks whose link moves
// a block in 1 ms. The tier tests use the scheduler's exported API only.
func tierHarness(t *testing.T) *schedtest.Harness[*Scheduler] {
	return newHarness(t, Options{BlockSize: 4, NumBlocks: 4, PrefixCaching: true, Events: true,
		Tiers: kvcache.TierOptions{CPUBlocks: 8, CPUBandwidth: 1, BlockBytes: 1e6}})
}

// tierStep runs the pass starting at ms, checking the invariants after it.
func tierStep(h *schedtest.Harness[*Scheduler], ms int) *sched.Pass {
	h.T.Helper()
	h.S.SetNow(time.Duration(ms) * time.Millisecond)
	return h.Step()
}

// names maps the sequence hashes of each prompt's full blocks (block size 4) to "p0", "p1"... by prefix.
func names(prompts map[string][]uint32) map[uint64]string {
	m := map[uint64]string{}
	for name, p := range prompts {
		s := tokens.NewSequence(4)
		s.Append(p...)
		for i, b := range s.Blocks() {
			m[b.Hash] = fmt.Sprintf("%s%d", name, i)
		}
	}
	return m
}

func describeEvents(evs []kvcache.Event, m map[uint64]string) string {
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

// TestLowerTierHitOnboardsBeforePrefill: a prompt whose blocks were evicted to the CPU tier is onboarded
// (2 blocks at 1 ms each) while another request runs; its blocks are announced on the GPU only when they
// have arrived, and then it is admitted with them as cached.
func TestLowerTierHitOnboardsBeforePrefill(t *testing.T) {
	h := tierHarness(t)
	a, b, c := schedtest.Prompt(0, 9), schedtest.Prompt(100, 15), schedtest.Prompt(200, 3)
	m := names(map[string][]uint32{"a": a, "b": b})
	at := func(ms int) *sched.Pass { return tierStep(h, ms) }

	h.Enqueue(1, a, 1)
	if got, want := describeEvents(at(0).Events, m), "GPU stored a0,a1; "; got != want {
		t.Fatalf("pass 0: events %q, want %q", got, want)
	}
	h.Enqueue(2, b, 1) // takes the whole pool: a goes to the CPU tier
	if got, want := describeEvents(at(10).Events, m), "GPU removed a1,a0; CPU stored a1,a0; GPU stored b0,b1,b2; "; got != want {
		t.Fatalf("pass 10: events %q, want %q", got, want)
	}

	h.Enqueue(3, a, 1)
	h.Enqueue(4, c, 1)
	p := at(20)
	// Request 3 onboards a0 and a1 into two GPU blocks (a free one and b2's) until 22 ms; request 4 runs.
	if got, want := describeEvents(p.Events, m), "GPU removed b2; CPU stored b2; GPU removed b1; CPU stored b1; "; got != want {
		t.Fatalf("pass 20: events %q, want %q", got, want)
	}
	if want := []sched.Admission{{ID: 4}}; !slices.Equal(p.Admitted, want) || p.Until != 0 {
		t.Fatalf("pass 20: admitted %+v until %v, want %+v and no wait", p.Admitted, p.Until, want)
	}
	p = at(21)
	if len(p.Admitted) != 0 || len(p.Batch.Seqs) != 0 || len(p.Events) != 0 || p.Until != 22*time.Millisecond {
		t.Fatalf("pass 21: admitted %+v, %d seqs, events %+v, until %v; want a wait until 22ms", p.Admitted, len(p.Batch.Seqs), p.Events, p.Until)
	}
	p = at(22)
	if got, want := describeEvents(p.Events, m), "GPU stored a0,a1; "; got != want {
		t.Fatalf("pass 22: events %q, want %q", got, want)
	}
	if want := []sched.Admission{{ID: 3, Cached: 8}}; !slices.Equal(p.Admitted, want) {
		t.Fatalf("pass 22: admitted %+v, want %+v", p.Admitted, want)
	}
	if o := p.Outputs; len(o) != 1 || o[0].ID != 3 || len(o[0].Tokens) != 1 || !o[0].Done {
		t.Fatalf("pass 22: outputs %+v, want request 3's one token, done", p.Outputs)
	}
	want := kvcache.TierStats{CPUHits: 2, Offloaded: 4, OnboardTime: 2 * time.Millisecond, CPUUsed: 4}
	if got := h.S.Metrics().Tiers; got != want {
		t.Fatalf("tier stats %+v, want %+v", got, want)
	}
	if m := h.S.Metrics(); m.PrefixQueries != 9+15+9+3 || m.PrefixHits != 8 {
		t.Fatalf("prefix queries %d, hits %d; want 36, 8", m.PrefixQueries, m.PrefixHits)
	}
}

// TestCancelOnboarding: a request cancelled while its blocks arrive gives them back.
func TestCancelOnboarding(t *testing.T) {
	h := tierHarness(t)
	h.Enqueue(1, schedtest.Prompt(0, 9), 1)
	tierStep(h, 0)
	h.Enqueue(2, schedtest.Prompt(100, 15), 1)
	tierStep(h, 10)
	h.Enqueue(3, schedtest.Prompt(0, 9), 1)
	if p := tierStep(h, 20); p.Until != 22*time.Millisecond || h.S.Idle() {
		t.Fatalf("request 3 is not onboarding until 22ms: until %v", p.Until)
	}
	if !h.S.Cancel(3) || !h.S.Idle() || h.S.Pool().Active() != 0 {
		t.Fatalf("cancel: idle %v, %d active blocks", h.S.Idle(), h.S.Pool().Active())
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
