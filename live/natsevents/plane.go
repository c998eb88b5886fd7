package natsevents

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zeebo/xxh3"

	"github.com/mocker-sim/mocker/kvcache"
)

// Dynamo's event plane (lib/runtime/src/transports/event_plane) carries every event as a MessagePack
// EventEnvelope {publisher_id, sequence, published_at, topic, payload} whose payload is the MessagePack
// event itself, both written by rmp_serde::to_vec_named: structs as maps keyed by field name, in
// declaration order, integers in their shortest form, Option::None as nil, externally tagged enums
// as {"variant": value} and unit variants as the bare name. On NATS the envelope is the message body,
// on the subject of Scope.Subject; on ZMQ it travels in a four-frame message (see ZMQFrames).

// Topics of the event plane that workers publish on (lib/llm/src/kv_router.rs).
const (
	KVEventsTopic = "kv-events"  // RouterEvents, on the worker's component
	LoadTopic     = "kv_metrics" // ActiveLoads, on the worker's endpoint
)

// maxPublisherID keeps publisher ids exact in float64-based JSON, as Dynamo masks its random ones.
const maxPublisherID = 1<<53 - 1

// Scope is where a publisher sits: a Dynamo namespace and component, and an endpoint for
// endpoint-scoped topics (LoadTopic). Dynamo's workers default to dynamo/backend/generate.
type Scope struct {
	Namespace, Component, Endpoint string
}

// Subject returns the NATS subject (and the ZMQ broker's routing key) of topic in s, as Dynamo's
// EventScope::subject writes it: namespace.NS.component.C[.endpoint.E].TOPIC with every segment
// percent-encoded, so that a name cannot add a NATS token or a wildcard.
func (s Scope) Subject(topic string) string {
	var b strings.Builder
	b.WriteString("namespace.")
	b.WriteString(segment(s.Namespace))
	b.WriteString(".component.")
	b.WriteString(segment(s.Component))
	if s.Endpoint != "" {
		b.WriteString(".endpoint.")
		b.WriteString(segment(s.Endpoint))
	}
	b.WriteByte('.')
	b.WriteString(segment(topic))
	return b.String()
}

// segment keeps ASCII letters, digits, '-' and '_' and writes every other byte as %XX.
func segment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// PublisherID derives a publisher id from the run's seed and the names that tell publishers apart.
// Dynamo draws its ids at random; deriving them keeps one seed's output byte-identical.
func PublisherID(seed uint64, names ...string) uint64 {
	h := xxh3.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	for _, n := range names {
		h.WriteString(n)
		h.Write([]byte{0})
	}
	return h.Sum64() & maxPublisherID
}

// Envelope is Dynamo's EventEnvelope.
type Envelope struct {
	Topic       string
	PublisherID uint64
	Sequence    uint64 // 0, 1, 2, ... per publisher
	PublishedAt uint64 // Unix milliseconds
	Payload     []byte
}

// encoder writes MessagePack into a reusable buffer.
type encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

func newEncoder() *encoder {
	e := &encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	return e
}

// Writes to a bytes.Buffer do not fail, so neither do the encoder's calls below.

func (e *encoder) key(k string)    { e.enc.EncodeString(k) }
func (e *encoder) uint(v uint64)   { e.enc.EncodeUint(v) }
func (e *encoder) mapLen(n int)    { e.enc.EncodeMapLen(n) }
func (e *encoder) nil()            { e.enc.EncodeNil() }
func (e *encoder) str(s string)    { e.enc.EncodeString(s) }
func (e *encoder) arrayLen(n int)  { e.enc.EncodeArrayLen(n) }
func (e *encoder) bytes(b []byte)  { e.enc.EncodeBytes(b) }
func (e *encoder) reset()          { e.buf.Reset() }
func (e *encoder) written() []byte { return e.buf.Bytes() }

// envelope writes env in the field order of Dynamo's EventEnvelope and MsgpackCodec's
// encode_envelope_parts; payload is serialized as MessagePack bin (serialize_bytes).
func (e *encoder) envelope(env *Envelope) {
	e.mapLen(5)
	e.key("publisher_id")
	e.uint(env.PublisherID)
	e.key("sequence")
	e.uint(env.Sequence)
	e.key("published_at")
	e.uint(env.PublishedAt)
	e.key("topic")
	e.str(env.Topic)
	e.key("payload")
	e.bytes(env.Payload)
}

