package disagg

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// blocked is how long a wait must stay blocked to count as blocked: a busy machine can only make such a
// check pass, never fail.
const blocked = 50 * time.Millisecond

// patience only stops a hung test: a wait that must end gets this long, far beyond what a loaded
// machine needs.
const patience = 30 * time.Second

func startBootstrap(t *testing.T, timeout time.Duration) *BootstrapServer {
	t.Helper()
	s, err := ListenBootstrap("127.0.0.1:0", BootstrapOptions{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// async runs f in a goroutine and delivers its error.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// newRoom opens a room on s.
func newRoom(t *testing.T, s *BootstrapServer) Room {
	t.Helper()
	r, err := s.NewRoom()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func connect(s *BootstrapServer, room Room) <-chan error {
	return async(func() error { return ConnectBootstrap(context.Background(), s.Addr().String(), room) })
}

func waitReady(s *BootstrapServer, room Room) <-chan error {
	return async(func() error { return s.WaitForDecodeReady(context.Background(), room) })
}

// result is what ch delivers (within patience).
func result(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(patience):
		t.Fatalf("%s: still blocked", what)
		return nil
	}
}

func succeeds(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	if err := result(t, what, ch); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func stillBlocked(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned early (err %v)", what, err)
	case <-time.After(blocked):
	}
}

func roomCount(s *BootstrapServer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rooms)
}

// TestBootstrapWire speaks the protocol by hand: the room id's 16 bytes, then one byte 0x01 once the
// prefill side has completed the room.
func TestBootstrapWire(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	room := newRoom(t, s)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(room[:]); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitForDecodeReady(context.Background(), room); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteRoom(room); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(patience))
	ack, err := io.ReadAll(c)
	if err != nil || string(ack) != "\x01" {
		t.Fatalf("read %q, %v; want the ack 0x01 then EOF", ack, err)
	}
}

// TestBootstrapDecodeFirst: the decode worker connects before the prefill worker asks for it; the prefill
// side then passes WaitForDecodeReady at once, and the decode side is acknowledged only on CompleteRoom.
func TestBootstrapDecodeFirst(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	r7 := newRoom(t, s)
	decode := connect(s, r7)
	succeeds(t, "WaitForDecodeReady", waitReady(s, r7)) // returns once the connection has arrived
	succeeds(t, "WaitForDecodeReady again", waitReady(s, r7))
	stillBlocked(t, "decode before CompleteRoom", decode)
	if err := s.CompleteRoom(r7); err != nil {
		t.Fatal(err)
	}
	succeeds(t, "decode", decode)
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left after the ack", n)
	}
}

// TestBootstrapPrefillFirst: WaitForDecodeReady blocks until the decode connection arrives, which is
// acknowledged only on CompleteRoom.
func TestBootstrapPrefillFirst(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	r7 := newRoom(t, s)
	ready := waitReady(s, r7)
	stillBlocked(t, "WaitForDecodeReady before the decode connects", ready)
	decode := connect(s, r7)
	succeeds(t, "WaitForDecodeReady", ready)
	stillBlocked(t, "decode before CompleteRoom", decode)
	if err := s.CompleteRoom(r7); err != nil {
		t.Fatal(err)
	}
	succeeds(t, "decode", decode)
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left after the ack", n)
	}
}

// TestBootstrapCompleteFirst: CompleteRoom before anyone waits for the room; the decode connection that
// arrives later is acknowledged at once. Completing twice is an error.
func TestBootstrapCompleteFirst(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	r7 := newRoom(t, s)
	if err := s.CompleteRoom(r7); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteRoom(r7); err == nil {
		t.Fatal("second CompleteRoom accepted")
	}
	succeeds(t, "decode", connect(s, r7))
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left after the ack", n)
	}
}

