package live

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/outlen"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/tokens"
	"github.com/mocker-sim/mocker/workload"
	"golang.org/x/sync/semaphore"
)

var (
	errClosed    = errors.New("server is shutting down")
	errCancelled = errors.New("request cancelled")
)

// Options configure a Server.
type Options struct {
	Engine  engine.Options // every worker's engine
	Workers int            // aggregated workers; 0 means 1

	// Router spreads requests over workers and data-parallel ranks; its BlockSize must be the engines'.
	Router router.Options

	ModelName   string // the served model id
	MaxModelLen int    // prompt + max_tokens at most; 0: unlimited
	// LoRAModules are the adapters served besides the base model: a request names one in its model field,
	// and its blocks are hashed with the adapter's seed.
	LoRAModules []LoRAModule
	// DefaultMaxTokens is what a request that sets no max_tokens generates.
	DefaultMaxTokens int
	// OutputLength draws where a choice without ignore_eos meets its end-of-sequence (finish_reason
	// "stop"), keyed by Engine.Seed and the request; the zero Model always generates max_tokens.
	OutputLength outlen.Model
	// MaxWaiting bounds the requests waiting to run (in the router's queue and the engines' waiting
	// queues; disaggregated, also in the decode router's queue and for room on a decode worker); past it
	// requests get 429. 0: unbounded. (Requests prefilling or transferring when the decode side fills
	// still join its queues.)
	MaxWaiting int
	// MaxBodyBytes bounds a request body (413 past it); 0 means 16 MiB.
	MaxBodyBytes int64
	// APIKey, when set, is required as "Authorization: Bearer KEY".
	APIKey string
	// HTTP bounds connections and their timeouts (HTTPServer, Serve).
	HTTP HTTPLimits

	// FailureRate is the share of requests answered with an injected error instead (0: none), drawn
	// from FailureSeed; FailureTypes are the failures to choose from (empty: all of FailureTypes()).
	FailureRate  float64
	FailureTypes []string
	FailureSeed  uint64

	// Tokenizer encodes prompts (chats rendered by tokenize.ChatPrompt) and decodes outputs.
	Tokenizer tokenize.Tokenizer
	// ImageTokens is the number of tokens of each image_url part of a chat (0: 576, LLaVA-1.5's
	// 336-pixel image); images are never fetched, so their size is this, whatever the image.
	ImageTokens int

	// Metrics serves /metrics; nil: no metrics endpoint.
	Metrics http.Handler
	// Recorder returns the metrics recorder of one rank of one worker (nil: none).
	Recorder func(worker, rank int) Recorder
	// Sinks publish KV events and follow requests (NATS, ZMQ); called on worker goroutines.
	Sinks []Sink

	// Disagg, when set, makes the Workers prefill workers and adds decode workers.
	Disagg *Disagg

	// Fleet, when set, makes the server a fleet frontend: besides its own Workers (which may be 0) it
	// routes over the workers it discovers on NATS.
	Fleet *FleetOptions

	// RouterEventDelay delays the KV events the server's router sees (its own workers' and, in a fleet,
	// the remote workers'), to study routing on a stale index; the sinks get them undelayed.
	RouterEventDelay time.Duration
	// EventsAtPassEnd makes vLLM and TensorRT-LLM workers publish their KV events when a pass ends,
	// as SGLang's do, rather than when it starts.
	EventsAtPassEnd bool

	// CheckInvariants makes every worker verify its engine's block accounting after every pass (slow;
	// for tests); Server.CheckInvariants reports the first violation.
	CheckInvariants bool
}

