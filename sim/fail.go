package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
)

// Failure kills a worker at a simulated time (fault injection). The worker loses everything: its passes
// in flight, its requests, its KV cache; its router forgets its blocks and sends it nothing while it is
// down. After Duration it comes back empty; a Duration of 0 keeps it down for good.
type Failure struct {
	// Worker is the worker's number, as the per-request records number them: its index among the
	// aggregated workers, or the prefill workers' indices followed by the decode workers'.
	Worker   int
	At       time.Duration
	Duration time.Duration
}

func (f Failure) String() string {
	s := strconv.Itoa(f.Worker) + "@" + f.At.String()
	if f.Duration > 0 {
		s += ":" + f.Duration.String()
	}
	return s
}

// ParseFailure parses ID@TIME[:DURATION], TIME and DURATION each a Go duration ("90s", "1m30s",
// "250ms") or a number of seconds ("90", "0.25").
func ParseFailure(s string) (Failure, error) {
	bad := func(why string) (Failure, error) {
		return Failure{}, fmt.Errorf("fail-worker %q: %s (want ID@TIME[:DURATION], e.g. 1@30s:10s)", s, why)
	}
	id, rest, ok := strings.Cut(s, "@")
	if !ok {
		return bad("no @")
	}
	w, err := strconv.Atoi(id)
	if err != nil || w < 0 {
		return bad("worker " + strconv.Quote(id) + " is not a worker number")
	}
	at, dur, hasDur := strings.Cut(rest, ":")
	f := Failure{Worker: w}
	if f.At, err = ParseTime(at); err != nil {
		return bad("time: " + err.Error())
	}
	if hasDur {
		if f.Duration, err = ParseTime(dur); err != nil {
			return bad("duration: " + err.Error())
		}
		if f.Duration == 0 {
			return bad("duration 0 (leave it out to keep the worker down)")
		}
	}
	return f, nil
}

// ParseTime parses a simulated time given on the command line: a non-negative Go duration or number of
// seconds.
func ParseTime(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return d, nil
	}
	sec, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(sec) || sec < 0 || sec > float64(math.MaxInt64)/1e9 {
		return 0, fmt.Errorf("%q is not a duration (90s, 1m30s, 250ms) or seconds (90, 0.25)", s)
	}
	return time.Duration(math.Round(sec * 1e9)), nil
}

// OnFailure is what becomes of the requests a failed worker held, waiting or running.
type OnFailure uint8

const (
	// Retry starts them over: each is routed again (to a live worker) and prefills again; its arrival
	// stays, so its TTFT and E2E include the lost work.
	Retry OnFailure = iota
	// Fail ends them as failed.
	Fail
)

// ParseOnFailure parses "retry" or "fail".
func ParseOnFailure(s string) (OnFailure, error) {
	switch s {
	case "retry", "":
		return Retry, nil
	case "fail":
		return Fail, nil
	}
	return 0, fmt.Errorf("on-worker-failure %q: want retry or fail", s)
}

func (m OnFailure) String() string { return [...]string{"retry", "fail"}[m] }

// scheduleFailures checks the failures against the workers and puts them on the timeline.
func (r *runner) scheduleFailures() error {
	if len(r.o.Failures) == 0 {
		return nil
	}
	if r.planner != nil {
		return fmt.Errorf("fail-worker: not supported with a planner (it starts and stops workers itself)")
	}
	var numbered []*worker // the workers by number: the ingress pool's, then the decode pool's
	for _, p := range r.pools {
		numbered = append(numbered, p.workers...)
	}
	fs := slices.Clone(r.o.Failures)
	slices.SortStableFunc(fs, func(a, b Failure) int { return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.At, b.At)) })
	for i, f := range fs {
		if f.Worker >= len(numbered) {
			return fmt.Errorf("fail-worker %v: there are %d workers (0 to %d)", f, len(numbered), len(numbered)-1)
		}
		if i > 0 && fs[i-1].Worker == f.Worker && (fs[i-1].Duration == 0 || fs[i-1].At+fs[i-1].Duration > f.At) {
			return fmt.Errorf("fail-worker %v: worker %d is still down from %v", f, f.Worker, fs[i-1])
		}
	}
	for i, f := range r.o.Failures { // the order given breaks ties between workers failing together
		w := numbered[f.Worker]
		r.timeline.push(event{at: f.At, phase: phaseWorkerDown, key: uint64(i), w: w})
		if f.Duration > 0 {
			w.returns++
			r.timeline.push(event{at: f.At + f.Duration, phase: phaseWorkerUp, key: uint64(i), w: w})
		}
	}
	return nil
}

