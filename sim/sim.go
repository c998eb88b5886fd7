package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/planner"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"
	"github.com/mocker-sim/mocker/workload"
)

// Options configure a run: aggregated workers, or prefill and decode pools.
type Options struct {
	Workers int            // aggregated workers (ignored when PrefillWorkers > 0)
	Engine  engine.Options // each aggregated worker's engine
	Router  router.Options // routes arrivals over the aggregated (or prefill) workers' ranks

	// Disaggregated serving: prefill workers compute prompts, then their KV moves to decode workers.
	PrefillWorkers, DecodeWorkers int
	PrefillEngine, DecodeEngine   engine.Options
	DecodeRouter                  router.Options
	Transfer                      disagg.Transfer

	// RouterEventsAtPassEnd makes routers see a vLLM worker's KV events when its pass ends rather than
	// when it starts (the reference's default; SGLang's are always seen at the end). RouterEventDelay
	// holds every event back this much longer, to study stale routing.
	RouterEventsAtPassEnd bool
	RouterEventDelay      time.Duration

	// FrontendLatency is the time between a request's arrival and its routing: the API server's request
	// parsing, tokenisation and hand-off to the engine. The request's arrival time stays the client's
	// send, so TTFT and E2E include it.
	FrontendLatency time.Duration
	// FrontendPerRequest and FrontendPerChunk, if either is set, put a single-threaded API-server process
	// between clients and engines (see frontend): it spends FrontendPerRequest on each arriving request
	// before its FrontendLatency, and FrontendPerChunk on each chunk of tokens a pass delivers before
	// the client sees it. Not with Failures.
	FrontendPerRequest, FrontendPerChunk time.Duration
	// ReplyHeader is how many tokens every reply opens with that its stream shows no text for
	// (model.Model.ReplyHeader: gpt-oss's 3): the report's TTFT, TTST, ITL and TPOT are a client's,
	// from the first token after them (report.Collector.SetHeader). The engines generate them all.
	ReplyHeader int

	// Failures kill workers at simulated times; OnFailure says what becomes of their requests.
	Failures  []Failure
	OnFailure OnFailure

	// Planner, if set, resizes the pools every adjustment interval.
	Planner *planner.Config

	Concurrency     int     // > 0: keep this many sessions in flight, ignoring arrival times
	ArrivalSpeedup  float64 // divides arrival times and inter-turn delays; <= 0 means 1
	CheckInvariants bool    // verify every engine's accounting after every pass (slow)
	// Threads is how many goroutines plan aggregated workers' passes at once between two routings (0:
	// runtime.GOMAXPROCS(0)). The results are the same, byte for byte, whatever it is.
	Threads int
	// Observer, if set, sees every pass and hand-off. Unless it is a RunObserver, it is shown plain decode
	// passes one by one, which is slower: they are no longer coasted.
	Observer Observer
	// Compact makes the collector keep of each ended request only what the summary and its percentiles
	// need (report.Collector.Forget), so that memory follows the requests in flight, not the length of the
	// run; Result.Collector then has no per-request records (Lifetimes, WriteRequestsJSONL) but those of
	// the requests in flight at the end; beyond a few thousand requests, the samples of its exact
	// percentiles go to a temporary file (report.Collector.Forget). Records, if set (with Compact only), receives every request's
	// line of WriteRequestsJSONL as it is forgotten, in id order, and the rest when the run ends; an
	// error writing them does not stop the run (Result.RecordsErr).
	Compact bool
	Records io.Writer
	// Progress, if set, is called with the number of requests that have ended so far.
	Progress func(ended int)
	// Finished, if set, is called as each request completes, with its TTFT (first false: it produced
	// no token) and E2E; returning false stops the run at once, and Run returns ErrStopped. A search
	// uses it to drop a candidate whose latency target can no longer be met.
	Finished func(ttft, e2e time.Duration, first bool) bool

	noLookahead bool // tests: every pass goes through the event heap
	noMirror    bool // tests: routers index every worker's KV events (see runner.mirror)
	// Tests: a run that goes past limit (simulated time) or maxPasses (passes) fails instead of running on,
	// so a livelock shows as an error; 0 is no limit. inspect, if set, runs after every delivered pass and
	// once per worker at the end.
	limit     time.Duration
	maxPasses int64
	inspect   func(r *runner, w *worker) error
	// Tests: heard, if set, is handed every KV event a router is handed (with the worker's epoch and the
	// simulated time), and routing, if set, every prompt the ingress router routes, before it does.
	heard   func(p *pool, t router.Target, epoch uint32, at time.Duration, ev kvcache.Event)
	routing func(r *runner, blocks []tokens.Block) error
}