// Validate reports the first invalid option, naming it by its flag (as config reports it, with the file
// and line it came from). Zero values take the defaults New gives them.
func (o Options) Validate() error {
	switch {
	case o.MaxWaiting < 0:
		return fmt.Errorf("max-waiting %d: must be >= 0 (0: unbounded)", o.MaxWaiting)
	case o.HTTP.MaxConns < 0 || o.HTTP.MaxConns > 1<<20:
		return fmt.Errorf("max-connections %d: must be in [0, 1048576] (0: 4096)", o.HTTP.MaxConns)
	case !(o.FailureRate >= 0 && o.FailureRate <= 1):
		return fmt.Errorf("failure-rate %v: must be in [0, 1]", o.FailureRate)
	case o.Disagg != nil && (o.Disagg.BootstrapPort < 0 || o.Disagg.BootstrapPort > 65535):
		return fmt.Errorf("bootstrap-port %d: must be in [0, 65535] (0: any free port)", o.Disagg.BootstrapPort)
	}
	for _, t := range o.FailureTypes {
		if !slices.Contains(FailureTypes(), t) {
			return fmt.Errorf("failure-types %q: want one of %s", t, strings.Join(FailureTypes(), ", "))
		}
	}
	return nil
}

// A Sink publishes KV events outside the process. Its methods are called on worker goroutines
// (several at once when there are several workers) and must not keep the slices they are given.
type Sink interface {
	// Prompt announces a request's prompt, and the LoRA adapter that serves it ("" for none), before it
	// is routed.
	Prompt(id uint64, prompt []uint32, lora string)
	// Events publishes a rank's KV events.
	Events(worker, rank int, evs []kvcache.Event)
	// Tokens reports a request's new output tokens.
	Tokens(worker int, id uint64, toks []uint32)
	// Ended reports that a request left its worker.
	Ended(worker int, id uint64)
}

// Server is a set of simulated workers behind a router, answering the OpenAI API.
type Server struct {
	o       Options
	workers []*Worker
	t0      time.Time
	nextID  atomic.Uint64
	created int64
	loras   atomic.Pointer[[]LoRAModule] // the adapters served now (see lora.go)
	loraMu  sync.Mutex                   // serialises their updates

	life sync.Mutex // serialises Start and Close

	mu       sync.Mutex // guards router, pending, started, closed, delayed, decode's state and handoffs
	router   *router.Router
	pending  map[uint64]*pendingReq // queued in the router
	started  bool
	closed   bool
	delayed  []delayedEvents // KV events on their way to the router (Options.RouterEventDelay)
	evTimer  *time.Timer     // applies delayed's head when it is due
	ready    []router.Decision
	decode   *decodePool         // disaggregated serving
	handoffs map[uint64]*handoff // disaggregated requests, from submission to their end
	fleet    *fleet              // remote workers (Options.Fleet)

	apiKey   []byte // the Authorization header's value that the API key asks for
	capacity int    // tokens one rank's KV pool holds: no request may need more
	failures *failures
	bodies   *semaphore.Weighted // bytes of request bodies being read and tokenised (bodyBudget)

	// Background work outside the workers' loops (KV transfers, a frontend's pinger): bgStop ends it,
	// Close waits for it.
	bgCtx  context.Context
	bgStop context.CancelFunc
	bg     sync.WaitGroup
}

// delayedEvents are one rank's KV events held back from the router until due.
type delayedEvents struct {
	due time.Time
	t   router.Target
	evs []kvcache.Event
}

type pendingReq struct {
	req    *sched.Request
	stream *Stream
}

