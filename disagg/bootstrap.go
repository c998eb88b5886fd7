package disagg

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The bootstrap rendezvous (dynamo-mocker.md §8, Dynamo's common/bootstrap.rs) tells a decode worker
// when the prefill worker it was paired with has produced a request's first token, so the decode side
// starts only once the KV cache it needs exists. The wire protocol is Dynamo's, but for the room id: the
// decode worker connects to the prefill worker's bootstrap port, sends the room id (RoomLen bytes), and
// reads one byte, 0x01, when the room is done; the server closes the connection without that byte when
// the room fails. Dynamo's room id is the request id, 8 bytes: anyone who can reach the port and read a
// response's id could take the acknowledgement meant for a decode worker. Here the prefill side draws
// each room id from crypto/rand and connections naming any other room are closed at once.

// DefaultBootstrapTimeout bounds every bootstrap wait, as in the reference.
const DefaultBootstrapTimeout = 30 * time.Second

// DefaultBootstrapMaxConns bounds a bootstrap server's open connections unless told otherwise.
const DefaultBootstrapMaxConns = 1024

// idTimeout bounds how long a connection may take to send its room id; a decode worker sends it at
// once.
const idTimeout = 5 * time.Second

// bootstrapAck is the byte that tells the decode worker its room is done.
const bootstrapAck = 0x01

// RoomLen is the length of a room id on the wire: 128 random bits.
const RoomLen = 16

// A Room names one rendezvous. Ids come from BootstrapServer.NewRoom, never from the request.
type Room [RoomLen]byte

func (r Room) String() string { return hex.EncodeToString(r[:]) }

var (
	// ErrBootstrapTimeout is returned by the waits of a room that was not done within the server's
	// timeout of its creation.
	ErrBootstrapTimeout = errors.New("bootstrap room timed out")
	// ErrBootstrapClosed is returned after the bootstrap server is closed.
	ErrBootstrapClosed = errors.New("bootstrap server closed")
	// ErrBootstrapCancelled is returned by the waits of a room that CancelRoom failed.
	ErrBootstrapCancelled = errors.New("bootstrap room cancelled")
	// ErrBootstrapPeerGone is returned by the waits of a room whose decode connection closed (or sent
	// more than its room id) before the acknowledgement.
	ErrBootstrapPeerGone = errors.New("bootstrap decode connection closed")
	// ErrBootstrapNoRoom is returned for a room that does not exist (any more).
	ErrBootstrapNoRoom = errors.New("no such bootstrap room")
)

// BootstrapOptions configure a BootstrapServer.
type BootstrapOptions struct {
	// Timeout bounds each room's life; <= 0 means DefaultBootstrapTimeout.
	Timeout time.Duration
	// MaxConns bounds the open connections; <= 0 means DefaultBootstrapMaxConns. Past it, the oldest
	// connection that has not sent its room id yet is closed for the new one, so that a flood of idle
	// connections cannot keep decode workers out; if every connection has a room, the new one is closed.
	MaxConns int
}

// BootstrapServer is the prefill side of the rendezvous. NewRoom creates a room; it is done, and
// forgotten, once it has both its decode connection and its completion (CompleteRoom), in either order;
// it fails if that has not happened within the server's timeout of its creation, if it is cancelled, or
// if its decode connection closes first. A BootstrapServer is safe for concurrent use.
type BootstrapServer struct {
	ln   net.Listener
	o    BootstrapOptions
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	rooms   map[Room]*roomState
	conns   map[net.Conn]*list.Element // open connections; an element of idle while it has no room
	waiting *list.List                 // connections without a room yet, oldest first
}

type roomState struct {
	ready     chan struct{} // closed when the decode connection arrives
	decode    bool          // the decode connection has arrived
	completed bool          // CompleteRoom has been called
	end       chan struct{} // closed when the room is done or has failed
	err       error         // why the room failed; set before end is closed
	timer     *time.Timer   // fails the room at its deadline
}

// ListenBootstrap starts a bootstrap server on the TCP address addr (a loopback address unless decode
// workers run on other hosts; "127.0.0.1:0" in tests).
func ListenBootstrap(addr string, o BootstrapOptions) (*BootstrapServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("disagg: bootstrap: %w", err)
	}
	return ServeBootstrap(ln, o), nil
}

