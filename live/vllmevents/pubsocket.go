package vllmevents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// A pubSocket is the PUB side of ZMQ publish/subscribe, on go-zeromq's ZMTP connections. go-zeromq's own
// PUB socket keeps its writer goroutine after Close and makes every subscriber wait for the slowest one;
// here each subscriber has its own queue, cut at the high-water mark as libzmq does, and close stops
// every goroutine.
type pubSocket struct {
	ln     net.Listener       // nil when the socket connects
	quit   chan struct{}      // closed by close: stops the dialer
	cancel context.CancelFunc // ends a dial in progress (connecting sockets)
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	subs   map[*subscriber]struct{} // open connections, handshake done or not
}

type subscriber struct {
	nc   net.Conn
	quit chan struct{} // closed when the connection is dropped
	wake chan struct{} // holds a token while the queue may be non-empty

	mu     sync.Mutex
	topics map[string]int // subscribed prefixes and how many times each
	queue  [][][]byte
}

// listenPub listens on a "tcp://host:port" ("*" for any host) or "ipc://path" endpoint.
func listenPub(endpoint string) (*pubSocket, error) {
	network, addr, ok := strings.Cut(endpoint, "://")
	switch network {
	case "tcp":
		if host, port, err := net.SplitHostPort(addr); err == nil && host == "*" {
			addr = net.JoinHostPort("", port)
		}
	case "ipc":
		network = "unix"
	default:
		ok = false
	}
	if !ok {
		return nil, fmt.Errorf("vllmevents: PUB endpoint %q is not tcp:// or ipc://", endpoint)
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("vllmevents: %w", err)
	}
	s := &pubSocket{ln: &guardListener{Listener: ln}, quit: make(chan struct{}), subs: make(map[*subscriber]struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// redialInterval is how long a connecting socket waits before it dials again: libzmq's ZMQ_RECONNECT_IVL
// default.
const redialInterval = 100 * time.Millisecond

// dialPub connects to a SUB socket listening on a "tcp://host:port" or "ipc://path" endpoint, as a
// ZMQ PUB does when it connects: it keeps dialing until the peer listens, and again whenever the
// connection fails, until close.
func dialPub(endpoint string) (*pubSocket, error) {
	network, addr, ok := strings.Cut(endpoint, "://")
	switch network {
	case "tcp":
	case "ipc":
		network = "unix"
	default:
		ok = false
	}
	if !ok || addr == "" {
		return nil, fmt.Errorf("vllmevents: PUB endpoint %q is not tcp:// or ipc://", endpoint)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &pubSocket{quit: make(chan struct{}), cancel: cancel, subs: make(map[*subscriber]struct{})}
	s.wg.Add(1)
	go s.dial(ctx, network, addr)
	return s, nil
}

func (s *pubSocket) dial(ctx context.Context, network, addr string) {
	defer s.wg.Done()
	d := net.Dialer{Timeout: handshakeTimeout}
	for {
		if nc, err := d.DialContext(ctx, network, addr); err == nil {
			sub := s.adopt(nc)
			if sub == nil {
				return
			}
			s.serve(sub, false) // until the connection fails
		}
		select {
		case <-s.quit:
			return
		case <-time.After(redialInterval):
		}
	}
}

func newSubscriber(nc net.Conn) *subscriber {
	return &subscriber{nc: nc, quit: make(chan struct{}), wake: make(chan struct{}, 1), topics: make(map[string]int)}
}

// adopt registers a new connection's subscriber for serve (which owns a wait-group count); nil, with
// the connection closed, once the socket is closed.
func (s *pubSocket) adopt(nc net.Conn) *subscriber {
	sub := newSubscriber(nc)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return nil
	}
	s.subs[sub] = struct{}{}
	s.wg.Add(1)
	return sub
}

func (s *pubSocket) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) // out of file descriptors, say: try again later
			continue
		}
		sub := s.adopt(nc)
		if sub == nil {
			return
		}
		go s.serve(sub, true)
	}
}

// serve does the ZMTP handshake (as the side that accepted the connection, or dialed it), then starts
// the writer and reads subscriptions until the connection fails or is dropped.
func (s *pubSocket) serve(sub *subscriber, accepted bool) {
	defer s.wg.Done()
	defer s.drop(sub)
	conn, err := zmq4.Open(sub.nc, null.Security(), zmq4.Pub, nil, accepted, nil)
	if err != nil {
		return
	}
	s.wg.Add(1)
	go s.write(sub, conn)
	for {
		msg, err := conn.RecvMsg()
		if err != nil {
			return
		}
		// A subscription is one frame: 1 to subscribe or 0 to cancel, then the topic prefix.
		if msg.Type != zmq4.UsrMsg || len(msg.Frames) != 1 || len(msg.Frames[0]) == 0 {
			continue
		}
		f := msg.Frames[0]
		topic := string(f[1:])
		sub.mu.Lock()
		switch f[0] {
		case 1:
			sub.topics[topic]++
		case 0:
			if sub.topics[topic]--; sub.topics[topic] <= 0 {
				delete(sub.topics, topic)
			}
		}
		sub.mu.Unlock()
	}
}

func (s *pubSocket) write(sub *subscriber, conn *zmq4.Conn) {
	defer s.wg.Done()
	for {
		select {
		case <-sub.quit:
			return
		case <-sub.wake:
		}
		sub.mu.Lock()
		q := sub.queue
		sub.queue = nil
		sub.mu.Unlock()
		for _, frames := range q {
			if conn.SendMsg(zmq4.NewMsgFrom(frames...)) != nil {
				s.drop(sub)
				return
			}
		}
	}
}

// drop closes a subscriber's connection, once.
func (s *pubSocket) drop(sub *subscriber) {
	s.mu.Lock()
	_, ok := s.subs[sub]
	delete(s.subs, sub)
	s.mu.Unlock()
	if ok {
		close(sub.quit)
		sub.nc.Close()
	}
}

// send queues a message for every subscriber whose subscriptions match its first frame, except those
// with hwm messages queued already. The frames must not change afterwards.
func (s *pubSocket) send(frames [][]byte) {
	topic := frames[0]
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		sub.mu.Lock()
		ok := len(sub.queue) < hwm && sub.matches(topic)
		if ok {
			sub.queue = append(sub.queue, frames)
		}
		sub.mu.Unlock()
		if ok {
			select {
			case sub.wake <- struct{}{}:
			default:
			}
		}
	}
}

func (sub *subscriber) matches(topic []byte) bool {
	for p := range sub.topics {
		if len(topic) >= len(p) && string(topic[:len(p)]) == p {
			return true
		}
	}
	return false
}

func (s *pubSocket) close() error {
	s.mu.Lock()
	s.closed = true
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	close(s.quit)
	if s.cancel != nil {
		s.cancel()
	}
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for sub := range subs {
		close(sub.quit)
		sub.nc.Close()
	}
	s.wg.Wait()
	return err
}
