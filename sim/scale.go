package sim

import (
	"fmt"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/planner"
	"github.com/mocker-sim/mocker/router"
)

// plannerState drives the autoscaling planner on the virtual clock.
type plannerState struct {
	cfg   *planner.Config
	p     *planner.Planner
	usage *planner.Usage
	last  time.Duration // start of the current window

	// The window's completed requests.
	requests      int
	isl, osl, hit int64

	series    []ScalePoint
	decisions []string
}

func (r *runner) startPlanner() error {
	perf := map[planner.Pool]planner.Perf{}
	for _, p := range r.pools {
		perf[planner.Pool(p.name)] = planner.Perf{Model: p.eng.Timing, KVTokens: kvTokens(p.eng), Ranks: max(p.eng.DPSize, 1)}
	}
	pl, err := planner.New(planner.Options{Config: *r.o.Planner, PoolPerf: perf})
	if err != nil {
		return err
	}
	pools := r.o.Planner.Pools
	if (r.decode == nil) != (pools.Agg != nil) {
		return fmt.Errorf("planner config: its pools (agg, or prefill and decode) do not match the run's workers")
	}
	r.planner = &plannerState{cfg: r.o.Planner, p: pl, usage: planner.NewUsage(r.o.Planner)}
	for _, p := range r.pools {
		r.planner.record(0, p)
	}
	r.timeline.push(event{at: r.o.Planner.AdjustmentInterval, phase: phasePlanner})
	return nil
}

// kvTokens is one rank's KV capacity.
func kvTokens(eo engine.Options) int {
	return eo.KVBlocks() * eo.BlockSize()
}

// completed counts a finished request in the planner's window.
func (s *plannerState) completed(req *request) {
	s.requests++
	s.isl += int64(req.prompt)
	s.osl += int64(req.turn.OutputLen)
	s.hit += int64(req.cached)
}

// record notes a pool's worker count (those holding GPUs) from now on.
func (s *plannerState) record(now time.Duration, p *pool) {
	n := 0
	for _, w := range p.workers {
		if w.state != gone {
			n++
		}
	}
	if k := len(s.series); k > 0 {
		for i := k - 1; i >= 0; i-- {
			if s.series[i].Pool == p.name {
				if s.series[i].Workers == n {
					return
				}
				break
			}
		}
	}
	s.series = append(s.series, ScalePoint{At: now, Pool: p.name, Workers: n})
	s.usage.Record(now, planner.Pool(p.name), n)
}

// plannerTick observes the window, asks the planner, and starts or drains workers.
func (r *runner) plannerTick() error {
	s := r.planner
	obs := planner.Observation{Window: r.now - s.last, Requests: s.requests, Pools: map[planner.Pool]planner.PoolObservation{}}
	if s.requests > 0 {
		obs.MeanISL = float64(s.isl) / float64(s.requests)
		obs.MeanOSL = float64(s.osl) / float64(s.requests)
	}
	if s.isl > 0 {
		obs.PrefixHitRate = float64(s.hit) / float64(s.isl)
	}
	for _, p := range r.pools {
		var po planner.PoolObservation
		for _, w := range p.workers {
			switch w.state {
			case starting:
				po.Starting++
			case draining:
				po.Draining++
			case serving:
				po.Ready++
				po.Workers = append(po.Workers, w.samples...)
			}
			for i := range w.samples {
				w.samples[i] = w.samples[i][:0]
			}
		}
		obs.Pools[planner.Pool(p.name)] = po
	}
	d := s.p.Tick(r.now, obs)
	s.decisions = append(s.decisions, fmt.Sprintf("%.1fs %s", r.now.Seconds(), d))
	for _, p := range r.pools {
		pd, ok := d.Pools[planner.Pool(p.name)]
		if !ok {
			continue
		}
		if err := r.resize(p, pd.Target); err != nil {
			return err
		}
	}
	s.last, s.requests, s.isl, s.osl, s.hit = r.now, 0, 0, 0, 0
	if r.inFlight() > 0 || !r.exhausted {
		r.timeline.push(event{at: r.now + s.cfg.AdjustmentInterval, phase: phasePlanner})
	}
	return nil
}

// resize starts or drains workers until the pool has target of them (starting or serving).
func (r *runner) resize(p *pool, target int) error {
	var live []*worker
	for _, w := range p.workers {
		if w.state == starting || w.state == serving {
			live = append(live, w)
		}
	}
	for n := len(live); n < target; n++ {
		w, err := r.addWorker(p)
		if err != nil {
			return err
		}
		r.timeline.push(event{at: r.now + r.planner.cfg.StartupTime, phase: phaseWorkerReady, key: w.serial, w: w})
	}
	// Drain the newest first: workers still starting, then serving ones.
	for i := len(live) - 1; i >= target; i-- {
		w := live[i]
		if w.state == starting {
			w.state = gone
			continue
		}
		w.state = draining
		for rank := range w.eng.DPSize() {
			p.router.RemoveTarget(router.Target{Worker: w.id, Rank: rank})
		}
		r.unmirror(w)
		if w.pass == nil && w.eng.Idle() && len(w.pending) == 0 {
			r.retire(w)
		}
	}
	r.planner.record(r.now, p)
	return r.drain(p)
}

// workerReady puts a started worker into service.
func (r *runner) workerReady(w *worker) error {
	if w.state != starting {
		return nil // drained before it was ready
	}
	r.serve(w)
	r.planner.record(r.now, w.pool)
	return r.drain(w.pool)
}

// retire removes a drained worker.
func (r *runner) retire(w *worker) {
	w.state = gone
	if r.planner != nil {
		r.planner.record(r.now, w.pool)
	}
}

// result adds the scaling history and GPU-hours to a run's result.
func (s *plannerState) result(res *Result, end time.Duration) {
	res.Scaling = s.series
	res.Decisions = s.decisions
	res.Summary.GPUHours = s.usage.GPUHours(end)
}