// Result is what a run produced.
type Result struct {
	Collector  *report.Collector
	Summary    report.Summary
	Passes     int64         // forward passes across all workers
	End        time.Duration // simulated time of the last event
	Pools      []PoolResult
	Scaling    []ScalePoint // worker counts over time, when a planner ran
	Decisions  []string     // the planner's decisions, one line per tick
	RecordsErr error        // the first error writing Options.Records

	ahead   int64 // passes delivered ahead of the event heap (lookahead)
	coasted int64 // of those, plain decode passes (engine.Coast)
	crossed int64 // of those, passes with KV events (engine.Run.Blocks: across block boundaries)
	laned   int64 // workers' stretches planned on lanes (Threads)
}

// PoolResult is one pool's final state.
type PoolResult struct {
	Name    string
	Metrics [][]sched.Metrics // per worker that ever served, per rank
}

// ScalePoint is a pool's worker count (starting, ready or draining: holding GPUs) from At on.
type ScalePoint struct {
	At      time.Duration
	Pool    string
	Workers int
}

// session is a workload session being replayed.
type session struct {
	w     *workload.Session
	seq   uint64 // order the session was pulled in
	next  int    // index of the next turn to send
	keep  bool   // later turns continue this conversation: keep the prompt and output
	waits int    // requests the next turn waits on (Request.After) that have not ended
	// past is the conversation so far (keep), from its latest turn without history: each turn's request
	// and its output, from which the next turn's prompt is made again rather than held while the
	// session waits (sessions in flight come by the thousand, their histories by the thousand tokens).
	past []pastTurn
	// made is turn madeAt, the last one turn() made (workload.Session.Turn makes a synthetic conversation's
	// later turns anew at each call, and await and arrive both ask for the next).
	made   *workload.Request
	madeAt int
}

// turn returns the session's next turn (next), made once.
func (s *session) turn() *workload.Request {
	if s.made == nil || s.madeAt != s.next {
		s.made, s.madeAt = s.w.Turn(s.next), s.next
	}
	return s.made
}

// pastTurn is a turn of a conversation that has been sent: the conversation goes on with its prompt and
// then its output, out tokens of sched.OutputToken (the engines' output ids) so far.
type pastTurn struct {
	turn int // its index in the session (workload.Session.TurnAt makes it again, held by none)
	id   uint64
	out  int
}

// PromptLen and AppendSequence make the request's prompt (sched.PromptSource), so that an engine can let
// a waiting request hold none: a conversation's turn is its session's past turns, each one's prompt and
// output, then its own tokens (declaring its images only when it carries no history, as its first
// making did); any other request is the workload's.
func (req *request) PromptLen() int { return req.prompt }

func (req *request) AppendSequence(seq *tokens.Sequence) {
	t := req.turn
	if !req.sess.keep || !t.History { // a turn without history starts its conversation: the workload's prompt
		t.AppendSequence(seq)
		return
	}
	var buf [256]uint32
	var made workload.Request
	s := req.sess
	for _, p := range s.past[:len(s.past)-1] { // the last is this turn
		pt := s.w.TurnAt(p.turn, &made)
		pt.AppendPromptTo(seq)
		for i := 0; i < p.out; i += len(buf) {
			k := min(len(buf), p.out-i)
			for j := range k {
				buf[j] = sched.OutputToken(p.id, i+j, pt.OutputTokenIDs)
			}
			seq.Append(buf[:k]...)
		}
	}
	t.AppendPromptTo(seq)
}

// produced records n more output tokens of the session's latest turn, in flight.
func (s *session) produced(n int) { s.past[len(s.past)-1].out += n }

// request is a request in flight.
type request struct {
	id      uint64
	sess    *session
	turn    *workload.Request
	seq     *tokens.Sequence // the prompt, hashed at the engines' block size; nil when not needed (see routeSeq)
	prompt  int              // prompt tokens
	ingress *worker          // where its prompt is (being) computed
	rank    int
	decode  *worker // disaggregated: where it decodes
	drank   int

	arrived, transferFrom, activated time.Duration
	cached                           int // prompt tokens found cached at the first admission
	admitted, gotFirst               bool
	routed                           bool // past the frontend: routed, or queued by the router
	prefilled                        bool // disaggregated: the prefill worker holds its prompt's KV for the handoff
	onDecode                         bool // disaggregated: the decode worker has its KV
}

