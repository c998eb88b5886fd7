package vllmevents

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// zmtpGreeting is the 64-byte ZMTP 3.0 greeting of a NULL-security client.
func zmtpGreeting() []byte {
	g := make([]byte, greetingLen)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	return g
}

// zmtpReady is a NULL-security READY command announcing socket type typ.
func zmtpReady(typ string) []byte {
	body := append([]byte{5}, "READY"...)
	body = append(body, 11)
	body = append(body, "Socket-Type"...)
	body = append(body, 0, 0, 0, byte(len(typ)))
	body = append(body, typ...)
	return append([]byte{0x04, byte(len(body))}, body...)
}

// sendRaw connects to addr, writes b and returns the connection.
func sendRaw(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitClosed reads c until the server closes it.
func waitClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: the server kept the connection open", what)
	}
}

// Each attack declares more than a peer may send: the server must drop the connection before
// allocating, and keep serving subscribers and replays.
func TestOversizedFrames(t *testing.T) {
	huge := []byte{0x02, 0x40, 0, 0, 0, 0, 0, 0, 0} // a message frame of 2^62 bytes
	hugeCmd := append([]byte{0x06}, huge[1:]...)    // the same as a command, during the handshake
	justOver := []byte{0x02, 0, 0, 0, 0, 0, 0x10, 0, 1}
	var empties []byte // 20,000 empty frames of one message: 1.25 MiB counted at frameCost each
	for range 20_000 {
		empties = append(empties, 0x01, 0)
	}
	attacks := []struct {
		name string
		b    []byte
	}{
		{"huge frame after greeting", append(zmtpGreeting(), huge...)},
		{"huge command in handshake", append(zmtpGreeting(), hugeCmd...)},
		{"huge frame after READY", append(append(zmtpGreeting(), zmtpReady("DEALER")...), huge...)},
		{"one byte over the cap", append(append(zmtpGreeting(), zmtpReady("DEALER")...), justOver...)},
		{"many empty frames", append(append(zmtpGreeting(), zmtpReady("DEALER")...), empties...)},
	}
	p := listen(t, Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", Topic: topic})
	for _, a := range attacks {
		waitClosed(t, sendRaw(t, p.Addr().String(), a.b), "PUB: "+a.name)
		waitClosed(t, sendRaw(t, p.ReplayAddr().String(), a.b), "ROUTER: "+a.name)
	}

	testPublishSubscribe(t, p, "tcp://"+p.Addr().String(), 0)
	dealer := zmq4.NewDealer(context.Background())
	got := replay(t, dealer, dial(t, dealer, "tcp://"+p.ReplayAddr().String()), seqFrame(0))
	if len(got) == 0 || !bytes.Equal(got[0][1], seqFrame(0)) {
		t.Fatalf("replay after the attacks: %q", got)
	}
}

// A peer that connects and says nothing must not stop replay clients that come after it: go-zeromq's
// ROUTER does each handshake on its accept goroutine.
func TestSilentPeer(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 100 * time.Millisecond
	p := listen(t, Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"})
	p.Publish(Batch{TS: 1})
	silent := sendRaw(t, p.ReplayAddr().String(), nil)
	dealer := zmq4.NewDealer(context.Background())
	if got := replay(t, dealer, dial(t, dealer, "tcp://"+p.ReplayAddr().String()), seqFrame(0)); len(got) != 1 {
		t.Fatalf("%d batches replayed, want 1", len(got))
	}
	waitClosed(t, silent, "silent peer")
}

// Connections past maxConns are closed at once; once others leave, subscribers connect again.
func TestConnectionCap(t *testing.T) {
	defer func(n int) { maxConns = n }(maxConns)
	maxConns = 4
	p := listen(t, Options{Endpoint: "tcp://127.0.0.1:0", Topic: topic})
	var held []net.Conn
	for range maxConns {
		c := sendRaw(t, p.Addr().String(), zmtpGreeting()) // in its handshake for handshakeTimeout
		held = append(held, c)
	}
	// The server reads the greetings in its own time: wait until every slot is taken.
	waitClosed(t, sendRaw(t, p.Addr().String(), nil), "connection past the cap")
	for _, c := range held {
		c.Close()
	}
	g := p.pub.ln.(*guardListener)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still counted after the peers left", open)
		}
	}
	testPublishSubscribe(t, p, "tcp://"+p.Addr().String(), 0)
}
