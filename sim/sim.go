package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/workload"
)

// Options configure a run.
type Options struct {
	Workers         int            // identical engines; at least 1
	Engine          engine.Options // each worker's engine
	Concurrency     int            // > 0: keep this many sessions in flight, ignoring arrival times
	ArrivalSpeedup  float64        // divides arrival times and inter-turn delays; <= 0 means 1
	CheckInvariants bool           // verify every engine's accounting after every pass (slow)
	// Progress, if set, is called with the number of requests that have ended so far.
	Progress func(ended int)
}

// Result is what a run produced.
type Result struct {
	Collector *report.Collector
	Summary   report.Summary
	Passes    int64             // forward passes across all workers
	End       time.Duration     // simulated time of the last event
	Metrics   [][]sched.Metrics // final state of each worker's ranks
}

type worker struct {
	eng  *engine.Engine
	busy bool
	pass *engine.Pass // in flight while busy
}

// session is a workload session being replayed.
type session struct {
	w       *workload.Session
	seq     uint64 // order the session was pulled in
	next    int    // index of the next turn to send
	history []uint32
	keep    bool // later turns continue this conversation: keep the prompt and output
}

type runner struct {
	o         Options
	src       workload.Source
	workers   []*worker
	events    eventHeap
	col       *report.Collector
	now       time.Duration
	speedup   float64
	pulled    uint64
	exhausted bool
	nextID    int
	route     int
	inflight  map[uint64]*session // by request id
	talkers   map[uint64]*session // in-flight requests whose output continues a conversation
	ended     int
	passes    int64
	prompt    []uint32
}

// Run replays src against o.Workers engines until every request has ended.
func Run(src workload.Source, o Options) (*Result, error) {
	if o.Workers < 1 {
		return nil, fmt.Errorf("workers %d: must be at least 1", o.Workers)
	}
	if o.Concurrency < 0 {
		return nil, fmt.Errorf("concurrency %d: must not be negative", o.Concurrency)
	}
	r := &runner{o: o, src: src, col: report.NewCollector(), inflight: make(map[uint64]*session),
		talkers: make(map[uint64]*session), speedup: o.ArrivalSpeedup}
	if r.speedup <= 0 || math.IsNaN(r.speedup) {
		r.speedup = 1
	}
	for i := range o.Workers {
		eo := o.Engine
		eo.Seed = engine.RankSeed(o.Engine.Seed, i)
		e, err := engine.New(eo)
		if err != nil {
			return nil, err
		}
		r.workers = append(r.workers, &worker{eng: e})
	}
	if err := r.start(); err != nil {
		return nil, err
	}
	if err := r.loop(); err != nil {
		return nil, err
	}
	res := &Result{Collector: r.col, Passes: r.passes, End: r.now}
	res.Summary = r.col.Summary()
	var specSteps, specTokens int64
	for _, w := range r.workers {
		m := w.eng.Metrics()
		for _, rm := range m {
			res.Summary.Preemptions += int(rm.Preemptions)
			specSteps += rm.SpecSteps
			specTokens += rm.SpecTokens
		}
		res.Metrics = append(res.Metrics, m)
	}
	if specSteps > 0 {
		res.Summary.SpecMeanAcceptedLength = float64(specTokens) / float64(specSteps)
	}
	return res, nil
}

// start schedules the first arrivals: one session ahead in trace mode, Concurrency sessions at time 0.
func (r *runner) start() error {
	n := 1
	if r.o.Concurrency > 0 {
		n = r.o.Concurrency
	}
	for range n {
		if err := r.pullSession(); err != nil {
			return err
		}
	}
	return nil
}

// pullSession takes the next session from the workload and schedules its first turn.
func (r *runner) pullSession() error {
	if r.exhausted {
		return nil
	}
	w, err := r.src.Next()
	if errors.Is(err, io.EOF) {
		r.exhausted = true
		return nil
	}
	if err != nil {
		return err
	}
	if len(w.Turns) == 0 {
		return r.pullSession()
	}
	s := &session{w: w, seq: r.pulled}
	r.pulled++
	for _, t := range w.Turns[1:] {
		s.keep = s.keep || t.History
	}
	at := r.now
	if r.o.Concurrency == 0 {
		at = r.scale(w.Turns[0].At)
	}
	r.events.push(event{at: at, phase: phaseArrival, key: s.seq, sess: s})
	return nil
}

func (r *runner) scale(d time.Duration) time.Duration {
	if r.speedup == 1 {
		return d
	}
	return time.Duration(math.Round(float64(d) / r.speedup))
}