// TestBootstrapTimeout: a room that is not done within the timeout is removed and both sides fail. It
// runs on synctest's clock over in-memory pipes: on the wall clock a loaded machine could keep the
// decode connection from arriving within the 100 ms.
func TestBootstrapTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 100 * time.Millisecond
		ln := newPipeListener()
		s := ServeBootstrap(ln, BootstrapOptions{Timeout: timeout})
		defer s.Close()
		connect := func(room Room) <-chan error {
			return async(func() error { return ConnectBootstrapDial(context.Background(), ln.dial, "pipe", room) })
		}
		start := time.Now()
		r1 := newRoom(t, s)

		// Decode connected, prefill never completes.
		decode := connect(r1)
		if err := s.WaitForDecodeReady(context.Background(), r1); err != nil {
			t.Fatalf("WaitForDecodeReady: %v", err)
		}
		if err := <-decode; err == nil {
			t.Fatal("decode acknowledged without CompleteRoom")
		}
		if d := time.Since(start); d < timeout {
			t.Errorf("decode failed after %v, before the timeout %v", d, timeout)
		}
		if n := roomCount(s); n != 0 {
			t.Fatalf("%d rooms left after the timeout", n)
		}
		// Prefill waits, decode never connects: the wait fails at the timeout, not before.
		r2 := newRoom(t, s)
		begin := time.Now()
		if err := s.WaitForDecodeReady(context.Background(), r2); !errors.Is(err, ErrBootstrapTimeout) {
			t.Fatalf("WaitForDecodeReady: %v, want ErrBootstrapTimeout", err)
		}
		if d := time.Since(begin); d != timeout {
			t.Errorf("WaitForDecodeReady failed after %v, want the timeout %v", d, timeout)
		}
		if n := roomCount(s); n != 0 {
			t.Fatalf("%d rooms left after timeouts", n)
		}
		// A room that timed out is gone.
		if err := <-connect(r1); err == nil {
			t.Fatal("decode of a timed-out room acknowledged")
		}
		if err := s.CompleteRoom(r1); !errors.Is(err, ErrBootstrapNoRoom) {
			t.Fatalf("CompleteRoom of a timed-out room: %v, want ErrBootstrapNoRoom", err)
		}
	})
}

// pipeListener is a net.Listener whose connections are net.Pipe ends handed out by its dial: a server on
// it runs inside a synctest bubble.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial is a DialFunc: it connects a new client to the listener.
func (l *pipeListener) dial(ctx context.Context, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	return nil, net.ErrClosed
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestBootstrapCancelRoom: a cancelled room fails both sides at once, long before its timeout.
func TestBootstrapCancelRoom(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	r7 := newRoom(t, s)
	r8 := newRoom(t, s)
	decode := connect(s, r7)
	succeeds(t, "WaitForDecodeReady", waitReady(s, r7))
	prefill := waitReady(s, r8) // no decode peer yet
	stillBlocked(t, "WaitForDecodeReady", prefill)
	s.CancelRoom(r7)
	s.CancelRoom(r8)
	s.CancelRoom(Room{9}) // unknown: nothing happens
	if err := result(t, "decode", decode); err == nil {
		t.Fatal("decode of a cancelled room was acknowledged")
	}
	if err := result(t, "WaitForDecodeReady", prefill); !errors.Is(err, ErrBootstrapCancelled) {
		t.Fatalf("WaitForDecodeReady: %v, want ErrBootstrapCancelled", err)
	}
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left after cancelling", n)
	}
}

// TestBootstrapContext: both sides give up when their context ends.
func TestBootstrapContext(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	r1 := newRoom(t, s)
	r2 := newRoom(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), blocked)
	defer cancel()
	if err := s.WaitForDecodeReady(ctx, r1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForDecodeReady: %v, want DeadlineExceeded", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), blocked)
	defer cancel()
	if err := ConnectBootstrap(ctx, s.Addr().String(), r2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ConnectBootstrap: %v, want DeadlineExceeded", err)
	}
}

