package disagg

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// blocked is how long a wait must stay blocked to count as blocked.
const blocked = 50 * time.Millisecond

func startBootstrap(t *testing.T, timeout time.Duration) *BootstrapServer {
	t.Helper()
	s, err := ListenBootstrap("127.0.0.1:0", timeout)
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

func connect(s *BootstrapServer, room uint64) <-chan error {
	return async(func() error { return ConnectBootstrap(context.Background(), s.Addr().String(), room) })
}

func waitReady(s *BootstrapServer, room uint64) <-chan error {
	return async(func() error { return s.WaitForDecodeReady(context.Background(), room) })
}

// result is what ch delivers within a second.
func result(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Second):
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

// TestBootstrapWire speaks the protocol by hand: the room id as 8 bytes little-endian, then one byte 0x01
// once the prefill side has completed the room.
func TestBootstrapWire(t *testing.T) {
	s := startBootstrap(t, 5*time.Second)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(binary.LittleEndian.AppendUint64(nil, 0x0102030405060708)); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitForDecodeReady(context.Background(), 0x0102030405060708); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteRoom(0x0102030405060708); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	ack, err := io.ReadAll(c)
	if err != nil || string(ack) != "\x01" {
		t.Fatalf("read %q, %v; want the ack 0x01 then EOF", ack, err)
	}
}

// TestBootstrapDecodeFirst: the decode worker connects before the prefill worker asks for it; the prefill
// side then passes WaitForDecodeReady at once, and the decode side is acknowledged only on CompleteRoom.
func TestBootstrapDecodeFirst(t *testing.T) {
	s := startBootstrap(t, 5*time.Second)
	decode := connect(s, 7)
	succeeds(t, "WaitForDecodeReady", waitReady(s, 7)) // returns once the connection has arrived
	succeeds(t, "WaitForDecodeReady again", waitReady(s, 7))
	stillBlocked(t, "decode before CompleteRoom", decode)
	if err := s.CompleteRoom(7); err != nil {
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
	s := startBootstrap(t, 5*time.Second)
	ready := waitReady(s, 7)
	stillBlocked(t, "WaitForDecodeReady before the decode connects", ready)
	decode := connect(s, 7)
	succeeds(t, "WaitForDecodeReady", ready)
	stillBlocked(t, "decode before CompleteRoom", decode)
	if err := s.CompleteRoom(7); err != nil {
		t.Fatal(err)
	}
	succeeds(t, "decode", decode)
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left after the ack", n)
	}
}

// TestBootstrapCompleteFirst: CompleteRoom for a room nobody has asked for yet creates it; the decode
// connection that arrives later is acknowledged at once. Completing twice is an error.
func TestBootstrapCompleteFirst(t *testing.T) {
	s := startBootstrap(t, 5*time.Second)
	if err := s.CompleteRoom(7); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteRoom(7); err == nil {
		t.Fatal("second CompleteRoom accepted")
	}
	succeeds(t, "decode", connect(s, 7))
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left after the ack", n)
	}
}

// TestBootstrapTimeout: a room that is not done within the timeout is removed and both sides fail.
func TestBootstrapTimeout(t *testing.T) {
	s := startBootstrap(t, 100*time.Millisecond)

	// Decode connected, prefill never completes.
	decode := connect(s, 1)
	succeeds(t, "WaitForDecodeReady", waitReady(s, 1))
	if err := result(t, "decode", decode); err == nil {
		t.Fatal("decode acknowledged without CompleteRoom")
	}
	// Prefill waits, decode never connects.
	if err := result(t, "WaitForDecodeReady", waitReady(s, 2)); !errors.Is(err, ErrBootstrapTimeout) {
		t.Fatalf("WaitForDecodeReady: %v, want ErrBootstrapTimeout", err)
	}
	if n := roomCount(s); n != 0 {
		t.Fatalf("%d rooms left after timeouts", n)
	}
	// A room id that timed out can be used afresh.
	decode = connect(s, 1)
	succeeds(t, "WaitForDecodeReady", waitReady(s, 1))
	if err := s.CompleteRoom(1); err != nil {
		t.Fatal(err)
	}
	succeeds(t, "decode", decode)
}

// TestBootstrapCancelRoom: a cancelled room fails both sides at once, long before its timeout.
func TestBootstrapCancelRoom(t *testing.T) {
	s := startBootstrap(t, 5*time.Second)
	decode := connect(s, 7)
	succeeds(t, "WaitForDecodeReady", waitReady(s, 7))
	prefill := waitReady(s, 8) // no decode peer yet
	stillBlocked(t, "WaitForDecodeReady", prefill)
	s.CancelRoom(7)
	s.CancelRoom(8)
	s.CancelRoom(9) // unknown: nothing happens
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
	s := startBootstrap(t, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), blocked)
	defer cancel()
	if err := s.WaitForDecodeReady(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForDecodeReady: %v, want DeadlineExceeded", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), blocked)
	defer cancel()
	if err := ConnectBootstrap(ctx, s.Addr().String(), 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ConnectBootstrap: %v, want DeadlineExceeded", err)
	}
}

// TestBootstrapManyRooms: 200 rooms at once, in both orders, all acknowledged, none left.
func TestBootstrapManyRooms(t *testing.T) {
	s := startBootstrap(t, 5*time.Second)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for id := range uint64(n) {
		wg.Go(func() {
			if id%2 == 0 { // decode first, for half of the rooms
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
			if id%2 == 1 {
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
	s := startBootstrap(t, 5*time.Second)
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

	decode := connect(s, 7)
	succeeds(t, "WaitForDecodeReady", waitReady(s, 7))
	if err := result(t, "second decode connection", connect(s, 7)); err == nil {
		t.Fatal("second decode connection for a room acknowledged")
	}
	if err := s.CompleteRoom(7); err != nil {
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
	s, err := ListenBootstrap("127.0.0.1:0", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ready := waitReady(s, 1)
	decode := connect(s, 2)
	succeeds(t, "WaitForDecodeReady", waitReady(s, 2))
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
	if err := s.WaitForDecodeReady(context.Background(), 3); !errors.Is(err, ErrBootstrapClosed) {
		t.Fatalf("WaitForDecodeReady after Close: %v", err)
	}
	if err := s.CompleteRoom(3); !errors.Is(err, ErrBootstrapClosed) {
		t.Fatalf("CompleteRoom after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	stall.Close()
	deadline := time.Now().Add(time.Second)
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
		io.ReadFull(c, make([]byte, 8))
		c.Write([]byte{2})
	}()
	if err := ConnectBootstrap(context.Background(), ln.Addr().String(), 1); err == nil {
		t.Fatal("ack 0x02 accepted")
	}
}