// routerEvent writes RouterEvent {worker_id, storage_tier, residency_domain, event: KvCacheEvent
// {event_id, data, dp_rank}} as Dynamo's worker publisher builds it (RouterEvent::with_storage_tier:
// the event's medium as its tier, domain "worker", no state_source). KvCacheEventData is {"stored": KvCacheStoreData
// {parent_hash, start_position, blocks: [{block_hash, tokens_hash, mm_extra_info}]}}, {"removed":
// {block_hashes}} or "cleared"; start_position and mm_extra_info are None.
func (e *encoder) routerEvent(worker uint64, rank int, ev *kvcache.Event) error {
	if rank < 0 || uint64(rank) > 1<<32-1 {
		return fmt.Errorf("natsevents: dp_rank %d out of range", rank)
	}
	e.mapLen(4)
	e.key("worker_id")
	e.uint(worker)
	e.key("storage_tier")
	e.str(StorageTier(ev.Medium))
	e.key("residency_domain")
	e.str("worker")
	e.key("event")
	e.mapLen(3)
	e.key("event_id")
	e.uint(ev.ID)
	e.key("data")
	switch ev.Kind {
	case kvcache.Stored:
		e.mapLen(1)
		e.key("stored")
		e.mapLen(3)
		e.key("parent_hash")
		if ev.HasParent {
			e.uint(ev.Parent)
		} else {
			e.nil()
		}
		e.key("start_position")
		e.nil()
		e.key("blocks")
		e.arrayLen(len(ev.Blocks))
		for _, b := range ev.Blocks {
			e.mapLen(3)
			e.key("block_hash")
			e.uint(b.Hash)
			e.key("tokens_hash")
			e.uint(b.TokensHash)
			e.key("mm_extra_info")
			e.nil()
		}
	case kvcache.Removed:
		e.mapLen(1)
		e.key("removed")
		e.mapLen(1)
		e.key("block_hashes")
		e.arrayLen(len(ev.Hashes))
		for _, h := range ev.Hashes {
			e.uint(h)
		}
	case kvcache.Cleared:
		e.str("cleared")
	default:
		return fmt.Errorf("natsevents: event %d has unknown kind %d", ev.ID, ev.Kind)
	}
	e.key("dp_rank")
	e.uint(uint64(rank))
	return nil
}

// activeLoad writes ActiveLoad {worker_id, dp_rank, active_decode_blocks, active_prefill_tokens,
// scheduler_load_scope, kv_used_blocks} as a worker publishes it: only kv_used_blocks is set, the
// other loads are the router's own view.
func (e *encoder) activeLoad(worker uint64, rank int, used uint64) {
	e.mapLen(6)
	e.key("worker_id")
	e.uint(worker)
	e.key("dp_rank")
	e.uint(uint64(rank))
	e.key("active_decode_blocks")
	e.nil()
	e.key("active_prefill_tokens")
	e.nil()
	e.key("scheduler_load_scope")
	e.nil()
	e.key("kv_used_blocks")
	e.uint(used)
}

// A Sender hands one envelope to a transport: wire is its MessagePack encoding, valid only during
// the call; subject is Scope.Subject(env.Topic).
type Sender func(subject string, env *Envelope, wire []byte) error

// PlanePublisher is one Dynamo EventPublisher: one topic, one publisher id and its own gap-free
// sequence. It is safe for concurrent use.
type PlanePublisher struct {
	id      uint64
	topic   string
	subject string
	send    Sender
	now     func() time.Time

	mu      sync.Mutex
	seq     uint64
	payload *encoder
	wire    *encoder
}

// NewPlanePublisher returns a publisher of topic in scope with publisher id id (see PublisherID).
func NewPlanePublisher(id uint64, scope Scope, topic string, send Sender) *PlanePublisher {
	return &PlanePublisher{id: id, topic: topic, subject: scope.Subject(topic), send: send, now: time.Now,
		payload: newEncoder(), wire: newEncoder()}
}

// ID returns the publisher id.
func (p *PlanePublisher) ID() uint64 { return p.id }

// Subject returns the subject the publisher sends on.
func (p *PlanePublisher) Subject() string { return p.subject }

// PublishRouterEvent publishes one KV event of rank rank of worker.
func (p *PlanePublisher) PublishRouterEvent(worker uint64, rank int, ev kvcache.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.payload.reset()
	if err := p.payload.routerEvent(worker, rank, &ev); err != nil {
		return err
	}
	return p.publish()
}

// PublishLoad publishes rank rank of worker's KV blocks in use.
func (p *PlanePublisher) PublishLoad(worker uint64, rank int, used uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.payload.reset()
	p.payload.activeLoad(worker, rank, used)
	return p.publish()
}

// publish wraps the payload in the next envelope and sends it. A sequence number is spent only on an
// envelope the transport took, so a subscriber sees a gap only where messages were lost.
func (p *PlanePublisher) publish() error {
	env := Envelope{Topic: p.topic, PublisherID: p.id, Sequence: p.seq,
		PublishedAt: uint64(p.now().UnixMilli()), Payload: p.payload.written()}
	p.wire.reset()
	p.wire.envelope(&env)
	if err := p.send(p.subject, &env, p.wire.written()); err != nil {
		return err
	}
	p.seq++
	return nil
}

// FrameVersion is the version byte of the ZMQ data frame's 5-byte header.
const FrameVersion = 1

// ZMQFrames returns the multipart message Dynamo's ZMQ transport sends for one envelope: the topic
// frame subscribers filter on, publisher_id and sequence as big-endian u64s (for deduplication
// without decoding), and the envelope behind a header of FrameVersion and its length as a big-endian
// u32. A publisher that binds (direct mode) uses its topic as the first frame, one connected to a
// broker the subject. The frames do not alias wire.
func ZMQFrames(first string, env *Envelope, wire []byte) [][]byte {
	frame := make([]byte, 5, 5+len(wire))
	frame[0] = FrameVersion
	binary.BigEndian.PutUint32(frame[1:], uint32(len(wire)))
	frame = append(frame, wire...)
	return [][]byte{[]byte(first), binary.BigEndian.AppendUint64(nil, env.PublisherID),
		binary.BigEndian.AppendUint64(nil, env.Sequence), frame}
}
