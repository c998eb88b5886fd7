package live

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/metrics"
	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/live/vllmevents"
	"github.com/mocker-sim/mocker/sched"
)

// NATSSink publishes every worker's KV events on one NATS subject in Dynamo's RouterEvent JSON, with
// the worker's index as its worker_id: the form Dynamo's routers read before the event plane
// (--kv-events-format json).
type NATSSink struct {
	pubs []*natsevents.Publisher // by worker
}

// NewNATSSink publishes the events of workers 0..workers-1 on subject through nc.
func NewNATSSink(nc *nats.Conn, subject string, workers int) *NATSSink {
	s := &NATSSink{pubs: make([]*natsevents.Publisher, workers)}
	for i := range s.pubs {
		s.pubs[i] = natsevents.NewPublisher(nc, subject, uint64(i))
	}
	return s
}

// Events implements Sink. A publish error (the connection is closed) drops the event: a router that
// misses events routes less well, and the server keeps serving.
func (s *NATSSink) Events(worker, rank int, evs []kvcache.Event) {
	if worker >= len(s.pubs) {
		return
	}
	for _, e := range evs {
		s.pubs[worker].Publish(rank, e)
	}
}

// Prompt implements Sink.
func (*NATSSink) Prompt(uint64, []uint32, string) {}

// Tokens implements Sink.
func (*NATSSink) Tokens(int, uint64, []uint32) {}

// Ended implements Sink.
func (*NATSSink) Ended(int, uint64) {}

// PlaneOptions configure an EventPlaneSink.
type PlaneOptions struct {
	// Scope is the workers' Dynamo namespace and component (KV events) and endpoint (load metrics).
	Scope           natsevents.Scope
	Workers, DPSize int
	Seed            uint64 // publisher ids derive from it
	// WorkerID, when not 0, is the worker_id of a one-worker sink (a fleet worker's id) instead of 0.
	WorkerID uint64
}

// EventPlaneSink publishes on Dynamo's event plane what a Dynamo worker publishes there: every rank's
// KV events as RouterEvents (topic kv-events, scoped to the component) and its KV blocks in use as
// ActiveLoads (kv_metrics, scoped to the endpoint); one publisher per rank and topic, each with its
// own id and gap-free sequence. RouterEvents carry the worker's index as worker_id.
type EventPlaneSink struct {
	dp       int
	wid      uint64                       // added to a worker's index for its worker_id
	kv, load []*natsevents.PlanePublisher // by worker × DPSize + rank
	socks    []*vllmevents.Socket         // ZMQ only

	mu   sync.Mutex
	used []int // kv_used_blocks last published, by worker × DPSize + rank; -1: none yet
}

// newPlaneSink makes the publishers; sender gives publisher j its transport, j = 2 × (worker ×
// DPSize + rank) for KV events and one more for load metrics.
func newPlaneSink(o PlaneOptions, sender func(j int, topic, subject string) (natsevents.Sender, error)) (*EventPlaneSink, error) {
	o.DPSize = max(o.DPSize, 1)
	s := &EventPlaneSink{dp: o.DPSize, wid: o.WorkerID, used: make([]int, o.Workers*o.DPSize)}
	for i := range s.used {
		s.used[i] = -1
		w, r := strconv.Itoa(i/o.DPSize), strconv.Itoa(i%o.DPSize)
		for t, topic := range []string{natsevents.KVEventsTopic, natsevents.LoadTopic} {
			scope := o.Scope
			if topic == natsevents.KVEventsTopic {
				scope.Endpoint = ""
			}
			send, err := sender(2*i+t, topic, scope.Subject(topic))
			if err != nil {
				return nil, err
			}
			p := natsevents.NewPlanePublisher(natsevents.PublisherID(o.Seed, topic, w, r), scope, topic, send)
			if t == 0 {
				s.kv = append(s.kv, p)
			} else {
				s.load = append(s.load, p)
			}
		}
	}
	return s, nil
}

// NewNATSPlaneSink publishes on the event plane over NATS (Dynamo's DYN_EVENT_PLANE=nats): each
// envelope is a message on its publisher's subject.
func NewNATSPlaneSink(nc *nats.Conn, o PlaneOptions) *EventPlaneSink {
	s, _ := newPlaneSink(o, func(int, string, string) (natsevents.Sender, error) {
		// Conn.Publish copies the message before it returns.
		return func(subject string, _ *natsevents.Envelope, wire []byte) error { return nc.Publish(subject, wire) }, nil
	})
	return s
}

