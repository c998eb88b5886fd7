package vllmevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// timeout only stops a hung test: it is far beyond what a loaded machine needs.
const timeout = 30 * time.Second

func listen(t *testing.T, o Options) *Publisher {
	t.Helper()
	p, err := Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// dial connects a client socket to endpoint and delivers what it receives on a channel, closed when
// the socket is.
func dial(t *testing.T, s zmq4.Socket, endpoint string) <-chan zmq4.Msg {
	t.Helper()
	if err := s.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ch := make(chan zmq4.Msg, 1000)
	go func() {
		defer close(ch)
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			ch <- m
		}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan zmq4.Msg) zmq4.Msg {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("socket closed")
		}
		return m
	case <-time.After(timeout):
		t.Fatal("nothing received")
	}
	panic("unreachable")
}

func TestPublishSubscribe(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		p := listen(t, Options{Endpoint: "tcp://127.0.0.1:0", Topic: topic, MapFormat: true, DPRank: 3})
		testPublishSubscribe(t, p, "tcp://"+p.Addr().String(), 3)
	})
	t.Run("ipc", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kv.sock")
		p := listen(t, Options{Endpoint: "ipc://" + path, Topic: topic}) // vLLM offsets no ipc path
		testPublishSubscribe(t, p, "ipc://"+path, 0)
	})
}

const topic = "kv@pod-1@model"

func testPublishSubscribe(t *testing.T, p *Publisher, endpoint string, rank int) {
	sub := zmq4.NewSub(context.Background())
	msgs := dial(t, sub, endpoint)
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		t.Fatal(err)
	}

	// The subscription reaches the publisher asynchronously, and a PUB socket drops what nobody is
	// subscribed to yet: publish empty probes until one arrives. From then on nothing may be lost.
	deadline := time.After(timeout)
	var m zmq4.Msg
probe:
	for {
		if err := p.Publish(Batch{}); err != nil {
			t.Fatal(err)
		}
		select {
		case m = <-msgs:
			break probe
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatal("no probe arrived")
		}
	}

	stored := BlockStored{BlockHashes: []uint64{11, 12}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2,
		Medium: MediumGPU}
	var want []Batch
	for i := range 5 {
		b := Batch{TS: float64(100 + i), Events: []Event{stored, BlockRemoved{BlockHashes: []uint64{11}}}}
		if err := p.Publish(b); err != nil {
			t.Fatal(err)
		}
		b.DPRank = rank
		want = append(want, b)
	}
	var got []Batch
	for prev := int64(-1); ; m = recv(t, msgs) {
		if len(m.Frames) != 3 || string(m.Frames[0]) != topic || len(m.Frames[1]) != 8 {
			t.Fatalf("frames %q", m.Frames)
		}
		seq := int64(binary.BigEndian.Uint64(m.Frames[1]))
		if prev >= 0 && seq != prev+1 {
			t.Fatalf("seq %d after %d", seq, prev)
		}
		prev = seq
		b, err := DecodeBatch(m.Frames[2])
		if err != nil {
			t.Fatal(err)
		}
		if b.DPRank != rank {
			t.Fatalf("batch %d has rank %d", seq, b.DPRank)
		}
		if len(b.Events) > 0 { // not a probe
			got = append(got, b)
		}
		if len(got) == len(want) {
			break
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("received %+v\nwant %+v", got, want)
	}
}

// replay asks for the batches from start and returns the replies up to the end marker.
func replay(t *testing.T, dealer zmq4.Socket, replies <-chan zmq4.Msg, start []byte) [][][]byte {
	t.Helper()
	// A DEALER sends the empty delimiter a REQ socket would add itself.
	if err := dealer.Send(zmq4.NewMsgFrom(nil, start)); err != nil {
		t.Fatal(err)
	}
	var out [][][]byte
	for {
		m := recv(t, replies)
		if len(m.Frames) != 4 || len(m.Frames[0]) != 0 {
			t.Fatalf("reply frames %q", m.Frames)
		}
		if bytes.Equal(m.Frames[2], endSeq) {
			if len(m.Frames[1]) != 0 || len(m.Frames[3]) != 0 {
				t.Fatalf("end marker %q", m.Frames)
			}
			return out
		}
		out = append(out, m.Frames[1:])
	}
}

