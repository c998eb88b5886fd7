package router

import (
	"slices"
	"testing"
)

// queueOptions makes a target busy above 8 active prefill tokens.
func queueOptions(p Policy, q QueuePolicy) Options {
	o := DefaultOptions()
	o.Policy, o.QueuePolicy, o.BlockSize = p, q, 4
	o.QueueThreshold, o.MaxBatchedTokens = 1, 8
	return o
}

func ids(ds []Decision) []uint64 {
	var out []uint64
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// TestQueueThreshold is the reference's router case: the first request makes the only worker busy, so
// the second waits until the first's prefill is done.
func TestQueueThreshold(t *testing.T) {
	r := newRouter(t, queueOptions(KV, FCFS), tA)
	route(t, r, prompt(1, 4, run(1, 16)...))
	if _, queued := r.Route(prompt(2, 4, run(100, 4)...)); !queued {
		t.Fatal("second request routed while the only target is busy")
	}
	if got := r.Ready(nil); len(got) != 0 {
		t.Fatalf("Ready while busy = %v", got)
	}
	r.PrefillDone(3) // unknown: ignored
	r.PrefillDone(2) // queued: ignored
	if got := r.Ready(nil); len(got) != 0 {
		t.Fatalf("Ready while busy = %v", got)
	}
	r.PrefillDone(1)
	r.PrefillDone(1)
	got := r.Ready(nil)
	if want := []Decision{{ID: 2, Target: tA}}; !slices.Equal(got, want) {
		t.Fatalf("Ready after prefill = %v, want %v", got, want)
	}
	if r.Queued() != 0 || r.Load(tA) != (Load{Requests: 2, PrefillTokens: 4, Blocks: 5}) {
		t.Fatalf("queued %d, Load(A) %+v", r.Queued(), r.Load(tA))
	}
}

// TestQueueNeedsAllBusy: one idle target is enough to route; the queue starts when both are busy.
func TestQueueNeedsAllBusy(t *testing.T) {
	r := newRouter(t, queueOptions(KV, FCFS), tA, tB)
	d1 := route(t, r, prompt(1, 4, run(1, 16)...))
	if d2 := route(t, r, prompt(2, 4, run(100, 16)...)); d2.Target == d1.Target {
		t.Fatalf("second request joined the first on busy %v", d1.Target)
	}
	if _, queued := r.Route(prompt(3, 4, 1)); !queued {
		t.Fatal("request 3 routed with every target busy")
	}
	r.Finished(1)
	if got := r.Ready(nil); !slices.Equal(got, []Decision{{ID: 3, Target: d1.Target}}) {
		t.Fatalf("Ready = %v, want 3 on %v", got, d1.Target)
	}
}

// TestQueueReadyStopsWhenBusy: Ready hands out requests until the target is busy again, and while
// requests wait, new ones wait behind them even if capacity was freed without a call to Ready.
func TestQueueReadyStopsWhenBusy(t *testing.T) {
	r := newRouter(t, queueOptions(RoundRobin, FCFS), tA)
	route(t, r, prompt(1, 4, run(1, 16)...))
	for id := uint64(3); id <= 6; id++ {
		if _, queued := r.Route(prompt(id, 4, run(uint32(id)*100, 4)...)); !queued {
			t.Fatalf("request %d routed with the target busy", id)
		}
	}
	// 4-token requests go until the target passes 8 prefill tokens again: 4, 8, 12.
	r.PrefillDone(1)
	if got := ids(r.Ready(nil)); !slices.Equal(got, []uint64{3, 4, 5}) {
		t.Fatalf("Ready = %v, want [3 4 5]", got)
	}
	for id := uint64(3); id <= 5; id++ {
		r.PrefillDone(id)
	}
	if _, queued := r.Route(prompt(7, 4, 1)); !queued {
		t.Fatal("request 7 jumped the queue")
	}
	r.Finished(6) // cancelled while queued
	r.Finished(6)
	if got := ids(r.Ready(nil)); !slices.Equal(got, []uint64{7}) {
		t.Fatalf("Ready = %v, want [7]", got)
	}
}

func TestQueueOrder(t *testing.T) {
	for _, tc := range []struct {
		policy QueuePolicy
		want   []uint64
	}{
		{FCFS, []uint64{1, 2, 3, 4}},
		{LCFS, []uint64{4, 3, 2, 1}},
		// New tokens: 1: 20; 2: 36 − 24 cached = 12; 3: 16; 4: 16 (after 3).
		{WSPT, []uint64{2, 3, 4, 1}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			r := newRouter(t, queueOptions(RoundRobin, tc.policy), tA)
			store(r, tA, prompt(0, 4, run(1, 24)...))
			route(t, r, prompt(10, 4, run(5000, 12)...)) // the blocker
			for _, req := range []Request{
				prompt(1, 4, run(500, 20)...),
				prompt(2, 4, cat(run(1, 24), run(600, 12))...),
				prompt(3, 4, run(700, 16)...),
				prompt(4, 4, run(800, 16)...),
			} {
				if _, queued := r.Route(req); !queued {
					t.Fatalf("request %d routed past the blocker", req.ID)
				}
			}
			// Each request makes the target busy again, so they come out one per prefill.
			var got []uint64
			done := uint64(10)
			for range 4 {
				r.PrefillDone(done)
				ds := r.Ready(nil)
				if len(ds) != 1 {
					t.Fatalf("Ready = %v, want one decision", ds)
				}
				done = ds[0].ID
				got = append(got, done)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}

// TestQueueNoTargets: with no target a request waits (also without queueing), and adding one releases it.
func TestQueueNoTargets(t *testing.T) {
	noQueue := DefaultOptions()
	noQueue.Policy, noQueue.QueueThreshold = RoundRobin, 0
	for _, o := range []Options{noQueue, queueOptions(KV, WSPT)} {
		o.BlockSize = 4
		r := newRouter(t, o)
		for id := range uint64(3) {
			if _, queued := r.Route(prompt(id, 4, run(1, 2)...)); !queued {
				t.Fatalf("%v: routed with no target", o.Policy)
			}
		}
		r.Finished(1)
		r.AddTarget(tB)
		if got := r.Ready(nil); !slices.Equal(got, []Decision{{ID: 0, Target: tB}, {ID: 2, Target: tB}}) {
			t.Fatalf("%v: Ready = %v, want 0 and 2 on B", o.Policy, got)
		}
	}
}
