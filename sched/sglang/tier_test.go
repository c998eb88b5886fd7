package sglang

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// tierHarness drives a scheduler over 4 pages of 4 tokens with a host tier of 8 pages whose link moves a
// page in 1 ms.
func tierHarness(t *testing.T) *schedtest.Harness[*Scheduler] {
	o := opts(4, 4)
	o.Tiers = kvcache.TierOptions{CPUBlocks: 8, CPUBandwidth: 1, BlockBytes: 1e6}
	return newHarness(t, o)
}

// TestHostHitLoadsBackBeforePrefill: a prompt whose pages the radix cache evicted to the host tier is
// loaded back (2 pages at 1 ms each) while another request runs; its pages join the tree, and are
// announced on the GPU, only when they have arrived, and then it is admitted with them as cached. The
// eviction that makes room for the copies takes b's whole leaf (3 pages) and writes it back, which
// queues on the link behind the load.
func TestHostHitLoadsBackBeforePrefill(t *testing.T) {
	tierHarness(t).LoadBack("GPU removed b2,b1,b0; CPU stored b2,b1,b0; ",
		kvcache.TierStats{CPUHits: 2, Offloaded: 5, OnboardTime: 2 * time.Millisecond, CPUUsed: 5})
}

// TestWriteBackQueuesOnTheLink: a load started while a write-back still crosses the link waits for it:
// a's 2 pages, written back at 10 ms, hold the link until 12 ms, so their load from 11 ms arrives at
// 14 ms; b's 3 pages, evicted for the copies, are written back behind the load (until 17 ms) and delay a
// later load of them.
func TestWriteBackQueuesOnTheLink(t *testing.T) {
	h := tierHarness(t)
	a, b := schedtest.Prompt(0, 9), schedtest.Prompt(100, 13)
	h.Enqueue(1, a, 1)
	h.StepAt(0)
	h.Enqueue(2, b, 1)
	h.StepAt(10)
	h.Enqueue(3, a, 1)
	if p := h.StepAt(11); p.Until != 14*time.Millisecond {
		t.Fatalf("pass 11: until %v, want 14ms", p.Until)
	}
	h.StepAt(14) // a arrives and runs
	h.Enqueue(4, b, 1)
	// b's 3 pages cross from 17 ms to 20 ms; a's leaf, evicted for them, is written back after them.
	if p := h.StepAt(15); p.Until != 20*time.Millisecond {
		t.Fatalf("pass 15: until %v, want 20ms", p.Until)
	}
}

// TestCancelOnboarding: a request cancelled while its pages arrive gives them back, and its locked hits.
func TestCancelOnboarding(t *testing.T) {
	h := tierHarness(t)
	h.StartLoadBack()
	s := h.S
	if !s.Cancel(3) || !s.Idle() || s.Cache().ProtectedPages() != 0 || s.Cache().FreePages() != 4 {
		t.Fatalf("cancel: idle %v, %d protected pages, %d free", s.Idle(), s.Cache().ProtectedPages(), s.Cache().FreePages())
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// The copies never arrived: the tree holds nothing, and a later pass announces nothing.
	if p := h.StepAt(30); len(p.Events) != 0 || s.Cache().CachedPages() != 0 {
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
						p := slices.Concat(schedtest.Prompt(base, 8+rng.IntN(24)), schedtest.Prompt(100000+int(next)*100, rng.IntN(9)))
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
