package recommend

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/sim"
)

// Objectives.
const (
	FewestGPUs   = "fewest-gpus"    // fewest GPUs meeting the targets at the workload's rate
	TokensPerGPU = "tokens-per-gpu" // most output tokens/s per GPU meeting the targets
	MaxRate      = "max-rate"       // highest arrival rate each deployment sustains meeting the targets
)

// Options say what a search looks for.
type Options struct {
	Targets   []Target
	Objective string // FewestGPUs (""), TokensPerGPU or MaxRate
	// Threads is how many goroutines a search uses (0: GOMAXPROCS): up to that many shapes run at once,
	// and each of their runs simulates its workers on an equal share of the rest (sim.Options.Threads,
	// at least 1), so a search of many shapes runs each on one thread.
	Threads int
	// Progress, if set, is called (from one goroutine at a time) as each shape is done.
	Progress func(done, total int)
	// Runner, if set, runs each job in place of Evaluate in this process (package sweep: on workers
	// elsewhere); it is called from Threads goroutines at once and must return what Evaluate would.
	Runner func(Job) (Candidate, error)
}

// rateTolerance is how close MaxRate brackets the highest rate: the failing scale is at most this much
// above the passing one.
const rateTolerance = 1.05

// maxRateScale bounds MaxRate's doubling and halving of the arrival rate.
const maxRateScale = 1024

// Search simulates the space's deployments of base's workload and returns the report: Prepare, then
// Run with o.Runner. base is the configuration predict would run, less what the space sets; it is not
// changed.
func Search(base *config.Config, sp *Space, o Options) (*Report, error) {
	p, err := Prepare(base, sp, o)
	if err != nil {
		return nil, err
	}
	return p.Run(o.Runner)
}

// A Plan is a search checked and ready to run: its shapes, those refused with the reason, and the
// prompts its bounds read, by KV block size.
type Plan struct {
	base    *config.Config
	sp      *Space
	o       Options
	shapes  []Shape
	refused []string
	ps      map[int][]prompt
}

