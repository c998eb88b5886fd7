package live

import (
	"github.com/nats-io/nats.go"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/natsevents"
)

// NATSSink publishes every worker's KV events on one NATS subject in Dynamo's RouterEvent JSON, with
// the worker's index as its worker_id.
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
func (*NATSSink) Prompt(uint64, []uint32) {}

// Tokens implements Sink.
func (*NATSSink) Tokens(int, uint64, []uint32) {}

// Ended implements Sink.
func (*NATSSink) Ended(int, uint64) {}
