// Package natsevents carries KV cache events between processes over NATS, in the JSON shape of
// Dynamo's RouterEvent, and embeds a NATS server for the single-process default.
//
// Start with Publisher (a worker's side), Decode (a router's side) and StartEmbedded.
//
// # Wire format
//
// One NATS message holds one event, serialized as serde_json serializes Dynamo's RouterEvent
// (lib/kv-router/src/protocols.rs, formerly lib/llm/src/kv_router/protocols.rs):
//
//	{"worker_id":7,"storage_tier":"device","event":{"event_id":3,"data":DATA,"dp_rank":0}}
//
// where DATA is the externally tagged, snake_case KvCacheEventData:
//
//	{"stored":{"parent_hash":null,"blocks":[{"block_hash":11,"tokens_hash":12}]}}
//	{"removed":{"block_hashes":[11,12]}}
//	"cleared"
//
// parent_hash is an Option and is written as null when the run starts at the first block. Hashes are
// u64 and written as exact decimal integers; readers must not parse them as float64. block_hash is the
// sequence hash (tokens.Block.Hash), tokens_hash the hash of the block's own tokens. Fields Dynamo has
// added since (start_position, mm_extra_info, residency_domain, state_source) are optional there and
// omitted here; Decode ignores fields it does not know, as serde does.
package natsevents

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// Subject returns the NATS subject that carries the KV events of one model's workers:
//
//	namespace.mocker.component.<model>.kv_events
//
// following Dynamo's component event subjects (namespace.{namespace}.component.{component}.{event},
// event "kv_events"). The model name becomes a single subject token: ASCII letters, digits and '-'
// are kept and every other byte ('.', '/', '_', '*', '>', spaces, ...) is written as '_' and two
// upper-case hex digits, so distinct names give distinct subjects ("meta-llama/Llama-3.1-8B" becomes
// "meta-llama_2FLlama-3_2E1-8B"). An empty name becomes "_".
func Subject(model string) string {
	return "namespace.mocker.component." + token(model) + ".kv_events"
}

