package live

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/live/natsevents/planetest"
	"github.com/mocker-sim/mocker/router"
)

var testScope = natsevents.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}

// planeMsg is one event-plane message as a subscriber got it.
type planeMsg struct {
	first string // NATS subject or ZMQ topic frame
	env   natsevents.Envelope
}

type planeCollector struct {
	mu   sync.Mutex
	msgs []planeMsg
	err  error
}

func (c *planeCollector) add(first string, env natsevents.Envelope, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("message %d: %w", len(c.msgs), err)
	}
	c.msgs = append(c.msgs, planeMsg{first, env})
}

func (c *planeCollector) snapshot() ([]planeMsg, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs), c.err
}

// planeWorkload sends prompts sharing prefixes in four families, more than two 24-block caches hold.
func planeWorkload(t *testing.T, c openai.Client) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 3)
	for i := range 40 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			prompt := fmt.Sprintf("family %d. %s question %d of the batch", i%4, strings.Repeat(longPrompt, 2), i)
			_, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: testModel,
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(8)})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// checkReplay decodes every message with Dynamo's schema (planetest), replays the RouterEvents into a
// router's index and waits (up to 60 s) until it equals each engine's cache and the last ActiveLoad
// of each worker its blocks in use; then checks what Dynamo's subscribers rely on: each publisher
// has one topic and one worker and numbers its messages 0, 1, 2, ... without a gap.
func checkReplay(t *testing.T, s *Server, col *planeCollector, firstFrame func(topic, subject string) string) {
	t.Helper()
	var msgs []planeMsg
	var mismatch string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		msgs, err = col.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if mismatch = replayMismatch(t, s, msgs); mismatch == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s and %d messages: %s", len(msgs), mismatch)
		}
	}

	type pub struct {
		topic  string
		worker uint64
		next   uint64
	}
	pubs := map[uint64]*pub{}
	var stored, removed int
	for i, m := range msgs {
		var worker uint64
		switch m.env.Topic {
		case natsevents.KVEventsTopic:
			re, _ := planetest.RouterEvent(m.env.Payload) // decoded by replayMismatch already
			worker = re.Worker
			switch re.Event.Kind {
			case kvcache.Stored:
				stored++
			case kvcache.Removed:
				removed++
			}
			if want := firstFrame(m.env.Topic, "namespace.dynamo.component.backend.kv-events"); m.first != want {
				t.Fatalf("message %d: sent on %q, want %q", i, m.first, want)
			}
		case natsevents.LoadTopic:
			l, _ := planetest.ActiveLoad(m.env.Payload)
			worker = l.Worker
			if want := firstFrame(m.env.Topic, "namespace.dynamo.component.backend.endpoint.generate.kv_metrics"); m.first != want {
				t.Fatalf("message %d: sent on %q, want %q", i, m.first, want)
			}
		default:
			t.Fatalf("message %d: topic %q", i, m.env.Topic)
		}
		p := pubs[m.env.PublisherID]
		if p == nil {
			p = &pub{topic: m.env.Topic, worker: worker}
			pubs[m.env.PublisherID] = p
		}
		if p.topic != m.env.Topic || p.worker != worker {
			t.Fatalf("message %d: publisher %d sends %s of worker %d, and before %s of worker %d", i, m.env.PublisherID, m.env.Topic, worker, p.topic, p.worker)
		}
		if m.env.Sequence != p.next {
			t.Fatalf("message %d: publisher %d's sequence %d, want %d", i, m.env.PublisherID, m.env.Sequence, p.next)
		}
		p.next++
	}
	if len(pubs) != 2*len(s.workers) {
		t.Fatalf("%d publishers, want 2 per worker", len(pubs))
	}
	if stored == 0 || removed == 0 {
		t.Fatalf("%d stored and %d removed events: the workload must evict", stored, removed)
	}
	t.Logf("%d messages: %d stored, %d removed events", len(msgs), stored, removed)
}

