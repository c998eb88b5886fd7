package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
)

// Disagg configures disaggregated serving: the server's Workers prefill, these decode.
type Disagg struct {
	DecodeWorkers int
	// Engine, when set, is the decode workers' engine (its own TP, batch limits, pool and timing);
	// nil: the prefill workers' (Options.Engine). Both must use the same block size.
	Engine *engine.Options
	// Router picks a request's decode worker once its prompt is computed (Dynamo's decode router: no
	// overlap credit, no prefill tracking).
	Router router.Options
	// Transfer prices moving the prompt's KV from the prefill to the decode worker: one transfer alone
	// on its link (no contention, as in the reference's live mocker), and, like the simulator's, not
	// divided by the speedup ratio, which scales compute.
	Transfer disagg.Transfer
	// BootstrapHost and BootstrapPort are where prefill worker i listens for its decode peers' rendezvous
	// (port + i; port 0: any free port; host "": 127.0.0.1, as the decode workers are in this process).
	BootstrapHost string
	BootstrapPort int
	// BootstrapTimeout bounds each rendezvous wait; 0: disagg.DefaultBootstrapTimeout.
	BootstrapTimeout time.Duration
	// BootstrapMaxConns bounds each bootstrap server's connections; 0: disagg.DefaultBootstrapMaxConns.
	BootstrapMaxConns int
	// Listen and Dial carry the rendezvous (nil: TCP); tests give in-memory pipes, which a
	// testing/synctest bubble can wait on.
	Listen func(addr string) (net.Listener, error)
	Dial   disagg.DialFunc
}

// errTransfer fails a request whose rendezvous or KV transfer failed; the client learns no more (the
// cause names rooms and addresses).
var errTransfer = errors.New("KV transfer to the decode worker failed")

// handoff is a disaggregated request after its prefill: waiting for a decode worker's room, then
// moving its KV, then decoding.
type handoff struct {
	req     *sched.Request
	st      *Stream
	prefill *Worker
	prank   int
	decode  *Worker // nil until routed
	drank   int
	state   handoffState
	cancel  context.CancelFunc // stops the rendezvous and transfer
	room    disagg.Room        // its rendezvous, once transferring
	// cancelled marks a request cancelled while prefilling: if its prefill worker had already let go of
	// it (its pass was being published), prefilled drops it.
	cancelled bool
}

type handoffState uint8

const (
	prefilling handoffState = iota
	routing                 // queued in the decode router
	reserving               // waiting for room on its decode worker
	transferring
	decoding
)

// decodePool is the decode side of a disaggregated server.
type decodePool struct {
	o         Disagg
	workers   []*Worker
	router    *router.Router
	pending   [][]*handoff // per decode worker: reservations waiting for room, in order
	bootstrap []*disagg.BootstrapServer
	ready     []router.Decision
}

// newDecodePool builds the decode pool; its bootstrap servers listen from Start (listenBootstrap).
func (s *Server) newDecodePool(hooks func(decode bool) Hooks) error {
	d := s.o.Disagg
	rt, err := router.New(d.Router)
	if err != nil {
		return fmt.Errorf("live: decode router: %w", err)
	}
	p := &decodePool{o: *d, router: rt, pending: make([][]*handoff, d.DecodeWorkers)}
	s.decode = p
	eo := s.o.Engine
	if d.Engine != nil {
		eo = *d.Engine
	}
	eo.Role = sched.Decode
	eo.VLLM.Events, eo.SGLang.Events = false, false // decode workers publish no KV events
	for i := range d.DecodeWorkers {
		w, err := s.newWorker(i, len(s.workers)+i, eo, hooks(true))
		if err != nil {
			return err
		}
		p.workers = append(p.workers, w)
		for r := range w.eng.DPSize() {
			rt.AddTarget(router.Target{Worker: i, Rank: r})
		}
	}
	return nil
}

// listenBootstrap starts the prefill workers' bootstrap servers; Close closes them.
func (s *Server) listenBootstrap() error {
	d, p := s.o.Disagg, s.decode
	for i := range s.workers {
		port := 0
		if d.BootstrapPort > 0 {
			port = d.BootstrapPort + i
		}
		host := d.BootstrapHost
		if host == "" {
			host = "127.0.0.1"
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		bo := disagg.BootstrapOptions{Timeout: d.BootstrapTimeout, MaxConns: d.BootstrapMaxConns}
		var bs *disagg.BootstrapServer
		var err error
		if d.Listen != nil {
			var ln net.Listener
			if ln, err = d.Listen(addr); err == nil {
				bs = disagg.ServeBootstrap(ln, bo)
			}
		} else {
			bs, err = disagg.ListenBootstrap(addr, bo)
		}
		if err != nil {
			return fmt.Errorf("live: prefill worker %d: %w", i, err)
		}
		s.mu.Lock()
		p.bootstrap = append(p.bootstrap, bs)
		s.mu.Unlock()
	}
	return nil
}

// waiting counts the requests that have left their prefill worker and wait for a decode worker: in the
// decode router's queue or for room on their worker; s.mu is held.
func (p *decodePool) waiting() int {
	n := p.router.Queued()
	for _, q := range p.pending {
		n += len(q)
	}
	return n
}

// BootstrapAddrs are the prefill workers' rendezvous addresses, in order (disaggregated serving, once
// started).
func (s *Server) BootstrapAddrs() []string {
	if s.decode == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.decode.bootstrap))
	for i, b := range s.decode.bootstrap {
		out[i] = b.Addr().String()
	}
	return out
}