func token(s string) string {
	if s == "" {
		return "_"
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// Publisher publishes one worker's KV events on a subject. It is safe for concurrent use.
type Publisher struct {
	nc      *nats.Conn
	subject string
	worker  uint64

	mu  sync.Mutex
	buf []byte // reused: Conn.Publish copies the payload before it returns
}

// NewPublisher returns a publisher of worker's events (Dynamo's worker_id) on subject.
func NewPublisher(nc *nats.Conn, subject string, worker uint64) *Publisher {
	return &Publisher{nc: nc, subject: subject, worker: worker}
}

// Publish sends one event of data-parallel rank rank. Like nats.Conn.Publish it only buffers the
// message; call the connection's Flush to wait for the server.
func (p *Publisher) Publish(rank int, ev kvcache.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := appendRouterEvent(p.buf[:0], p.worker, rank, &ev)
	if err != nil {
		return err
	}
	p.buf = b
	return p.nc.Publish(p.subject, b)
}

// appendRouterEvent appends the RouterEvent JSON of ev to b.
func appendRouterEvent(b []byte, worker uint64, rank int, ev *kvcache.Event) ([]byte, error) {
	if rank < 0 || uint64(rank) > 1<<32-1 {
		return b, fmt.Errorf("natsevents: dp_rank %d out of range", rank)
	}
	b = append(b, `{"worker_id":`...)
	b = strconv.AppendUint(b, worker, 10)
	b = append(b, `,"storage_tier":"`...)
	b = append(b, StorageTier(ev.Medium)...)
	b = append(b, `","event":{"event_id":`...)
	b = strconv.AppendUint(b, ev.ID, 10)
	b = append(b, `,"data":`...)
	switch ev.Kind {
	case kvcache.Stored:
		b = append(b, `{"stored":{"parent_hash":`...)
		if ev.HasParent {
			b = strconv.AppendUint(b, ev.Parent, 10)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"blocks":[`...)
		for i, blk := range ev.Blocks {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"block_hash":`...)
			b = strconv.AppendUint(b, blk.Hash, 10)
			b = append(b, `,"tokens_hash":`...)
			b = strconv.AppendUint(b, blk.TokensHash, 10)
			b = append(b, '}')
		}
		b = append(b, "]}}"...)
	case kvcache.Removed:
		b = append(b, `{"removed":{"block_hashes":[`...)
		for i, h := range ev.Hashes {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, h, 10)
		}
		b = append(b, "]}}"...)
	case kvcache.Cleared:
		b = append(b, `"cleared"`...)
	default:
		return b, fmt.Errorf("natsevents: event %d has unknown kind %d", ev.ID, ev.Kind)
	}
	b = append(b, `,"dp_rank":`...)
	b = strconv.AppendUint(b, uint64(rank), 10)
	b = append(b, "}}"...)
	return b, nil
}

// RouterEvent is a decoded Dynamo RouterEvent: one KV event of one rank of one worker.
type RouterEvent struct {
	Worker uint64 // worker_id
	Rank   int    // dp_rank
	// Tier is storage_tier: "device" for GPU memory, "host_pinned" and "disk" for the lower tiers (Event's
	// Medium says which); Dynamo also has "external", which mocker neither publishes nor indexes.
	Tier  string
	Event kvcache.Event
}

// Wire types for Decode. Pointers mark fields that serde requires; encoding/json parses the u64s
// with strconv.ParseUint, so hashes above 2^53 stay exact.
type (
	wireRouterEvent struct {
		WorkerID    *uint64    `json:"worker_id"`
		StorageTier *string    `json:"storage_tier"`
		Event       *wireEvent `json:"event"`
	}
	wireEvent struct {
		EventID *uint64         `json:"event_id"`
		Data    json.RawMessage `json:"data"`
		DPRank  uint32          `json:"dp_rank"`
	}
	wireStored struct {
		ParentHash *uint64      `json:"parent_hash"`
		Blocks     *[]wireBlock `json:"blocks"`
	}
	wireBlock struct {
		BlockHash  *uint64 `json:"block_hash"`
		TokensHash *uint64 `json:"tokens_hash"`
	}
	wireRemoved struct {
		BlockHashes *[]uint64 `json:"block_hashes"`
	}
)

// Decode parses one RouterEvent message. A storage_tier that is absent defaults to "device", as in
// Dynamo.
func Decode(data []byte) (RouterEvent, error) {
	var w wireRouterEvent
	if err := json.Unmarshal(data, &w); err != nil {
		return RouterEvent{}, fmt.Errorf("natsevents: %w", err)
	}
	switch {
	case w.WorkerID == nil:
		return RouterEvent{}, errors.New("natsevents: missing worker_id")
	case w.Event == nil:
		return RouterEvent{}, errors.New("natsevents: missing event")
	case w.Event.EventID == nil:
		return RouterEvent{}, errors.New("natsevents: missing event.event_id")
	}
	re := RouterEvent{Worker: *w.WorkerID, Rank: int(w.Event.DPRank), Tier: "device"}
	if w.StorageTier != nil {
		re.Tier = *w.StorageTier
	}
	ev, err := decodeData(w.Event.Data)
	if err != nil {
		return RouterEvent{}, fmt.Errorf("natsevents: event %d: %w", *w.Event.EventID, err)
	}
	ev.ID = *w.Event.EventID
	ev.Medium, _ = Medium(re.Tier)
	re.Event = ev
	return re, nil
}

// StorageTier is Dynamo's storage_tier of a medium: its StorageTier enum as serde writes it.
func StorageTier(m kvcache.Medium) string {
	switch m {
	case kvcache.CPU:
		return "host_pinned"
	case kvcache.Disk:
		return "disk"
	}
	return "device"
}

// Medium is the medium of a storage_tier; false for one mocker does not keep ("external", unknown).
func Medium(tier string) (kvcache.Medium, bool) {
	switch tier {
	case "device":
		return kvcache.GPU, true
	case "host_pinned":
		return kvcache.CPU, true
	case "disk":
		return kvcache.Disk, true
	}
	return kvcache.GPU, false
}

// decodeData parses KvCacheEventData. serde writes the unit variant Cleared as "cleared" and also
// reads {"cleared":null}; the other variants are one-key objects.
func decodeData(data json.RawMessage) (kvcache.Event, error) {
	if len(data) == 0 {
		return kvcache.Event{}, errors.New("missing data")
	}
	if data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return kvcache.Event{}, err
		}
		if s != "cleared" {
			return kvcache.Event{}, fmt.Errorf("unknown data variant %q", s)
		}
		return kvcache.Event{Kind: kvcache.Cleared}, nil
	}
	var variants map[string]json.RawMessage
	if err := json.Unmarshal(data, &variants); err != nil {
		return kvcache.Event{}, fmt.Errorf("data: %w", err)
	}
	if len(variants) != 1 {
		return kvcache.Event{}, fmt.Errorf("data has %d variants, want 1", len(variants))
	}
	var name string
	var body json.RawMessage
	for name, body = range variants { // the only one
	}
	switch name {
	case "stored":
		return decodeStored(body)
	case "removed":
		return decodeRemoved(body)
	case "cleared":
		if string(body) != "null" {
			return kvcache.Event{}, fmt.Errorf("cleared carries %s", body)
		}
		return kvcache.Event{Kind: kvcache.Cleared}, nil
	}
	return kvcache.Event{}, fmt.Errorf("unknown data variant %q", name)
}

func decodeStored(body json.RawMessage) (kvcache.Event, error) {
	var s wireStored
	if err := json.Unmarshal(body, &s); err != nil {
		return kvcache.Event{}, fmt.Errorf("stored: %w", err)
	}
	if s.Blocks == nil {
		return kvcache.Event{}, errors.New("stored: missing blocks")
	}
	ev := kvcache.Event{Kind: kvcache.Stored}
	if s.ParentHash != nil {
		ev.Parent, ev.HasParent = *s.ParentHash, true
	}
	if n := len(*s.Blocks); n > 0 {
		ev.Blocks = make([]tokens.Block, n)
		for i, blk := range *s.Blocks {
			if blk.BlockHash == nil || blk.TokensHash == nil {
				return kvcache.Event{}, fmt.Errorf("stored: block %d lacks block_hash or tokens_hash", i)
			}
			ev.Blocks[i] = tokens.Block{Hash: *blk.BlockHash, TokensHash: *blk.TokensHash}
		}
	}
	return ev, nil
}

func decodeRemoved(body json.RawMessage) (kvcache.Event, error) {
	var r wireRemoved
	if err := json.Unmarshal(body, &r); err != nil {
		return kvcache.Event{}, fmt.Errorf("removed: %w", err)
	}
	if r.BlockHashes == nil {
		return kvcache.Event{}, errors.New("removed: missing block_hashes")
	}
	ev := kvcache.Event{Kind: kvcache.Removed}
	if len(*r.BlockHashes) > 0 {
		ev.Hashes = *r.BlockHashes
	}
	return ev, nil
}
