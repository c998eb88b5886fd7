package sim

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokens"
)

// Parallel lookahead (Options.Threads).
//
// Between two instants at which the router is read (the lookahead bound), each worker that runs does so
// in one stretch: from the start of the window if it was woken with work, or from the end of its pass in
// flight, which the heap delivers first. Its stretch depends on its engine alone, so a window's stretches
// run at once, each on a lane: the lane plans the worker's passes (runner.advance) and keeps copies of
// what the engine reuses. The main goroutine then applies each lane exactly where the one-thread loop
// would have run it — the pass in flight when the heap pops its end, the rest at that instant's
// startPasses — through the same runner methods. Which goroutine planned a pass changes nothing: the
// collector, the routers, the observer and the callbacks see the same calls in the same order.

// minLanes is the fewest workers a window needs for its stretches to go to lanes: one alone runs on the
// main goroutine, as without threads.
const minLanes = 2

// lanes hands a window's stretches to goroutines; the main goroutine computes them too while it waits.
type lanes struct {
	r           *runner
	jobs        chan *lane
	helpers     sync.WaitGroup
	queue       []*lane // this window's, in the order the main goroutine applies them
	scan        int     // queue[:scan] are claimed
	outstanding int     // lanes of the window not yet applied
}

// newLanes starts threads-1 helpers for a run whose workers may run ahead in parallel, or returns nil.
func newLanes(r *runner) *lanes {
	threads := r.o.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// Only aggregated workers run ahead (see lookahead); the test hooks read engines between passes.
	if threads < 2 || r.o.Workers < minLanes || r.decode != nil || r.planner != nil || r.o.Concurrency > 0 ||
		r.o.noLookahead || r.o.inspect != nil {
		return nil
	}
	ls := &lanes{r: r, jobs: make(chan *lane, len(r.ingress.workers))}
	for range min(threads, len(r.ingress.workers)) - 1 {
		ls.helpers.Go(func() {
			for l := range ls.jobs {
				if l.claim() {
					l.compute(r)
				}
			}
		})
	}
	return ls
}

// fanOut gives a lane to each worker that runs before bound, unless this window's are out already or
// it is empty (an arrival at this very instant: each worker plans one pass, which ends past it).
func (ls *lanes) fanOut(r *runner, bound time.Duration) {
	if ls.outstanding > 0 || bound <= r.now {
		return
	}
	ls.queue, ls.scan = ls.queue[:0], 0
	for _, w := range r.ingress.workers {
		l := &w.lane
		switch {
		case w.pass != nil && w.pass.End < bound:
			l.start, l.pending = w.pass.End, true
		case w.pass == nil && w.woken && !w.eng.Idle():
			l.start, l.pending = r.now, false
		default:
			continue
		}
		l.w, l.observed = w, r.o.Observer != nil
		ls.queue = append(ls.queue, l)
	}
	if len(ls.queue) < minLanes {
		for _, l := range ls.queue {
			l.pending = false
		}
		ls.queue = ls.queue[:0]
		return
	}
	// The heap's order: by the instant each stretch starts, then by worker.
	slices.SortFunc(ls.queue, func(a, b *lane) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.w.serial, b.w.serial))
	})
	for _, l := range ls.queue {
		l.arm(bound)
		ls.outstanding++
		r.laned++
	}
	for _, l := range ls.queue {
		ls.jobs <- l
	}
}

// wait returns once l has been computed, computing unclaimed lanes (l first, if it is) meanwhile.
func (ls *lanes) wait(l *lane) {
	for !l.finished.Load() {
		for ls.scan < len(ls.queue) && ls.queue[ls.scan].claimed.Load() {
			ls.scan++
		}
		if ls.scan == len(ls.queue) {
			break
		}
		if o := ls.queue[ls.scan]; o.claim() {
			o.compute(ls.r)
		}
	}
	l.done.Wait()
}

// close waits for every lane still out (a run that stopped early leaves some) and stops the helpers.
func (ls *lanes) close() {
	for _, l := range ls.queue {
		if l.active {
			ls.wait(l)
		}
	}
	close(ls.jobs)
	ls.helpers.Wait()
}

// lane is one worker's stretch of a window: what advance handed over, in order, with copies of what the
// engine reuses (the last pass, which ends past the window, is the engine's own until its next Step).
type lane struct {
	w            *worker
	start, bound time.Duration
	active       bool // armed and not yet applied
	observed     bool // copy the batches too: an observer reads them
	pending      bool // the stretch begins by delivering w's pass in flight: first, check
	claimed      atomic.Bool
	finished     atomic.Bool
	done         sync.WaitGroup

	first engine.Pass
	check error
	items []laneItem

	// Arenas for the copies, reused window after window.
	ranks   []engine.RankPass
	scheds  []sched.Pass
	seqs    []timing.Seq
	adm     []sched.Admission
	ids     []uint64
	evs     []kvcache.Event
	blocks  []tokens.Block
	outs    []sched.Output
	toks    []uint32
	ends    []time.Duration
	samples []sched.Sample
	emitted []engine.Emitted
}

type laneItemKind uint8

const (
	coastItem laneItemKind = iota
	passItem
	begunItem
)

// laneItem is one call of advance's sink.
type laneItem struct {
	kind  laneItemKind
	start time.Duration   // coastDone
	run   engine.Run      // coastDone
	pass  engine.Pass     // passDone: a copy
	last  *engine.Pass    // passBegun: the engine's
	m     []sched.Metrics // the observer's (the engine makes a new slice each time)
	check error           // passDone
}

