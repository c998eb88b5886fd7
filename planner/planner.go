package planner

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Options configure a Planner.
type Options struct {
	Config Config
	// Perf describes one worker of every pool, unless PoolPerf names the pool (prefill and decode
	// workers often differ in parallelism). Needed only with throughput scaling.
	Perf     Perf
	PoolPerf map[Pool]Perf
	// Predictor forecasts traffic; nil means a new one named by Config.Predictor.
	Predictor Predictor
}

// Observation is what happened in the window since the previous tick.
type Observation struct {
	Window        time.Duration // the window's length; requests per second are Requests / Window
	Requests      int           // requests completed in the window
	MeanISL       float64       // their mean prompt length, tokens
	MeanOSL       float64       // their mean output length, tokens
	PrefixHitRate float64       // the router's fraction of prompt tokens found cached at admission
	Pools         map[Pool]PoolObservation
}

// PoolObservation is one pool's state at the tick and its workers' passes in the window.
type PoolObservation struct {
	Ready    int // workers serving
	Starting int // workers ordered and not yet serving
	Draining int // workers leaving after their last requests; not counted as the pool's size
	// Workers holds, per ready worker (or data-parallel rank), its passes in the window in time order.
	// A worker with no passes was idle.
	Workers [][]PassSample
}

// Decision is the planner's answer for every configured pool.
type Decision struct {
	Pools map[Pool]PoolDecision
}

// PoolDecision is the desired size of one pool and how it was reached.
type PoolDecision struct {
	Current int    // Ready + Starting at the tick
	Target  int    // the workers the pool should have: the caller starts or drains the difference
	Floor   int    // the throughput floor within [min, max]; 0 when throughput scaling is off
	Load    int    // the load step's count within [floor or min, max]; 0 when load scaling is off
	Reason  string // one line for logs and reports
}

// String prints the decision in pool order, one "pool current→target (reason)" per pool.
func (d Decision) String() string {
	var parts []string
	for _, p := range allPools {
		if pd, ok := d.Pools[p]; ok {
			parts = append(parts, fmt.Sprintf("%s %d→%d (%s)", p, pd.Current, pd.Target, pd.Reason))
		}
	}
	return strings.Join(parts, "; ")
}

// Planner decides pool sizes. It is a deterministic state machine driven by Tick; it keeps the traffic
// predictor's history, the last request shape seen and when each pool's last scale-up becomes ready.
type Planner struct {
	cfg          Config
	perf         map[Pool]Perf
	pred         Predictor
	shape        Traffic // ISL, OSL and hit rate of the last window that completed requests
	pendingUntil map[Pool]time.Duration
}

// New validates the options and returns a planner.
func New(o Options) (*Planner, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("planner: %w", err)
	}
	p := &Planner{
		cfg:          o.Config,
		perf:         map[Pool]Perf{},
		pred:         o.Predictor,
		pendingUntil: map[Pool]time.Duration{},
	}
	if p.pred == nil {
		p.pred = Predictors()[o.Config.Predictor]()
	}
	for _, pool := range p.cfg.pools() {
		perf, ok := o.PoolPerf[pool]
		if !ok {
			perf = o.Perf
		}
		if p.cfg.ThroughputScaling {
			if err := perf.validate(); err != nil {
				return nil, fmt.Errorf("planner: %s workers: %w (throughput scaling prices workers)", pool, err)
			}
		}
		p.perf[pool] = perf
	}
	return p, nil
}

// Config returns the planner's configuration.
func (p *Planner) Config() Config { return p.cfg }

// Tick takes the window that ends at now and returns the desired size of every pool. now only times
// pending scale-ups (a worker ordered at now serves from now + startup_time); the caller ticks every
// adjustment_interval and applies the decision.
func (p *Planner) Tick(now time.Duration, obs Observation) Decision {
	if obs.Requests > 0 && obs.MeanISL > 0 {
		p.shape = Traffic{ISL: obs.MeanISL, OSL: max(obs.MeanOSL, 0), HitRate: clamp01(obs.PrefixHitRate)}
	}
	if obs.Window > 0 { // a window of no length says nothing about the rate
		t := p.shape
		t.Rate = float64(max(obs.Requests, 0)) / obs.Window.Seconds()
		p.pred.Observe(t)
	}
	next := p.pred.Predict()
	d := Decision{Pools: map[Pool]PoolDecision{}}
	for _, pool := range p.cfg.pools() {
		d.Pools[pool] = p.plan(now, pool, obs.Pools[pool], next)
	}
	return d
}

// plan decides one pool: the throughput floor, the load step above it, within [min, max].
func (p *Planner) plan(now time.Duration, pool Pool, po PoolObservation, next Traffic) PoolDecision {
	pc := p.cfg.pool(pool)
	ready, starting := max(po.Ready, 0), max(po.Starting, 0)
	pd := PoolDecision{Current: ready + starting}
	var why []string
	lo := pc.Min
	if p.cfg.ThroughputScaling {
		n, capacity := floorFor(pool, p.perf[pool], next, p.cfg.TTFTTarget, p.cfg.ITLTarget)
		pd.Floor = min(max(n, pc.Min), pc.Max)
		lo = pd.Floor
		why = append(why, floorReason(pd.Floor, next.Rate, capacity))
	}
	if p.cfg.LoadScaling {
		step, reason := 0, ""
		switch {
		case starting > 0:
			reason = fmt.Sprintf("load hold: %d starting", starting)
		case po.Draining > 0:
			reason = fmt.Sprintf("load hold: %d draining", po.Draining)
		case now < p.pendingUntil[pool]:
			reason = fmt.Sprintf("load hold: scale-up pending until %v", p.pendingUntil[pool])
		default:
			ests := make([]estimate, len(po.Workers))
			for i, w := range po.Workers {
				ests[i] = estimateEngine(pool, w, p.shape.ISL, p.shape.HitRate)
			}
			step, reason = loadVote(pool, ests, p.cfg.TTFTTarget, p.cfg.ITLTarget, p.cfg.LoadSensitivity)
		}
		// Never below the floor: the load step adjusts above the throughput plan, not against it.
		pd.Load = min(max(pd.Current+step, lo), pc.Max)
		pd.Target = pd.Load
		why = append(why, reason)
	} else {
		pd.Target = pd.Floor
	}
	if pd.Target > pd.Current {
		p.pendingUntil[pool] = now + p.cfg.StartupTime
	}
	pd.Reason = strings.Join(why, "; ")
	return pd
}

func floorReason(floor int, rate, capacity float64) string {
	switch {
	case rate == 0:
		return fmt.Sprintf("floor %d: no traffic", floor)
	case math.IsInf(capacity, 1):
		return fmt.Sprintf("floor %d: %.3g req/s cost nothing", floor, rate)
	}
	return fmt.Sprintf("floor %d: %.3g req/s at %.3g req/s per worker", floor, rate, capacity)
}
