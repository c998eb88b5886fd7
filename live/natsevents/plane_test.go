package natsevents_test

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/live/natsevents/planetest"
	"github.com/mocker-sim/mocker/tokens"
)

func TestScopeSubject(t *testing.T) {
	for _, c := range []struct {
		s     natsevents.Scope
		topic string
		want  string
	}{
		{natsevents.Scope{Namespace: "dynamo", Component: "backend"}, "kv-events", "namespace.dynamo.component.backend.kv-events"},
		{natsevents.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}, "kv_metrics",
			"namespace.dynamo.component.backend.endpoint.generate.kv_metrics"},
		// Dots, wildcards and spaces cannot add tokens: Dynamo percent-encodes each segment.
		{natsevents.Scope{Namespace: "a.b", Component: "c*>d e"}, "kv-events", "namespace.a%2Eb.component.c%2A%3Ed%20e.kv-events"},
	} {
		if got := c.s.Subject(c.topic); got != c.want {
			t.Errorf("%+v.Subject(%q) = %q, want %q", c.s, c.topic, got, c.want)
		}
	}
}

// fixstr is a MessagePack string of under 32 bytes.
func fixstr(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

type sent struct {
	subject string
	env     natsevents.Envelope
	wire    []byte
}

func capture(out *[]sent) natsevents.Sender {
	return func(subject string, env *natsevents.Envelope, wire []byte) error {
		*out = append(*out, sent{subject, *env, bytes.Clone(wire)})
		return nil
	}
}

// The bytes rmp_serde::to_vec_named writes for RouterEvent::with_storage_tier(7, KvCacheEvent {
// event_id: 3, data: Cleared, dp_rank: 2 }, Device) inside its envelope, written out by hand from the
// MessagePack spec: fixmaps of named fields, positive fixints, the unit variant as a string, the
// payload as bin 8.
func TestPlaneWireBytes(t *testing.T) {
	var out []sent
	p := natsevents.NewPlanePublisher(42, natsevents.Scope{Namespace: "dynamo", Component: "backend"}, natsevents.KVEventsTopic, capture(&out))
	if err := p.PublishRouterEvent(7, 2, kvcache.Event{ID: 3, Kind: kvcache.Cleared}); err != nil {
		t.Fatal(err)
	}
	payload := cat([]byte{0x84}, fixstr("worker_id"), []byte{7}, fixstr("storage_tier"), fixstr("device"),
		fixstr("residency_domain"), fixstr("worker"), fixstr("event"),
		[]byte{0x83}, fixstr("event_id"), []byte{3}, fixstr("data"), fixstr("cleared"), fixstr("dp_rank"), []byte{2})
	if len(out) != 1 {
		t.Fatalf("%d messages", len(out))
	}
	at := out[0].env.PublishedAt
	want := cat([]byte{0x85}, fixstr("publisher_id"), []byte{42}, fixstr("sequence"), []byte{0},
		fixstr("published_at"), []byte{0xcf}, binary.BigEndian.AppendUint64(nil, at), fixstr("topic"), fixstr("kv-events"),
		fixstr("payload"), []byte{0xc4, byte(len(payload))}, payload)
	if !bytes.Equal(out[0].wire, want) {
		t.Fatalf("wire\n% x\nwant\n% x", out[0].wire, want)
	}
	if out[0].subject != "namespace.dynamo.component.backend.kv-events" {
		t.Fatalf("subject %q", out[0].subject)
	}
}

func TestPlaneRoundTrip(t *testing.T) {
	var out []sent
	scope := natsevents.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}
	kvScope := scope
	kvScope.Endpoint = "" // KV events are the component's
	kv := natsevents.NewPlanePublisher(natsevents.PublisherID(1, "kv-events", "0", "1"), kvScope, natsevents.KVEventsTopic, capture(&out))
	big := uint64(1<<64 - 5) // hashes use all 64 bits
	evs := []kvcache.Event{
		{ID: 0, Kind: kvcache.Stored, Blocks: []tokens.Block{{Hash: 11, TokensHash: 12}, {Hash: big, TokensHash: 1 << 40}}},
		{ID: 1, Kind: kvcache.Stored, HasParent: true, Parent: big, Blocks: []tokens.Block{{Hash: 13, TokensHash: 14}}},
		{ID: 2, Kind: kvcache.Removed, Hashes: []uint64{13, big}},
		{ID: 3, Kind: kvcache.Cleared},
		{ID: 4, Kind: kvcache.Stored, Medium: kvcache.CPU, Blocks: []tokens.Block{{Hash: 15}}},
		{ID: 5, Kind: kvcache.Removed, Medium: kvcache.Disk, Hashes: []uint64{15}},
	}
	for _, ev := range evs {
		if err := kv.PublishRouterEvent(5, 1, ev); err != nil {
			t.Fatal(err)
		}
	}
	load := natsevents.NewPlanePublisher(natsevents.PublisherID(1, "kv_metrics", "0", "1"), scope, natsevents.LoadTopic, capture(&out))
	if err := load.PublishLoad(5, 1, 300); err != nil {
		t.Fatal(err)
	}
	if kv.ID() == load.ID() || kv.ID() > 1<<53-1 || load.ID() > 1<<53-1 {
		t.Fatalf("publisher ids %d and %d", kv.ID(), load.ID())
	}
	if got := natsevents.PublisherID(1, "kv-events", "0", "1"); got != kv.ID() {
		t.Fatalf("PublisherID is not deterministic: %d then %d", kv.ID(), got)
	}
	for i, m := range out[:len(evs)] {
		env, err := planetest.Envelope(m.wire)
		if err != nil {
			t.Fatal(err)
		}
		if env.Topic != "kv-events" || env.PublisherID != kv.ID() || env.Sequence != uint64(i) || m.subject != "namespace.dynamo.component.backend.kv-events" {
			t.Fatalf("message %d: envelope %+v on %q", i, env, m.subject)
		}
		re, err := planetest.RouterEvent(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		want := natsevents.RouterEvent{Worker: 5, Rank: 1, Tier: natsevents.StorageTier(evs[i].Medium), Event: evs[i]}
		if !reflect.DeepEqual(re, want) {
			t.Fatalf("event %d: %+v, want %+v", i, re, want)
		}
	}
	m := out[len(evs)]
	env, err := planetest.Envelope(m.wire)
	if err != nil {
		t.Fatal(err)
	}
	if env.Topic != "kv_metrics" || env.Sequence != 0 || m.subject != "namespace.dynamo.component.backend.endpoint.generate.kv_metrics" {
		t.Fatalf("load envelope %+v on %q", env, m.subject)
	}
	l, err := planetest.ActiveLoad(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if l.Worker != 5 || l.Rank != 1 || l.Used == nil || *l.Used != 300 || l.DecodeBlocks != nil || l.PrefillTokens != nil {
		t.Fatalf("load %+v", l)
	}

	frames := natsevents.ZMQFrames("kv-events", &out[2].env, out[2].wire)
	topic, zenv, err := planetest.ZMQ(frames)
	if err != nil {
		t.Fatal(err)
	}
	if topic != "kv-events" || zenv.Sequence != 2 || zenv.PublisherID != kv.ID() {
		t.Fatalf("ZMQ message: topic %q, envelope %+v", topic, zenv)
	}
}

// The strict decoder must refuse what Dynamo's types do not have, or the tests above prove nothing.
func TestPlanetestIsStrict(t *testing.T) {
	var out []sent
	p := natsevents.NewPlanePublisher(1, natsevents.Scope{Namespace: "n", Component: "c"}, natsevents.KVEventsTopic, capture(&out))
	p.PublishRouterEvent(0, 0, kvcache.Event{Kind: kvcache.Removed, Hashes: []uint64{1}})
	env, err := planetest.Envelope(out[0].wire)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, old, new string }{
		{"unknown field", "storage_tier", "storage_tiex"},
		{"unknown variant", "removed", "removex"},
		{"unknown tier", "device", "devicx"},
	} {
		bad := bytes.Replace(env.Payload, []byte(c.old), []byte(c.new), 1)
		if _, err := planetest.RouterEvent(bad); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
	if _, err := planetest.Envelope(append(bytes.Clone(out[0].wire), 0xc0)); err == nil {
		t.Error("trailing byte: decoded")
	}
	if _, err := planetest.Envelope(bytes.Replace(out[0].wire, []byte("sequence"), []byte("sequencx"), 1)); err == nil {
		t.Error("envelope without sequence: decoded")
	}
}

// FuzzPlaneRoundTrip: any event mocker can publish decodes, with Dynamo's schema, to itself.
func FuzzPlaneRoundTrip(f *testing.F) {
	f.Add(uint8(0), uint64(0), uint64(7), uint32(0), false, uint64(0), []byte("0123456789abcdef"))
	f.Add(uint8(0), uint64(1<<63), uint64(1<<64-1), uint32(1<<32-1), true, uint64(1<<64-1), []byte{})
	f.Add(uint8(1), uint64(3), uint64(1), uint32(2), false, uint64(0), bytes.Repeat([]byte{0xff}, 40))
	f.Add(uint8(2), uint64(9), uint64(1), uint32(0), false, uint64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, kind uint8, id, worker uint64, rank uint32, hasParent bool, parent uint64, raw []byte) {
		ev := kvcache.Event{ID: id, Kind: kvcache.EventKind(kind%3 + 1)}
		var hashes []uint64
		for len(raw) >= 8 {
			hashes = append(hashes, binary.LittleEndian.Uint64(raw))
			raw = raw[8:]
		}
		switch ev.Kind {
		case kvcache.Stored:
			ev.Parent, ev.HasParent = parent, hasParent
			if !hasParent {
				ev.Parent = 0
			}
			for i := 0; i+1 < len(hashes); i += 2 {
				ev.Blocks = append(ev.Blocks, tokens.Block{Hash: hashes[i], TokensHash: hashes[i+1]})
			}
		case kvcache.Removed:
			ev.Hashes = hashes
		}
		var out []sent
		p := natsevents.NewPlanePublisher(natsevents.PublisherID(id, "kv-events"), natsevents.Scope{Namespace: "n", Component: "c"},
			natsevents.KVEventsTopic, capture(&out))
		if err := p.PublishRouterEvent(worker, int(rank), ev); err != nil {
			t.Fatal(err)
		}
		env, err := planetest.Envelope(out[0].wire)
		if err != nil {
			t.Fatal(err)
		}
		re, err := planetest.RouterEvent(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		want := natsevents.RouterEvent{Worker: worker, Rank: int(rank), Tier: "device", Event: ev}
		if !reflect.DeepEqual(re, want) {
			t.Fatalf("decoded %+v, want %+v", re, want)
		}
	})
}