type runner struct {
	o        Options
	src      workload.Source
	col      *report.Collector
	timeline timeline
	now      time.Duration
	end      time.Duration // latest pass end delivered (lookahead delivers passes out of time order)
	speedup  float64

	pulled    uint64
	exhausted bool
	nextID    uint64
	ended     int
	passes    int64
	ahead     int64
	coasted   int64
	crossed   int64
	laned     int64
	runObs    RunObserver // Options.Observer, if it is shown coasted passes as runs
	coasting  []int       // coastDone's requests, reused
	lanes     *lanes      // nil: one thread

	reqs    []*request         // by id from reqBase on (ids are dense); nil once ended
	reqBase uint64             // the id of reqs[0]: the earliest request in flight, or one after it
	live    int                // requests in flight
	turnsOn int                // requests in flight whose end sends another: a later turn of its session, or one that waits on it
	spare   []*tokens.Sequence // sequences of finished requests, for reuse
	pools   []*pool
	woken   []*worker // workers that may have a pass to start
	ingress *pool     // where arrivals go: the aggregated or the prefill pool
	decode  *pool     // nil unless disaggregated
	serial  uint64

	network     *disagg.Network
	transferGen uint64
	doneIDs     []uint64
	stages      stages
	front       frontend

	planner  *plannerState
	failures int  // workers failed so far
	lora     bool // some request named a LoRA adapter

	// Agentic traces: the end of each awaited request that has ended, and the sessions whose next
	// turn waits on one that has not.
	ends    map[uint64]time.Duration
	waiters map[uint64][]*session
	waiting int // sessions whose next turn waits
}

// ErrStopped is Run's error when Options.Finished stopped the run.
var ErrStopped = errors.New("sim: stopped by Options.Finished")

// Run replays src until every request has ended. A compact run's Result.Collector holds a temporary file
// once the run is long enough: close it (report.Collector.Close) when done with the result.
func Run(src workload.Source, o Options) (_ *Result, err error) {
	if o.Concurrency < 0 {
		return nil, fmt.Errorf("concurrency %d: must not be negative", o.Concurrency)
	}
	r := &runner{o: o, src: src, col: report.NewCollector(), speedup: o.ArrivalSpeedup,
		front: frontend{perRequest: o.FrontendPerRequest, perChunk: o.FrontendPerChunk}}
	defer func() {
		if err != nil {
			r.col.Close() // its temporary file, if any
		}
	}()
	if o.Records != nil && !o.Compact {
		return nil, errors.New("per-request records are streamed only by a compact run")
	}
	if o.Compact {
		r.col.Forget(o.Records)
	}
	if o.ReplyHeader < 0 {
		return nil, fmt.Errorf("reply header %d: must not be negative", o.ReplyHeader)
	}
	r.col.SetHeader(o.ReplyHeader)
	r.stages = newStages(r.col)
	if r.front.on() && len(o.Failures) > 0 {
		return nil, errors.New("a frontend process cost (per request or per chunk) is not modelled with worker failures")
	}
	if r.speedup <= 0 || math.IsNaN(r.speedup) {
		r.speedup = 1
	}
	if o.Observer != nil {
		r.runObs, _ = runObserver(o.Observer)
	}
	if err := r.buildPools(); err != nil {
		return nil, err
	}
	if o.Planner != nil {
		if err := r.startPlanner(); err != nil {
			return nil, err
		}
	}
	if err := r.scheduleFailures(); err != nil {
		return nil, err
	}
	if err := r.start(); err != nil {
		return nil, err
	}
	if r.lanes = newLanes(r); r.lanes != nil {
		defer r.lanes.close()
	}
	if err := r.loop(); err != nil {
		return nil, err
	}
	if r.waiting > 0 {
		return nil, fmt.Errorf("%d sessions still wait on requests that never ended", r.waiting)
	}
	res := r.result()
	if err := r.col.Err(); err != nil {
		return nil, err
	}
	res.RecordsErr = r.col.Flush()
	return res, nil
}