// ServeBootstrap starts a bootstrap server on ln (in tests, an in-memory listener); Close closes ln.
func ServeBootstrap(ln net.Listener, o BootstrapOptions) *BootstrapServer {
	if o.Timeout <= 0 {
		o.Timeout = DefaultBootstrapTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultBootstrapMaxConns
	}
	s := &BootstrapServer{
		ln:      ln,
		o:       o,
		done:    make(chan struct{}),
		rooms:   make(map[Room]*roomState),
		conns:   make(map[net.Conn]*list.Element),
		waiting: list.New(),
	}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Addr is the address the server listens on, the one to advertise to decode workers.
func (s *BootstrapServer) Addr() net.Addr { return s.ln.Addr() }

// NewRoom creates a room with a fresh random id, to hand to the decode worker.
func (s *BootstrapServer) NewRoom() (Room, error) {
	var id Room
	rand.Read(id[:]) // never fails (crypto/rand's contract since Go 1.24)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return id, roomError(id, ErrBootstrapClosed)
	}
	r := &roomState{ready: make(chan struct{}), end: make(chan struct{})}
	// The timer's function takes s.mu, so it cannot see r before r.timer is set.
	r.timer = time.AfterFunc(s.o.Timeout, func() { s.expire(id, r) })
	s.rooms[id] = r
	return id, nil
}

// WaitForDecodeReady blocks until the decode connection for room has arrived; the prefill worker calls
// it before emitting the request's output. It fails with ErrBootstrapTimeout when the room times out,
// ErrBootstrapClosed when the server closes, ErrBootstrapPeerGone when the decode connection closes,
// ErrBootstrapNoRoom for a room that is over, and ctx's error when ctx ends first (the room then stays,
// so the decode side learns of the failure only at the timeout, as in the reference).
func (s *BootstrapServer) WaitForDecodeReady(ctx context.Context, room Room) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return roomError(room, ErrBootstrapClosed)
	}
	r := s.rooms[room]
	s.mu.Unlock()
	if r == nil {
		return roomError(room, ErrBootstrapNoRoom)
	}
	select {
	case <-r.ready:
		return nil
	case <-r.end:
		return r.err // nil when done: a done room had its decode connection
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CompleteRoom records that the prefill of room is complete; the prefill worker calls it after the
// request's first token. The decode connection is acknowledged now if it has arrived, or when it arrives.
// Completing a room twice is an error.
func (s *BootstrapServer) CompleteRoom(room Room) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return roomError(room, ErrBootstrapClosed)
	}
	r := s.rooms[room]
	if r == nil {
		return roomError(room, ErrBootstrapNoRoom)
	}
	if r.completed {
		return roomError(room, errors.New("completed twice"))
	}
	r.completed = true
	if r.decode {
		s.finish(room, r, nil)
	}
	return nil
}

// CancelRoom fails room at once, if it exists, with ErrBootstrapCancelled: its waiters return and its
// decode connection is closed without an ACK. The prefill worker calls it when the request is cancelled,
// so neither side waits out the timeout.
func (s *BootstrapServer) CancelRoom(room Room) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rooms[room]; r != nil {
		s.finish(room, r, ErrBootstrapCancelled)
	}
}

