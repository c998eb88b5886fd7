package sglang

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"
)

// tierScheduler is a scheduler over 4 pages of 4 tokens with a host tier of 8 pages whose link moves a
// page in 1 ms.
func tierScheduler(t *testing.T) *Scheduler {
	t.Helper()
	o := opts(4, 4)
	o.Tiers = kvcache.TierOptions{CPUBlocks: 8, CPUBandwidth: 1, BlockBytes: 1e6}
	s, err := New(o)
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

// tierStep runs the pass starting at ms and checks the accounting (the tiers' included) after it.
func tierStep(t *testing.T, s *Scheduler, ms int) *sched.Pass {
	t.Helper()
	s.SetNow(time.Duration(ms) * time.Millisecond)
	p := s.Step()
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	return p
}

// describe names the pages of each prompt "a0", "a1"... by their sequence hashes.
func describe(evs []kvcache.Event, prompts map[string][]uint32) string {
	m := map[uint64]string{}
	for name, p := range prompts {
		s := tokens.NewSequence(4)
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

// TestHostHitLoadsBackBeforePrefill: a prompt whose pages the radix cache evicted to the host tier is
// loaded back (2 pages at 1 ms each) while another request runs; its pages join the tree, and are
// announced on the GPU, only when they have arrived, and then it is admitted with them as cached. The
// eviction that makes room for the copies takes b's whole leaf (3 pages) and writes it back, which
// queues on the link behind the load.
func TestHostHitLoadsBackBeforePrefill(t *testing.T) {
	s := tierScheduler(t)
	a, b, c := tokensFrom(0, 9), tokensFrom(100, 15), tokensFrom(200, 3)
	prompts := map[string][]uint32{"a": a, "b": b}
	at := func(ms int) *sched.Pass { return tierStep(t, s, ms) }

	tierEnqueue(t, s, 1, a)
	if got, want := describe(at(0).Events, prompts), "GPU stored a0,a1; "; got != want {
		t.Fatalf("pass 0: events %q, want %q", got, want)
	}
	tierEnqueue(t, s, 2, b) // needs the whole pool: a's leaf goes to the host tier
	if got, want := describe(at(10).Events, prompts), "GPU removed a1,a0; CPU stored a1,a0; GPU stored b0,b1,b2; "; got != want {
		t.Fatalf("pass 10: events %q, want %q", got, want)
	}

	tierEnqueue(t, s, 3, a)
	tierEnqueue(t, s, 4, c)
	p := at(20)
	if got, want := describe(p.Events, prompts), "GPU removed b2,b1,b0; CPU stored b2,b1,b0; "; got != want {
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
	if got, want := describe(p.Events, prompts), "GPU stored a0,a1; "; got != want {
		t.Fatalf("pass 22: events %q, want %q", got, want)
	}
	if want := []sched.Admission{{ID: 3, Cached: 8}}; !slices.Equal(p.Admitted, want) {
		t.Fatalf("pass 22: admitted %+v, want %+v", p.Admitted, want)
	}
	if o := p.Outputs; len(o) != 1 || o[0].ID != 3 || len(o[0].Tokens) != 1 || !o[0].Done {
		t.Fatalf("pass 22: outputs %+v, want request 3's one token, done", p.Outputs)
	}
	want := kvcache.TierStats{CPUHits: 2, Offloaded: 5, OnboardTime: 2 * time.Millisecond, CPUUsed: 5}
	if got := s.Metrics().Tiers; got != want {
		t.Fatalf("tier stats %+v, want %+v", got, want)
	}
	if m := s.Metrics(); m.PrefixQueries != 9+15+9+3 || m.PrefixHits != 8 {
		t.Fatalf("prefix queries %d, hits %d; want 36, 8", m.PrefixQueries, m.PrefixHits)
	}
}

// TestWriteBackQueuesOnTheLink: a load started while a write-back still crosses the link waits for it:
// a's 2 pages, written back at 10 ms, hold the link until 12 ms, so their load from 11 ms arrives at
// 14 ms; b's 3 pages, evicted for the copies, are written back behind the load (until 17 ms) and delay a
// later load of them.
func TestWriteBackQueuesOnTheLink(t *testing.T) {
	s := tierScheduler(t)
	a, b := tokensFrom(0, 9), tokensFrom(100, 13)
	tierEnqueue(t, s, 1, a)
	tierStep(t, s, 0)
	tierEnqueue(t, s, 2, b)
	tierStep(t, s, 10)
	tierEnqueue(t, s, 3, a)
	if p := tierStep(t, s, 11); p.Until != 14*time.Millisecond {
		t.Fatalf("pass 11: until %v, want 14ms", p.Until)
	}
	tierStep(t, s, 14) // a arrives and runs
	tierEnqueue(t, s, 4, b)
	// b's 3 pages cross from 17 ms to 20 ms; a's leaf, evicted for them, is written back after them.
	if p := tierStep(t, s, 15); p.Until != 20*time.Millisecond {
		t.Fatalf("pass 15: until %v, want 20ms", p.Until)
	}
}

// TestCancelOnboarding: a request cancelled while its pages arrive gives them back, and its locked hits.
func TestCancelOnboarding(t *testing.T) {
	s := tierScheduler(t)
	tierEnqueue(t, s, 1, tokensFrom(0, 9))
	tierStep(t, s, 0)
	tierEnqueue(t, s, 2, tokensFrom(100, 15))
	tierStep(t, s, 10)
	tierEnqueue(t, s, 3, tokensFrom(0, 9))
	if p := tierStep(t, s, 20); p.Until != 22*time.Millisecond || s.Idle() {
		t.Fatalf("request 3 is not loading until 22ms: until %v", p.Until)
	}
	if !s.Cancel(3) || !s.Idle() || s.Cache().ProtectedPages() != 0 || s.Cache().FreePages() != 4 {
		t.Fatalf("cancel: idle %v, %d protected pages, %d free", s.Idle(), s.Cache().ProtectedPages(), s.Cache().FreePages())
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// The copies never arrived: the tree holds nothing, and a later pass announces nothing.
	if p := tierStep(t, s, 30); len(p.Events) != 0 || s.Cache().CachedPages() != 0 {
		t.Fatalf("pass 30: events %+v, %d cached pages", p.Events, s.Cache().CachedPages())
	}
}

// TestTierRandom drives tiered schedulers (each policy, overlap on and off, mixed chunks, speculative
// decoding) with random prompts sharing prefixes in a pool too small to keep them, and random
// cancellations: the accounting holds after every pass, each request ends (finished or cancelled)
// within a bound, the pool ends empty of private pages, and the host tier served hits.
func TestTierRandom(t *testing.T) {
	variants := []struct {
		name                   string
		policy                 Policy
		overlap, mixed, drafts bool
	}{
		{"fcfs", FCFS, false, false, false}, {"fcfs-overlap", FCFS, true, false, false}, {"lpm-overlap", LPM, true, false, false},
		{"mixed", FCFS, false, true, false}, {"spec", FCFS, true, false, true},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			var hits int64
			for seed := uint64(1); seed <= 20; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				o := opts(4, 24)
				o.ChunkedPrefillSize = 16
				o.Policy, o.Overlap, o.MixedChunk = v.policy, v.overlap, v.mixed
				if v.drafts {
					o.Spec = sched.Spec{Tokens: 2, AcceptRates: []float64{0.8, 0.5}, Seed: seed}
				}
				o.Tiers = kvcache.TierOptions{CPUBlocks: 8 + rng.IntN(40), CPUBandwidth: []float64{0.1, 1, 10}[rng.IntN(3)], BlockBytes: 1e6}
				if rng.IntN(2) == 0 {
					o.Tiers.DiskBlocks, o.Tiers.DiskBandwidth = 1+rng.IntN(64), 1
				}
				s, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				now, next, live := time.Duration(0), uint64(1), map[uint64]bool{}
				for step := 0; step < 4000 && (next <= 60 || !s.Idle()); step++ {
					if next <= 60 && rng.IntN(3) == 0 {
						base := 1000 * rng.IntN(4) // four families of shared prefixes
						p := slices.Concat(tokensFrom(base, 8+rng.IntN(24)), tokensFrom(100000+int(next)*100, rng.IntN(9)))
						if err := s.Enqueue(&sched.Request{ID: next, Prompt: p, MaxTokens: 1 + rng.IntN(6)}); err != nil {
							t.Fatal(err)
						}
						live[next] = true
						next++
					}
					if rng.IntN(12) == 0 {
						for id := range live {
							s.Cancel(id)
							delete(live, id)
							break
						}
					}
					s.SetNow(now)
					p := s.Step()
					if err := s.CheckInvariants(); err != nil {
						t.Fatalf("seed %d, step %d at %v: %v", seed, step, now, err)
					}
					for _, out := range p.Outputs {
						if out.Done {
							delete(live, out.ID)
						}
					}
					now = max(now+time.Millisecond, p.Until)
				}
				if !s.Idle() || next <= 60 {
					t.Fatalf("seed %d: %d enqueued, idle %v after 4000 passes", seed, next-1, s.Idle())
				}
				if s.private != 0 || s.cache.ProtectedPages() != 0 {
					t.Fatalf("seed %d: idle with %d private and %d protected pages", seed, s.private, s.cache.ProtectedPages())
				}
				st := s.Metrics().Tiers
				hits += st.CPUHits + st.DiskHits
			}
			if hits == 0 {
				t.Fatal("the lower tiers served no hit over the seeds")
			}
		})
	}
}