// NewZMQPlaneSink publishes on the event plane over ZMQ, Dynamo's default transport. Without broker
// it is Dynamo's direct mode: every publisher binds a PUB socket of its own on endpoint's host,
// publisher j (see Addrs) on its PORT + j, or on a free port each when PORT is 0, and its messages
// lead with its topic. With broker, endpoint is a Dynamo ZMQ broker's XSUB (DYN_ZMQ_BROKER_URL's
// xsub=): one PUB socket connects to it for all publishers, and messages lead with their subject,
// which the broker's subscribers filter on.
func NewZMQPlaneSink(endpoint string, broker bool, o PlaneOptions) (*EventPlaneSink, error) {
	var socks []*vllmevents.Socket
	var s *EventPlaneSink
	var err error
	if broker {
		var k *vllmevents.Socket
		if k, err = vllmevents.DialSocket(endpoint); err == nil {
			socks = append(socks, k)
			s, err = newPlaneSink(o, func(_ int, _, subject string) (natsevents.Sender, error) {
				return zmqSender(k, subject), nil
			})
		}
	} else {
		s, err = newPlaneSink(o, func(j int, topic, _ string) (natsevents.Sender, error) {
			ep := endpoint
			if !strings.HasSuffix(endpoint, ":0") {
				var e error
				if ep, e = offsetPort(endpoint, j); e != nil {
					return nil, e
				}
			}
			k, e := vllmevents.ListenSocket(ep)
			if e != nil {
				return nil, fmt.Errorf("dynamo event plane: publisher %d: %w", j, e)
			}
			socks = append(socks, k)
			return zmqSender(k, topic), nil
		})
	}
	if err != nil {
		for _, k := range socks {
			k.Close()
		}
		return nil, err
	}
	s.socks = socks
	return s, nil
}

func zmqSender(k *vllmevents.Socket, first string) natsevents.Sender {
	return func(_ string, env *natsevents.Envelope, wire []byte) error {
		k.Send(natsevents.ZMQFrames(first, env, wire))
		return nil
	}
}

// Addrs returns the addresses of the PUB sockets that bind, by publisher; nil when they connect.
func (s *EventPlaneSink) Addrs() []net.Addr {
	var a []net.Addr
	for _, k := range s.socks {
		if ad := k.Addr(); ad != nil {
			a = append(a, ad)
		}
	}
	return a
}

// Subscribed returns how many subscriptions the ZMQ sockets have, summed.
func (s *EventPlaneSink) Subscribed() int {
	n := 0
	for _, k := range s.socks {
		n += k.Subscribed()
	}
	return n
}

// Close closes the ZMQ sockets.
func (s *EventPlaneSink) Close() error {
	var first error
	for _, k := range s.socks {
		if err := k.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Events implements Sink. Like NATSSink, it drops what a closed transport refuses.
func (s *EventPlaneSink) Events(worker, rank int, evs []kvcache.Event) {
	i := worker*s.dp + rank
	if i >= len(s.kv) {
		return
	}
	for _, e := range evs {
		s.kv[i].PublishRouterEvent(s.wid+uint64(worker), rank, e)
	}
}

// Prompt implements Sink.
func (*EventPlaneSink) Prompt(uint64, []uint32, string) {}

// Tokens implements Sink.
func (*EventPlaneSink) Tokens(int, uint64, []uint32) {}

// Ended implements Sink.
func (*EventPlaneSink) Ended(int, uint64) {}

// Recorders wraps Options.Recorder (nil: none) so that every rank's state also reaches the event plane:
// an ActiveLoad whenever its KV blocks in use change.
func (s *EventPlaneSink) Recorders(inner func(worker, rank int) Recorder) func(worker, rank int) Recorder {
	return func(w, r int) Recorder {
		var rec Recorder = nopRecorder{}
		if inner != nil {
			if in := inner(w, r); in != nil {
				rec = in
			}
		}
		return loadRecorder{Recorder: rec, s: s, worker: w, rank: r}
	}
}

type loadRecorder struct {
	Recorder
	s            *EventPlaneSink
	worker, rank int
}

func (l loadRecorder) SetState(m sched.Metrics) {
	l.Recorder.SetState(m)
	l.s.publishLoad(l.worker, l.rank, m.ActiveBlocks)
}

func (s *EventPlaneSink) publishLoad(worker, rank, used int) {
	i := worker*s.dp + rank
	if i >= len(s.load) {
		return
	}
	s.mu.Lock()
	changed := s.used[i] != used
	s.used[i] = used
	s.mu.Unlock()
	if changed {
		s.load[i].PublishLoad(s.wid+uint64(worker), rank, uint64(used))
	}
}

// nopRecorder stands for a rank without metrics.
type nopRecorder struct{}

func (nopRecorder) SetState(sched.Metrics)   {}
func (nopRecorder) Prompt(int, int)          {}
func (nopRecorder) Generated(int)            {}
func (nopRecorder) Iteration(int)            {}
func (nopRecorder) QueueTime(time.Duration)  {}
func (nopRecorder) FirstToken(time.Duration) {}
func (nopRecorder) InterToken(time.Duration) {}
func (nopRecorder) Finished(metrics.Request) {}
