package sim

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// recorder keeps what an observer is shown.
type recorder struct {
	passes    map[uint64][]ObservedPass // by worker serial, in the order shown
	tokens    int                       // output tokens of the passes shown
	routed    map[string]int            // hand-offs by pool
	transfers map[uint64][2]time.Duration
}

func newRecorder() *recorder {
	return &recorder{passes: map[uint64][]ObservedPass{}, routed: map[string]int{}, transfers: map[uint64][2]time.Duration{}}
}

func (c *recorder) Pass(p *ObservedPass) {
	kept := *p
	kept.Ranks, kept.Metrics = nil, append(p.Metrics[:0:0], p.Metrics...) // Ranks is the engine's, reused
	c.passes[p.Worker] = append(c.passes[p.Worker], kept)
	for _, rp := range p.Ranks {
		for _, out := range rp.Outputs {
			c.tokens += len(out.Tokens)
		}
	}
}

func (c *recorder) Routed(_ time.Duration, _ uint64, pool string, _ uint64, _ int) { c.routed[pool]++ }

func (c *recorder) Transferred(id uint64, start, end time.Duration) {
	c.transfers[id] = [2]time.Duration{start, end}
}

// runRecorder is a recorder that is shown plain decode passes as runs, and keeps them pass by pass.
type runRecorder struct {
	*recorder
	runs int
}

func (c *runRecorder) Coasted(r *ObservedRun) {
	c.runs++
	start := r.Start
	for _, end := range r.Ends {
		c.passes[r.Worker] = append(c.passes[r.Worker], ObservedPass{Pool: r.Pool, Worker: r.Worker, Start: start, End: end,
			Metrics: append(r.Metrics[:0:0], r.Metrics...)})
		c.tokens += r.Tokens
		start = end
	}
}