// TestBootstrapManyRooms: 200 rooms at once, in both orders, all acknowledged, none left.
func TestBootstrapManyRooms(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		id := newRoom(t, s)
		wg.Go(func() {
			if i%2 == 0 { // decode first, for half of the rooms
				time.Sleep(time.Millisecond)
			}
			if err := s.WaitForDecodeReady(context.Background(), id); err != nil {
				errs <- err
				return
			}
			if err := s.CompleteRoom(id); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			if i%2 == 1 {
				time.Sleep(time.Millisecond)
			}
			if err := ConnectBootstrap(context.Background(), s.Addr().String(), id); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left", n)
	}
}

// TestBootstrapMalformed: clients that hang up early, send a short room id or stall, and a second
// connection for a room, do not disturb a well-behaved room.
func TestBootstrapMalformed(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	r7 := newRoom(t, s)
	addr := s.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	dial().Close() // nothing sent
	c := dial()    // a short room id, then hang up
	c.Write([]byte{1, 2, 3})
	c.Close()
	stall := dial() // a short room id, then nothing
	defer stall.Close()
	stall.Write([]byte{1, 2, 3})

	decode := connect(s, r7)
	succeeds(t, "WaitForDecodeReady", waitReady(s, r7))
	if err := result(t, "second decode connection", connect(s, r7)); err == nil {
		t.Fatal("second decode connection for a room acknowledged")
	}
	if err := s.CompleteRoom(r7); err != nil {
		t.Fatal(err)
	}
	succeeds(t, "decode", decode)
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left", n)
	}
}

// TestBootstrapClose: Close fails every wait on both sides, and every goroutine of the server exits.
func TestBootstrapClose(t *testing.T) {
	base := runtime.NumGoroutine()
	s, err := ListenBootstrap("127.0.0.1:0", BootstrapOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r1 := newRoom(t, s)
	r2 := newRoom(t, s)
	ready := waitReady(s, r1)
	decode := connect(s, r2)
	succeeds(t, "WaitForDecodeReady", waitReady(s, r2))
	stall, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	stall.Write([]byte{1})

	if err := result(t, "Close", async(s.Close)); err != nil {
		t.Fatal(err)
	}
	if err := result(t, "WaitForDecodeReady", ready); !errors.Is(err, ErrBootstrapClosed) {
		t.Fatalf("WaitForDecodeReady: %v, want ErrBootstrapClosed", err)
	}
	if err := result(t, "decode", decode); err == nil {
		t.Fatal("decode acknowledged by a closed server")
	}
	if err := s.WaitForDecodeReady(context.Background(), Room{3}); !errors.Is(err, ErrBootstrapClosed) {
		t.Fatalf("WaitForDecodeReady after Close: %v", err)
	}
	if err := s.CompleteRoom(Room{3}); !errors.Is(err, ErrBootstrapClosed) {
		t.Fatalf("CompleteRoom after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	stall.Close()
	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the server", runtime.NumGoroutine(), base)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBootstrapBadAck: an answer other than 0x01 is an error on the decode side.
func TestBootstrapBadAck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.ReadFull(c, make([]byte, RoomLen))
		c.Write([]byte{2})
	}()
	if err := ConnectBootstrap(context.Background(), ln.Addr().String(), Room{1}); err == nil {
		t.Fatal("ack 0x02 accepted")
	}
}

// TestBootstrapRetry: a decode connection closed before its room id was read (a server pushing it out
// for newer connections past its cap) is made again; the room is acknowledged on the second.
func TestBootstrapRetry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan int, 1)
	go func() {
		n := 0
		defer func() { accepted <- n }()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n++
			if n == 1 {
				c.Close() // pushed out unread
				continue
			}
			io.ReadFull(c, make([]byte, RoomLen))
			c.Write([]byte{bootstrapAck})
			c.Close()
			return
		}
	}()
	if err := ConnectBootstrap(context.Background(), ln.Addr().String(), Room{1}); err != nil {
		t.Fatal(err)
	}
	if n := <-accepted; n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
	}
}

