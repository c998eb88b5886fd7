package vllm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"
)

// tierScheduler is a scheduler over 4 blocks of 4 tokens with a CPU tier of 8 blocks whose link moves a
// block in 1 ms. The tier tests use the scheduler's exported API only.
func tierScheduler(t *testing.T) *Scheduler {
	t.Helper()
	s, err := New(Options{BlockSize: 4, NumBlocks: 4, PrefixCaching: true, Events: true,
		Tiers: kvcache.TierOptions{CPUBlocks: 8, CPUBandwidth: 1, BlockBytes: 1e6}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tokensFrom returns n distinct tokens starting at base.
func tokensFrom(base, n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(base + i)
	}
	return p
}

func tierEnqueue(t *testing.T, s *Scheduler, id uint64, toks []uint32) {
	t.Helper()
	if err := s.Enqueue(&sched.Request{ID: id, Prompt: toks, MaxTokens: 1}); err != nil {
		t.Fatal(err)
	}
}

// tierStep runs the pass starting at ms and checks the accounting after it.
func tierStep(t *testing.T, s *Scheduler, ms int) *sched.Pass {
	t.Helper()
	s.SetNow(time.Duration(ms) * time.Millisecond)
	p := s.Step()
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	return p
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
	s := tierScheduler(t)
	a, b, c := tokensFrom(0, 9), tokensFrom(100, 15), tokensFrom(200, 3)
	m := names(map[string][]uint32{"a": a, "b": b})
	at := func(ms int) *sched.Pass { return tierStep(t, s, ms) }

	tierEnqueue(t, s, 1, a)
	if got, want := describeEvents(at(0).Events, m), "GPU stored a0,a1; "; got != want {
		t.Fatalf("pass 0: events %q, want %q", got, want)
	}
	tierEnqueue(t, s, 2, b) // takes the whole pool: a goes to the CPU tier
	if got, want := describeEvents(at(10).Events, m), "GPU removed a1,a0; CPU stored a1,a0; GPU stored b0,b1,b2; "; got != want {
		t.Fatalf("pass 10: events %q, want %q", got, want)
	}

	tierEnqueue(t, s, 3, a)
	tierEnqueue(t, s, 4, c)
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
	if got := s.Metrics().Tiers; got != want {
		t.Fatalf("tier stats %+v, want %+v", got, want)
	}
	if m := s.Metrics(); m.PrefixQueries != 9+15+9+3 || m.PrefixHits != 8 {
		t.Fatalf("prefix queries %d, hits %d; want 36, 8", m.PrefixQueries, m.PrefixHits)
	}
}

// TestCancelOnboarding: a request cancelled while its blocks arrive gives them back.
func TestCancelOnboarding(t *testing.T) {
	s := tierScheduler(t)
	tierEnqueue(t, s, 1, tokensFrom(0, 9))
	tierStep(t, s, 0)
	tierEnqueue(t, s, 2, tokensFrom(100, 15))
	tierStep(t, s, 10)
	tierEnqueue(t, s, 3, tokensFrom(0, 9))
	if p := tierStep(t, s, 20); p.Until != 22*time.Millisecond || s.Idle() {
		t.Fatalf("request 3 is not onboarding until 22ms: until %v", p.Until)
	}
	if !s.Cancel(3) || !s.Idle() || s.Pool().Active() != 0 {
		t.Fatalf("cancel: idle %v, %d active blocks", s.Idle(), s.Pool().Active())
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
