package vllmevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// Limits on what a peer may send. go-zeromq allocates a frame at the size its header declares before
// reading it and has no option to cap it, so the guard below reads the ZMTP stream alongside it and
// drops a connection before a header past these limits reaches it. Peers only send subscriptions,
// replay requests and handshake commands, all a few bytes. Variables for the tests.
var (
	// maxMessage bounds one incoming message: its frames' bodies plus frameCost per frame.
	maxMessage uint64 = 1 << 20
	// maxConns bounds the open connections on each socket; connections past it are closed at once.
	maxConns = 1024
	// handshakeTimeout bounds the ZMTP greeting and handshake: go-zeromq's ROUTER performs it on its
	// accept goroutine, so a silent peer would otherwise stop every later one from connecting.
	handshakeTimeout = 10 * time.Second
	// replayWriteTimeout bounds one write to a replay client: the replay goroutine answers clients
	// one at a time, so one that stops reading would otherwise stall the others.
	replayWriteTimeout = 10 * time.Second
)

// frameCost is what a frame costs go-zeromq beyond its body (a slice header and an allocation), so
// that a message of many empty frames is bounded too.
const frameCost = 64

// greetingLen is the length of a ZMTP 3 greeting, which precedes the frames.
const greetingLen = 64

var errTooLarge = errors.New("vllmevents: ZMTP message over the size limit")

// A guardListener caps its open connections and guards each one.
type guardListener struct {
	net.Listener
	writeTimeout time.Duration

	mu   sync.Mutex
	open int
}

func (l *guardListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		ok := l.open < maxConns
		if ok {
			l.open++
		}
		l.mu.Unlock()
		if !ok {
			nc.Close()
			continue
		}
		c := &guardConn{Conn: nc, l: l, greeting: greetingLen}
		// go-zeromq neither times out a handshake nor closes a connection whose handshake failed.
		time.AfterFunc(handshakeTimeout, func() {
			if !c.ready.Load() {
				c.Close()
			}
		})
		return c, nil
	}
}

// A guardConn follows the ZMTP framing of what it reads: greeting, then frames of a flags byte, a
// 1-byte or (flag 0x02) 8-byte big-endian length and the body. It closes itself on the first read
// error, since go-zeromq does not close a connection whose handshake failed.
type guardConn struct {
	net.Conn
	l     *guardListener
	once  sync.Once
	ready atomic.Bool // the handshake is over: go-zeromq reads past the peer's first command

	shook    bool // the peer's first command has been read
	greeting int  // greeting bytes still to come

	hdr   [9]byte // the current frame header, hdrN bytes of it read
	hdrN  int
	body  uint64 // body bytes of the current frame still to come
	msg   uint64 // cost of the current message so far
	more  bool   // the current frame is followed by another of the same message
	isCmd bool   // the current frame is a command
}

func (c *guardConn) Read(p []byte) (int, error) {
	if c.shook {
		c.ready.Store(true)
	}
	n, err := c.Conn.Read(p)
	if err == nil {
		err = c.scan(p[:n])
	}
	if err != nil {
		c.Close()
		return 0, err
	}
	return n, nil
}

func (c *guardConn) Write(p []byte) (int, error) {
	if c.ready.Load() && c.l.writeTimeout > 0 {
		c.Conn.SetWriteDeadline(time.Now().Add(c.l.writeTimeout))
	}
	return c.Conn.Write(p)
}

func (c *guardConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		err = c.Conn.Close()
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return err
}

// scan advances the framing state over b, the next bytes read, and fails as soon as a header
// declares a message over maxMessage.
func (c *guardConn) scan(b []byte) error {
	for len(b) > 0 {
		switch {
		case c.greeting > 0:
			k := min(c.greeting, len(b))
			c.greeting -= k
			b = b[k:]
		case c.body > 0:
			k := min(c.body, uint64(len(b)))
			c.body -= k
			b = b[k:]
			if c.body == 0 {
				c.endFrame()
			}
		default:
			c.hdr[c.hdrN] = b[0]
			c.hdrN++
			b = b[1:]
			need := 2
			if c.hdr[0]&0x02 != 0 {
				need = 9
			}
			if c.hdrN < need {
				continue
			}
			size := uint64(c.hdr[1])
			if need == 9 {
				size = binary.BigEndian.Uint64(c.hdr[1:])
			}
			c.hdrN = 0
			if size > maxMessage || c.msg+frameCost+size > maxMessage {
				return fmt.Errorf("%w: a frame of %d bytes", errTooLarge, size)
			}
			c.msg += frameCost + size
			c.more = c.hdr[0]&0x01 != 0
			c.isCmd = c.hdr[0]&0x04 != 0
			c.body = size
			if size == 0 {
				c.endFrame()
			}
		}
	}
	return nil
}

func (c *guardConn) endFrame() {
	if !c.more {
		c.msg = 0
	}
	// The peer's first command is its handshake (READY for NULL security).
	if c.isCmd {
		c.shook = true
	}
}

// guardedTransport is a go-zeromq transport whose listeners are guarded, for the ROUTER socket that
// zmq4 builds itself.
type guardedTransport struct {
	transport.Transport
}

func (t guardedTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := t.Transport.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &guardListener{Listener: ln, writeTimeout: replayWriteTimeout}, nil
}

// guarded maps an endpoint's scheme to its guarded transport, registered with go-zeromq below.
var guarded = map[string]string{"tcp": "vllmevents-tcp", "ipc": "vllmevents-ipc"}

func init() {
	for scheme, name := range guarded {
		network := scheme
		if scheme == "ipc" {
			network = "unix"
		}
		if err := zmq4.RegisterTransport(name, guardedTransport{transport.New(network)}); err != nil {
			panic(err)
		}
	}
}