// arm readies l for a window ending at bound.
func (l *lane) arm(bound time.Duration) {
	l.bound, l.active, l.check = bound, true, nil
	clear(l.items) // let go of the last window's metrics
	l.items = l.items[:0]
	l.ranks, l.scheds, l.seqs, l.adm, l.ids = l.ranks[:0], l.scheds[:0], l.seqs[:0], l.adm[:0], l.ids[:0]
	l.evs, l.blocks, l.outs, l.toks, l.ends, l.samples, l.emitted = l.evs[:0], l.blocks[:0], l.outs[:0], l.toks[:0], l.ends[:0], l.samples[:0], l.emitted[:0]
	l.finished.Store(false)
	l.done.Add(1)
	l.claimed.Store(false) // last: a helper holding a stale pointer to l may claim it from here on
}

func (l *lane) claim() bool { return l.claimed.CompareAndSwap(false, true) }

// compute runs the stretch; only the goroutine that claimed l calls it.
func (l *lane) compute(r *runner) {
	defer l.done.Done()
	defer l.finished.Store(true)
	w := l.w
	if l.pending {
		l.copyPass(&l.first, w.pass, l.observed)
		if r.o.CheckInvariants {
			l.check = w.eng.CheckInvariants()
		}
		if l.check != nil || w.eng.Idle() {
			return
		}
	}
	r.advance(w, l.start, l.bound, true, l) // its only error is a check's, which the items keep
}

func (l *lane) coastDone(w *worker, start time.Duration, run *engine.Run, m []sched.Metrics) {
	l.items = append(l.items, laneItem{kind: coastItem, start: start, m: m,
		run: engine.Run{Ends: keep(&l.ends, run.Ends), Samples: keep(&l.samples, run.Samples),
			Events: l.keepEvents(run.Events), Emitted: keep(&l.emitted, run.Emitted)}})
}

// keepEvents copies KV events, their blocks and hashes too, to l's arenas.
func (l *lane) keepEvents(evs []kvcache.Event) []kvcache.Event {
	from := len(l.evs)
	for _, ev := range evs {
		ev.Blocks, ev.Hashes = keep(&l.blocks, ev.Blocks), keep(&l.ids, ev.Hashes)
		l.evs = append(l.evs, ev)
	}
	return l.evs[from:len(l.evs):len(l.evs)]
}

func (l *lane) passDone(w *worker, pass *engine.Pass, m []sched.Metrics, check error) error {
	l.items = append(l.items, laneItem{kind: passItem, m: m, check: check})
	l.copyPass(&l.items[len(l.items)-1].pass, pass, l.observed)
	return check
}

func (l *lane) passBegun(w *worker, pass *engine.Pass, m []sched.Metrics) {
	l.items = append(l.items, laneItem{kind: begunItem, last: pass, m: m})
}

// replay applies w's lane: the rest of its stretch, after the pass in flight that passEnd delivered.
func (r *runner) replay(w *worker) error {
	l := &w.lane
	r.lanes.wait(l)
	l.active = false
	r.lanes.outstanding--
	for i := range l.items {
		it := &l.items[i]
		switch it.kind {
		case coastItem:
			r.coastDone(w, it.start, &it.run, it.m)
		case passItem:
			if err := r.passDone(w, &it.pass, it.m, it.check); err != nil {
				return err
			}
		case begunItem:
			r.passBegun(w, it.last, it.m)
		}
	}
	return nil
}

// copyPass copies p into dst, on l's arenas; the batches only for an observer (nothing else reads them
// after the timing model has).
func (l *lane) copyPass(dst, p *engine.Pass, batches bool) {
	*dst = engine.Pass{Start: p.Start, End: p.End}
	from := len(l.ranks)
	for _, rp := range p.Ranks {
		sp := sched.Pass{
			Batch:     rp.Batch,
			Admitted:  keep(&l.adm, rp.Admitted),
			Preempted: keep(&l.ids, rp.Preempted),
			FPM:       rp.FPM,
		}
		sp.Batch.Seqs = nil // the engine's, reused by its next pass: copied below if kept
		if batches {
			sp.Batch.Seqs = keep(&l.seqs, rp.Batch.Seqs)
		}
		sp.Events = l.keepEvents(rp.Events)
		outs := len(l.outs)
		for _, o := range rp.Outputs {
			o.Tokens = keep(&l.toks, o.Tokens)
			l.outs = append(l.outs, o)
		}
		sp.Outputs = l.outs[outs:len(l.outs):len(l.outs)]
		l.scheds = append(l.scheds, sp)
		// A pointer into the arena stays valid when it grows: the old array keeps what was copied.
		l.ranks = append(l.ranks, engine.RankPass{Pass: &l.scheds[len(l.scheds)-1], Rank: rp.Rank, Cost: rp.Cost})
	}
	dst.Ranks = l.ranks[from:len(l.ranks):len(l.ranks)]
}

// keep appends src to the arena and returns the copy, capped so that nothing appends over it.
func keep[T any](arena *[]T, src []T) []T {
	if src == nil {
		return nil
	}
	n := len(*arena)
	*arena = append(*arena, src...)
	return (*arena)[n:len(*arena):len(*arena)]
}
