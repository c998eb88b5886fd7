package sim

import (
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/sched"
)

// An Observer watches a run as it happens, for timelines (a Perfetto trace, an HTML report's charts).
// It sees every forward pass (a RunObserver, plain decode passes in runs) and every request's hand-offs;
// nothing it does changes the run, and a run with an observer gives the same results as one without.
//
// One worker's passes come in time order, but workers interleave out of order: lookahead delivers a
// worker's passes ahead of the event heap (see runner.lookahead). An observer that wants one time
// order across workers sorts what it kept.
type Observer interface {
	// Pass reports a forward pass as it starts. p and what it points to are valid only during the call.
	Pass(p *ObservedPass)
	// Routed reports a request handed to a worker's rank: to an aggregated or prefill worker by the
	// ingress router, or to the decode worker that reserves room for its KV.
	Routed(at time.Duration, id uint64, pool string, worker uint64, rank int)
	// Transferred reports a disaggregated request's KV transfer, from the decode worker's reservation
	// to the KV's arrival there.
	Transferred(id uint64, start, end time.Duration)
}

// A RunObserver is an Observer that can also be shown a worker's plain decode passes as one run
// (engine.Coast), instead of pass by pass: a run observed by one keeps coasting them, and runs nearly as
// fast as an unobserved one (whose coasts also cross KV block boundaries, changing the worker's state).
type RunObserver interface {
	Observer
	// Coasted reports plain decode passes, back to back, as they are applied. c and what it points to
	// are valid only during the call.
	Coasted(c *ObservedRun)
}

// ObservedRun is a worker's plain decode passes back to back: in each, every running request computes
// its next token and nothing else happens (nothing waits, is admitted, preempted or finishes, and no KV
// block is allocated or freed), so the worker's state after each pass is the same. Shown pass by pass,
// each would be an ObservedPass with these Metrics and Tokens output tokens.
type ObservedRun struct {
	Pool    string
	Worker  uint64
	Start   time.Duration   // the first pass's start
	Ends    []time.Duration // each pass's end, the next one's start
	Tokens  int             // output tokens of each pass: one per running request
	Metrics []sched.Metrics // every rank's state once each pass was planned
}

// ObservedPass is one forward pass of one worker.
type ObservedPass struct {
	Pool       string
	Worker     uint64 // the worker's serial, unique over all pools, as in the per-request records
	Start, End time.Duration
	Ranks      []engine.RankPass // the ranks that did something
	Metrics    []sched.Metrics   // every rank's state once the pass was planned
}

// runObserver is o as a RunObserver, if it is one: Observers is one when each of its observers is.
func runObserver(o Observer) (RunObserver, bool) {
	if os, ok := o.(Observers); ok {
		for _, m := range os {
			if _, ok := runObserver(m); !ok {
				return nil, false
			}
		}
		return os, true
	}
	ro, ok := o.(RunObserver)
	return ro, ok
}

// Observers shows a run to each of its observers in turn.
type Observers []Observer

// Pass implements Observer.
func (os Observers) Pass(p *ObservedPass) {
	for _, o := range os {
		o.Pass(p)
	}
}

// Routed implements Observer.
func (os Observers) Routed(at time.Duration, id uint64, pool string, worker uint64, rank int) {
	for _, o := range os {
		o.Routed(at, id, pool, worker, rank)
	}
}

// Transferred implements Observer.
func (os Observers) Transferred(id uint64, start, end time.Duration) {
	for _, o := range os {
		o.Transferred(id, start, end)
	}
}

// Coasted implements RunObserver, for Observers whose observers all are RunObservers (the only ones that
// are shown runs).
func (os Observers) Coasted(c *ObservedRun) {
	for _, o := range os {
		o.(RunObserver).Coasted(c)
	}
}