// Close stops accepting connections, fails every room with ErrBootstrapClosed, closes every connection
// and returns once the server's goroutines have exited.
func (s *BootstrapServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.ln.Close()
	for id, r := range s.rooms {
		s.finish(id, r, ErrBootstrapClosed)
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// finish removes room r, done when err is nil and failed with err otherwise. s.mu must be held.
func (s *BootstrapServer) finish(id Room, r *roomState, err error) {
	delete(s.rooms, id)
	r.timer.Stop()
	if err != nil {
		r.err = roomError(id, err)
	}
	close(r.end)
}

func roomError(id Room, err error) error { return fmt.Errorf("disagg: room %s: %w", id, err) }

func (s *BootstrapServer) expire(id Room, r *roomState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The room may have ended while this timer fired.
	if s.rooms[id] == r {
		s.finish(id, r, ErrBootstrapTimeout)
	}
}

func (s *BootstrapServer) accept() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off until some are released, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-s.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		if len(s.conns) >= s.o.MaxConns {
			front := s.waiting.Front()
			if front == nil { // every connection has its room: the newcomer waits for none
				s.mu.Unlock()
				c.Close()
				continue
			}
			old := s.waiting.Remove(front).(net.Conn)
			delete(s.conns, old) // its goroutine finds it gone when its read fails
			old.Close()
		}
		s.conns[c] = s.waiting.PushBack(c)
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve reads a decode connection's room id, waits for the room to end and acknowledges it if it is
// done. A connection that does not send its room id within idTimeout, or names a room that does not
// exist or already has its decode connection, is closed at once and leaves the rooms alone. One that
// closes, or sends anything more, before the room ends fails the room.
func (s *BootstrapServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		if e, ok := s.conns[c]; ok {
			delete(s.conns, c)
			if e != nil {
				s.waiting.Remove(e)
			}
		}
		s.mu.Unlock()
		c.Close()
	}()
	var id Room
	c.SetReadDeadline(time.Now().Add(min(idTimeout, s.o.Timeout)))
	if _, err := io.ReadFull(c, id[:]); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	r := s.attach(c, id)
	if r == nil {
		return
	}
	// A decode worker sends nothing after its room id: a read returns only when it hangs up (or
	// misbehaves), or when the connection is closed below.
	gone := make(chan struct{})
	s.wg.Go(func() {
		c.Read(make([]byte, 1))
		close(gone)
	})
	select {
	case <-r.end:
		if r.err == nil {
			// A failed write means the decode worker has gone; there is no one left to tell.
			c.Write([]byte{bootstrapAck})
		}
	case <-gone:
		s.mu.Lock()
		if s.rooms[id] == r {
			s.finish(id, r, ErrBootstrapPeerGone)
		}
		s.mu.Unlock()
	}
}

// attach records the arrival of room id's decode connection c and returns the room, or nil when the
// connection is not wanted.
func (s *BootstrapServer) attach(c net.Conn, id Room) *roomState {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.conns[c]
	if s.closed || !ok { // closed, or pushed out by newer connections
		return nil
	}
	r := s.rooms[id]
	if r == nil || r.decode {
		return nil
	}
	s.waiting.Remove(e)
	s.conns[c] = nil
	r.decode = true
	close(r.ready)
	if r.completed {
		s.finish(id, r, nil)
	}
	return r
}

// ConnectBootstrap is the decode side of the rendezvous: it connects to the prefill worker's bootstrap
// server at addr, registers room and returns nil once the prefill worker has completed the room. It
// fails when the server closes the connection without acknowledgement (the room timed out, the server
// closed, or room already had a decode connection) connectAttempts times, and when ctx ends; without a
// deadline in ctx it waits at most DefaultBootstrapTimeout.
func ConnectBootstrap(ctx context.Context, addr string, room Room) error {
	return ConnectBootstrapDial(ctx, nil, addr, room)
}

// A DialFunc connects to the bootstrap server at addr.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// ConnectBootstrapDial is ConnectBootstrap over connections from dial (nil: TCP; in tests, in-memory
// pipes).
func ConnectBootstrapDial(ctx context.Context, dial DialFunc, addr string, room Room) error {
	if dial == nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultBootstrapTimeout)
		defer cancel()
	}
	var ack byte
	var err error
	for attempt := 0; ; attempt++ {
		ack, err = exchange(ctx, dial, addr, room)
		// A connection refused, or closed before its room id was read (pushed out by a flood of newer
		// connections past the server's cap), leaves the room as it was: try again.
		if err == nil || ctx.Err() != nil || attempt == connectAttempts-1 {
			break
		}
		select {
		case <-time.After(time.Duration(10<<attempt) * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if err == nil && ack != bootstrapAck {
		err = fmt.Errorf("acknowledgement %#x, want %#x", ack, bootstrapAck)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // rather than the i/o error it caused
		}
		return fmt.Errorf("disagg: room %s: bootstrap %s: %w", room, addr, err)
	}
	return nil
}

// connectAttempts is how many connections ConnectBootstrap makes before it gives up (10, 20 and 40 ms
// apart).
const connectAttempts = 4

// exchange sends room to the bootstrap server at addr and returns the byte it answers.
func exchange(ctx context.Context, dial DialFunc, addr string, room Room) (byte, error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	// Interrupt the blocking write and read below when ctx ends.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(room[:]); err != nil {
		return 0, err
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, err
	}
	return b[0], nil
}
