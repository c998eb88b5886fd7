// Package planetest decodes Dynamo event-plane messages strictly, for tests: it accepts exactly the
// fields of Dynamo's definitions (EventEnvelope of lib/runtime/src/transports/event_plane,
// RouterEvent, KvCacheEvent, KvCacheEventData, KvCacheStoreData, KvCacheStoredBlockData,
// KvCacheRemoveData and ActiveLoad in lib/kv-router/src/protocols.rs), with their types, and fails on
// any other field, a missing required one or trailing bytes. Options may be absent or nil, as serde
// allows. It is written from those definitions, independently of the encoder it checks.
package planetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/tokens"
)

// Load is a decoded ActiveLoad; nil fields were None.
type Load struct {
	Worker, Rank                      uint64
	DecodeBlocks, PrefillTokens, Used *uint64
}

type decoder struct {
	r *bytes.Reader
	d *msgpack.Decoder
}

func newDecoder(b []byte) *decoder {
	r := bytes.NewReader(b)
	return &decoder{r: r, d: msgpack.NewDecoder(r)}
}

func (d *decoder) end(what string) error {
	if d.r.Len() != 0 {
		return fmt.Errorf("%s: %d trailing bytes", what, d.r.Len())
	}
	return nil
}

func (d *decoder) isNil() (bool, error) {
	c, err := d.d.PeekCode()
	if err != nil {
		return false, err
	}
	if c == msgpcode.Nil {
		return true, d.d.DecodeNil()
	}
	return false, nil
}

// optUint reads an Option<u64>.
func (d *decoder) optUint() (*uint64, error) {
	if null, err := d.isNil(); null || err != nil {
		return nil, err
	}
	v, err := d.d.DecodeUint64()
	return &v, err
}

// fields reads a struct serialized as a map, calling f for each key; it fails on a key f does not
// know (f returns false), a repeated key or a missing required one.
func (d *decoder) fields(what string, required []string, f func(key string) (bool, error)) error {
	n, err := d.d.DecodeMapLen()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n < 0 {
		return fmt.Errorf("%s: nil, want a map", what)
	}
	seen := make(map[string]bool, n)
	for range n {
		k, err := d.d.DecodeString()
		if err != nil {
			return fmt.Errorf("%s: key: %w", what, err)
		}
		if seen[k] {
			return fmt.Errorf("%s: field %q twice", what, k)
		}
		seen[k] = true
		known, err := f(k)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", what, k, err)
		}
		if !known {
			return fmt.Errorf("%s: unknown field %q", what, k)
		}
	}
	for _, k := range required {
		if !seen[k] {
			return fmt.Errorf("%s: missing field %q", what, k)
		}
	}
	return nil
}

// Envelope decodes an EventEnvelope.
func Envelope(b []byte) (natsevents.Envelope, error) {
	d := newDecoder(b)
	var e natsevents.Envelope
	err := d.fields("EventEnvelope", []string{"topic", "publisher_id", "sequence", "published_at", "payload"},
		func(k string) (bool, error) {
			var err error
			switch k {
			case "topic":
				e.Topic, err = d.d.DecodeString()
			case "publisher_id":
				e.PublisherID, err = d.d.DecodeUint64()
			case "sequence":
				e.Sequence, err = d.d.DecodeUint64()
			case "published_at":
				e.PublishedAt, err = d.d.DecodeUint64()
			case "payload":
				// serde_bytes writes bin; a Vec<u8> reader would also take an array, never nil.
				var c byte
				if c, err = d.d.PeekCode(); err == nil && !(c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32) {
					return true, fmt.Errorf("code %#x, want bin", c)
				}
				e.Payload, err = d.d.DecodeBytes()
			default:
				return false, nil
			}
			return true, err
		})
	if err != nil {
		return e, err
	}
	return e, d.end("EventEnvelope")
}

