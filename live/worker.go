package live

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/metrics"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"
)

// Recorder receives one data-parallel rank's request metrics; *metrics.Rank implements it.
type Recorder interface {
	SetState(m sched.Metrics)
	Prompt(tokens, cached int)
	Generated(tokens int)
	Iteration(tokens int)
	QueueTime(d time.Duration)
	FirstToken(ttft time.Duration)
	InterToken(d time.Duration)
	Finished(r metrics.Request)
}

// Hooks connect a worker to the rest of the server. Each is called on the worker's own goroutine, never
// while the worker's lock is held, and must not keep the slices it is given.
type Hooks struct {
	// Events receives a rank's KV events when they become visible: at the start of a pass for vLLM and
	// TensorRT-LLM (the reference's default), at its end for SGLang.
	Events func(worker, rank int, evs []kvcache.Event)
	// Tokens receives every request's new output tokens when the pass that produced them ends; first
	// marks a request's first tokens.
	Tokens func(worker int, id uint64, toks []uint32, first bool)
	// Ended is called once for every request that leaves the worker: finished, failed or cancelled.
	Ended func(worker int, id uint64)
	// Recorder returns the metrics of one rank (nil: none).
	Recorder func(worker, rank int) Recorder
	// Prefilled is called, instead of Ended, when a prefill worker has computed a request's prompt: its
	// KV stays held on the worker until Release.
	Prefilled func(worker, rank int, id uint64)
	// PassEnded is called after every pass, once its outputs are published: capacity may have freed.
	PassEnded func(worker int)
}

// Worker runs one engine on the wall clock, as the reference's live scheduler does: it computes a pass
// at once, publishes what is visible when the pass starts, sleeps until the pass would end on the GPU,
// then publishes the outputs, the remaining KV events and the metrics. An idle worker blocks.
type Worker struct {
	id      int
	atEnd   bool // KV events become visible at the end of a pass
	prefill bool // a disaggregated prefill worker: requests end at Prefilled
	check   bool // verify the engine's accounting after every pass
	// countWaiting keeps waiting, the requests waiting in the engine, for a server that bounds them:
	// it reads every worker's count for every request, so it must not take every worker's lock.
	countWaiting bool
	waiting      atomic.Int64
	hooks        Hooks
	recs         []Recorder // by rank; nil entries record nothing
	t0           time.Time

	mu      sync.Mutex // guards eng, streams, started, closed and broken
	eng     *engine.Engine
	streams map[uint64]*Stream
	started bool
	closed  bool
	broken  error         // the first accounting violation a check found
	wake    chan struct{} // capacity 1: a request arrived or was cancelled
	quit    chan struct{}
	exited  chan struct{}

	// The current pass, copied out of the engine under the lock (Cancel and Enqueue may run while the
	// loop publishes it). Reused by every pass.
	admitted []rankAdmission
	outs     []output
	toks     []uint32
	evs      []rankEvents
	events   []kvcache.Event
	blocks   []tokens.Block
	hashes   []uint64
	state    []sched.Metrics // by rank, as last published
	iter     []int           // by rank: tokens the pass processed (prompts completed and tokens generated)
	gen      []int           // by rank: tokens the pass generated, counted once a pass
	end      time.Duration   // the last pass's end on the engine's clock
	busy     bool            // the last pass followed another without an idle wait
}

type rankAdmission struct {
	rank int
	sched.Admission
}

type output struct {
	rank       int
	id         uint64
	start, end int // in toks
	done       bool
	first      bool    // the request's first tokens (set when published)
	stream     *Stream // its stream when published; nil if it was cancelled while the pass ran
}

type rankEvents struct {
	rank       int
	start, end int // in events
}

// newWorker builds worker id of its pool (start runs it); global numbers it among all the server's workers, for its
// metrics. check makes it verify its engine's accounting after every pass; countWaiting makes it keep
// Waiting.
func newWorker(id, global int, eng *engine.Engine, role sched.Role, check, countWaiting bool, hooks Hooks, t0 time.Time) *Worker {
	w := &Worker{
		id:           id,
		eng:          eng,
		atEnd:        eng.EventsAtPassEnd(),
		prefill:      role == sched.Prefill,
		check:        check,
		countWaiting: countWaiting,
		hooks:        hooks,
		t0:           t0,
		streams:      make(map[uint64]*Stream),
		wake:         make(chan struct{}, 1),
		quit:         make(chan struct{}),
		exited:       make(chan struct{}),
	}
	w.recs = make([]Recorder, eng.DPSize())
	w.iter = make([]int, eng.DPSize())
	w.gen = make([]int, eng.DPSize())
	if hooks.Recorder != nil {
		for r := range w.recs {
			w.recs[r] = hooks.Recorder(global, r)
		}
	}
	return w
}

