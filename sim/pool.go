package sim

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/planner"
	"github.com/mocker-sim/mocker/radix"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
)

// pool is a set of identical workers behind one router: the aggregated workers, or the prefill or the
// decode workers of disaggregated serving.
type pool struct {
	name      string
	eng       engine.Options
	router    *router.Router
	workers   []*worker // every worker ever started, by id
	blockSize int
	atEnd     bool // the router sees KV events at the end of a pass
	ready     []router.Decision
}

type workerState uint8

const (
	starting workerState = iota // ordered by the planner, not serving yet
	serving
	draining // no new requests; leaves once idle
	gone
	failed // killed by fault injection; back empty if returns > 0
)

// worker is one engine of a pool.
type worker struct {
	pool   *pool
	id     int    // index in pool.workers, the router's Target.Worker
	serial uint64 // unique over all pools: event tie-breaks and the report
	eng    *engine.Engine
	state  workerState
	pass   *engine.Pass // in flight, or nil

	woken   bool // in runner.woken
	passes  int64
	busy    time.Duration
	samples [][]planner.PassSample // per rank, since the last planner tick
	pending []*request             // decode worker: requests waiting for room to receive their KV (FIFO)
	epoch   uint32                 // failures so far: a pass or KV events of an earlier epoch are void
	returns int                    // scheduled comebacks after failures
	run     engine.Run             // coast's
	lane    lane                   // its stretch of the window, with threads (lanes.go)
	views   []*radix.View          // the radix views its router reads (mirror), until it drains (unmirror)
}

func (r *runner) newPool(name string, eo engine.Options, ro router.Options, n int) (*pool, error) {
	p := &pool{name: name, eng: eo, blockSize: eo.BlockSize()}
	ro.BlockSize = p.blockSize
	if ro.MaxBatchedTokens == 0 {
		ro.MaxBatchedTokens = eo.MaxBatchedTokens()
	}
	rt, err := router.New(ro)
	if err != nil {
		return nil, fmt.Errorf("%s router: %w", name, err)
	}
	p.router = rt
	r.pools = append(r.pools, p)
	for range n {
		w, err := r.addWorker(p)
		if err != nil {
			return nil, err
		}
		r.serve(w)
	}
	p.atEnd = r.o.RouterEventsAtPassEnd || p.workers[0].eng.EventsAtPassEnd()
	return p, nil
}

// addWorker creates a worker, not yet serving.
func (r *runner) addWorker(p *pool) (*worker, error) {
	eo := p.eng
	eo.Seed = engine.RankSeed(p.eng.Seed, int(r.serial))
	e, err := engine.New(eo)
	if err != nil {
		return nil, err
	}
	w := &worker{pool: p, id: len(p.workers), serial: r.serial, eng: e, samples: make([][]planner.PassSample, e.DPSize())}
	// A run observer is shown a run's state once (ObservedRun), which a pass that allocates blocks changes.
	w.run.Blocks = r.o.Observer == nil
	r.serial++
	p.workers = append(p.workers, w)
	return w, nil
}

// serve makes a worker's ranks routing targets.
func (r *runner) serve(w *worker) {
	w.state = serving
	for rank := range w.eng.DPSize() {
		w.pool.router.AddTarget(router.Target{Worker: w.id, Rank: rank})
	}
	if !r.o.noMirror {
		r.mirror(w)
	}
}