// New builds a server: its engines, routers and HTTP routes. It starts nothing: Start runs the
// workers, Close stops them.
func New(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Workers < 0 || o.Workers == 0 && o.Fleet == nil {
		o.Workers = 1
	}
	if o.Fleet != nil && o.Disagg != nil {
		return nil, errors.New("live: a fleet frontend routes aggregated workers only")
	}
	if o.DefaultMaxTokens <= 0 {
		o.DefaultMaxTokens = 16
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 16 << 20
	}
	o.HTTP = o.HTTP.withDefaults()
	capacity := poolTokens(o.Engine)
	if o.Disagg != nil && o.Disagg.Engine != nil {
		// A request needs room on both sides.
		if o.Disagg.Engine.BlockSize() != o.Engine.BlockSize() {
			return nil, fmt.Errorf("live: decode workers' block size %d differs from the prefill workers' %d", o.Disagg.Engine.BlockSize(), o.Engine.BlockSize())
		}
		capacity = min(capacity, poolTokens(*o.Disagg.Engine))
	}
	switch {
	case o.MaxModelLen > 0 && o.DefaultMaxTokens >= o.MaxModelLen:
		return nil, fmt.Errorf("live: default max tokens %d: must be below max-model-len %d, which counts the prompt too", o.DefaultMaxTokens, o.MaxModelLen)
	case o.DefaultMaxTokens >= capacity:
		return nil, fmt.Errorf("live: default max tokens %d: must be below the %d tokens a KV pool holds, which counts the prompt too", o.DefaultMaxTokens, capacity)
	}
	fails := newFailures(o.FailureRate, o.FailureTypes, o.FailureSeed)
	if o.Tokenizer == nil {
		o.Tokenizer = tokenize.Builtin()
	}
	switch {
	case o.ImageTokens == 0:
		o.ImageTokens = workload.DefaultImageTokens
	case o.ImageTokens < 0:
		return nil, fmt.Errorf("live: image tokens %d: must be at least 1", o.ImageTokens)
	}
	if o.ModelName == "" {
		o.ModelName = "mocker"
	}
	for i, m := range o.LoRAModules {
		switch {
		case m.Name == "" || m.Name == o.ModelName:
			return nil, fmt.Errorf("live: LoRA adapter %q: must be named, and not as the base model", m.Name)
		case slices.ContainsFunc(o.LoRAModules[:i], func(x LoRAModule) bool { return x.Name == m.Name }):
			return nil, fmt.Errorf("live: LoRA adapter %q given twice", m.Name)
		}
	}
	rt, err := router.New(o.Router)
	if err != nil {
		return nil, fmt.Errorf("live: %w", err)
	}
	s := &Server{o: o, t0: time.Now(), router: rt, pending: make(map[uint64]*pendingReq), handoffs: make(map[uint64]*handoff),
		capacity: capacity, failures: fails, bodies: semaphore.NewWeighted(bodyBudget * o.MaxBodyBytes)}
	s.created = s.t0.Unix()
	s.bgCtx, s.bgStop = context.WithCancel(context.Background())
	loras := slices.Clone(o.LoRAModules)
	s.loras.Store(&loras)
	hooks := func(decode bool) Hooks {
		if decode {
			return Hooks{Tokens: s.tokens, Ended: s.decodeEnded, PassEnded: s.decodePassEnded, Recorder: o.Recorder}
		}
		h := Hooks{Events: s.events, Tokens: s.tokens, Ended: s.ended, Recorder: o.Recorder}
		if o.Disagg != nil {
			h.Prefilled = s.prefilled
		}
		return h
	}
	eo := o.Engine
	if o.Disagg != nil {
		eo.Role = sched.Prefill
	}
	for i := range o.Workers {
		w, err := s.newWorker(i, i, eo, hooks(false))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.workers = append(s.workers, w)
		for r := range w.eng.DPSize() {
			rt.AddTarget(router.Target{Worker: i, Rank: r})
		}
	}
	if o.Disagg != nil {
		if err := s.newDecodePool(hooks); err != nil {
			s.Close()
			return nil, err
		}
	}
	if o.Fleet != nil {
		s.newFleet(*o.Fleet)
	}
	if o.APIKey != "" {
		s.apiKey = []byte("Bearer " + o.APIKey)
	}
	return s, nil
}