// start runs the worker's loop, unless it was closed.
func (w *Worker) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.started {
		return
	}
	w.started = true
	go w.run()
}

// Submit hands r to the engine; s receives its output. An error (a *sched.RejectError) means the engine
// can never serve r; errClosed that the worker is shutting down.
func (w *Worker) Submit(r *sched.Request, s *Stream) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	if err := w.eng.Enqueue(r); err != nil {
		w.mu.Unlock()
		return err
	}
	s.enqueued = time.Now()
	s.rank, s.maxTokens = r.Rank, r.MaxTokens
	w.streams[r.ID] = s
	w.noteWaiting()
	w.mu.Unlock()
	w.poke()
	return nil
}

// Cancel drops request id and frees its KV blocks; it reports whether the worker had it.
func (w *Worker) Cancel(id uint64) bool {
	w.mu.Lock()
	s := w.streams[id]
	if s == nil {
		w.mu.Unlock()
		return false
	}
	delete(w.streams, id)
	w.eng.Cancel(id)
	w.noteWaiting()
	w.mu.Unlock()
	// vLLM counts a request its client abandoned as finished, with reason abort.
	if s.rank < len(w.recs) && w.recs[s.rank] != nil {
		w.recs[s.rank].Finished(s.stats("abort", time.Now()))
	}
	s.fail(errCancelled)
	w.poke()
	if w.hooks.Ended != nil {
		w.hooks.Ended(w.id, id)
	}
	return true
}

// Reserve makes room on a decode worker for a request whose KV is about to arrive; see
// engine.Engine.Reserve.
func (w *Worker) Reserve(r *sched.Request) (missing int, ok bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, false, errClosed
	}
	defer w.noteWaiting()
	return w.eng.Reserve(r)
}

// Activate hands a reserved request whose KV has arrived to the engine; s receives its output.
func (w *Worker) Activate(rank int, id uint64, s *Stream) bool {
	w.mu.Lock()
	ok := !w.closed && w.eng.Activate(rank, id)
	if ok {
		s.enqueued, s.rank = time.Now(), rank
		w.streams[id] = s
	}
	w.noteWaiting()
	w.mu.Unlock()
	w.poke()
	return ok
}

// Unreserve drops a reservation.
func (w *Worker) Unreserve(rank int, id uint64) {
	w.mu.Lock()
	w.eng.Unreserve(rank, id)
	w.noteWaiting()
	w.mu.Unlock()
	w.poke()
}

// Release frees the KV a prefill worker held for a request after its transfer.
func (w *Worker) Release(rank int, id uint64) {
	w.mu.Lock()
	w.eng.Release(rank, id)
	w.noteWaiting()
	w.mu.Unlock()
	w.poke()
}

// State reports each rank's scheduler state.
func (w *Worker) State() []sched.Metrics {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.eng.Metrics()
}

// Waiting is the number of requests waiting in the worker's engine (kept only for a server with
// Options.MaxWaiting: 0 otherwise). It takes no lock.
func (w *Worker) Waiting() int { return int(w.waiting.Load()) }

// noteWaiting refreshes Waiting after the engine's queues may have changed; w.mu is held.
func (w *Worker) noteWaiting() {
	if !w.countWaiting {
		return
	}
	w.waiting.Store(int64(w.eng.Waiting()))
}

// InFlight is the number of requests the worker holds.
func (w *Worker) InFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.streams)
}

// checkInvariants returns the first violation a pass's check found, else checks the engine now.
func (w *Worker) checkInvariants() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return w.broken
	}
	return w.eng.CheckInvariants()
}

// close stops the loop after the current pass; requests still held fail with errClosed.
func (w *Worker) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.exited
		return
	}
	w.closed = true
	if !w.started {
		close(w.exited) // no loop to stop
	}
	w.mu.Unlock()
	close(w.quit)
	<-w.exited
	w.mu.Lock()
	ended := make([]uint64, 0, len(w.streams))
	for id, s := range w.streams {
		w.eng.Cancel(id)
		s.fail(errClosed)
		ended = append(ended, id)
	}
	clear(w.streams)
	w.noteWaiting()
	w.mu.Unlock()
	if w.hooks.Ended != nil {
		for _, id := range ended {
			w.hooks.Ended(w.id, id)
		}
	}
}

