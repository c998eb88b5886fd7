package disagg

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The bootstrap rendezvous (dynamo-mocker.md §8, Dynamo's common/bootstrap.rs) tells a decode worker
// when the prefill worker it was paired with has produced a request's first token, so the decode side
// starts only once the KV cache it needs exists. The wire protocol is Dynamo's: the decode worker
// connects to the prefill worker's bootstrap port, sends the request's room id as 8 bytes little-endian,
// and reads one byte, 0x01, when the room is done; the server closes the connection without that byte
// when the room fails.

// DefaultBootstrapTimeout bounds every bootstrap wait, as in the reference.
const DefaultBootstrapTimeout = 30 * time.Second

// bootstrapAck is the byte that tells the decode worker its room is done.
const bootstrapAck = 0x01

var (
	// ErrBootstrapTimeout is returned by the waits of a room that was not done within the server's
	// timeout of its creation.
	ErrBootstrapTimeout = errors.New("bootstrap room timed out")
	// ErrBootstrapClosed is returned after the bootstrap server is closed.
	ErrBootstrapClosed = errors.New("bootstrap server closed")
	// ErrBootstrapCancelled is returned by the waits of a room that CancelRoom failed.
	ErrBootstrapCancelled = errors.New("bootstrap room cancelled")
)

// BootstrapServer is the prefill side of the rendezvous. A room is created by whichever comes first of
// the decode connection, WaitForDecodeReady and CompleteRoom; it is done, and forgotten, once it has both
// its decode connection and its completion, in either order; it fails if that has not happened within the
// server's timeout of its creation. A BootstrapServer is safe for concurrent use.
type BootstrapServer struct {
	ln      net.Listener
	timeout time.Duration
	done    chan struct{} // closed by Close
	wg      sync.WaitGroup

	mu     sync.Mutex
	closed bool
	rooms  map[uint64]*roomState
	conns  map[net.Conn]struct{} // open decode connections, closed by Close
}

type roomState struct {
	ready     chan struct{} // closed when the decode connection arrives
	decode    bool          // the decode connection has arrived
	completed bool          // CompleteRoom has been called
	end       chan struct{} // closed when the room is done or has failed
	err       error         // why the room failed; set before end is closed
	timer     *time.Timer   // fails the room at its deadline
}

// ListenBootstrap starts a bootstrap server on the TCP address addr ("0.0.0.0:port" for a worker,
// "127.0.0.1:0" in tests). The timeout bounds each room's life and how long a connection may take to send
// its room id; <= 0 means DefaultBootstrapTimeout.
func ListenBootstrap(addr string, timeout time.Duration) (*BootstrapServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("disagg: bootstrap: %w", err)
	}
	if timeout <= 0 {
		timeout = DefaultBootstrapTimeout
	}
	s := &BootstrapServer{
		ln:      ln,
		timeout: timeout,
		done:    make(chan struct{}),
		rooms:   make(map[uint64]*roomState),
		conns:   make(map[net.Conn]struct{}),
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the server listens on, the one to advertise to decode workers.
func (s *BootstrapServer) Addr() net.Addr { return s.ln.Addr() }

// WaitForDecodeReady blocks until the decode connection for room has arrived; the prefill worker calls
// it before emitting the request's output. It fails with ErrBootstrapTimeout when the room times out,
// ErrBootstrapClosed when the server closes, and ctx's error when ctx ends first (the room then stays, so
// the decode side learns of the failure only at the timeout, as in the reference).
func (s *BootstrapServer) WaitForDecodeReady(ctx context.Context, room uint64) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return roomError(room, ErrBootstrapClosed)
	}
	r := s.lookup(room)
	s.mu.Unlock()
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
func (s *BootstrapServer) CompleteRoom(room uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return roomError(room, ErrBootstrapClosed)
	}
	r := s.lookup(room)
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
func (s *BootstrapServer) CancelRoom(room uint64) {
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

// lookup returns room id, creating it if needed. s.mu must be held.
func (s *BootstrapServer) lookup(id uint64) *roomState {
	if r := s.rooms[id]; r != nil {
		return r
	}
	r := &roomState{ready: make(chan struct{}), end: make(chan struct{})}
	// The timer's function takes s.mu, so it cannot see r before r.timer is set.
	r.timer = time.AfterFunc(s.timeout, func() { s.expire(id, r) })
	s.rooms[id] = r
	return r
}

// finish removes room r, done when err is nil and failed with err otherwise. s.mu must be held.
func (s *BootstrapServer) finish(id uint64, r *roomState, err error) {
	delete(s.rooms, id)
	r.timer.Stop()
	if err != nil {
		r.err = roomError(id, err)
	}
	close(r.end)
}

func roomError(id uint64, err error) error { return fmt.Errorf("disagg: room %d: %w", id, err) }

func (s *BootstrapServer) expire(id uint64, r *roomState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The room may have ended while this timer fired; its id may even belong to a new room by now.
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
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve reads a decode connection's room id, waits for the room to end and acknowledges it if it is
// done. A connection that does not send its room id within the timeout, or that names a room which
// already has its decode connection, is closed without acknowledgement and leaves the rooms alone.
func (s *BootstrapServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	var b [8]byte
	c.SetReadDeadline(time.Now().Add(s.timeout))
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return
	}
	r := s.attach(binary.LittleEndian.Uint64(b[:]))
	if r == nil {
		return
	}
	<-r.end
	if r.err == nil {
		// A failed write means the decode worker has gone; there is no one left to tell.
		c.Write([]byte{bootstrapAck})
	}
}

// attach records the arrival of room id's decode connection and returns the room, or nil when the
// connection is not wanted.
func (s *BootstrapServer) attach(id uint64) *roomState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	r := s.lookup(id)
	if r.decode {
		return nil
	}
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
// closed, or room already had a decode connection) and when ctx ends; without a deadline in ctx it waits
// at most DefaultBootstrapTimeout.
func ConnectBootstrap(ctx context.Context, addr string, room uint64) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultBootstrapTimeout)
		defer cancel()
	}
	ack, err := exchange(ctx, addr, room)
	if err == nil && ack != bootstrapAck {
		err = fmt.Errorf("acknowledgement %#x, want %#x", ack, bootstrapAck)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // rather than the i/o error it caused
		}
		return fmt.Errorf("disagg: room %d: bootstrap %s: %w", room, addr, err)
	}
	return nil
}

// exchange sends room to the bootstrap server at addr and returns the byte it answers.
func exchange(ctx context.Context, addr string, room uint64) (byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	// Interrupt the blocking write and read below when ctx ends.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], room)
	if _, err := c.Write(b[:]); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c, b[:1]); err != nil {
		return 0, err
	}
	return b[0], nil
}