// replayMismatch says how the replayed index or loads differ from the engines ("": they agree).
func replayMismatch(t *testing.T, s *Server, msgs []planeMsg) string {
	r, err := router.New(router.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for w := range s.workers {
		r.AddTarget(router.Target{Worker: w})
	}
	used := map[uint64]uint64{}
	for i, m := range msgs {
		switch m.env.Topic {
		case natsevents.KVEventsTopic:
			re, err := planetest.RouterEvent(m.env.Payload)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if re.Tier != "device" {
				t.Fatalf("message %d: tier %q", i, re.Tier)
			}
			r.Apply(router.Target{Worker: int(re.Worker), Rank: re.Rank}, re.Event)
		case natsevents.LoadTopic:
			l, err := planetest.ActiveLoad(m.env.Payload)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if l.Used == nil || l.DecodeBlocks != nil || l.PrefillTokens != nil || l.Rank != 0 {
				t.Fatalf("message %d: load %+v", i, l)
			}
			used[l.Worker] = *l.Used
		}
	}
	for i, w := range s.workers {
		w.mu.Lock()
		cached := w.eng.AppendCached(0, nil)
		active := w.eng.Metrics()[0].ActiveBlocks
		w.mu.Unlock()
		got := r.AppendIndexed(router.Target{Worker: i}, nil)
		slices.Sort(cached)
		slices.Sort(got)
		if !slices.Equal(got, cached) {
			return fmt.Sprintf("worker %d: %d blocks replayed, the engine caches %d", i, len(got), len(cached))
		}
		if u, ok := used[uint64(i)]; !ok || u != uint64(active) {
			return fmt.Sprintf("worker %d: kv_used_blocks %d (published: %v), the engine uses %d", i, u, ok, active)
		}
	}
	return ""
}

func planeOptions() Options {
	o := testOptions(5, 1, math.Inf(1))
	o.Workers = 2
	o.Engine.VLLM.NumBlocks = 24
	return o
}

func TestEventPlaneNATS(t *testing.T) {
	ns, url, err := natsevents.StartEmbedded(0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	pc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	sc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var col planeCollector
	// As Dynamo's NATS subscriber does: a plain subscription to the subject, no discovery needed.
	if _, err := sc.Subscribe("namespace.dynamo.component.backend.>", func(m *nats.Msg) {
		env, err := planetest.Envelope(m.Data)
		col.add(m.Subject, env, err)
	}); err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	o := planeOptions()
	ps := NewNATSPlaneSink(pc, PlaneOptions{Scope: testScope, Workers: o.Workers, Seed: 1})
	o.Sinks, o.Recorder = []Sink{ps}, ps.Recorders(nil)
	s, _, c := start(t, o)
	planeWorkload(t, c)
	if err := pc.Flush(); err != nil {
		t.Fatal(err)
	}
	checkReplay(t, s, &col, func(_, subject string) string { return subject })
}

// zmqCollect receives from sub until ctx ends.
func zmqCollect(ctx context.Context, sub zmq4.Socket, col *planeCollector) {
	for ctx.Err() == nil {
		m, err := sub.Recv()
		if err != nil {
			return
		}
		topic, env, err := planetest.ZMQ(m.Frames)
		col.add(topic, env, err)
	}
}

// waitSubscribed waits (up to 30 s) until the sink's sockets have n subscriptions: a PUB socket drops
// what it sends before.
func waitSubscribed(t *testing.T, ps *EventPlaneSink, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ps.Subscribed() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d subscriptions after 30 s", ps.Subscribed(), n)
		}
	}
}

// Direct mode: a subscriber connects to every publisher's own socket, as Dynamo's does to the
// endpoints discovery lists, and messages lead with the topic.
func TestEventPlaneZMQDirect(t *testing.T) {
	o := planeOptions()
	ps, err := NewZMQPlaneSink("tcp://127.0.0.1:0", false, PlaneOptions{Scope: testScope, Workers: o.Workers, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	addrs := ps.Addrs()
	if len(addrs) != 4 {
		t.Fatalf("%d sockets, want one per worker and topic", len(addrs))
	}
	ctx, cancel := context.WithCancel(context.Background())
	sub := zmq4.NewSub(ctx)
	defer func() { cancel(); sub.Close() }()
	for _, a := range addrs {
		if err := sub.Dial("tcp://" + a.String()); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	waitSubscribed(t, ps, len(addrs))
	var col planeCollector
	go zmqCollect(ctx, sub, &col)
	o.Sinks, o.Recorder = []Sink{ps}, ps.Recorders(nil)
	s, _, c := start(t, o)
	planeWorkload(t, c)
	checkReplay(t, s, &col, func(topic, _ string) string { return topic })
}

// Broker mode: mocker connects to a broker's XSUB (here a SUB that binds, which speaks the same to a
// PUB) and messages lead with their subject, the broker subscribers' filter.
func TestEventPlaneZMQBroker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sub := zmq4.NewSub(ctx)
	defer func() { cancel(); sub.Close() }()
	if err := sub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "namespace.dynamo.component.backend."); err != nil {
		t.Fatal(err)
	}
	o := planeOptions()
	ps, err := NewZMQPlaneSink("tcp://"+sub.Addr().String(), true, PlaneOptions{Scope: testScope, Workers: o.Workers, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if ps.Addrs() != nil {
		t.Fatalf("a connecting sink listens on %v", ps.Addrs())
	}
	waitSubscribed(t, ps, 1)
	var col planeCollector
	go zmqCollect(ctx, sub, &col)
	o.Sinks, o.Recorder = []Sink{ps}, ps.Recorders(nil)
	s, _, c := start(t, o)
	planeWorkload(t, c)
	checkReplay(t, s, &col, func(_, subject string) string { return subject })
}