// buildPools creates the pools and their routers.
func (r *runner) buildPools() error {
	if r.o.PrefillWorkers > 0 || r.o.DecodeWorkers > 0 {
		if r.o.PrefillWorkers < 1 || r.o.DecodeWorkers < 1 {
			return fmt.Errorf("prefill-workers %d and decode-workers %d: disaggregated serving needs at least one of each", r.o.PrefillWorkers, r.o.DecodeWorkers)
		}
		pe, de := r.o.PrefillEngine, r.o.DecodeEngine
		pe.Role, de.Role = sched.Prefill, sched.Decode
		p, err := r.newPool("prefill", pe, r.o.Router, r.o.PrefillWorkers)
		if err != nil {
			return err
		}
		d, err := r.newPool("decode", de, r.o.DecodeRouter, r.o.DecodeWorkers)
		if err != nil {
			return err
		}
		r.ingress, r.decode = p, d
		r.network = disagg.NewNetwork(r.o.Transfer.GBps)
		return nil
	}
	if r.o.Workers < 1 {
		return fmt.Errorf("workers %d: must be at least 1", r.o.Workers)
	}
	a, err := r.newPool("agg", r.o.Engine, r.o.Router, r.o.Workers)
	if err != nil {
		return err
	}
	r.ingress = a
	return nil
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
	if w.Len() == 0 {
		return r.pullSession()
	}
	s := &session{w: w, seq: r.pulled, keep: w.History()}
	r.pulled++
	if w.Turns[0].After != nil {
		// It has no arrival time of its own: it waits, and the next session is due now.
		if err := r.await(s, 0); err != nil {
			return err
		}
		return r.pullSession()
	}
	at := r.now
	if r.o.Concurrency == 0 {
		at = r.scale(w.Turns[0].At)
	}
	r.timeline.push(event{at: at, phase: phaseArrival, key: s.seq, sess: s})
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
		if len(r.woken) > 0 && (r.timeline.len() == 0 || r.timeline.next() > r.now) {
			if err := r.startPasses(); err != nil {
				return err
			}
		}
		if r.timeline.len() == 0 {
			break
		}
		ev := r.timeline.pop()
		r.now = ev.at
		if err := r.overLimit(); err != nil {
			return err
		}
		var err error
		switch ev.phase {
		case phasePassEnd:
			if ev.epoch == ev.w.epoch {
				err = r.passEnd(ev.w)
			}
		case phaseWorkerDown:
			err = r.workerDown(ev.w, r.o.Failures[ev.key])
		case phaseWorkerUp:
			err = r.workerUp(ev.w)
		case phaseWorkerReady:
			err = r.workerReady(ev.w)
		case phaseTransfer:
			if ev.key == r.transferGen {
				err = r.transfersDone()
			}
		case phaseClientEnd:
			err = r.clientEnd(r.req(ev.key))
		case phaseRoute:
			err = r.route(r.req(ev.key))
		case phaseArrival:
			err = r.arrive(ev.sess)
		case phaseKVEvents:
			r.applyKV(ev.kv.pool, ev.kv.target, ev.kv.epoch, ev.kv.events, ev.at)
		case phasePlanner:
			err = r.plannerTick()
		}
		if err != nil {
			return err
		}
	}
	for _, p := range r.pools {
		for _, w := range p.workers {
			if !w.eng.Idle() {
				return fmt.Errorf("simulation stalled at %v: %s worker %d still has requests it cannot schedule (%+v)", r.now, p.name, w.id, w.eng.Metrics())
			}
		}
	}
	if r.inFlight() > 0 {
		return fmt.Errorf("simulation stalled at %v: %d requests never finished (routers queue %d)", r.now, r.inFlight(), r.ingress.router.Queued())
	}
	if r.o.inspect != nil {
		for _, p := range r.pools {
			for _, w := range p.workers {
				if err := r.o.inspect(r, w); err != nil {
					return fmt.Errorf("at the end: %w", err)
				}
			}
		}
	}
	return nil
}