// mirror makes each of w's ranks' prefix caches its router's view of the rank's GPU cache (router.Mirror),
// read in place instead of indexing its KV events. SGLang's radix cache is read through its radix.View,
// which shows what the events the router has heard announced, at pass end or delayed alike. A block pool
// (vLLM's, TensorRT-LLM's, which publish their events as a pass starts) is read as it is, which is what
// the router's index holds only where each event reaches the router at the instant its pool emits it:
// not at pass end (--router-events-at-pass-end) and not delayed. Lookahead and lanes keep it: a request
// is routed only once every pass started before it has been applied, and no lane is computing then.
// Decode workers publish nothing, and their router indexes nothing.
// Unless an Observer is shown the passes' events, a view's cache then counts its GPU events' pages
// rather than listing them (radix.View.Sole): the router needs only how many each event stores or removes.
func (r *runner) mirror(w *worker) {
	if w.pool.name == "decode" {
		return
	}
	for rank := range w.eng.DPSize() {
		t := router.Target{Worker: w.id, Rank: rank}
		if v := w.eng.EventView(rank); v != nil {
			w.pool.router.SetMirror(t, v)
			if r.o.heard == nil && r.o.Observer == nil {
				v.Sole() // the router reads the cache through the view, and nothing else reads its events
			}
			w.views = append(w.views, v)
		} else if bp := w.eng.EventPool(rank); bp != nil && r.o.RouterEventDelay <= 0 && !r.o.RouterEventsAtPassEnd {
			w.pool.router.SetMirror(t, bp)
		}
	}
}

// unmirror closes w's radix views once its router has removed it (draining): the router no longer hears
// its events, so every node it evicts would otherwise stay a ghost for the rest of the run. No lane runs
// then (there are none with a planner).
func (r *runner) unmirror(w *worker) {
	for _, v := range w.views {
		v.Close()
	}
	w.views = nil
}

// wake marks a worker that may have work to start: it got a request, freed memory, or finished a pass.
func (r *runner) wake(w *worker) {
	if !w.woken {
		w.woken = true
		r.woken = append(r.woken, w)
	}
}

// startPasses starts a pass on every woken worker that is idle and has work, in creation order. With
// lookahead and threads, the workers that run in this window run at once on the lanes (see lanes.go),
// and each one's turn here applies what its lane did.
func (r *runner) startPasses() error {
	slices.SortFunc(r.woken, func(a, b *worker) int { return cmp.Compare(a.serial, b.serial) })
	bound, ahead := r.lookahead()
	if ahead && r.lanes != nil {
		r.lanes.fanOut(r, bound)
	}
	for _, w := range r.woken {
		w.woken = false
		if w.pass != nil {
			continue
		}
		var err error
		switch {
		case w.lane.active:
			err = r.replay(w)
		case !w.eng.Idle():
			err = r.run(w, bound, ahead)
		}
		if err != nil {
			return err
		}
	}
	clear(r.woken)
	r.woken = r.woken[:0]
	return nil
}

// lookahead reports whether workers may run ahead of the event heap, and until when.
//
// Workers interact only through arrivals: an aggregated worker's passes change nothing another worker
// reads, and what they tell the router (KV events, first tokens, completions) is read only when a request
// is routed. So while no request can be routed, a worker can deliver pass after pass without waiting for
// the other workers' earlier pass ends, and its pool stays in the CPU's caches for the whole run; the
// results are those of strict time order. A request is routed only at an arrival, when it leaves the
// frontend (a route event, with a frontend latency), or when the router's queue drains at a pass end; an
// arrival is either in the heap already (the next session of a trace) or the next turn of a session that
// has one (or of a session waiting on the request), or a closed-loop client's next request. Lookahead is
// on when the router queues nothing and no request in flight has a next turn or a waiter, up to the next event that is neither a pass end nor delayed KV
// events: an arrival, a route, or the planner's and the disaggregated pools' events (which it leaves
// alone). A frontend process (Options.FrontendPerChunk) ties every delivery to every other: it is off.
func (r *runner) lookahead() (bound time.Duration, ok bool) {
	if r.o.noLookahead || r.front.on() || r.decode != nil || r.planner != nil || r.o.Concurrency > 0 || r.turnsOn > 0 ||
		r.ingress.router.Queued() > 0 {
		return 0, false
	}
	// No coast runs past the horizon, where the run stops (overLimit).
	if r.o.limit > 0 {
		return min(r.timeline.bound(), r.o.limit+1, horizon+1), true
	}
	return min(r.timeline.bound(), horizon+1), true
}