// RouterEvent decodes a RouterEvent payload.
func RouterEvent(b []byte) (natsevents.RouterEvent, error) {
	d := newDecoder(b)
	re := natsevents.RouterEvent{Tier: "device"}
	err := d.fields("RouterEvent", []string{"worker_id", "event"}, func(k string) (bool, error) {
		var err error
		switch k {
		case "worker_id":
			re.Worker, err = d.d.DecodeUint64()
		case "storage_tier":
			re.Tier, err = d.d.DecodeString()
			if err == nil && re.Tier != "device" && re.Tier != "host_pinned" && re.Tier != "disk" && re.Tier != "external" {
				err = fmt.Errorf("unknown StorageTier %q", re.Tier)
			}
		case "residency_domain":
			var s string
			if s, err = d.d.DecodeString(); err == nil && s != "worker" && s != "cache_owner" {
				err = fmt.Errorf("unknown ResidencyDomain %q", s)
			}
		case "state_source":
			var null bool
			if null, err = d.isNil(); err == nil && !null {
				err = errors.New("a CacheOwnerId: not decoded here")
			}
		case "event":
			err = d.kvCacheEvent(&re)
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return re, err
	}
	re.Event.Medium, _ = natsevents.Medium(re.Tier)
	return re, d.end("RouterEvent")
}

func (d *decoder) kvCacheEvent(re *natsevents.RouterEvent) error {
	return d.fields("KvCacheEvent", []string{"event_id", "data"}, func(k string) (bool, error) {
		var err error
		switch k {
		case "event_id":
			re.Event.ID, err = d.d.DecodeUint64()
		case "dp_rank":
			var r uint32
			r, err = d.d.DecodeUint32()
			re.Rank = int(r)
		case "data":
			err = d.eventData(&re.Event)
		default:
			return false, nil
		}
		return true, err
	})
}

// eventData decodes KvCacheEventData: the unit variant as its name, the others as one-entry maps.
func (d *decoder) eventData(ev *kvcache.Event) error {
	c, err := d.d.PeekCode()
	if err != nil {
		return err
	}
	if msgpcode.IsString(c) {
		s, err := d.d.DecodeString()
		if err != nil {
			return err
		}
		if s != "cleared" {
			return fmt.Errorf("unknown unit variant %q", s)
		}
		ev.Kind = kvcache.Cleared
		return nil
	}
	n, err := d.d.DecodeMapLen()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("%d variants, want 1", n)
	}
	name, err := d.d.DecodeString()
	if err != nil {
		return err
	}
	switch name {
	case "stored":
		ev.Kind = kvcache.Stored
		return d.fields("KvCacheStoreData", []string{"blocks"}, func(k string) (bool, error) {
			switch k {
			case "parent_hash":
				p, err := d.optUint()
				if p != nil {
					ev.Parent, ev.HasParent = *p, true
				}
				return true, err
			case "start_position":
				p, err := d.optUint()
				if err == nil && p != nil && *p > 1<<32-1 {
					err = fmt.Errorf("%d is not a u32", *p)
				}
				return true, err
			case "blocks":
				n, err := d.d.DecodeArrayLen()
				if err != nil || n < 0 {
					return true, fmt.Errorf("want an array (%v)", err)
				}
				for range n {
					var blk tokens.Block
					err := d.fields("KvCacheStoredBlockData", []string{"block_hash", "tokens_hash"}, func(k string) (bool, error) {
						var err error
						switch k {
						case "block_hash":
							blk.Hash, err = d.d.DecodeUint64()
						case "tokens_hash":
							blk.TokensHash, err = d.d.DecodeUint64()
						case "mm_extra_info":
							var null bool
							if null, err = d.isNil(); err == nil && !null {
								err = errors.New("a BlockExtraInfo: mocker has no multimodal blocks")
							}
						default:
							return false, nil
						}
						return true, err
					})
					if err != nil {
						return true, err
					}
					ev.Blocks = append(ev.Blocks, blk)
				}
				return true, nil
			}
			return false, nil
		})
	case "removed":
		ev.Kind = kvcache.Removed
		return d.fields("KvCacheRemoveData", []string{"block_hashes"}, func(k string) (bool, error) {
			if k != "block_hashes" {
				return false, nil
			}
			n, err := d.d.DecodeArrayLen()
			if err != nil || n < 0 {
				return true, fmt.Errorf("want an array (%v)", err)
			}
			for range n {
				h, err := d.d.DecodeUint64()
				if err != nil {
					return true, err
				}
				ev.Hashes = append(ev.Hashes, h)
			}
			return true, nil
		})
	}
	return fmt.Errorf("unknown variant %q", name)
}

// ActiveLoad decodes an ActiveLoad payload.
func ActiveLoad(b []byte) (Load, error) {
	d := newDecoder(b)
	var l Load
	err := d.fields("ActiveLoad", []string{"worker_id"}, func(k string) (bool, error) {
		var err error
		switch k {
		case "worker_id":
			l.Worker, err = d.d.DecodeUint64()
		case "dp_rank":
			l.Rank, err = d.d.DecodeUint64()
		case "active_decode_blocks":
			l.DecodeBlocks, err = d.optUint()
		case "active_prefill_tokens":
			l.PrefillTokens, err = d.optUint()
		case "scheduler_load_scope":
			if null, e := d.isNil(); e != nil || !null {
				err = fmt.Errorf("workers publish no scheduler_load_scope (%v)", e)
			}
		case "kv_used_blocks":
			l.Used, err = d.optUint()
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return l, err
	}
	return l, d.end("ActiveLoad")
}

// ZMQ decodes a ZMQ event-plane message: topic, publisher_id, sequence, data frame. It checks that
// the frames' publisher id and sequence are the envelope's.
func ZMQ(frames [][]byte) (topic string, env natsevents.Envelope, err error) {
	if len(frames) != 4 {
		return "", env, fmt.Errorf("%d frames, want 4", len(frames))
	}
	if len(frames[1]) != 8 || len(frames[2]) != 8 {
		return "", env, fmt.Errorf("publisher_id and sequence frames of %d and %d bytes, want 8", len(frames[1]), len(frames[2]))
	}
	f := frames[3]
	if len(f) < 5 || f[0] != 1 || binary.BigEndian.Uint32(f[1:5]) != uint32(len(f)-5) {
		return "", env, fmt.Errorf("data frame header % x for %d bytes", f[:min(5, len(f))], len(f))
	}
	if env, err = Envelope(f[5:]); err != nil {
		return "", env, err
	}
	if id, seq := binary.BigEndian.Uint64(frames[1]), binary.BigEndian.Uint64(frames[2]); id != env.PublisherID || seq != env.Sequence {
		return "", env, fmt.Errorf("frames say publisher %d sequence %d, the envelope %d %d", id, seq, env.PublisherID, env.Sequence)
	}
	return string(frames[0]), env, nil
}