func (r *runner) loop() error {
	for {
		if len(r.events) == 0 || r.events[0].at > r.now {
			r.startPasses()
		}
		if len(r.events) == 0 {
			break
		}
		ev := r.events.pop()
		r.now = ev.at
		switch ev.phase {
		case phasePassEnd:
			if err := r.passEnd(ev.worker); err != nil {
				return err
			}
		case phaseArrival:
			if err := r.arrive(ev.sess); err != nil {
				return err
			}
		}
	}
	for i, w := range r.workers {
		if !w.eng.Idle() {
			m := w.eng.Metrics()
			return fmt.Errorf("simulation stalled at %v: worker %d still has requests it cannot schedule (%+v)", r.now, i, m)
		}
	}
	return nil
}

// startPasses starts a pass on every idle worker with work, in worker order.
func (r *runner) startPasses() {
	for i, w := range r.workers {
		if w.busy || w.eng.Idle() {
			continue
		}
		p := w.eng.Step(r.now)
		if p.Empty() {
			continue
		}
		r.passes++
		for _, rp := range p.Ranks {
			for _, a := range rp.Admitted {
				r.col.Admitted(int(a.ID), r.now, a.Cached)
			}
		}
		w.busy, w.pass = true, p
		r.events.push(event{at: p.End, phase: phasePassEnd, key: uint64(i), worker: i})
	}
}

// passEnd delivers a finished pass's tokens and completions.
func (r *runner) passEnd(i int) error {
	w := r.workers[i]
	if r.o.CheckInvariants {
		if err := w.eng.CheckInvariants(); err != nil {
			return fmt.Errorf("worker %d, pass ending at %v: %w", i, r.now, err)
		}
	}
	for _, rp := range w.pass.Ranks {
		for _, out := range rp.Outputs {
			if len(out.Tokens) > 0 {
				r.col.Tokens(int(out.ID), r.now, len(out.Tokens))
			}
			if len(r.talkers) > 0 {
				if s := r.talkers[out.ID]; s != nil {
					s.history = append(s.history, out.Tokens...)
				}
			}
			if out.Done {
				s := r.inflight[out.ID]
				delete(r.inflight, out.ID)
				delete(r.talkers, out.ID)
				r.col.Finished(int(out.ID), r.now)
				if err := r.turnEnded(s); err != nil {
					return err
				}
			}
		}
	}
	w.busy, w.pass = false, nil
	return nil
}

// arrive sends a session's next turn to a worker.
func (r *runner) arrive(s *session) error {
	if s.next == 0 && r.o.Concurrency == 0 {
		// Open loop: the following session arrives on its own schedule.
		if err := r.pullSession(); err != nil {
			return err
		}
	}
	t := &s.w.Turns[s.next]
	s.next++
	id := r.nextID
	r.nextID++

	r.prompt = r.prompt[:0]
	if t.History {
		r.prompt = append(r.prompt, s.history...)
	}
	r.prompt = t.AppendTokens(r.prompt)
	if s.keep {
		s.history = append(s.history[:0], r.prompt...)
	}

	slot := r.route
	r.route++
	wi := slot % len(r.workers)
	eng := r.workers[wi].eng
	rank := slot / len(r.workers) % eng.DPSize()
	r.col.Arrived(id, r.now, len(r.prompt), t.OutputLen, wi)
	req := sched.Request{ID: uint64(id), Prompt: r.prompt, MaxTokens: t.OutputLen, OutputTokens: t.OutputTokenIDs, Rank: rank}
	if err := eng.Enqueue(&req); err != nil {
		var rej *sched.RejectError
		if !errors.As(err, &rej) {
			return err
		}
		r.col.Rejected(id, r.now, rej.Reason)
		return r.turnEnded(s)
	}
	r.inflight[uint64(id)] = s
	if s.keep {
		r.talkers[uint64(id)] = s
	}
	return nil
}

// turnEnded schedules the session's next turn, or ends the session.
func (r *runner) turnEnded(s *session) error {
	r.ended++
	if r.o.Progress != nil {
		r.o.Progress(r.ended)
	}
	if s.next < len(s.w.Turns) {
		r.events.push(event{at: r.now + r.scale(s.w.Turns[s.next].Delay), phase: phaseArrival, key: s.seq, sess: s})
		return nil
	}
	if r.o.Concurrency > 0 {
		return r.pullSession()
	}
	return nil
}