// Prepare checks a search of the space's deployments of base's workload for o's targets and objective,
// all that can refuse it before any run (a command checks its outputs and reaches its workers after, and
// then runs it), and lists its shapes. Run's runner, if set, replaces o.Runner. base is not changed,
// and is read by Run.
func Prepare(base *config.Config, sp *Space, o Options) (*Plan, error) {
	if o.Objective == "" {
		o.Objective = FewestGPUs
	}
	switch {
	case o.Objective != FewestGPUs && o.Objective != TokensPerGPU && o.Objective != MaxRate:
		return nil, fmt.Errorf("objective %q: want %s, %s or %s", o.Objective, FewestGPUs, TokensPerGPU, MaxRate)
	case len(o.Targets) == 0:
		return nil, errors.New("no latency target: give at least one (--ttft-p90-ms, --itl-p90-ms, --e2e-p90-ms or --sla)")
	case len(base.FailWorker) > 0:
		return nil, errors.New("fail-worker: a search compares deployments at full strength; run predict to study failures")
	case base.PlannerConfig != "":
		return nil, errors.New("planner-config: an autoscaler changes the worker count a search is choosing; run predict with it")
	case o.Objective == MaxRate && base.Concurrency > 0:
		return nil, fmt.Errorf("concurrency %d: closed-loop clients set their own rate; max-rate scales arrival times", base.Concurrency)
	}
	// A setting no shape takes or reads is refused once, by name, not shape by shape.
	if err := sp.Deployable(base); err != nil {
		return nil, err
	}
	// What no shape changes is checked once, not once per shape: the model, the GPU system, and what the
	// timing model needs (its data's directory, its profile's file). Where it fails on some backends
	// only, their shapes are refused and the others searched.
	if err := base.HoldsOnSome(sp.Backends, (*config.Config).CheckShared); err != nil {
		return nil, err
	}
	p := &Plan{base: base, sp: sp, o: o, ps: map[int][]prompt{}}
	var err error
	if p.shapes, p.refused, err = sp.shapes(base); err != nil {
		return nil, err
	}
	if len(p.shapes) == 0 {
		return nil, fmt.Errorf("no deployment in the search space is valid: %s", strings.Join(p.refused, "; "))
	}
	if err := withinContext(base); err != nil {
		return nil, err
	}
	// The bounds read the workload once per KV block size.
	if slices.ContainsFunc(o.Targets, func(t Target) bool { return t.Metric != report.E2E }) {
		header, err := base.ReplyHeader()
		if err != nil {
			return nil, err
		}
		var some []prompt
		for _, s := range p.shapes {
			c := s.config(base, 1)
			bs := c.BlockSizeOrDefault()
			if _, ok := p.ps[bs]; !ok {
				if p.ps[bs], err = prompts(&c, bs, header); err != nil {
					return nil, err
				}
				some = p.ps[bs]
			}
		}
		if err := measurable(o.Targets, some, header); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Run simulates the plan's deployments and returns the report. runner, if set, runs each job in place
// of Evaluate in this process, and of the plan's Options.Runner.
func (p *Plan) Run(runner func(Job) (Candidate, error)) (*Report, error) {
	o, shapes := p.o, p.shapes
	if runner != nil {
		o.Runner = runner
	}
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	at := min(threads, len(shapes))
	perRun := max(threads/at, 1)
	out := make([]shapeOut, len(shapes))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		done int
	)
	for range at {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(shapes) {
					return
				}
				s := shapes[i]
				c := s.config(p.base, 1)
				out[i] = search(p.base, s, p.sp, o, p.ps[c.BlockSizeOrDefault()], perRun)
				mu.Lock()
				done++
				if o.Progress != nil {
					o.Progress(done, len(shapes))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return assemble(o, shapes, p.refused, out)
}

// shapeOut is what the search of one shape found.
type shapeOut struct {
	res   ShapeResult
	cands []Candidate
	err   error
}

// search runs one shape: its bounds, then bisection over its scales (or, for MaxRate, over the
// arrival rate at each scale), each run on threads goroutines.
func search(base *config.Config, s Shape, sp *Space, o Options, ps []prompt, threads int) shapeOut {
	lo, hi := s.scales(sp.MinWorkers, sp.MaxWorkers)
	out := shapeOut{res: ShapeResult{Shape: s, Scales: hi - lo + 1}}
	for _, t := range o.Targets {
		c := s.config(base, lo)
		var b Bound
		var err error
		switch t.Metric {
		case report.TTFT:
			b, err = ttftBound(&c, ps, t.Percentile)
		case report.ITL:
			b, err = itlBound(&c, ps)
		default:
			continue
		}
		if err != nil {
			out.err = fmt.Errorf("%s: %w", s, err)
			return out
		}
		out.res.Bounds = append(out.res.Bounds, TargetBound{Target: t.String(), Bound: b})
		if b.Ms > t.Ms && out.res.Infeasible == "" {
			out.res.Infeasible = fmt.Sprintf("%s %.1f ms at best > %g ms: %s", t.Label(), b.Ms, t.Ms, b.What)
		}
	}
	if out.res.Infeasible != "" {
		out.res.Skipped = out.res.Scales
		return out
	}
	run := func(scale int, rate float64, early bool) *Candidate {
		if out.err != nil {
			return &Candidate{} // the search has failed: fail fast, recording nothing
		}
		j := Job{Shape: s, Scale: scale, Rate: rate, Early: early}
		var c Candidate
		if o.Runner != nil {
			var err error
			if c, err = o.Runner(j); err != nil {
				out.err = fmt.Errorf("%s: %w", s, err)
				return &Candidate{}
			}
			c.Shape = s // the runner's copy lacks the parsed ratio
		} else {
			c = Evaluate(base, o.Targets, j, threads)
		}
		out.cands = append(out.cands, c)
		out.res.Simulated++
		return &out.cands[len(out.cands)-1]
	}
	if o.Objective == MaxRate {
		for scale := lo; scale <= hi; scale++ {
			out.res.Rates = append(out.res.Rates, maxRate(func(rate float64) *Candidate { return run(scale, rate, true) }, scale))
		}
		return out
	}
	// Monotonicity: at a fixed shape, a run with more workers meets whatever targets one with fewer
	// meets (the same requests, spread wider). So if the largest fails, all fail, and the smallest that
	// passes is found by bisection. The largest runs in full: its figures say how close the shape comes.
	if !run(hi, 1, false).Pass {
		out.res.Skipped = out.res.Scales - out.res.Simulated
		return out
	}
	l, h := lo, hi // h passes
	for l < h {
		m := (l + h) / 2
		if run(m, 1, true).Pass {
			h = m
		} else {
			l = m + 1
		}
	}
	out.res.Skipped = out.res.Scales - out.res.Simulated
	return out
}

// maxRate brackets the highest arrival-rate scale at which run passes: doubling or halving from 1 until
// the result changes, then bisecting geometrically until the bracket is within rateTolerance. It
// assumes a run that passes at a rate passes at any lower one.
func maxRate(run func(rate float64) *Candidate, scale int) RateBracket {
	b := RateBracket{Scale: scale}
	if run(1).Pass {
		b.Pass = 1
		for b.Fail = 2; ; b.Fail *= 2 {
			if !run(b.Fail).Pass {
				break
			}
			b.Pass = b.Fail
			if b.Fail >= maxRateScale {
				b.Fail = 0 // passes at every rate tried
				return b
			}
		}
	} else {
		b.Fail = 1
		for b.Pass = 0.5; !run(b.Pass).Pass; b.Pass /= 2 {
			b.Fail = b.Pass
			if b.Pass <= 1.0/maxRateScale {
				b.Pass = 0 // fails at every rate tried
				return b
			}
		}
	}
	for b.Fail/b.Pass > rateTolerance {
		m := math.Sqrt(b.Pass * b.Fail)
		if run(m).Pass {
			b.Pass = m
		} else {
			b.Fail = m
		}
	}
	return b
}

// Job is one run of a search: a shape at a size (workers, or disaggregated ratio groups) with the
// workload's arrival rate scaled by Rate; Early lets the run stop once a target is certainly missed.
type Job struct {
	Shape Shape   `json:"shape"`
	Scale int     `json:"scale"`
	Rate  float64 `json:"rate"`
	Early bool    `json:"early"`
}

// Evaluate runs a job on base's workload and checks the targets: what Search does with each job when
// Options.Runner is nil, and what a runner elsewhere must do. threads is the run's sim.Options.Threads;
// the candidate is the same whatever it is.
func Evaluate(base *config.Config, targets []Target, j Job, threads int) Candidate {
	s := j.Shape
	if s.Disagg && s.ratio == (Ratio{}) {
		s.ratio, _ = ParseRatio(s.Ratio) // a job decoded from JSON; a bad ratio fails in Validate
	}
	return evaluate(base, s, j.Scale, j.Rate, targets, j.Early, threads)
}

// evaluate simulates shape s at scale with the arrival rate scaled by rate on threads goroutines and
// checks the targets. early lets the run stop once a target is certainly missed (stopRule).
func evaluate(base *config.Config, s Shape, scale int, rate float64, targets []Target, early bool, threads int) Candidate {
	cfg := s.config(base, scale)
	cfg.ArrivalSpeedupRatio *= rate
	c := Candidate{Shape: s, Workers: scale, GPUs: s.gpus(&cfg, scale), RateScale: rate}
	if s.Disagg {
		c.Workers, c.PrefillWorkers, c.DecodeWorkers = 0, cfg.PrefillWorkers, cfg.DecodeWorkers
	}
	fail := func(err error) Candidate {
		c.Error = err.Error()
		c.Why = "the run failed: " + c.Error
		return c
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	if _, err := cfg.ResolveDesync(sim.MeanE2EMs); err != nil {
		return fail(err)
	}
	src, err := cfg.Source()
	if err != nil {
		return fail(err)
	}
	opts, err := cfg.SimOptions()
	if err != nil {
		return fail(err)
	}
	opts.Threads = threads
	opts.Compact = true // a candidate reads the summary, percentiles and first rejection, no request's record
	var rule *stopRule
	if early {
		rule = newStopRule(targets, src.Requests())
		opts.Finished = rule.finished
	}
	res, err := sim.Run(src, opts)
	if errors.Is(err, sim.ErrStopped) {
		t := targets[rule.stopped]
		c.StoppedEarly = true
		c.Why = fmt.Sprintf("%s certainly > %g ms: %d requests over it (stopped early)", t.Label(), t.Ms, rule.late[rule.stopped])
		return c
	} else if err != nil {
		return fail(err)
	}
	defer res.Collector.Close()
	c.Figures = figures(&res.Summary, c.GPUs)
	c.Pass = true
	var why []string
	for _, t := range targets {
		v, ok := res.Collector.Percentile(t.Metric, t.Percentile)
		ch := Check{Target: t.String(), Ms: v, Met: ok && v <= t.Ms} // no sample: nothing met it
		c.Checks = append(c.Checks, ch)
		switch {
		case !ok:
			c.Pass = false
			why = append(why, fmt.Sprintf("%s: no completed request has one", t.Label()))
		case !ch.Met:
			c.Pass = false
			why = append(why, fmt.Sprintf("%s %.1f ms > %g ms (+%.0f%%)", t.Label(), v, t.Ms, 100*(v/t.Ms-1)))
		}
	}
	if n := res.Summary.RejectedRequests; n > 0 {
		c.Pass = false
		_, _, _, reason, _ := res.Collector.FirstRejection()
		why = append(why, fmt.Sprintf("%d requests rejected (the first: %s)", n, reason))
	}
	c.Why = strings.Join(why, "; ")
	return c
}

func figures(s *report.Summary, gpus int) *Figures {
	f := &Figures{
		Completed:         s.CompletedRequests,
		Rejected:          s.RejectedRequests,
		Preemptions:       s.Preemptions,
		RequestThroughput: s.RequestThroughput,
		OutputTokensPerS:  s.OutputTokenThroughput,
		PerGPU:            s.OutputTokenThroughput / float64(gpus),
		TTFT:              dist(s.TTFT),
		ITL:               dist(s.ITL),
		E2E:               dist(s.E2E),
	}
	if s.TPOT.Mean > 0 {
		f.PerUser = 1000 / s.TPOT.Mean
	}
	return f
}

func dist(s report.Stats) Dist { return Dist{Mean: s.Mean, P50: s.P50, P90: s.P90, P99: s.P99} }

// assemble ranks the candidates and marks the Pareto frontier.
func assemble(o Options, shapes []Shape, refused []string, outs []shapeOut) (*Report, error) {
	r := &Report{Objective: o.Objective, Refused: refused}
	for _, t := range o.Targets {
		r.Targets = append(r.Targets, t.String())
	}
	type keyed struct {
		c     Candidate
		shape int
	}
	var all []keyed
	for i, out := range outs {
		if out.err != nil {
			return nil, out.err
		}
		r.Shapes = append(r.Shapes, out.res)
		r.Simulated += out.res.Simulated
		r.Skipped += out.res.Skipped
		if out.res.Infeasible != "" {
			r.BoundPruned++
		}
		for _, c := range out.cands {
			if c.StoppedEarly {
				r.StoppedEarly++
			}
			all = append(all, keyed{c, i})
		}
	}
	slices.SortStableFunc(all, func(a, b keyed) int {
		if c := cmpBool(a.c.Pass, b.c.Pass); c != 0 {
			return c
		}
		if a.c.Pass {
			var c int
			switch o.Objective {
			case FewestGPUs:
				c = cmp.Or(cmp.Compare(a.c.GPUs, b.c.GPUs), cmp.Compare(b.c.Figures.PerGPU, a.c.Figures.PerGPU))
			case TokensPerGPU:
				c = cmp.Or(cmp.Compare(b.c.Figures.PerGPU, a.c.Figures.PerGPU), cmp.Compare(a.c.GPUs, b.c.GPUs))
			case MaxRate:
				c = cmp.Or(cmp.Compare(b.c.Figures.RequestThroughput, a.c.Figures.RequestThroughput), cmp.Compare(a.c.GPUs, b.c.GPUs))
			}
			if c != 0 {
				return c
			}
		} else if c := cmp.Compare(a.c.miss(), b.c.miss()); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.c.GPUs, b.c.GPUs), cmp.Compare(a.shape, b.shape), cmp.Compare(a.c.Workers+a.c.PrefillWorkers, b.c.Workers+b.c.PrefillWorkers), cmp.Compare(a.c.RateScale, b.c.RateScale))
	})
	for _, k := range all {
		r.Candidates = append(r.Candidates, k.c)
	}
	pareto(r.Candidates)
	return r, nil
}

// cmpBool orders true first.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// miss is how far a failing candidate is from its targets: the largest figure/target ratio; a run
// that failed or stopped early, whose figures are not known, comes after every measured one.
func (c *Candidate) miss() float64 {
	if c.Figures == nil {
		return math.Inf(1)
	}
	worst := 0.0
	for _, ch := range c.Checks {
		t, _ := ParseTarget(ch.Target)
		worst = max(worst, ch.Ms/t.Ms)
	}
	if c.Figures.Rejected > 0 {
		worst = max(worst, math.MaxFloat64)
	}
	return worst
}

// pareto marks the passing candidates that no other passing one beats on both output tokens/s per GPU
// and tokens/s per user.
func pareto(cs []Candidate) {
	for i := range cs {
		if !cs[i].Pass {
			continue
		}
		a := cs[i].Figures
		cs[i].Pareto = !slices.ContainsFunc(cs, func(d Candidate) bool {
			if !d.Pass {
				return false
			}
			b := d.Figures
			return b.PerGPU >= a.PerGPU && b.PerUser >= a.PerUser && (b.PerGPU > a.PerGPU || b.PerUser > a.PerUser)
		})
	}
}
