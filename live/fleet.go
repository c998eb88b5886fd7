package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"
)

// A fleet is frontends and workers in separate processes over NATS. A worker registers as a NATS
// service (nats.go's micro: $SRV.PING/INFO/STATS answer for it, `nats micro ls` lists it) named
// FleetService, its metadata saying how to reach it; frontends discover workers by pinging
// $SRV.PING.FleetService every TTL/3 on a standing inbox, so the ping answers are the heartbeat: a
// worker unheard of for TTL is gone. Services rather than a JetStream KV bucket: the embedded server
// runs without JetStream, and a dead worker needs no key to expire.
//
// A request is one message to the worker's generate subject whose reply subject is the frontend's
// inbox for that request; the worker publishes fleetChunks there, one per pass, the last with Done or
// Error. KV events go out in Dynamo's RouterEvent JSON (natsevents) on natsevents.Subject(model),
// worker_id being the worker's fleet id.
const (
	FleetService = "mocker-worker"
	// fleetLeave carries the fleet id of a worker that drains: routers stop choosing it at once.
	fleetLeave = "mocker.fleet.leave"
	// fleetJoin announces a new worker, carrying its service's id: frontends ping it at once rather
	// than at their next round, and it alone (a thousand workers joining cost a thousand answers, not
	// half a million).
	fleetJoin = "mocker.fleet.join"
	// DefaultFleetTTL is how long a frontend waits for a worker's ping answer before it drops it.
	DefaultFleetTTL = 6 * time.Second
)

const pingSubject = "$SRV.PING." + FleetService

// errWorkerLost fails the requests in flight on a worker that stopped answering.
var errWorkerLost = errors.New("the worker running the request was lost")

func generateSubject(id uint64) string { return fmt.Sprintf("mocker.fleet.%016x.generate", id) }
func cancelSubject(id uint64) string   { return fmt.Sprintf("mocker.fleet.%016x.cancel", id) }

// fleetRequest is what a frontend sends a worker.
type fleetRequest struct {
	Prompt    []uint32      `json:"prompt"`
	MaxTokens int           `json:"max_tokens"`
	Finish    string        `json:"finish,omitempty"` // the metrics' finished_reason when it runs its course
	LoRA      string        `json:"lora,omitempty"`   // the adapter that serves it
	Images    []tokens.Item `json:"images,omitempty"` // the prompt's images (sched.Request.Images)
}

// checkImages checks a fleet request's images as the prompt's items must be: in order, not overlapping,
// inside the prompt.
func checkImages(images []tokens.Item, n int) error {
	end := 0
	for i, im := range images {
		if im.Len < 1 || im.Start < end || im.Start > n-im.Len {
			return fmt.Errorf("image %d at [%d, +%d) is not after the previous one and inside the %d-token prompt", i, im.Start, im.Len, n)
		}
		end = im.Start + im.Len
	}
	return nil
}