// TestObserverSeesEveryPass: an observed run reports byte for byte what an unobserved one does (the
// observer turns coasting off, which TestLookaheadChangesNothing shows changes nothing either); the
// observer is shown every pass, each worker's in time order without overlap, every output token, and
// every hand-off: one route per request in an aggregated run, a route into each pool and one transfer
// per request in a disaggregated one, each transfer inside its request's lifetime. A RunObserver keeps
// coasting plain decode passes on (not through block boundaries) and is shown the same passes, those
// coasted as runs.
func TestObserverSeesEveryPass(t *testing.T) {
	e := engine.Options{
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 150, MaxNumSeqs: 16, MaxBatchedTokens: 512, ChunkedPrefill: true, PrefixCaching: true, Events: true},
		Timing: timing.Polynomial{}}
	src := func() workload.Source {
		s, err := workload.NewSynthetic(workload.SyntheticOptions{
			NumRequests: 120, Input: workload.Length{Mean: 400, Stddev: 150}, Output: workload.Length{Mean: 60, Stddev: 30},
			RequestRate: 40, Arrival: "poisson", SharedPrefixRatio: 0.5, NumPrefixGroups: 4, Seed: 5,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dis := disaggOptions(2, 2)
	dis.PrefillEngine, dis.DecodeEngine = e, e
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"agg", Options{Workers: 3, Engine: e, Router: router.DefaultOptions()}},
		{"disagg", dis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, err := Run(src(), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			o := tc.o
			o.Observer = rec
			seen, err := Run(src(), o)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := reportBytes(t, seen), reportBytes(t, plain); !bytes.Equal(a, b) {
				t.Fatalf("an observer changed the report:\n%s\n---\n%s", a[:min(len(a), 1500)], b[:min(len(b), 1500)])
			}
			if seen.coasted != 0 {
				t.Fatalf("%d passes coasted under an observer", seen.coasted)
			}
			runs := &runRecorder{recorder: newRecorder()}
			o.Observer = runs
			coasting, err := Run(src(), o)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := reportBytes(t, coasting), reportBytes(t, plain); !bytes.Equal(a, b) {
				t.Fatalf("a run observer changed the report:\n%s\n---\n%s", a[:min(len(a), 1500)], b[:min(len(b), 1500)])
			}
			// Unobserved, a coast also crosses block boundaries (engine.Run.Blocks), which a run observer's
			// runs, of one state each, do not.
			agg := tc.name == "agg"
			if agg != (runs.runs > 0) || agg && (coasting.coasted == 0 || coasting.coasted >= plain.coasted) ||
				!agg && coasting.coasted+plain.coasted > 0 {
				t.Fatalf("%d passes coasted in %d runs under a run observer, %d unobserved", coasting.coasted, runs.runs, plain.coasted)
			}
			if !reflect.DeepEqual(runs.passes, rec.passes) || runs.tokens != rec.tokens || !reflect.DeepEqual(runs.routed, rec.routed) {
				t.Fatal("a run observer was shown other passes than an observer")
			}
			var passes int64
			busy := map[string]time.Duration{}
			for serial, ps := range rec.passes {
				passes += int64(len(ps))
				for i, p := range ps {
					busy[p.Pool] += p.End - p.Start
					if p.End <= p.Start || i > 0 && p.Start < ps[i-1].End {
						t.Fatalf("worker %d pass %d [%v, %v] after [%v, %v]", serial, i, p.Start, p.End, ps[max(i-1, 0)].Start, ps[max(i-1, 0)].End)
					}
					if len(p.Metrics) != 1 || p.Metrics[0].TotalBlocks != 150 {
						t.Fatalf("worker %d pass %d metrics %+v", serial, i, p.Metrics)
					}
				}
			}
			if passes != seen.Passes {
				t.Fatalf("observer saw %d passes of %d", passes, seen.Passes)
			}
			for _, ps := range seen.Summary.Pools {
				if busy[ps.Name] != ps.Busy {
					t.Fatalf("pool %s: observed busy %v, report %v", ps.Name, busy[ps.Name], ps.Busy)
				}
			}
			n := seen.Summary.CompletedRequests
			switch tc.name {
			case "agg":
				if rec.routed["agg"] != n || rec.tokens != seen.Summary.TotalOutputTokens {
					t.Fatalf("routed %v, tokens %d; want %d routes and %d tokens", rec.routed, rec.tokens, n, seen.Summary.TotalOutputTokens)
				}
			case "disagg":
				// The prefill pass emits each request's first token; decode passes emit the rest.
				if rec.routed["prefill"] != n || rec.routed["decode"] != n || len(rec.transfers) != n {
					t.Fatalf("routed %v, %d transfers; want %d of each", rec.routed, len(rec.transfers), n)
				}
				for id, tr := range rec.transfers {
					if tr[1] < tr[0] || tr[0] <= 0 {
						t.Fatalf("request %d transfer [%v, %v]", id, tr[0], tr[1])
					}
				}
			}
		})
	}
}

// TestRunObservers: Observers is shown runs only when every one of its observers takes them.
func TestRunObservers(t *testing.T) {
	plain, runs := newRecorder(), &runRecorder{recorder: newRecorder()}
	for i, tc := range []struct {
		o    Observer
		want bool
	}{
		{plain, false}, {runs, true}, {Observers{runs, runs}, true}, {Observers{runs, plain}, false},
		{Observers{runs, Observers{runs, plain}}, false}, {Observers{}, true},
	} {
		if _, ok := runObserver(tc.o); ok != tc.want {
			t.Errorf("case %d: runObserver says %v, want %v", i, ok, tc.want)
		}
	}
}

// TestObserversShowEach: Observers shows every pass, route and transfer to each of its observers.
func TestObserversShowEach(t *testing.T) {
	a, b := newRecorder(), newRecorder()
	o := disaggOptions(1, 1)
	o.Observer = Observers{a, b}
	res := run(t, trace(t, `{"timestamp": 0, "input_length": 8, "output_length": 3}`+"\n"+`{"timestamp": 5, "input_length": 8, "output_length": 2}`+"\n"), o)
	for _, c := range []*recorder{a, b} {
		n := 0
		for _, ps := range c.passes {
			n += len(ps)
		}
		if int64(n) != res.Passes || c.routed["prefill"] != 2 || c.routed["decode"] != 2 || len(c.transfers) != 2 {
			t.Fatalf("observer saw %d of %d passes, routes %v, %d transfers", n, res.Passes, c.routed, len(c.transfers))
		}
	}
}
