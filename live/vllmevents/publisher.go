package vllmevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/go-zeromq/zmq4"
)

// DefaultBufferSize is how many batches a Publisher keeps for replay unless told otherwise: vLLM's
// buffer_steps default.
const DefaultBufferSize = 10_000

// hwm bounds the batches queued for a subscriber; past it, new ones are dropped: vLLM's hwm default.
const hwm = 100_000

// endSeq is the replay's end marker, vLLM's END_SEQ: -1 as 8 bytes big-endian.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("vllmevents: publisher closed")

// Options configure a Publisher, with the meaning of vLLM's KVEventsConfig fields.
type Options struct {
	// Endpoint is where the PUB socket listens, e.g. "tcp://*:5557" (vLLM's default),
	// "tcp://127.0.0.1:5557" or "ipc:///run/kv.sock"; TCP port 0 picks a free port (see Addr). With
	// Connect, it is where a subscriber listens instead.
	Endpoint string
	// Connect makes the PUB socket connect to Endpoint, where the subscriber binds (llm-d's centralized
	// indexer), redialling whenever the connection fails, instead of listening. Binds says which one
	// vLLM chooses for an endpoint.
	Connect bool
	// ReplayEndpoint is where the ROUTER socket serving replays listens (tcp, ipc or inproc); "" serves
	// none.
	ReplayEndpoint string
	// Topic is the first frame of every message; subscribers filter on its prefix.
	Topic string
	// BufferSize is how many of the latest batches replay can serve; 0 means DefaultBufferSize.
	BufferSize int
	// MapFormat encodes events as tagged maps (vLLM PR #42892 on) instead of tagged arrays.
	MapFormat bool
	// DPRank is the engine's data-parallel rank. As in vLLM, it is stamped on every batch and offsets
	// both endpoints: added to a TCP port (other than 0), appended as "_dp<rank>" to an inproc name.
	DPRank int
}

// A Publisher sends event batches as vLLM's ZmqEventPublisher does and serves replays of recent ones. Its
// methods may be called concurrently.
type Publisher struct {
	pub       *pubSocket
	replay    zmq4.Socket
	topic     []byte
	mapFormat bool
	rank      int
	done      chan struct{} // closed when the replay goroutine has returned

	mu     sync.Mutex
	closed bool
	next   uint64  // sequence number of the next batch
	ring   []entry // the latest batches, oldest at ring[start] once full
	size   int
	start  int
}

type entry struct {
	seq     uint64
	payload []byte
}

// Listen binds the sockets described by o and starts serving replays.
func Listen(o Options) (*Publisher, error) {
	size := o.BufferSize
	if size == 0 {
		size = DefaultBufferSize
	}
	if size < 0 {
		return nil, fmt.Errorf("vllmevents: negative buffer size %d", size)
	}
	ep, err := offsetEndpoint(o.Endpoint, o.DPRank)
	if err != nil {
		return nil, err
	}
	open := listenPub
	if o.Connect {
		open = dialPub
	}
	pub, err := open(ep)
	if err != nil {
		return nil, err
	}
	p := &Publisher{
		pub:       pub,
		topic:     []byte(o.Topic),
		mapFormat: o.MapFormat,
		rank:      o.DPRank,
		done:      make(chan struct{}),
		size:      size,
	}
	if o.ReplayEndpoint == "" {
		close(p.done)
		return p, nil
	}
	rep, err := offsetEndpoint(o.ReplayEndpoint, o.DPRank)
	if err == nil {
		if scheme, addr, ok := strings.Cut(rep, "://"); ok && guarded[scheme] != "" {
			rep = guarded[scheme] + "://" + addr
		}
		// Peers' failed handshakes would be logged: a flood of them, a flood of lines.
		p.replay = zmq4.NewRouter(context.Background(), zmq4.WithLogger(log.New(io.Discard, "", 0)))
		if err = p.replay.Listen(rep); err != nil {
			p.replay.Close()
			err = fmt.Errorf("vllmevents: %w", err)
		}
	}
	if err != nil {
		p.pub.close()
		return nil, err
	}
	go p.serveReplay()
	return p, nil
}

// Addr returns the address the PUB socket listens on; nil when it connects.
func (p *Publisher) Addr() net.Addr {
	if p.pub.ln == nil {
		return nil
	}
	return p.pub.ln.Addr()
}