// Start runs the server: its workers' loops, the prefill workers' bootstrap rendezvous
// (disaggregated) and a fleet frontend's discovery. Requests submitted before wait for it. It runs
// once; on an error, Close stops what it started.
func (s *Server) Start() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return errors.New("live: Start: the server was started or closed already")
	}
	s.started = true
	s.mu.Unlock()
	if s.decode != nil {
		if err := s.listenBootstrap(); err != nil {
			return err
		}
	}
	if s.fleet != nil {
		if err := s.startFleet(); err != nil {
			return err
		}
	}
	for _, w := range s.allWorkers() {
		w.start()
	}
	return nil
}

// poolTokens is the tokens one rank's KV pool holds.
func poolTokens(eo engine.Options) int {
	return eo.KVBlocks() * eo.BlockSize()
}

// newWorker builds worker id of its pool; global, its index among all the server's workers, seeds it
// and labels its metrics.
func (s *Server) newWorker(id, global int, eo engine.Options, hooks Hooks) (*Worker, error) {
	eo.Seed = engine.RankSeed(s.o.Engine.Seed, global)
	eng, err := engine.New(eo)
	if err != nil {
		return nil, fmt.Errorf("live: worker %d: %w", global, err)
	}
	w := newWorker(id, global, eng, eo.Role, s.o.CheckInvariants, s.o.MaxWaiting > 0, hooks, s.t0)
	w.atEnd = w.atEnd || s.o.EventsAtPassEnd
	return w, nil
}

// CheckInvariants reports the first accounting violation a worker found after a pass (with
// Options.CheckInvariants), or one it has now.
func (s *Server) CheckInvariants() error {
	for i, w := range s.allWorkers() {
		if err := w.checkInvariants(); err != nil {
			return fmt.Errorf("live: %s: %w", s.workerName(i), err)
		}
	}
	return nil
}

// workerName names the i-th of allWorkers.
func (s *Server) workerName(i int) string {
	switch {
	case s.decode == nil:
		return fmt.Sprintf("worker %d", i)
	case i < len(s.workers):
		return fmt.Sprintf("prefill worker %d", i)
	}
	return fmt.Sprintf("decode worker %d", i-len(s.workers))
}

// Close stops everything Start started and waits for it; requests still running fail. It may be
// called more than once, and without Start.
func (s *Server) Close() {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	s.closed = true
	pend := s.pending
	s.pending = make(map[uint64]*pendingReq)
	if s.evTimer != nil {
		s.evTimer.Stop()
	}
	s.delayed = nil
	s.mu.Unlock()
	for _, p := range pend {
		p.stream.fail(errClosed)
	}
	if s.fleet != nil {
		s.closeFleet()
	}
	for _, w := range s.allWorkers() {
		w.close()
	}
	s.bgStop()
	if s.decode != nil {
		for _, b := range s.decode.bootstrap {
			b.Close()
		}
	}
	s.bg.Wait()
}

// allWorkers are the aggregated (or prefill) workers, then the decode workers.
func (s *Server) allWorkers() []*Worker {
	if s.decode == nil {
		return s.workers
	}
	return append(slices.Clip(s.workers), s.decode.workers...)
}

// Workers are the server's workers, in order (disaggregated: its prefill workers).
func (s *Server) Workers() []*Worker { return s.workers }

// DecodeWorkers are a disaggregated server's decode workers, in order; nil when aggregated.
func (s *Server) DecodeWorkers() []*Worker {
	if s.decode == nil {
		return nil
	}
	return s.decode.workers
}

// imageSink is a Sink that names blocks by their tokens and so must know a prompt's images too (ZMQSink).
type imageSink interface {
	PromptImages(id uint64, prompt []uint32, lora string, images []tokens.Item)
}

