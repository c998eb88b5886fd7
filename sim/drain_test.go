package sim

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/timing"
)

// TestDrainClosesViews: the KV router reads each serving SGLang worker's radix views, and a worker the
// planner drains closes them as its router removes it (it hears no more of the worker's events, whose
// evictions would otherwise stay ghosts for the rest of the run).
func TestDrainClosesViews(t *testing.T) {
	b, cfg := burstThenQuiet()
	o := Options{Workers: 1, Planner: &cfg, Router: router.DefaultOptions(), RouterEventDelay: 20 * time.Millisecond,
		Engine: engine.Options{Backend: engine.SGLang, DPSize: 2,
			SGLang: sglang.Options{PageSize: 16, NumPages: 2000, MaxRunning: 64, MaxPrefillTokens: 8192, ChunkedPrefillSize: 4096,
				ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true, Events: true},
			Timing: timing.Polynomial{}}}
	drained := 0 // passes ended by draining workers
	o.inspect = func(r *runner, w *worker) error {
		switch {
		case w.state == serving && len(w.views) != 2:
			t.Fatalf("serving worker %d reads %d views, want 2", w.id, len(w.views))
		case w.state != serving && w.views != nil:
			t.Fatalf("worker %d in state %d still reads %d views", w.id, w.state, len(w.views))
		case w.state == draining:
			drained++
		}
		return nil
	}
	res := run(t, trace(t, b.String()), o)
	if drained == 0 {
		t.Fatalf("no pass of a draining worker (scaling %+v)", res.Scaling)
	}
	if res.Summary.CompletedRequests != 660 {
		t.Fatalf("completed %d of 660", res.Summary.CompletedRequests)
	}
}