func connCount(s *BootstrapServer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// rawRoom connects to s, sends b and returns the connection.
func rawRoom(t *testing.T, s *BootstrapServer, b []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedWithoutAck reads c to its end and fails if the server acknowledged anything.
func closedWithoutAck(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if b, err := io.ReadAll(c); len(b) > 0 || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: read %q, %v; want the connection closed without a word", what, b, err)
	}
}

// TestBootstrapHijack: request ids are public, room ids are not. Connections naming guessed rooms (the
// request ids Dynamo uses, as 8 or 16 bytes, or random ones) are closed at once, create nothing, and
// the real decode connection is acknowledged.
func TestBootstrapHijack(t *testing.T) {
	s := startBootstrap(t, time.Minute)
	room := newRoom(t, s)
	var guesses [][]byte
	for id := range uint64(50) {
		guesses = append(guesses, binary.LittleEndian.AppendUint64(nil, id))
		guesses = append(guesses, binary.LittleEndian.AppendUint64(make([]byte, 8), id))
		guesses = append(guesses, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, id), 0))
	}
	var random Room
	rand.Read(random[:])
	guesses = append(guesses, random[:])
	for _, g := range guesses {
		c := rawRoom(t, s, g)
		if len(g) == RoomLen {
			closedWithoutAck(t, c, fmt.Sprintf("guess %x", g))
		}
	}
	decode := connect(s, room)
	succeeds(t, "WaitForDecodeReady", waitReady(s, room))
	if err := s.CompleteRoom(room); err != nil {
		t.Fatal(err)
	}
	succeeds(t, "decode", decode)
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left", n)
	}
}

// TestBootstrapPeerGone: a decode connection that hangs up fails its room at once, not at the
// timeout, and its descriptor is released.
func TestBootstrapPeerGone(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	room := newRoom(t, s)
	c := rawRoom(t, s, room[:])
	succeeds(t, "WaitForDecodeReady", waitReady(s, room))
	c.Close()
	eventually(t, "room failed", func() bool { return roomCount(s) == 0 })
	if err := s.CompleteRoom(room); !errors.Is(err, ErrBootstrapNoRoom) {
		t.Fatalf("CompleteRoom after the peer left: %v, want ErrBootstrapNoRoom", err)
	}
	eventually(t, "connection released", func() bool { return connCount(s) == 0 })

	// A prefill worker waiting for its peer learns of the failure at once too.
	room = newRoom(t, s)
	c = rawRoom(t, s, room[:])
	eventually(t, "decode attached", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.rooms[room].decode
	})
	s.mu.Lock()
	r := s.rooms[room] // before the close, which ends and removes the room
	s.mu.Unlock()
	ready := async(func() error {
		<-r.end
		return r.err
	})
	c.Close()
	if err := result(t, "room end", ready); !errors.Is(err, ErrBootstrapPeerGone) {
		t.Fatalf("room ended with %v, want ErrBootstrapPeerGone", err)
	}
}

// TestBootstrapGarbage: a megabyte of garbage is cut after one room id's worth; a room id followed by
// anything fails the room without an acknowledgement.
func TestBootstrapGarbage(t *testing.T) {
	s := startBootstrap(t, time.Hour)
	garbage := make([]byte, 1<<20)
	rand.Read(garbage)
	c := rawRoom(t, s, garbage[:4096])
	go c.Write(garbage) // the server stops reading: this write may never finish
	closedWithoutAck(t, c, "garbage")

	room := newRoom(t, s)
	c = rawRoom(t, s, append(room[:], 0x01, 0x02))
	closedWithoutAck(t, c, "room id with a tail")
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left", n)
	}
	eventually(t, "connections released", func() bool { return connCount(s) == 0 })
}

// TestBootstrapFlood: far more connections than MaxConns, idle or hanging up after 8 bytes, keep at
// most MaxConns descriptors and do not stop a real rendezvous.
func TestBootstrapFlood(t *testing.T) {
	const maxConns = 8
	s, err := ListenBootstrap("127.0.0.1:0", BootstrapOptions{Timeout: time.Hour, MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range 1000 {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 { // idle, held open by the client
			t.Cleanup(func() { c.Close() })
			continue
		}
		c.Write(make([]byte, 8))
		c.Close()
	}
	if n := connCount(s); n > maxConns {
		t.Fatalf("%d connections open, cap %d", n, maxConns)
	}
	room := newRoom(t, s)
	decode := connect(s, room)
	succeeds(t, "WaitForDecodeReady", waitReady(s, room))
	if err := s.CompleteRoom(room); err != nil {
		t.Fatal(err)
	}
	succeeds(t, "decode", decode)
	if n := connCount(s); n > maxConns {
		t.Fatalf("%d connections open, cap %d", n, maxConns)
	}
}