// run starts a pass of w and, while lookahead allows, coasts through plain decode passes, delivers each
// other pass at once and starts the next, until a pass ends at or after bound: that one's end goes through
// the heap.
func (r *runner) run(w *worker, bound time.Duration, ahead bool) error {
	return r.advance(w, r.now, bound, ahead, r)
}

// passSink takes what advance's engine work produced, in order: the runner applies it at once, a lane
// keeps a copy for the runner to apply later.
type passSink interface {
	// coastDone: plain decode passes from start (engine.Coast).
	coastDone(w *worker, start time.Duration, run *engine.Run, m []sched.Metrics)
	// passDone: a pass that ends before the lookahead bound, delivered at its end; check is the engine's
	// invariant check after it. An error stops advance.
	passDone(w *worker, pass *engine.Pass, m []sched.Metrics, check error) error
	// passBegun: a pass whose end goes through the heap.
	passBegun(w *worker, pass *engine.Pass, m []sched.Metrics)
}

// advance is the engine's side of run: it plans w's passes from now, and with ahead coasts through
// decode passes (engine.Coast) and hands over each other pass that ends before bound as delivered, until one ends at or
// after bound or w has nothing to run. It touches only w's engine and run buffer, and reads the options,
// so lanes call it on other goroutines.
func (r *runner) advance(w *worker, now, bound time.Duration, ahead bool, out passSink) error {
	// These want every pass through step and deliver, but an observer that takes runs of them.
	coast := ahead && !r.o.CheckInvariants && (r.o.Observer == nil || r.runObs != nil)
	for {
		if coast {
			w.eng.Coast(now, bound, &w.run)
			if n := len(w.run.Ends); n > 0 {
				out.coastDone(w, now, &w.run, r.metrics(w))
				now = w.run.Ends[n-1]
			}
		}
		pass := w.eng.Step(now)
		if pass.Empty() {
			return nil // nothing can run until something changes; whatever changes it wakes w
		}
		if !ahead || pass.End >= bound {
			out.passBegun(w, pass, r.metrics(w))
			return nil
		}
		// Nothing reaches w before bound: its pass ends now as far as anyone can tell.
		var check error
		if r.o.CheckInvariants {
			check = w.eng.CheckInvariants()
		}
		if err := out.passDone(w, pass, r.metrics(w), check); err != nil {
			return err
		}
		if w.eng.Idle() {
			return nil
		}
		now = pass.End
	}
}

// metrics is w's engine state for the observer, if there is one.
func (r *runner) metrics(w *worker) []sched.Metrics {
	if r.o.Observer == nil {
		return nil
	}
	return w.eng.Metrics()
}

// coastDone delivers the tokens of w's decode passes (engine.Coast: every running request computes its
// next token, allocating and committing its blocks, and nothing is admitted, preempted or finished), and
// their KV events as step and delivered would, skipping what such passes do not need of those.
func (r *runner) coastDone(w *worker, start time.Duration, run *engine.Run, m []sched.Metrics) {
	passes := len(run.Ends)
	if len(run.Emitted) > 0 {
		r.publishRun(w, start, run)
	}
	k := len(run.Samples) / passes
	r.coasting = r.coasting[:0]
	for _, sm := range run.Samples[:k] {
		req := r.req(sm.ID) // decoding, so its first token is out: no router update
		r.coasting = append(r.coasting, int(sm.ID))
		if req.sess.keep {
			req.sess.produced(passes)
		}
	}
	r.col.TokenRuns(r.coasting, run.Ends)
	if r.runObs != nil {
		r.runObs.Coasted(&ObservedRun{Pool: w.pool.name, Worker: w.serial, Start: start, Ends: run.Ends, Tokens: k, Metrics: m})
	}
	end := run.Ends[passes-1]
	r.passes += int64(passes)
	w.passes += int64(passes)
	r.ahead += int64(passes)
	r.coasted += int64(passes)
	w.busy += end - start
	r.end = max(r.end, end)
}