// fleetChunk is one message of a worker's answer.
type fleetChunk struct {
	Tokens []uint32 `json:"tokens,omitempty"`
	Ends   []int    `json:"ends,omitempty"` // where each pass's tokens end in Tokens
	Cached int      `json:"cached"`
	Done   bool     `json:"done,omitempty"`
	// Error ends a request that failed; Kind says why: "reject" (it can never run), "busy", "closed"
	// (the worker is draining: the request never started), "shutdown" (the worker's drain ran out of
	// time: the request was cut off), or "" (other).
	Error string `json:"error,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// FleetWorker serves a Server's one worker (all its DP ranks) to frontends over NATS.
type FleetWorker struct {
	nc  *nats.Conn
	srv *Server
	id  uint64
	svc micro.Service
	sub *nats.Subscription // cancels

	mu      sync.Mutex
	byReply map[string]uint64 // a running request's reply subject → its id here
	cut     bool              // the drain ran out of time: a request still coming in is cut off too
	running sync.WaitGroup
}

// NewFleetSink publishes one worker's KV events as those of fleet worker id.
func NewFleetSink(nc *nats.Conn, model string, id uint64) *NATSSink {
	return &NATSSink{pubs: []*natsevents.Publisher{natsevents.NewPublisher(nc, natsevents.Subject(model), id)}}
}

// ServeFleet registers srv's worker 0 as fleet worker id and takes requests until Drain. When it
// returns the server has the worker's subscriptions: a request sent then reaches it.
func ServeFleet(nc *nats.Conn, srv *Server, id uint64) (*FleetWorker, error) {
	if len(srv.workers) != 1 || srv.decode != nil {
		return nil, errors.New("live: a fleet worker serves exactly one aggregated worker")
	}
	fw := &FleetWorker{nc: nc, srv: srv, id: id, byReply: make(map[string]uint64)}
	sub, err := nc.Subscribe(cancelSubject(id), func(m *nats.Msg) {
		fw.mu.Lock()
		rid, ok := fw.byReply[string(m.Data)]
		fw.mu.Unlock()
		if ok {
			srv.cancel(rid)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("live: fleet: %w", err)
	}
	fw.sub = sub
	svc, err := micro.AddService(nc, micro.Config{
		Name: FleetService, Version: "1.0.0", Description: "a mocker worker",
		Metadata: map[string]string{
			"worker_id":  strconv.FormatUint(id, 10),
			"model":      srv.o.ModelName,
			"dp_size":    strconv.Itoa(srv.workers[0].eng.DPSize()),
			"block_size": strconv.Itoa(srv.o.Router.BlockSize),
		},
		Endpoint: &micro.EndpointConfig{Subject: generateSubject(id), Handler: micro.HandlerFunc(fw.handle)},
	})
	if err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("live: fleet: %w", err)
	}
	fw.svc = svc
	nc.Publish(fleetJoin, []byte(svc.Info().ID))
	if err := nc.Flush(); err != nil { // a round trip: the server has processed the subscriptions
		svc.Stop()
		sub.Unsubscribe()
		return nil, fmt.Errorf("live: fleet: %w", err)
	}
	return fw, nil
}

func (fw *FleetWorker) handle(r micro.Request) {
	reply := r.Reply()
	if reply == "" {
		return
	}
	var m fleetRequest
	err := json.Unmarshal(r.Data(), &m)
	switch {
	case err == nil && (len(m.Prompt) == 0 || m.MaxTokens < 1):
		err = errors.New("want a prompt and max_tokens ≥ 1")
	case err == nil && m.MaxTokens > fw.srv.capacity-len(m.Prompt): // as the HTTP API checks
		err = fmt.Errorf("%d prompt tokens and max_tokens %d exceed the %d tokens a KV pool holds", len(m.Prompt), m.MaxTokens, fw.srv.capacity)
	case err == nil:
		err = checkImages(m.Images, len(m.Prompt))
	}
	if err != nil {
		fw.send(reply, fleetChunk{Done: true, Error: "bad fleet request: " + err.Error(), Kind: "reject"})
		return
	}
	req := fw.srv.newRequest(m.Prompt, m.MaxTokens, m.LoRA, m.Images...)
	st := newStream(req.ID, len(m.Prompt), time.Now(), nil)
	st.finish = m.Finish
	fw.running.Add(1)
	if err := fw.srv.submit(context.WithValue(context.Background(), pinKey{}, 0), req, st); err != nil {
		fw.running.Done()
		var rej *sched.RejectError
		c := fleetChunk{Done: true, Error: err.Error()}
		switch {
		case errors.As(err, &rej):
			c.Kind, c.Error = "reject", rej.Reason
		case errors.Is(err, errBusy):
			c.Kind = "busy"
		case errors.Is(err, errClosed):
			c.Kind = "closed"
		}
		fw.send(reply, c)
		return
	}
	fw.mu.Lock()
	if fw.cut { // came in while the drain cut the others off (the service stops taking requests late)
		fw.mu.Unlock()
		fw.running.Done()
		fw.send(reply, shutdownChunk)
		fw.srv.cancel(req.ID)
		return
	}
	fw.byReply[reply] = req.ID
	fw.mu.Unlock()
	go fw.forward(reply, st)
}

// forward relays a request's output, a chunk per wake-up, until it ends.
func (fw *FleetWorker) forward(reply string, st *Stream) {
	defer fw.running.Done()
	var toks []uint32
	var ends []int
	sent := false // a token went out: the request can no longer move to another worker
	for {
		<-st.Ready()
		var done bool
		var err error
		toks, ends, done, err = st.Next(toks[:0], ends[:0])
		c := fleetChunk{Tokens: toks, Ends: ends, Cached: st.Cached(), Done: done}
		if err != nil {
			c.Error = err.Error()
			if errors.Is(err, errClosed) && !sent && len(toks) == 0 {
				c.Kind = "closed"
			}
		}
		if len(toks) > 0 || done {
			fw.send(reply, c)
			sent = sent || len(toks) > 0
		}
		if done {
			fw.mu.Lock()
			delete(fw.byReply, reply)
			fw.mu.Unlock()
			return
		}
	}
}

// send publishes c; a closed connection drops it (the frontend then loses the worker).
func (fw *FleetWorker) send(reply string, c fleetChunk) {
	b, _ := json.Marshal(c)
	fw.nc.Publish(reply, b)
}

// Drain stops taking requests (the service unregisters, frontends are told), then waits until ctx
// ends for the requests in flight to finish.
func (fw *FleetWorker) Drain(ctx context.Context) error {
	fw.svc.Stop()
	fw.nc.Publish(fleetLeave, []byte(strconv.FormatUint(fw.id, 10)))
	fw.nc.Flush()
	done := make(chan struct{})
	go func() { fw.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		fw.cutOff()
		return ctx.Err()
	}
	fw.sub.Unsubscribe()
	return nil
}

// shutdownChunk ends a request the worker cut off at the end of its drain.
var shutdownChunk = fleetChunk{Done: true, Kind: "shutdown", Error: "the worker shut down before the request finished"}

// cutOff ends the requests still in flight when a drain runs out of time. Their frontends are told
// first: having stopped watching the worker when it left, they would wait for the rest of the answers
// for ever. Then the engine drops them.
func (fw *FleetWorker) cutOff() {
	fw.mu.Lock()
	fw.cut = true
	replies := slices.Sorted(maps.Keys(fw.byReply))
	ids := make([]uint64, len(replies))
	for i, reply := range replies {
		ids[i] = fw.byReply[reply]
	}
	fw.mu.Unlock()
	for _, reply := range replies {
		fw.send(reply, shutdownChunk)
	}
	fw.nc.Flush()
	for _, id := range ids {
		fw.srv.cancel(id)
	}
}

// FleetOptions make a Server a fleet frontend: it routes over the workers it discovers on NATS.
type FleetOptions struct {
	Conn *nats.Conn
	// TTL is how long a worker may go unheard before it is dropped; 0: DefaultFleetTTL.
	TTL time.Duration
}

// fleet is a frontend's view of the workers; guarded by Server.mu.
type fleet struct {
	o      FleetOptions
	inbox  string // reply subjects: inbox.<request id>.<worker's router slot>
	subs   []*nats.Subscription
	byID   map[uint64]*remote // live workers
	bySlot map[int]*remote    // live and draining workers, by router slot
	gone   map[uint64]bool    // workers that left: late ping answers do not revive them (a lost one may return)
	reqs   map[uint64]*remoteReq
	next   int           // the next router slot
	quit   chan struct{} // closed to stop the pinger
	stop   sync.Once
}

type remote struct {
	id       uint64
	slot, dp int
	seen     time.Time
	reqs     map[uint64]*remoteReq
}

type remoteReq struct {
	reply   string // where its worker answers
	req     *sched.Request
	st      *Stream
	w       *remote
	started bool // a token came back: the request cannot move
}

// newFleet makes the server a fleet frontend; startFleet runs it.
func (s *Server) newFleet(o FleetOptions) {
	if o.TTL <= 0 {
		o.TTL = DefaultFleetTTL
	}
	s.fleet = &fleet{o: o, inbox: o.Conn.NewRespInbox(), byID: map[uint64]*remote{}, bySlot: map[int]*remote{},
		gone: map[uint64]bool{}, reqs: map[uint64]*remoteReq{}, next: len(s.workers), quit: make(chan struct{})}
}

// startFleet subscribes to discovery, KV events and answers, and starts pinging.
func (s *Server) startFleet() error {
	f := s.fleet
	o := f.o
	pings := o.Conn.NewRespInbox()
	for subj, h := range map[string]nats.MsgHandler{
		pings:                             s.fleetPong,
		f.inbox + ".*.*":                  s.fleetChunk,
		fleetLeave:                        s.fleetLeft,
		fleetJoin:                         func(m *nats.Msg) { o.Conn.PublishRequest(joinPing(m.Data), pings, nil) },
		natsevents.Subject(s.o.ModelName): s.fleetEvent,
	} {
		sub, err := o.Conn.Subscribe(subj, h)
		if err != nil {
			return fmt.Errorf("live: fleet: %w", err)
		}
		f.subs = append(f.subs, sub)
	}
	// A round trip: the server has the subscriptions, so a worker that joins once Start has returned
	// is pinged at its join rather than at the next standing round.
	if err := o.Conn.Flush(); err != nil {
		return fmt.Errorf("live: fleet: %w", err)
	}
	s.bg.Go(func() {
		t := time.NewTicker(o.TTL / 3)
		defer t.Stop()
		for {
			o.Conn.PublishRequest(pingSubject, pings, nil)
			select {
			case <-t.C:
				s.fleetSweep(time.Now())
			case <-f.quit:
				return
			}
		}
	})
	return nil
}

// joinPing is the subject that pings the worker a join announced: its service's own ping subject, or
// every worker's when the join names no service id (a worker from before joins named theirs) or one
// that is not a plain token (micro's ids are nuids: letters and digits), which must not reach a subject.
func joinPing(id []byte) string {
	if len(id) == 0 || len(id) > 64 {
		return pingSubject
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
			return pingSubject
		}
	}
	return pingSubject + "." + string(id)
}

func (s *Server) fleetPong(m *nats.Msg) {
	var p micro.Ping
	if json.Unmarshal(m.Data, &p) != nil {
		return
	}
	id, err1 := strconv.ParseUint(p.Metadata["worker_id"], 10, 64)
	dp, err2 := strconv.Atoi(p.Metadata["dp_size"])
	bs, err3 := strconv.Atoi(p.Metadata["block_size"])
	// Workers of another model, or whose blocks hash differently, serve other frontends.
	if err1 != nil || err2 != nil || err3 != nil || dp < 1 || p.Metadata["model"] != s.o.ModelName || bs != s.o.Router.BlockSize {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fleet
	if s.closed || f.gone[id] {
		return
	}
	w := f.byID[id]
	if w == nil {
		w = &remote{id: id, slot: f.next, dp: dp, reqs: map[uint64]*remoteReq{}}
		f.next++
		f.byID[id], f.bySlot[w.slot] = w, w
		for r := range dp {
			s.router.AddTarget(router.Target{Worker: w.slot, Rank: r})
		}
		s.drain()
	}
	w.seen = time.Now()
}

// fleetSweep drops the workers unheard of since now − TTL.
func (s *Server) fleetSweep(now time.Time) {
	s.mu.Lock()
	var moved []*remoteReq
	for _, w := range s.fleet.byID {
		if now.Sub(w.seen) > s.fleet.o.TTL {
			moved = append(moved, s.dropWorker(w, true)...)
		}
	}
	s.mu.Unlock()
	s.reroute(moved)
}

// fleetLeft stops routing to a draining worker; its requests run their course.
func (s *Server) fleetLeft(m *nats.Msg) {
	id, err := strconv.ParseUint(string(m.Data), 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.fleet.byID[id]; w != nil {
		s.dropWorker(w, false)
	}
}

// dropWorker removes w from routing, with its blocks in the router's index. Lost, its requests that
// have not started come back to be rerouted and the others fail. s.mu is held.
func (s *Server) dropWorker(w *remote, lost bool) []*remoteReq {
	f := s.fleet
	delete(f.byID, w.id)
	for r := range w.dp {
		s.router.RemoveTarget(router.Target{Worker: w.slot, Rank: r})
	}
	if !lost {
		f.gone[w.id] = true // a ping answer sent before it left must not bring it back
		if len(w.reqs) == 0 {
			delete(f.bySlot, w.slot)
		}
		return nil
	}
	delete(f.bySlot, w.slot)
	var moved []*remoteReq
	for id, rr := range w.reqs {
		delete(f.reqs, id)
		if rr.started {
			rr.st.fail(fmt.Errorf("%w (worker %016x unheard of for %v)", errWorkerLost, w.id, f.o.TTL))
			continue
		}
		moved = append(moved, rr)
	}
	clear(w.reqs)
	return moved
}

// reroute routes again requests that never started on the worker they were sent to.
func (s *Server) reroute(rrs []*remoteReq) {
	for _, rr := range rrs {
		if err := s.route(rr.req, rr.st, -1); err != nil {
			s.sinksEnded(-1, rr.req.ID)
			rr.st.fail(err)
		}
	}
}

func (s *Server) fleetEvent(m *nats.Msg) {
	ev, err := natsevents.Decode(m.Data)
	if _, kept := natsevents.Medium(ev.Tier); err != nil || !kept {
		return
	}
	s.mu.Lock()
	if w := s.fleet.byID[ev.Worker]; w != nil {
		s.applyEvents(router.Target{Worker: w.slot, Rank: ev.Rank}, ev.Event)
	}
	s.mu.Unlock()
}

// dispatchRemote sends a routed request to its worker; s.mu is held.
func (s *Server) dispatchRemote(w *remote, req *sched.Request, st *Stream) error {
	// The reply subject names the worker too: a request rerouted from a worker cut off, not dead, must
	// not take that worker's late answers.
	reply := s.fleet.inbox + "." + strconv.FormatUint(req.ID, 10) + "." + strconv.Itoa(w.slot)
	b, err := json.Marshal(fleetRequest{Prompt: req.Prompt, MaxTokens: req.MaxTokens, Finish: st.finish, LoRA: req.LoRA, Images: req.Images})
	if err == nil {
		err = s.fleet.o.Conn.PublishMsg(&nats.Msg{Subject: generateSubject(w.id), Reply: reply, Data: b})
	}
	if err != nil {
		return fmt.Errorf("live: fleet: %w", err)
	}
	rr := &remoteReq{reply: reply, req: req, st: st, w: w}
	w.reqs[req.ID], s.fleet.reqs[req.ID] = rr, rr
	return nil
}

func (s *Server) fleetChunk(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, s.fleet.inbox+".")
	ids, slots, ok2 := strings.Cut(rest, ".")
	id, err := strconv.ParseUint(ids, 10, 64)
	slot, err2 := strconv.Atoi(slots)
	if !ok || !ok2 || err != nil || err2 != nil {
		return
	}
	var c fleetChunk
	if json.Unmarshal(m.Data, &c) != nil {
		return
	}
	s.mu.Lock()
	f := s.fleet
	rr := f.reqs[id]
	if rr == nil || rr.w.slot != slot {
		s.mu.Unlock()
		return
	}
	if c.Done {
		delete(f.reqs, id)
		delete(rr.w.reqs, id)
		if f.byID[rr.w.id] == nil && len(rr.w.reqs) == 0 {
			delete(f.bySlot, rr.w.slot)
		}
		s.router.Finished(id)
		if rerouted(c.Kind) && !rr.started { // it produced no token there: try another
			s.mu.Unlock()
			s.reroute([]*remoteReq{rr})
			s.mu.Lock()
			s.drain()
			s.mu.Unlock()
			return
		}
	}
	if len(c.Tokens) > 0 && !rr.started {
		rr.started = true
		s.router.PrefillDone(id)
	}
	s.drain()
	s.mu.Unlock()
	rr.st.setCached(c.Cached)
	at := 0
	for _, e := range c.Ends {
		if e > at && e <= len(c.Tokens) {
			rr.st.push(c.Tokens[at:e], false)
			at = e
		}
	}
	if c.Done {
		s.sinksEnded(-1, id)
		var err error
		switch c.Kind {
		case "":
			if c.Error != "" {
				err = errors.New("worker: " + c.Error)
			}
		case "reject":
			err = &sched.RejectError{ID: id, Reason: c.Error}
		case "busy":
			err = errBusy
		case "closed":
			err = errClosed
		case "shutdown":
			err = fmt.Errorf("%w (worker %016x shut down before it finished)", errWorkerLost, rr.w.id)
		default: // a kind a newer worker sends: an end this frontend cannot read is no success
			err = fmt.Errorf("worker: request ended as %q: %s", c.Kind, c.Error)
		}
		if err != nil {
			rr.st.fail(err)
		} else {
			rr.st.push(nil, true)
		}
	}
}

// rerouted reports whether a request that ends with kind on a worker, before its first token, goes to
// another worker: the worker was draining or shut down, which says nothing of the request.
func rerouted(kind string) bool { return kind == "closed" || kind == "shutdown" }

// cancelRemote tells the worker running request id to drop it; it reports whether one was.
func (s *Server) cancelRemote(id uint64) bool {
	s.mu.Lock()
	rr := s.fleet.reqs[id]
	s.mu.Unlock()
	if rr == nil {
		return false
	}
	s.fleet.o.Conn.Publish(cancelSubject(rr.w.id), []byte(rr.reply))
	return true
}

// closeFleet stops discovery; requests still on workers fail, and the workers drop them.
func (s *Server) closeFleet() {
	f := s.fleet
	f.stop.Do(func() {
		close(f.quit) // the pinger stops; Close waits for it
		for _, sub := range f.subs {
			sub.Unsubscribe()
		}
	})
	s.mu.Lock()
	rrs := f.reqs
	f.reqs = map[uint64]*remoteReq{}
	s.mu.Unlock()
	for _, rr := range rrs {
		f.o.Conn.Publish(cancelSubject(rr.w.id), []byte(rr.reply)) // no one will read the rest
		rr.st.fail(errClosed)
	}
}

// FleetWorkerState is what a frontend knows of a remote worker.
type FleetWorkerState struct {
	Blocks  int // in the router's index
	Running int // requests sent to it that have produced tokens
	Waiting int // requests sent to it that have not: lost, it hands them back to be routed again
}

// FleetWorkers reports the workers a frontend routes to, by fleet id.
func (s *Server) FleetWorkers() map[uint64]FleetWorkerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[uint64]FleetWorkerState{}
	if s.fleet == nil {
		return m
	}
	for id, w := range s.fleet.byID {
		var st FleetWorkerState
		for r := range w.dp {
			st.Blocks += s.router.Indexed(router.Target{Worker: w.slot, Rank: r})
		}
		for _, rr := range w.reqs {
			if rr.started {
				st.Running++
			} else {
				st.Waiting++
			}
		}
		m[id] = st
	}
	return m
}

// IndexedBlocks is how many blocks the router's index holds, over all its targets.
func (s *Server) IndexedBlocks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.router.Targets() {
		n += s.router.Indexed(t)
	}
	return n
}