// prefilled starts a request's handoff once its prefill worker has computed the prompt and holds its KV.
func (s *Server) prefilled(worker, rank int, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.router.PrefillDone(id)
	s.router.Finished(id)
	s.drain()
	h := s.handoffs[id]
	if h == nil || h.cancelled {
		s.workers[worker].Release(rank, id)
		if h != nil {
			delete(s.handoffs, id)
			s.sinksEnded(worker, id)
			h.st.fail(errCancelled)
		}
		return
	}
	h.prefill, h.prank = s.workers[worker], rank
	h.state = routing
	d, queued := s.decode.router.Route(router.Request{ID: id, Blocks: h.req.Seq.Blocks(), PromptTokens: h.req.PromptLen()})
	if !queued {
		s.reserve(h, d)
	}
}

// reserve asks the chosen decode worker for room, behind any request already waiting there; s.mu is
// held.
func (s *Server) reserve(h *handoff, d router.Decision) {
	p := s.decode
	h.decode, h.drank = p.workers[d.Target.Worker], d.Target.Rank
	h.state = reserving
	if len(p.pending[d.Target.Worker]) == 0 && s.tryReserve(h) {
		return
	}
	p.pending[d.Target.Worker] = append(p.pending[d.Target.Worker], h)
}

// tryReserve reserves room for h and starts its transfer; false means no room yet. s.mu is held.
func (s *Server) tryReserve(h *handoff) bool {
	missing, ok, err := h.decode.Reserve(&sched.Request{ID: h.req.ID, Seq: h.req.Seq, MaxTokens: h.req.MaxTokens, Rank: h.drank, LoRA: h.req.LoRA})
	if err != nil {
		s.dropHandoff(h)
		h.st.fail(err)
		return true
	}
	if !ok {
		return false
	}
	bs := s.decode.bootstrap[h.prefill.id]
	h.state = transferring
	room, err := bs.NewRoom()
	if err != nil { // closing
		s.dropHandoff(h)
		h.st.fail(errClosed)
		return true
	}
	h.room = room
	ctx, cancel := context.WithCancel(s.bgCtx) // Close cancels it
	h.cancel = cancel
	addr := bs.Addr().String()
	t := s.decode.o.Transfer
	delay := disagg.Delay(t.Tokens(missing, h.req.PromptLen()), t.BytesPerToken, t.GBps)
	id := h.req.ID
	// Reference §8: the prefill side waits for its decode peer before releasing its output and
	// completes the room after it; the decode side connects and waits for the ACK; then the KV moves.
	s.bg.Go(func() {
		if bs.WaitForDecodeReady(ctx, room) == nil {
			bs.CompleteRoom(room)
		}
	})
	s.bg.Go(func() {
		err := disagg.ConnectBootstrapDial(ctx, s.decode.o.Dial, addr, room)
		if err == nil && delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				err = ctx.Err()
			}
		}
		s.transferred(id, err)
	})
	return true
}

// transferred ends a request's KV transfer: the prefill worker frees its copy and the decode worker
// takes the request.
func (s *Server) transferred(id uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.handoffs[id]
	if h == nil || h.state != transferring { // cancelled
		return
	}
	h.cancel()
	if err != nil {
		s.dropHandoff(h)
		h.st.fail(errTransfer)
		return
	}
	h.prefill.Release(h.prank, id)
	h.state = decoding
	if !h.decode.Activate(h.drank, id, h.st) {
		s.dropHandoff(h)
		h.st.fail(errClosed)
	}
}

// dropHandoff abandons a handoff in any state before decoding: it frees what each side holds. A
// reserving handoff must already be out of its decode worker's queue. s.mu is held.
func (s *Server) dropHandoff(h *handoff) {
	id := h.req.ID
	delete(s.handoffs, id)
	s.sinksEnded(-1, id)
	if h.cancel != nil {
		h.cancel()
		s.decode.bootstrap[h.prefill.id].CancelRoom(h.room) // the decode side's connection ends now
	}
	switch h.state {
	case routing, reserving, transferring:
		h.prefill.Release(h.prank, id)
		s.decode.router.Finished(id)
	}
	if h.state == transferring {
		h.decode.Unreserve(h.drank, id)
	}
}

// decodePassEnded gives a decode worker's waiting reservations the room its pass may have freed, in
// order.
func (s *Server) decodePassEnded(worker int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.decode.pending[worker]
	for len(q) > 0 && s.tryReserve(q[0]) {
		q[0] = nil
		q = q[1:]
	}
	s.decode.pending[worker] = q
}

// decodeEnded forgets a request that left its decode worker.
func (s *Server) decodeEnded(worker int, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handoffs, id)
	s.sinksEnded(worker, id)
	s.decode.router.Finished(id)
	s.decode.ready = s.decode.router.Ready(s.decode.ready[:0])
	for _, d := range s.decode.ready {
		if h := s.handoffs[d.ID]; h != nil && h.state == routing {
			s.reserve(h, d)
		} else {
			s.decode.router.Finished(d.ID)
		}
	}
}

// cancelHandoff drops a disaggregated request between prefill and decode; false means it is not in a
// handoff (it is prefilling or decoding, and its worker cancels it).
func (s *Server) cancelHandoff(id uint64) bool {
	s.mu.Lock()
	h := s.handoffs[id]
	if h != nil && h.state == prefilling {
		h.cancelled = true // in case its prefill worker no longer has it, but prefilled has not run yet
	}
	if h == nil || h.state == prefilling || h.state == decoding {
		s.mu.Unlock()
		return false
	}
	if h.state == reserving {
		q := s.decode.pending[h.decode.id]
		s.decode.pending[h.decode.id] = slices.DeleteFunc(q, func(x *handoff) bool { return x == h })
	}
	s.dropHandoff(h)
	s.mu.Unlock()
	h.st.fail(errCancelled)
	return true
}