func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// now is the engine's clock: wall time since the server started, never behind the last pass's end (the
// engine's time is monotone even when publishing ran late).
func (w *Worker) now() time.Duration {
	wall := time.Since(w.t0)
	if w.busy && wall-w.end < maxLag {
		// Back-to-back passes: the GPU starts the next one when the last ends; the time spent publishing
		// is the host's, not the model's, so it does not delay the schedule.
		return w.end
	}
	return max(wall, w.end)
}

// maxLag is how far behind the wall clock a busy worker may fall (a stalled process, a slow host)
// before it stops catching up and resumes from the present.
const maxLag = 50 * time.Millisecond

func (w *Worker) run() {
	defer close(w.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	instant := false // the last pass took no time
	for {
		ran, timed := w.step()
		if !ran {
			w.busy = false
			// Nothing to do until a request arrives or leaves; the gauges show what a cancel, a
			// release or the last pass left.
			w.publishState()
			select {
			case <-w.wake:
				if instant {
					// Passes take no time (the last one did): woken by one request, the worker would run
					// its passes before the next request is submitted, each request nearly alone (about
					// six passes a request under load at infinite speedup). Requests being submitted now
					// go first and share them.
					runtime.Gosched()
				}
				continue
			case <-w.quit:
				return
			}
		}
		instant = !timed
		w.busy = true
		w.publishStart()
		// A pass that takes no time (at infinite speedup, every pass) has nothing to wait for: the
		// clock is read only when it may.
		var d time.Duration
		if timed {
			d = time.Until(w.t0.Add(w.end))
		}
		if d > 0 {
			timer.Reset(d)
		sleep:
			for {
				select {
				case <-timer.C:
					break sleep
				case <-w.wake: // a cancel may have freed blocks: the gauges say so now, not at the pass's end
					w.publishState()
				case <-w.quit:
					timer.Stop()
					return
				}
			}
		}
		w.publishEnd()
	}
}

// publishState hands every rank's scheduler state to its recorder. Only the loop calls it, so the
// recorders see the states in order.
func (w *Worker) publishState() {
	if w.hooks.Recorder == nil {
		return
	}
	w.mu.Lock()
	w.state = w.eng.AppendMetrics(w.state[:0])
	w.mu.Unlock()
	for r, rec := range w.recs {
		if rec != nil {
			rec.SetState(w.state[r])
		}
	}
}

// step plans the next pass and copies what the loop will publish; ran false means there is no pass to
// run, timed whether the pass takes time on the engine's clock.
func (w *Worker) step() (ran, timed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.eng.Idle() {
		return false, false
	}
	p := w.eng.Step(w.now())
	w.noteWaiting()
	if w.check && w.broken == nil {
		if err := w.eng.CheckInvariants(); err != nil {
			w.broken = fmt.Errorf("after the pass starting at %v: %w", p.Start, err)
		}
	}
	if p.Empty() {
		return false, false
	}
	w.end = p.End
	w.admitted, w.outs, w.toks, w.evs = w.admitted[:0], w.outs[:0], w.toks[:0], w.evs[:0]
	w.events, w.blocks, w.hashes = w.events[:0], w.blocks[:0], w.hashes[:0]
	for i := range p.Ranks {
		rp := &p.Ranks[i]
		for _, a := range rp.Admitted {
			w.admitted = append(w.admitted, rankAdmission{rp.Rank, a})
		}
		for _, o := range rp.Outputs {
			start := len(w.toks)
			w.toks = append(w.toks, o.Tokens...)
			w.outs = append(w.outs, output{rank: rp.Rank, id: o.ID, start: start, end: len(w.toks), done: o.Done})
		}
		if len(rp.Events) > 0 {
			start := len(w.events)
			w.copyEvents(rp.Events)
			w.evs = append(w.evs, rankEvents{rank: rp.Rank, start: start, end: len(w.events)})
		}
	}
	return true, p.End > p.Start
}

// copyEvents appends evs, whose slices the engine reuses, to the worker's buffers.
func (w *Worker) copyEvents(evs []kvcache.Event) {
	for _, e := range evs {
		if len(e.Blocks) > 0 {
			at := len(w.blocks)
			w.blocks = append(w.blocks, e.Blocks...)
			e.Blocks = w.blocks[at:len(w.blocks):len(w.blocks)]
		}
		if len(e.Hashes) > 0 {
			at := len(w.hashes)
			w.hashes = append(w.hashes, e.Hashes...)
			e.Hashes = w.hashes[at:len(w.hashes):len(w.hashes)]
		}
		w.events = append(w.events, e)
	}
}

// publishStart publishes what is visible as the pass starts: admissions, and KV events unless the
// backend publishes them at the end.
func (w *Worker) publishStart() {
	if len(w.admitted) > 0 { // most passes admit nothing: no lock, no clock (a read costs ~0.2 µs in a VM)
		now := time.Now()
		w.mu.Lock()
		for _, a := range w.admitted {
			s := w.streams[a.ID]
			if s == nil || s.admitted {
				continue
			}
			s.admitted, s.scheduled = true, now
			s.setCached(a.Cached)
			if rec := w.recs[a.rank]; rec != nil {
				rec.QueueTime(now.Sub(s.enqueued))
			}
		}
		w.mu.Unlock()
	}
	if !w.atEnd {
		w.publishEvents()
	}
}

func (w *Worker) publishEvents() {
	if w.hooks.Events == nil {
		return
	}
	for _, re := range w.evs {
		w.hooks.Events(w.id, re.rank, w.events[re.start:re.end])
	}
}

// publishEnd publishes the end of a pass in the reference's order: KV events (SGLang), then output
// tokens and request accounting. The metrics go first of these, so a client that has its last token
// finds its request counted.
func (w *Worker) publishEnd() {
	if w.atEnd {
		w.publishEvents()
	}
	w.publishState()
	now := time.Now()
	var ended []uint64
	var prefilled []rankID
	w.mu.Lock()
	clear(w.iter)
	clear(w.gen)
	for i := range w.outs {
		o := &w.outs[i]
		s := w.streams[o.id]
		o.stream = s
		if s == nil { // cancelled while the pass ran
			continue
		}
		o.first = s.last.IsZero() && o.end > o.start
		toks := w.toks[o.start:o.end]
		rec := w.recs[o.rank]
		if rec != nil && len(toks) > 0 {
			if o.first {
				rec.FirstToken(now.Sub(s.arrived))
				rec.Prompt(s.prompt, s.Cached())
				s.first = now
				w.iter[o.rank] += s.prompt
			} else {
				gap := now.Sub(s.last) / time.Duration(len(toks))
				for range toks {
					rec.InterToken(gap)
				}
			}
			w.gen[o.rank] += len(toks)
			w.iter[o.rank] += len(toks)
		}
		if len(toks) > 0 {
			s.last = now
			s.generated += len(toks)
		}
	}
	// The pass's tokens are counted before any of its requests is finished or handed its last tokens.
	for r, n := range w.iter {
		if n > 0 && w.recs[r] != nil {
			w.recs[r].Iteration(n)
			if w.gen[r] > 0 {
				w.recs[r].Generated(w.gen[r])
			}
		}
	}
	for i := range w.outs {
		o := &w.outs[i]
		s := o.stream
		if s == nil {
			continue
		}
		toks := w.toks[o.start:o.end]
		if o.done && w.prefill {
			delete(w.streams, o.id)
			prefilled = append(prefilled, rankID{o.rank, o.id})
			continue
		}
		if o.done {
			delete(w.streams, o.id)
			ended = append(ended, o.id)
			if rec := w.recs[o.rank]; rec != nil {
				rec.Finished(s.stats(s.reason(), now))
			}
		}
		s.push(toks, o.done)
	}
	w.mu.Unlock()
	if w.hooks.Tokens != nil {
		for _, o := range w.outs {
			w.hooks.Tokens(w.id, o.id, w.toks[o.start:o.end], o.first)
		}
	}
	if w.hooks.Ended != nil {
		for _, id := range ended {
			w.hooks.Ended(w.id, id)
		}
	}
	if w.hooks.Prefilled != nil {
		for _, p := range prefilled {
			w.hooks.Prefilled(w.id, p.rank, p.id)
		}
	}
	if w.hooks.PassEnded != nil {
		w.hooks.PassEnded(w.id)
	}
}

type rankID struct {
	rank int
	id   uint64
}

// stats is what the request's end tells the metrics, as it ends at now for reason.
func (s *Stream) stats(reason string, now time.Time) metrics.Request {
	r := metrics.Request{Reason: reason, E2E: now.Sub(s.arrived), PromptTokens: s.prompt, CachedTokens: s.Cached(),
		OutputTokens: s.generated, MaxTokens: s.maxTokens, N: 1}
	if !s.first.IsZero() {
		r.Prefill, r.Decode, r.Inference = s.first.Sub(s.scheduled), s.last.Sub(s.first), s.last.Sub(s.scheduled)
	}
	return r
}
