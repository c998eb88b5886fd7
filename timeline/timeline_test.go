package timeline

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

func run(t *testing.T, rec *Recorder) *sim.Result {
	t.Helper()
	src, err := workload.NewSynthetic(workload.SyntheticOptions{
		NumRequests: 80, Input: workload.Length{Mean: 300, Stddev: 100}, Output: workload.Length{Mean: 40, Stddev: 20},
		RequestRate: 60, Arrival: "poisson", SharedPrefixRatio: 0.5, NumPrefixGroups: 4, Seed: 9,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.Options{DPSize: 2,
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 60, MaxNumSeqs: 8, MaxBatchedTokens: 256, ChunkedPrefill: true, PrefixCaching: true, Events: true},
		Timing: timing.Polynomial{}}
	res, err := sim.Run(src, sim.Options{Workers: 2, Engine: e, Router: router.DefaultOptions(), Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRecorderAddsUp: the recorded passes account for every pass, busy nanosecond, emitted token,
// finished request, admission, preemption and route of the run, and the last pass's cumulative counters
// are the engine's final metrics; each rank's busy time is its priced prefill plus decode, at most the pass.
func TestRecorderAddsUp(t *testing.T) {
	rec := &Recorder{}
	res := run(t, rec)
	var passes int64
	var busy time.Duration
	var sampled, finished, preempted, admitted int
	ws := rec.Workers()
	if len(ws) != 2 || ws[0].Serial != 0 || ws[1].Serial != 1 || ws[0].Ranks != 2 {
		t.Fatalf("workers %+v", ws)
	}
	for wi, w := range ws {
		for _, p := range w.Passes {
			passes++
			busy += p.End - p.Start
			for _, r := range p.Ranks {
				sampled += r.Sampled
				finished += r.Finished
				preempted += r.Preempted
				admitted += r.Admitted
				if r.Prefill+r.Decode > p.End-p.Start || r.TotalBlocks != 60 {
					t.Fatalf("rank %+v in pass [%v, %v]", r, p.Start, p.End)
				}
			}
		}
		last := w.Passes[len(w.Passes)-1]
		for i, m := range res.Pools[0].Metrics[wi] {
			if r := last.Ranks[i]; r.Preemptions != m.Preemptions || r.PrefixHits != m.PrefixHits || r.PrefixQueries != m.PrefixQueries {
				t.Fatalf("worker %d rank %d: last pass %+v, final metrics %+v", wi, i, r, m)
			}
		}
	}
	s := res.Summary
	if passes != res.Passes || busy != s.Pools[0].Busy || sampled != s.TotalOutputTokens || finished != s.CompletedRequests ||
		preempted != s.Preemptions || admitted < s.CompletedRequests || len(rec.Routes) != s.CompletedRequests {
		t.Fatalf("passes %d/%d busy %v/%v tokens %d/%d finished %d/%d preempted %d/%d admitted %d routes %d",
			passes, res.Passes, busy, s.Pools[0].Busy, sampled, s.TotalOutputTokens, finished, s.CompletedRequests,
			preempted, s.Preemptions, admitted, len(rec.Routes))
	}
	if s.Preemptions == 0 {
		t.Fatal("the workload should preempt (60 blocks a rank): the test lost its teeth")
	}
}

// TestRecorderWindow: with a window, exactly the passes and routes that overlap it are kept and the
// other passes are counted.
func TestRecorderWindow(t *testing.T) {
	all := &Recorder{}
	run(t, all)
	from, to := 300*time.Millisecond, 600*time.Millisecond
	win := &Recorder{From: from, To: to}
	res := run(t, win)
	var kept, want int64
	for _, w := range all.Workers() {
		for _, p := range w.Passes {
			if p.End >= from && p.Start < to {
				want++
			}
		}
	}
	for _, w := range win.Workers() {
		for _, p := range w.Passes {
			if p.End < from || p.Start >= to {
				t.Fatalf("pass [%v, %v] outside [%v, %v)", p.Start, p.End, from, to)
			}
			kept++
		}
	}
	if kept != want || kept+win.Skipped != res.Passes || kept == 0 || win.Skipped == 0 {
		t.Fatalf("kept %d (want %d), skipped %d, passes %d", kept, want, win.Skipped, res.Passes)
	}
	for _, r := range win.Routes {
		if r.At < from || r.At >= to {
			t.Fatalf("route at %v outside the window", r.At)
		}
	}
}

// TestRecorderHandoffs: in a disaggregated run, every request is prefilled once (no failures) and
// transferred once, its prompt done before its transfer starts; a window keeps them all, since a
// report drawing a request that straddles the window needs them.
func TestRecorderHandoffs(t *testing.T) {
	src, err := workload.NewSynthetic(workload.SyntheticOptions{
		NumRequests: 40, Input: workload.Length{Mean: 300, Stddev: 100}, Output: workload.Length{Mean: 20, Stddev: 10},
		RequestRate: 50, Arrival: "poisson", Seed: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.Options{VLLM: vllm.Options{BlockSize: 16, NumBlocks: 200, MaxNumSeqs: 8, MaxBatchedTokens: 256, ChunkedPrefill: true, PrefixCaching: true, Events: true},
		Timing: timing.Polynomial{}}
	dr := router.DefaultOptions()
	dr.OverlapScoreWeight, dr.TrackPrefillTokens = 0, false
	rec := &Recorder{From: 200 * time.Millisecond, To: 300 * time.Millisecond}
	res, err := sim.Run(src, sim.Options{PrefillWorkers: 2, DecodeWorkers: 1, PrefillEngine: e, DecodeEngine: e,
		Router: router.DefaultOptions(), DecodeRouter: dr, Observer: rec,
		Transfer: disagg.Transfer{GBps: 10, BytesPerToken: 1e5, Mode: disagg.DestinationMissing}})
	if err != nil {
		t.Fatal(err)
	}
	n := res.Summary.CompletedRequests
	if n != 40 || len(rec.Prefills) != n || len(rec.Transfers) != n {
		t.Fatalf("completed %d, prefills %d, transfers %d; want 40 each", n, len(rec.Prefills), len(rec.Transfers))
	}
	done := map[uint64]time.Duration{}
	for _, p := range rec.Prefills {
		done[p.ID] = p.At
	}
	for _, tr := range rec.Transfers {
		if at, ok := done[tr.ID]; !ok || at > tr.Start || tr.Start > tr.End {
			t.Fatalf("request %d: prefilled at %v (%v), transfer [%v, %v]", tr.ID, at, ok, tr.Start, tr.End)
		}
	}
}