func TestReplay(t *testing.T) {
	p := listen(t, Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", Topic: "t",
		BufferSize: 5})
	payloads := make([][]byte, 8)
	for i := range payloads {
		b := Batch{TS: float64(i), Events: []Event{AllBlocksCleared{}}}
		if err := p.Publish(b); err != nil {
			t.Fatal(err)
		}
		payloads[i], _ = EncodeBatch(b, false)
	}
	dealer := zmq4.NewDealer(context.Background())
	replies := dial(t, dealer, "tcp://"+p.ReplayAddr().String())

	// A request of the wrong shape gets no answer, and the next one is still served.
	if err := dealer.Send(zmq4.NewMsg(seqFrame(0))); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		start []byte
		first uint64
	}{
		{seqFrame(5), 5},
		{seqFrame(0), 3},                       // batches 0 to 2 were dropped from the full buffer
		{seqFrame(8), 8},                       // nothing that new: just the end marker
		{[]byte{6}, 6},                         // vLLM reads the number whatever its length
		{make([]byte, 9), 3},                   // leading zeros included
		{[]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, 8}, // past 2^64
	} {
		got := replay(t, dealer, replies, c.start)
		if len(got) != 8-int(c.first) {
			t.Fatalf("from % x: %d batches, want %d", c.start, len(got), 8-c.first)
		}
		for i, f := range got {
			seq := c.first + uint64(i)
			if string(f[0]) != "t" || !bytes.Equal(f[1], seqFrame(seq)) || !bytes.Equal(f[2], payloads[seq]) {
				t.Errorf("from % x: reply %d = %q, want batch %d", c.start, i, f, seq)
			}
		}
	}
}