// Binds reports whether vLLM's ZmqEventPublisher binds its PUB socket to endpoint rather than
// connecting to it: when the address is a wildcard ("*", "::" or "0.0.0.0" anywhere in it) or the
// transport is ipc or inproc. A host address connects, to a subscriber that binds.
func Binds(endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::") || strings.Contains(endpoint, "0.0.0.0") ||
		strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://")
}

// ReplayAddr returns the address the replay socket listens on, or nil if there is none.
func (p *Publisher) ReplayAddr() net.Addr {
	if p.replay == nil {
		return nil
	}
	return p.replay.Addr()
}

// Publish sends b, stamped with the publisher's DPRank, under the next sequence number and keeps it for
// replay. As with any PUB socket, subscribers that are not connected yet, or too slow, miss it.
func (p *Publisher) Publish(b Batch) error {
	b.DPRank = p.rank
	payload, err := EncodeBatch(b, p.mapFormat)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	seq := p.next
	p.next++
	p.pub.send([][]byte{p.topic, seqFrame(seq), payload})
	if len(p.ring) < p.size {
		p.ring = append(p.ring, entry{seq, payload})
	} else {
		p.ring[p.start] = entry{seq, payload}
		p.start = (p.start + 1) % p.size
	}
	return nil
}

// Close closes the sockets and waits for the replay goroutine to return.
func (p *Publisher) Close() error {
	p.mu.Lock()
	closed := p.closed
	p.closed = true
	p.mu.Unlock()
	if closed {
		return nil
	}
	err := p.pub.close()
	if p.replay != nil {
		// Connections that clients closed first fail to close again: no news to the caller.
		if e := p.replay.Close(); err == nil && !errors.Is(e, net.ErrClosed) {
			err = e
		}
	}
	<-p.done
	return err
}

// serveReplay answers replay requests until the ROUTER socket is closed.
func (p *Publisher) serveReplay() {
	defer close(p.done)
	for {
		msg, err := p.replay.Recv()
		if err != nil {
			return // closed
		}
		// [identity, "", start seq]; vLLM ignores anything else, and reads the big-endian seq whatever its
		// length: one too long for 64 bits is past every batch, so only the end marker goes back.
		if len(msg.Frames) != 3 {
			continue
		}
		id := msg.Frames[0]
		start := uint64(math.MaxUint64)
		if digits := bytes.TrimLeft(msg.Frames[2], "\x00"); len(digits) <= 8 {
			start = 0
			for _, x := range digits {
				start = start<<8 | uint64(x)
			}
		}
		for _, e := range p.since(start) {
			if err := p.replay.SendMulti(zmq4.NewMsgFrom(id, nil, p.topic, seqFrame(e.seq), e.payload)); err != nil {
				break // the client's connection failed; the next request may fare better
			}
		}
		p.replay.SendMulti(zmq4.NewMsgFrom(id, nil, nil, endSeq, nil))
	}
}

// since returns the buffered batches numbered start or later, oldest first.
func (p *Publisher) since(start uint64) []entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []entry
	for i := range p.ring {
		if e := p.ring[(p.start+i)%len(p.ring)]; e.seq >= start {
			out = append(out, e)
		}
	}
	return out
}

func seqFrame(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }

// offsetEndpoint gives data-parallel rank rank its own endpoint, as vLLM's offset_endpoint_port does: the
// TCP port plus rank, or an inproc name with "_dp<rank>" appended. Port 0 (any free port) stays 0.
func offsetEndpoint(ep string, rank int) (string, error) {
	switch {
	case rank == 0 || ep == "":
		return ep, nil
	case strings.HasPrefix(ep, "inproc://"):
		return ep + "_dp" + strconv.Itoa(rank), nil
	case strings.HasPrefix(ep, "tcp://"):
		i := strings.LastIndexByte(ep, ':')
		port, err := strconv.Atoi(ep[i+1:])
		if err != nil {
			return "", fmt.Errorf("vllmevents: bad port in endpoint %q", ep)
		}
		if port == 0 {
			return ep, nil
		}
		return ep[:i+1] + strconv.Itoa(port+rank), nil
	}
	return "", fmt.Errorf("vllmevents: cannot offset endpoint %q for data-parallel rank %d", ep, rank)
}