// submit routes a request to a worker, or queues it in the router; a request that came in on a worker's
// own listener (WorkerAPIServer, recorded in ctx) goes to that worker. The stream it returns carries the
// output; an error means the request was refused: *sched.RejectError (it can never run), errBusy (too
// many requests waiting), errClosed.
func (s *Server) submit(ctx context.Context, req *sched.Request, st *Stream) error {
	// Sinks learn the prompt before any worker can store its blocks.
	for _, sk := range s.o.Sinks {
		if is, ok := sk.(imageSink); ok && len(req.Images) > 0 {
			is.PromptImages(req.ID, req.Prompt, req.LoRA, req.Images)
			continue
		}
		sk.Prompt(req.ID, req.Prompt, req.LoRA)
	}
	pin, pinned := ctx.Value(pinKey{}).(int)
	if !pinned {
		pin = -1
	}
	err := s.route(req, st, pin)
	if err != nil {
		s.sinksEnded(-1, req.ID)
	}
	return err
}

// sinksEnded tells the sinks a request is gone, once, from whichever path ended it.
func (s *Server) sinksEnded(worker int, id uint64) {
	for _, sk := range s.o.Sinks {
		sk.Ended(worker, id)
	}
}

// route routes req, to worker pin if it is not negative.
func (s *Server) route(req *sched.Request, st *Stream, pin int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.o.MaxWaiting > 0 && s.waiting() >= s.o.MaxWaiting {
		return errBusy
	}
	if s.decode != nil {
		s.handoffs[req.ID] = &handoff{req: req, st: st}
	}
	rr := router.Request{ID: req.ID, Blocks: req.Seq.Blocks(), PromptTokens: req.PromptLen()}
	if pin >= 0 {
		d, ok := s.router.RouteTo(rr, pin)
		if !ok {
			return fmt.Errorf("live: no worker %d", pin)
		}
		return s.dispatch(d, req, st)
	}
	d, queued := s.router.Route(rr)
	if queued {
		s.pending[req.ID] = &pendingReq{req: req, stream: st}
		return nil
	}
	return s.dispatch(d, req, st)
}

// waiting counts the requests not yet running: queued in a router, waiting in an engine or for room on
// a decode worker; s.mu is held. (Options.MaxWaiting > 0: the workers keep their counts.)
func (s *Server) waiting() int {
	n := len(s.pending)
	for _, w := range s.allWorkers() {
		n += w.Waiting()
	}
	if s.decode != nil {
		n += s.decode.waiting()
	}
	return n
}

// dispatch hands a routed request to its worker; s.mu is held.
func (s *Server) dispatch(d router.Decision, req *sched.Request, st *Stream) error {
	req.Rank = d.Target.Rank
	var err error
	if d.Target.Worker < len(s.workers) {
		err = s.workers[d.Target.Worker].Submit(req, st)
	} else {
		err = s.dispatchRemote(s.fleet.bySlot[d.Target.Worker], req, st)
	}
	if err != nil {
		s.router.Finished(req.ID)
		delete(s.handoffs, req.ID)
	}
	return err
}

// cancel drops a request wherever it is: queued in the router, running on a worker, or between a
// prefill and a decode worker.
func (s *Server) cancel(id uint64) {
	s.mu.Lock()
	if p := s.pending[id]; p != nil {
		delete(s.pending, id)
		delete(s.handoffs, id)
		s.router.Finished(id)
		s.mu.Unlock()
		s.sinksEnded(-1, id)
		p.stream.fail(errCancelled)
		return
	}
	s.mu.Unlock()
	if s.decode != nil && s.cancelHandoff(id) {
		return
	}
	if s.fleet != nil && s.cancelRemote(id) {
		return
	}
	for _, w := range s.allWorkers() {
		if w.Cancel(id) {
			return
		}
	}
}

func (s *Server) events(worker, rank int, evs []kvcache.Event) {
	s.mu.Lock()
	s.applyEvents(router.Target{Worker: worker, Rank: rank}, evs...)
	s.mu.Unlock()
	for _, sk := range s.o.Sinks {
		sk.Events(worker, rank, evs)
	}
}