func TestConcurrentPublish(t *testing.T) {
	const writers, each = 8, 50
	p := listen(t, Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := p.Publish(Batch{TS: float64(w*each + i)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	dealer := zmq4.NewDealer(context.Background())
	got := replay(t, dealer, dial(t, dealer, "tcp://"+p.ReplayAddr().String()), seqFrame(0))
	if len(got) != writers*each {
		t.Fatalf("%d batches replayed, want %d", len(got), writers*each)
	}
	var ts []float64
	for i, f := range got {
		if !bytes.Equal(f[1], seqFrame(uint64(i))) {
			t.Fatalf("reply %d has seq % x", i, f[1])
		}
		b, err := DecodeBatch(f[2])
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, b.TS)
	}
	slices.Sort(ts)
	for i, v := range ts {
		if v != float64(i) {
			t.Fatalf("batch TS %v missing or repeated", i)
		}
	}

	if err := p.Close(); err != nil {
		t.Error(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.Publish(Batch{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Close: %v", err)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		p := listen(t, Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"})
		sub := zmq4.NewSub(context.Background())
		dial(t, sub, "tcp://"+p.Addr().String())
		sub.SetOption(zmq4.OptionSubscribe, "")
		dealer := zmq4.NewDealer(context.Background())
		replies := dial(t, dealer, "tcp://"+p.ReplayAddr().String())
		p.Publish(Batch{TS: 1})
		replay(t, dealer, replies, seqFrame(0))
		// The publisher goes first, so its own Close must end the goroutines serving the clients.
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		sub.Close()
		dealer.Close()
	}()
	for start := time.Now(); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > timeout {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(),
				buf[:runtime.Stack(buf, true)])
		}
	}
}

func TestListenErrors(t *testing.T) {
	for _, o := range []Options{
		{Endpoint: "nope://x"},
		{Endpoint: "tcp://127.0.0.1:0", BufferSize: -1},
		{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "nope://x"},
		{Endpoint: "ipc:///tmp/vllmevents-test", DPRank: 1},
	} {
		if p, err := Listen(o); err == nil {
			p.Close()
			t.Errorf("Listen(%+v) succeeded", o)
		}
	}
}

func TestOffsetEndpoint(t *testing.T) {
	for _, c := range []struct {
		ep   string
		rank int
		want string
	}{
		{"tcp://*:5557", 0, "tcp://*:5557"},
		{"tcp://*:5557", 2, "tcp://*:5559"},
		{"tcp://[::1]:5557", 1, "tcp://[::1]:5558"},
		{"tcp://127.0.0.1:0", 1, "tcp://127.0.0.1:0"},
		{"inproc://cache", 1, "inproc://cache_dp1"},
		{"ipc:///tmp/x", 0, "ipc:///tmp/x"},
		{"", 3, ""},
	} {
		if got, err := offsetEndpoint(c.ep, c.rank); err != nil || got != c.want {
			t.Errorf("offsetEndpoint(%q, %d) = %q, %v; want %q", c.ep, c.rank, got, err, c.want)
		}
	}
	for _, ep := range []string{"ipc:///tmp/x", "tcp://host", "udp://h:1"} {
		if got, err := offsetEndpoint(ep, 1); err == nil {
			t.Errorf("offsetEndpoint(%q, 1) = %q, want an error", ep, got)
		}
	}
}

func TestSubscriptionMatching(t *testing.T) {
	sub := subscriber{topics: map[string]int{"kv@a": 1, "x": 2}}
	for topic, want := range map[string]bool{"kv@a": true, "kv@ab": true, "kv@": false, "xyz": true, "": false} {
		if got := sub.matches([]byte(topic)); got != want {
			t.Errorf("matches(%q) = %v", topic, got)
		}
	}
	sub.topics[""] = 1 // everything
	if !sub.matches(nil) {
		t.Error("the empty subscription does not match the empty topic")
	}
}

// TestBinds pins vLLM's ZmqEventPublisher rule: a wildcard address or an ipc/inproc endpoint binds, a
// host address connects.
func TestBinds(t *testing.T) {
	for ep, want := range map[string]bool{
		"tcp://*:5557":           true,
		"tcp://[::]:5557":        true,
		"tcp://0.0.0.0:5557":     true,
		"ipc:///tmp/kv.sock":     true,
		"inproc://kv":            true,
		"tcp://127.0.0.1:5557":   false,
		"tcp://indexer:5557":     false,
		"tcp://10.0.0.7:5557":    false,
		"tcp://[fe80::1]:5557":   true, // "::" is in it, as vLLM tests
		"tcp://epp.svc.local:80": false,
	} {
		if got := Binds(ep); got != want {
			t.Errorf("Binds(%q) = %v, want %v", ep, got, want)
		}
	}
}

// TestConnect is llm-d's centralized mode: the subscriber binds and filters on its topic prefix, the
// publisher connects (before the subscriber listens, so it must keep dialing) and its batches reach it.
func TestConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the port is free again: the publisher dials nothing yet
	p := listen(t, Options{Endpoint: "tcp://" + addr, Topic: topic, Connect: true})
	if p.Addr() != nil {
		t.Fatalf("a connecting publisher's Addr = %v, want nil", p.Addr())
	}
	sub := zmq4.NewSub(context.Background())
	t.Cleanup(func() { sub.Close() })
	if err := sub.Listen("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		t.Fatal(err)
	}
	got := make(chan zmq4.Msg, 1)
	go func() {
		if m, err := sub.Recv(); err == nil {
			got <- m
		}
	}()
	// A PUB drops what it sends before the subscription arrives: publish until a batch gets through.
	deadline := time.After(timeout)
	for {
		if err := p.Publish(Batch{TS: 1, Events: []Event{AllBlocksCleared{}}}); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if len(m.Frames) != 3 || string(m.Frames[0]) != topic {
				t.Fatalf("received %d frames, topic %q; want 3 frames under %q", len(m.Frames), m.Frames[0], topic)
			}
			return
		case <-deadline:
			t.Fatal("nothing received")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