// overLimit reports a run past its test limits.
func (r *runner) overLimit() error {
	if r.now > horizon {
		return fmt.Errorf("simulated time passed a century (%.0f years, after %d passes, %d requests in flight): passes or arrivals this long (--speedup-ratio, --decode-speedup-ratio, --arrival-speedup-ratio, --prefill-ms, --decode-ms, --host-overhead-us) describe no deployment",
			r.now.Hours()/(365*24), r.passes, r.inFlight())
	}
	if r.o.limit > 0 && r.now > r.o.limit || r.o.maxPasses > 0 && r.passes > r.o.maxPasses {
		return fmt.Errorf("simulation ran past its limit (%v, %d passes): at %v after %d passes, %d requests in flight",
			r.o.limit, r.o.maxPasses, r.now, r.passes, r.inFlight())
	}
	return nil
}

// horizon is where a run stops, with an error: a century of simulated time, far inside a
// time.Duration (292 years) for every pass priced at most timing.MaxPass.
const horizon = 100 * 365 * 24 * time.Hour

func (r *runner) inFlight() int { return r.live }

// req returns the request in flight with id, or nil.
func (r *runner) req(id uint64) *request {
	if id >= r.reqBase && id-r.reqBase < uint64(len(r.reqs)) {
		return r.reqs[id-r.reqBase]
	}
	return nil
}

// arrive sends a session's next turn to the ingress pool's router, at once or through the frontend.
func (r *runner) arrive(s *session) error {
	if s.next == 0 && r.o.Concurrency == 0 && s.w.Turns[0].After == nil {
		// Open loop: the following session arrives on its own schedule.
		if err := r.pullSession(); err != nil {
			return err
		}
	}
	t, turn := s.turn(), s.next
	s.next++
	if s.next < s.w.Len() || t.Awaited {
		r.turnsOn++
	}
	id := r.nextID
	r.nextID++

	req := &request{id: id, sess: s, turn: t, arrived: r.now, prompt: t.PromptLen()}
	if s.keep {
		// A conversation: the prompt is the history so far plus the new turn, and it is the next history.
		if !t.History {
			s.past = s.past[:0]
		}
		var made workload.Request
		for _, p := range s.past {
			req.prompt += s.w.TurnAt(p.turn, &made).PromptLen() + p.out
		}
		s.past = append(s.past, pastTurn{turn: turn, id: id})
	}
	// The ended requests before the earliest in flight leave the window, so that it follows the requests in
	// flight rather than the length of the run.
	k := 0
	for k < len(r.reqs) && r.reqs[k] == nil {
		k++
	}
	r.reqs, r.reqBase = r.reqs[k:], r.reqBase+uint64(k)
	r.reqs = append(r.reqs, req) // ids are dense: id == reqBase+len(r.reqs)
	r.live++
	r.col.Arrived(int(id), r.now, req.prompt, t.OutputLen)
	r.col.Identify(int(id), t.Name(), t.Line)

	if r.front.on() {
		at := r.front.take(r.now, r.front.perRequest) + r.o.FrontendLatency
		r.timeline.push(event{at: at, phase: phaseRoute, key: id})
		return nil
	}
	if r.o.FrontendLatency > 0 {
		// Routed when it leaves the frontend; requests leaving together go in arrival (id) order.
		r.timeline.push(event{at: r.now + r.o.FrontendLatency, phase: phaseRoute, key: id})
		return nil
	}
	return r.route(req)
}

// route hands a request to the ingress pool's router, which dispatches it or queues it.
func (r *runner) route(req *request) error {
	req.routed = true
	if len(r.o.Failures) > 0 && r.poolDead(r.ingress) {
		r.col.Failed(int(req.id), r.now, "no "+r.ingress.name+" worker left")
		return r.requestEnded(req)
	}
	seq := r.routeSeq(req)
	if r.o.routing != nil {
		if err := r.o.routing(r, seq.Blocks()); err != nil {
			return fmt.Errorf("request %d at %v: %w", req.id, r.now, err)
		}
	}
	d, queued := r.ingress.router.Route(router.Request{ID: req.id, Blocks: seq.Blocks(), PromptTokens: seq.Len()})
	if queued {
		return nil
	}
	return r.dispatch(req, d)
}

// routeSeq returns the request's prompt hashed into blocks, making it if it is not held. A request that
// is not disaggregated holds its sequence only from routing to its dispatch: the engine makes the prompt
// again from the request when it admits it (see sched.Request.Source), so requests waiting by the
// thousand hold no prompts.
func (r *runner) routeSeq(req *request) *tokens.Sequence {
	if req.seq == nil {
		req.seq = r.newSeq(req.turn.LoRA)
		// Room for the output as well: an engine that takes the sequence (sched.Request.GiveSeq) appends
		// it there, where growing would copy the whole prompt.
		req.seq.Grow(req.turn.InputLen + req.turn.OutputLen)
		req.AppendSequence(req.seq)
	}
	return req.seq
}