// publishRun publishes the KV events of w's coasted passes, each pass's at its start or at its end (atEnd).
func (r *runner) publishRun(w *worker, start time.Duration, run *engine.Run) {
	from, last := 0, -1
	for _, em := range run.Emitted {
		if em.Pass != last { // a pass's ranks' entries are consecutive
			r.crossed++
			last = em.Pass
		}
		at := start
		switch {
		case w.pool.atEnd:
			at = run.Ends[em.Pass]
		case em.Pass > 0:
			at = run.Ends[em.Pass-1]
		}
		r.publishKV(w.pool, router.Target{Worker: w.id, Rank: em.Rank}, run.Events[from:em.End], at)
		from = em.End
	}
}

// passBegun starts w's pass, whose end the heap will deliver.
func (r *runner) passBegun(w *worker, pass *engine.Pass, m []sched.Metrics) {
	r.step(w, pass, m)
	r.timeline.push(event{at: pass.End, phase: phasePassEnd, key: w.serial, w: w, epoch: w.epoch})
}

// passDone starts w's pass and delivers it at its end, ahead of the heap: the runner's clock reads the
// pass's end while delivered runs, as when the heap delivers a pass end (its tokens, completions, the
// sessions' next turns and the router's queue all take their time from it), and goes back after, for the
// next worker's pass to start from.
func (r *runner) passDone(w *worker, pass *engine.Pass, m []sched.Metrics, check error) error {
	r.step(w, pass, m)
	now := r.now
	r.now = pass.End
	r.ahead++
	err := r.delivered(w, check)
	r.now = now
	return err
}

// step applies the start of w's pass, at pass.Start: admissions, KV events seen at pass start, planner
// samples, the observer.
func (r *runner) step(w *worker, pass *engine.Pass, m []sched.Metrics) {
	p := w.pool
	r.passes++
	w.passes++
	w.busy += pass.End - pass.Start
	for _, rp := range pass.Ranks {
		for _, a := range rp.Admitted {
			if req := r.req(a.ID); req != nil && !req.admitted {
				// Only the first admission counts: a decode worker's, or a resumed one, does not.
				req.admitted, req.cached = true, a.Cached
				r.col.Admitted(int(a.ID), pass.Start, a.Cached)
			}
		}
		if !p.atEnd {
			r.publishKV(p, router.Target{Worker: w.id, Rank: rp.Rank}, rp.Events, pass.Start)
		}
		if r.planner != nil {
			w.samples[rp.Rank] = append(w.samples[rp.Rank], planner.PassSample{FPM: rp.FPM, Wall: pass.End - pass.Start})
		}
	}
	w.pass = pass
	if r.o.Observer != nil {
		r.o.Observer.Pass(&ObservedPass{Pool: p.name, Worker: w.serial, Start: pass.Start, End: pass.End,
			Ranks: pass.Ranks, Metrics: m})
	}
}

// publishKV hands a worker's KV events, emitted at at, to its pool's router: at once, or after the
// configured delay.
func (r *runner) publishKV(p *pool, t router.Target, evs []kvcache.Event, at time.Duration) {
	if len(evs) == 0 || p.name == "decode" {
		return // decode workers publish no KV events (reference §8)
	}
	if r.o.RouterEventDelay <= 0 {
		r.applyKV(p, t, p.workers[t.Worker].epoch, evs, at)
		return
	}
	// The pass's buffers are reused by the engine: keep a copy until the events are due.
	held := make([]kvcache.Event, len(evs))
	for i, ev := range evs {
		held[i] = ev
		held[i].Blocks = slices.Clone(ev.Blocks)
		held[i].Hashes = slices.Clone(ev.Hashes)
	}
	r.timeline.push(event{at: at + r.o.RouterEventDelay, phase: phaseKVEvents, key: r.nextKV(),
		kv: &delayedEvents{pool: p, epoch: p.workers[t.Worker].epoch, target: t, events: held}})
}