// workerDown kills w: its engine, passes and cache are gone; its requests are retried or fail.
func (r *runner) workerDown(w *worker, f Failure) error {
	p := w.pool
	r.failures++
	w.state = failed
	w.epoch++ // its pass in flight and its delayed KV events are void
	w.pass = nil
	for rank := range w.eng.DPSize() {
		p.router.RemoveTarget(router.Target{Worker: w.id, Rank: rank})
	}
	// Its views go with its old engine: nothing to close.
	w.views = nil
	eo := p.eng
	eo.Seed = engine.RankSeed(engine.RankSeed(p.eng.Seed, int(w.serial)), int(w.epoch))
	e, err := engine.New(eo)
	if err != nil {
		return err
	}
	w.eng = e // empty until it comes back
	lost := w.pending
	w.pending = nil
	reason := fmt.Sprintf("worker %d failed at %v", f.Worker, r.now)
	for _, req := range r.reqs { // in id order: retries are routed in arrival order
		if req == nil || !r.heldBy(req, w) {
			continue
		}
		r.unhand(req, w, lost)
		if err := r.lose(req, reason); err != nil {
			return err
		}
	}
	if r.poolDead(p) {
		return r.failStranded(p)
	}
	return nil
}

// heldBy reports whether w holds some of req's state: the ingress worker until the decode worker has
// the request's KV, the decode worker from its choice on.
func (r *runner) heldBy(req *request, w *worker) bool {
	if w.pool == r.decode {
		return req.decode == w
	}
	return req.ingress == w && !req.onDecode
}

// unhand undoes the disaggregated handoff of req, one of whose workers (w) failed: the other side lets
// go of what it holds for req (a decode worker's reservation and the transfer; a prefill worker's KV).
// lost is the failed decode worker's queue of handoffs waiting for room.
func (r *runner) unhand(req *request, w *worker, lost []*request) {
	if r.decode == nil {
		return
	}
	if req.prefilled && req.decode == nil {
		r.decode.router.Finished(req.id) // queued in the decode router
	}
	if req.decode != nil {
		r.decode.router.Finished(req.id)
		waiting := slices.Contains(req.decode.pending, req) || slices.Contains(lost, req)
		if !waiting && !req.onDecode {
			// Reserved, its KV on the way.
			r.network.Cancel(r.now, req.id)
			r.scheduleTransfer()
			if req.decode != w {
				req.decode.eng.Unreserve(req.drank, req.id)
			}
		}
		if i := slices.Index(req.decode.pending, req); i >= 0 && req.decode != w {
			req.decode.pending = slices.Delete(req.decode.pending, i, i+1)
		}
	}
	if req.prefilled && req.ingress != w && !req.onDecode {
		req.ingress.eng.Release(req.rank, req.id) // the prompt's KV it kept for the transfer
		r.wake(req.ingress)
	}
}

// lose retries or fails a request its worker lost.
func (r *runner) lose(req *request, reason string) error {
	if r.o.OnFailure == Fail || r.poolDead(r.ingress) {
		r.col.Failed(int(req.id), r.now, reason)
		return r.requestEnded(req)
	}
	r.col.Retried(int(req.id), r.now)
	if req.sess.keep {
		req.sess.past[len(req.sess.past)-1].out = 0 // the lost output is generated again
	}
	*req = request{id: req.id, sess: req.sess, turn: req.turn, seq: req.seq, prompt: req.prompt, arrived: req.arrived}
	return r.route(req)
}

// workerUp brings a failed worker back, empty.
func (r *runner) workerUp(w *worker) error {
	w.returns--
	r.serve(w)
	return r.drain(w.pool)
}

// poolDead reports whether p has no worker serving and none coming back.
func (r *runner) poolDead(p *pool) bool {
	for _, w := range p.workers {
		if w.state == serving || w.returns > 0 {
			return false
		}
	}
	return true
}

// failStranded fails the requests that wait for a worker of p, which has none left.
func (r *runner) failStranded(p *pool) error {
	for _, req := range r.reqs {
		if req == nil {
			continue
		}
		stranded := p == r.ingress && req.routed && req.ingress == nil ||
			p == r.decode && req.prefilled && req.decode == nil
		if !stranded {
			continue
		}
		p.router.Finished(req.id)
		if p == r.decode {
			req.ingress.eng.Release(req.rank, req.id)
			r.wake(req.ingress)
		}
		r.col.Failed(int(req.id), r.now, "no "+p.name+" worker left")
		if err := r.requestEnded(req); err != nil {
			return err
		}
	}
	return nil
}