// applyEvents feeds a rank's KV events to the router, now or after Options.RouterEventDelay (in
// order: every batch waits as long); s.mu is held.
func (s *Server) applyEvents(t router.Target, evs ...kvcache.Event) {
	d := s.o.RouterEventDelay
	if d <= 0 {
		for _, e := range evs {
			s.router.Apply(t, e)
		}
		return
	}
	if s.closed {
		return
	}
	cp := make([]kvcache.Event, len(evs)) // the caller reuses evs and its blocks
	for i, e := range evs {
		e.Blocks, e.Hashes = slices.Clone(e.Blocks), slices.Clone(e.Hashes)
		cp[i] = e
	}
	s.delayed = append(s.delayed, delayedEvents{due: time.Now().Add(d), t: t, evs: cp})
	if len(s.delayed) == 1 {
		s.armEvents()
	}
}

// armEvents sets the timer for the head of delayed; s.mu is held.
func (s *Server) armEvents() {
	d := time.Until(s.delayed[0].due)
	if s.evTimer == nil {
		s.evTimer = time.AfterFunc(d, s.applyDue)
		return
	}
	s.evTimer.Reset(d)
}

// applyDue applies the delayed events that are due and waits for the next.
func (s *Server) applyDue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := time.Now()
	n := 0
	for ; n < len(s.delayed) && !s.delayed[n].due.After(now); n++ {
		for _, e := range s.delayed[n].evs {
			s.router.Apply(s.delayed[n].t, e)
		}
	}
	s.delayed = slices.Delete(s.delayed, 0, n)
	if len(s.delayed) > 0 {
		s.armEvents()
	}
}

func (s *Server) tokens(worker int, id uint64, toks []uint32, first bool) {
	if first { // its prompt is computed: the router stops counting it as prefill load
		s.mu.Lock()
		s.router.PrefillDone(id)
		s.drain()
		s.mu.Unlock()
	}
	for _, sk := range s.o.Sinks {
		sk.Tokens(worker, id, toks)
	}
}

func (s *Server) ended(worker int, id uint64) {
	s.mu.Lock()
	delete(s.handoffs, id)
	s.router.Finished(id)
	s.drain()
	s.mu.Unlock()
	s.sinksEnded(worker, id)
}

// drain dispatches the queued requests the router now lets through; s.mu is held.
func (s *Server) drain() {
	if len(s.pending) == 0 {
		return
	}
	s.ready = s.router.Ready(s.ready[:0])
	for _, d := range s.ready {
		p := s.pending[d.ID]
		delete(s.pending, d.ID)
		if p == nil {
			s.router.Finished(d.ID)
			continue
		}
		if err := s.dispatch(d, p.req, p.stream); err != nil {
			s.sinksEnded(-1, d.ID)
			p.stream.fail(err)
		}
	}
}

// pinKey is the context key of the worker a request was sent to (WorkerAPIServer).
type pinKey struct{}

func (s *Server) checkPin(w int) {
	if w < 0 || w >= len(s.workers) || s.decode != nil {
		panic(fmt.Sprintf("live: no aggregated worker %d", w))
	}
}

// newRequest builds the engine request of a prompt served by adapter lora ("" for the base model),
// hashing its blocks once for the router and the engine; images are the prompt's image_url parts.
func (s *Server) newRequest(prompt []uint32, maxTokens int, lora string, images ...tokens.Item) *sched.Request {
	seq := tokens.NewSequence(s.o.Router.BlockSize)
	if lora != "" {
		seq.SetSeed(tokens.LoRASeed(lora))
	}
	seq.AddItems(images...)
	seq.Append(prompt...)
	return &sched.Request{ID: s.nextID.Add(1), Prompt: prompt, MaxTokens: maxTokens, Seq: seq, LoRA: lora, Images: images}
}

// Shutdown stops accepting requests through api, waits (until ctx ends) for the requests in flight to
// be answered, then stops the workers.
func (s *Server) Shutdown(ctx context.Context, api *APIServer) error {
	err := api.Shutdown(ctx)
	s.Close()
	return err
}