// dropSeq lets go of a dispatched request's sequence when nothing will need it again.
func (r *runner) dropSeq(req *request) {
	if req.seq != nil && r.decode == nil {
		r.spare = append(r.spare, req.seq)
		req.seq = nil
	}
}

// newSeq returns an empty sequence at the engines' block size, hashed with the seed of adapter lora
// ("" for the base model), reusing a finished request's.
func (r *runner) newSeq(lora string) *tokens.Sequence {
	var s *tokens.Sequence
	if n := len(r.spare); n > 0 {
		s = r.spare[n-1]
		r.spare = r.spare[:n-1]
		s.Reset()
	} else {
		s = tokens.NewSequence(r.ingress.blockSize)
	}
	if lora != "" {
		s.SetSeed(tokens.LoRASeed(lora))
		r.lora = true
	}
	return s
}

// dispatch enqueues a routed request on its ingress worker.
func (r *runner) dispatch(req *request, d router.Decision) error {
	w := r.ingress.workers[d.Target.Worker]
	req.ingress, req.rank = w, d.Target.Rank
	maxTokens := req.turn.OutputLen
	if r.decode != nil {
		maxTokens = 1 // the prefill worker computes the prompt; the decode worker generates
	}
	sr := &sched.Request{ID: req.id, Seq: req.seq, MaxTokens: maxTokens, OutputTokens: req.turn.OutputTokenIDs, Rank: d.Target.Rank, LoRA: req.turn.LoRA,
		Images: req.turn.Images}
	if r.decode == nil {
		sr.Source = req
		sr.GiveSeq = true // dropSeq lets go of it: the scheduler may keep it rather than copy it
	}
	err := w.eng.Enqueue(sr)
	req.seq = sr.Seq // an empty one in its place if the scheduler took it
	r.dropSeq(req)
	if err != nil {
		var rej *sched.RejectError
		if !errors.As(err, &rej) {
			return err
		}
		r.ingress.router.Finished(req.id)
		r.col.Rejected(int(req.id), r.now, rej.Reason)
		return r.requestEnded(req)
	}
	r.col.Routed(int(req.id), w.serial)
	if r.o.Observer != nil {
		r.o.Observer.Routed(r.now, req.id, r.ingress.name, w.serial, d.Target.Rank)
	}
	r.wake(w)
	return nil
}

// drain dispatches what a pool's router releases from its queue.
func (r *runner) drain(p *pool) error {
	if p.router.Queued() == 0 {
		return nil
	}
	p.ready = p.router.Ready(p.ready[:0])
	for _, d := range p.ready {
		req := r.req(d.ID)
		if p == r.decode {
			if err := r.reserve(req, d); err != nil {
				return err
			}
			continue
		}
		if err := r.dispatch(req, d); err != nil {
			return err
		}
	}
	return nil
}

// requestEnded releases a finished (or rejected) request and moves its session on.
func (r *runner) requestEnded(req *request) error {
	r.reqs[req.id-r.reqBase] = nil
	r.live--
	if req.sess.next < req.sess.w.Len() || req.turn.Awaited {
		r.turnsOn--
	}
	if req.seq != nil {
		r.spare = append(r.spare, req.seq)
		req.seq = nil
	}
	if req.turn.Awaited {
		if err := r.awaitedEnded(req.turn); err != nil {
			return err
		}
	}
	return r.turnEnded(req.sess)
}

// turnEnded schedules the session's next turn, or ends the session.
func (r *runner) turnEnded(s *session) error {
	r.ended++
	if r.o.Progress != nil {
		r.o.Progress(r.ended)
	}
	if s.next < s.w.Len() {
		return r.await(s, r.now)
	}
	if r.o.Concurrency > 0 {
		return r.pullSession()
	}
	return nil
}