func (r *runner) nextKV() uint64 {
	r.serial++ // shares the serial space: only order matters
	return r.serial
}

// applyKV hands KV events to the router at at, unless their worker has gone or failed since.
func (r *runner) applyKV(p *pool, t router.Target, epoch uint32, evs []kvcache.Event, at time.Duration) {
	if w := p.workers[t.Worker]; w.state == gone || w.state == failed || w.epoch != epoch {
		return
	}
	for _, ev := range evs {
		if r.o.heard != nil {
			r.o.heard(p, t, epoch, at, ev)
		}
		p.router.Apply(t, ev)
	}
}

// passEnd ends w's pass at its end time, as the heap orders it, and wakes w for its next one.
func (r *runner) passEnd(w *worker) error {
	r.wake(w)
	if l := &w.lane; l.pending {
		// Its lane has run on from this pass: deliver the lane's copy of it.
		r.lanes.wait(l)
		l.pending = false
		w.pass = &l.first
		return r.delivered(w, l.check)
	}
	var check error
	if r.o.CheckInvariants {
		check = w.eng.CheckInvariants()
	}
	return r.delivered(w, check)
}

// delivered delivers w's finished pass: its tokens, completions and (at pass end) KV events; check is the
// engine's invariant check after it.
func (r *runner) delivered(w *worker, check error) error {
	p := w.pool
	r.end = max(r.end, r.now)
	if check != nil {
		return fmt.Errorf("%s worker %d, pass ending at %v: %w", p.name, w.id, r.now, check)
	}
	pass := w.pass
	w.pass = nil
	for _, rp := range pass.Ranks {
		if p.atEnd {
			r.publishKV(p, router.Target{Worker: w.id, Rank: rp.Rank}, rp.Events, r.now)
		}
		for _, out := range rp.Outputs {
			req := r.req(out.ID)
			if req == nil {
				continue // cancelled
			}
			var err error
			switch {
			case p == r.ingress && r.decode != nil:
				err = r.prefilled(req)
			default:
				err = r.decoded(req, out)
			}
			if err != nil {
				return err
			}
		}
	}
	if p == r.decode {
		if err := r.retryReservations(w); err != nil {
			return err
		}
	}
	if w.state == draining && w.eng.Idle() && len(w.pending) == 0 {
		r.retire(w)
	}
	if err := r.drain(p); err != nil {
		return err
	}
	if r.o.inspect != nil {
		if err := r.o.inspect(r, w); err != nil {
			return fmt.Errorf("%s worker %d, pass ending at %v: %w", p.name, w.id, r.now, err)
		}
	}
	return r.overLimit()
}

// decoded records tokens from the worker that generates them (aggregated or decode).
func (r *runner) decoded(req *request, out sched.Output) error {
	p := r.ingress
	if r.decode != nil {
		p = r.decode
	}
	if len(out.Tokens) > 0 {
		if !req.gotFirst {
			req.gotFirst = true
			p.router.PrefillDone(req.id)
			if r.decode != nil {
				r.stages.decodeWait.Add(ms(r.now - req.activated))
			}
		}
		at := r.now
		if r.front.on() {
			at = r.front.take(r.now, r.front.perChunk)
			r.end = max(r.end, at)
		}
		r.col.Tokens(int(req.id), at, len(out.Tokens))
		if req.sess.keep {
			req.sess.produced(len(out.Tokens))
		}
	}
	if !out.Done {
		return nil
	}
	p.router.PrefillDone(req.id)
	p.router.Finished(req.id)
	if r.front.on() {
		// The engine is done with it; the client is when the frontend has sent what it took before.
		r.timeline.push(event{at: max(r.now, r.front.free), phase: phaseClientEnd, key: req.id})
		return nil
	}
	return r.clientEnd(req)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