// await schedules the session's next turn Delay after from and the end of every request it waits
// on, or, if some have not ended, leaves it waiting on them. Waits are refused with a concurrency,
// whose sessions could all be waiting on ones it has not let in yet.
func (r *runner) await(s *session, from time.Duration) error {
	t := s.turn()
	if t.After != nil && r.o.Concurrency > 0 {
		return fmt.Errorf("request %s waits on others: a trace of dependent requests replays on its own times, not with a concurrency", t.Name())
	}
	for _, k := range t.After {
		if end, ok := r.ends[k]; ok {
			from = max(from, end)
			continue
		}
		if r.waiters == nil {
			r.waiters = map[uint64][]*session{}
		}
		r.waiters[k] = append(r.waiters[k], s)
		s.waits++
	}
	if s.waits > 0 {
		r.waiting++
		return nil
	}
	r.timeline.push(event{at: from + r.scale(t.Delay), phase: phaseArrival, key: s.seq, sess: s})
	return nil
}

// awaitedEnded records the end of a request others wait on and sends those it was the last wait of.
func (r *runner) awaitedEnded(t *workload.Request) error {
	if r.ends == nil {
		r.ends = map[uint64]time.Duration{}
	}
	r.ends[t.Key] = r.now
	for _, s := range r.waiters[t.Key] {
		if s.waits--; s.waits == 0 {
			r.waiting--
			if err := r.await(s, r.now); err != nil { // every wait has ended, the latest now
				return err
			}
		}
	}
	delete(r.waiters, t.Key)
	return nil
}

// result gathers the report.
func (r *runner) result() *Result {
	res := &Result{Collector: r.col, Passes: r.passes, End: max(r.now, r.end), ahead: r.ahead, coasted: r.coasted, crossed: r.crossed, laned: r.laned}
	res.Summary = r.col.Summary()
	res.Summary.WorkerFailures = r.failures
	res.Summary.LoRA = r.lora
	var specSteps, specTokens int64
	var queries, hits, cpuTokens, diskTokens int64
	tiers := &res.Summary.Tiers
	for _, p := range r.pools {
		tiers.On = tiers.On || p.eng.Tiers().Enabled()
		pr := PoolResult{Name: p.name}
		var ps report.PoolSummary
		ps.Name = p.name
		for _, w := range p.workers {
			m := w.eng.Metrics()
			pr.Metrics = append(pr.Metrics, m)
			for _, rm := range m {
				res.Summary.Preemptions += int(rm.Preemptions)
				specSteps += rm.SpecSteps
				specTokens += rm.SpecTokens
				ps.Preemptions += int(rm.Preemptions)
				ps.PrefixQueries += rm.PrefixQueries
				ps.PrefixHits += rm.PrefixHits
				queries += rm.PrefixQueries
				hits += rm.PrefixHits
				cpuTokens += rm.Tiers.CPUHits * int64(p.blockSize)
				diskTokens += rm.Tiers.DiskHits * int64(p.blockSize)
				tiers.OnboardedBlocks += rm.Tiers.CPUHits + rm.Tiers.DiskHits
				tiers.OffloadedBlocks += rm.Tiers.Offloaded
				tiers.OnboardTime += rm.Tiers.OnboardTime
				res.Summary.LoRALoads += rm.LoRALoads
			}
			enc := w.eng.EncoderStats()
			res.Summary.ImagesEncoded += enc.Images
			res.Summary.ImageTokensEncoded += enc.Tokens
			res.Summary.EncoderCacheHits += enc.CacheHits
			ps.Passes += w.passes
			ps.Busy += w.busy
		}
		ps.Workers = len(p.workers)
		res.Pools = append(res.Pools, pr)
		res.Summary.Pools = append(res.Summary.Pools, ps)
	}
	if tiers.On && queries > 0 {
		q := float64(queries)
		tiers.GPUHitRatio = float64(hits-cpuTokens-diskTokens) / q
		tiers.CPUHitRatio, tiers.DiskHitRatio = float64(cpuTokens)/q, float64(diskTokens)/q
	}
	if specSteps > 0 {
		res.Summary.SpecMeanAcceptedLength = float64(specTokens) / float64(specSteps)
	}
	r.stages.fill(&res.Summary, r.decode != nil)
	if r.planner != nil {
		r.planner.result(res, r.now)
	}
	return res
}

// MeanE2EMs runs src and returns its requests' mean end-to-end latency in milliseconds (what
// config.Config.ResolveDesync measures a request's lifetime with).
func MeanE2EMs(src workload.Source, o Options) (float64, error) {
	o.Compact, o.Records = true, nil
	res, err := Run(src, o)
	if err != nil {
		return 0, err
	}
	return res.Summary.E2E.Mean, nil
}
