package natsevents

import (
	"errors"
	"io"
	"math"
	"net"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

const (
	big1 = 1<<53 + 1 // the first integer float64 cannot hold
	big2 = 1<<63 + 12345
	big3 = math.MaxUint64
)

var golden = []struct {
	name   string
	worker uint64
	rank   int
	ev     kvcache.Event
	json   string
}{
	{"stored root", 7, 0,
		kvcache.Event{ID: 0, Kind: kvcache.Stored, Blocks: []tokens.Block{{Hash: 11, TokensHash: 11}, {Hash: 21, TokensHash: 12}}},
		`{"worker_id":7,"storage_tier":"device","event":{"event_id":0,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":11,"tokens_hash":11},{"block_hash":21,"tokens_hash":12}]}},"dp_rank":0}}`},
	{"stored child", 7, 3,
		kvcache.Event{ID: 1, Kind: kvcache.Stored, Parent: 21, HasParent: true, Blocks: []tokens.Block{{Hash: 31, TokensHash: 13}}},
		`{"worker_id":7,"storage_tier":"device","event":{"event_id":1,"data":{"stored":{"parent_hash":21,"blocks":[{"block_hash":31,"tokens_hash":13}]}},"dp_rank":3}}`},
	{"removed", 7, 3,
		kvcache.Event{ID: 2, Kind: kvcache.Removed, Hashes: []uint64{31, 21}},
		`{"worker_id":7,"storage_tier":"device","event":{"event_id":2,"data":{"removed":{"block_hashes":[31,21]}},"dp_rank":3}}`},
	{"cleared", 7, 0,
		kvcache.Event{ID: 3, Kind: kvcache.Cleared},
		`{"worker_id":7,"storage_tier":"device","event":{"event_id":3,"data":"cleared","dp_rank":0}}`},
	{"hashes above 2^53", big2, 1,
		kvcache.Event{ID: big3, Kind: kvcache.Stored, Parent: big1, HasParent: true, Blocks: []tokens.Block{{Hash: big3, TokensHash: big2}}},
		`{"worker_id":9223372036854788153,"storage_tier":"device","event":{"event_id":18446744073709551615,"data":{"stored":{"parent_hash":9007199254740993,"blocks":[{"block_hash":18446744073709551615,"tokens_hash":9223372036854788153}]}},"dp_rank":1}}`},
	{"removed above 2^53", 1, 0,
		kvcache.Event{ID: 4, Kind: kvcache.Removed, Hashes: []uint64{big1, big2, big3}},
		`{"worker_id":1,"storage_tier":"device","event":{"event_id":4,"data":{"removed":{"block_hashes":[9007199254740993,9223372036854788153,18446744073709551615]}},"dp_rank":0}}`},
	{"stored in the CPU tier", 7, 0,
		kvcache.Event{ID: 5, Kind: kvcache.Stored, Medium: kvcache.CPU, Blocks: []tokens.Block{{Hash: 41}}},
		`{"worker_id":7,"storage_tier":"host_pinned","event":{"event_id":5,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":41,"tokens_hash":0}]}},"dp_rank":0}}`},
	{"removed from the disk tier", 7, 0,
		kvcache.Event{ID: 6, Kind: kvcache.Removed, Medium: kvcache.Disk, Hashes: []uint64{41}},
		`{"worker_id":7,"storage_tier":"disk","event":{"event_id":6,"data":{"removed":{"block_hashes":[41]}},"dp_rank":0}}`},
}

func TestGolden(t *testing.T) {
	for _, tt := range golden {
		got, err := appendRouterEvent(nil, tt.worker, tt.rank, &tt.ev)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if string(got) != tt.json {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.json)
		}
		re, err := Decode([]byte(tt.json))
		if err != nil {
			t.Fatalf("%s: Decode: %v", tt.name, err)
		}
		want := RouterEvent{Worker: tt.worker, Rank: tt.rank, Tier: StorageTier(tt.ev.Medium), Event: tt.ev}
		if !reflect.DeepEqual(re, want) {
			t.Errorf("%s: Decode = %+v, want %+v", tt.name, re, want)
		}
	}
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		in   string
		want RouterEvent
	}{
		// Dynamo before storage_tier; serde's map form of a unit variant; fields added later.
		{`{"worker_id":1,"event":{"event_id":5,"data":{"cleared":null}}}`,
			RouterEvent{Worker: 1, Tier: "device", Event: kvcache.Event{ID: 5, Kind: kvcache.Cleared}}},
		{`{"worker_id":1,"storage_tier":"host_pinned","residency_domain":"worker","event":{"event_id":6,"dp_rank":2,
		  "data":{"stored":{"parent_hash":null,"start_position":0,"blocks":[{"block_hash":1,"tokens_hash":2,"mm_extra_info":null}]}}}}`,
			RouterEvent{Worker: 1, Rank: 2, Tier: "host_pinned", Event: kvcache.Event{ID: 6, Kind: kvcache.Stored,
				Blocks: []tokens.Block{{Hash: 1, TokensHash: 2}}, Medium: kvcache.CPU}}},
		{`{"worker_id":1,"event":{"event_id":7,"data":{"removed":{"block_hashes":[]}}}}`,
			RouterEvent{Worker: 1, Tier: "device", Event: kvcache.Event{ID: 7, Kind: kvcache.Removed}}},
	}
	for _, tt := range tests {
		got, err := Decode([]byte(tt.in))
		if err != nil {
			t.Errorf("Decode(%s): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Decode(%s) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct{ in, err string }{
		{`not json`, "invalid character"},
		{`{"event":{"event_id":1,"data":"cleared"}}`, "missing worker_id"},
		{`{"worker_id":1}`, "missing event"},
		{`{"worker_id":1,"event":{"data":"cleared"}}`, "missing event.event_id"},
		{`{"worker_id":1,"event":{"event_id":1}}`, "missing data"},
		{`{"worker_id":-1,"event":{"event_id":1,"data":"cleared"}}`, "cannot unmarshal"},
		{`{"worker_id":1.5,"event":{"event_id":1,"data":"cleared"}}`, "cannot unmarshal"},
		{`{"worker_id":18446744073709551616,"event":{"event_id":1,"data":"cleared"}}`, "cannot unmarshal"},
		{`{"worker_id":1,"event":{"event_id":1,"data":"flushed"}}`, `unknown data variant "flushed"`},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"moved":{}}}}`, `unknown data variant "moved"`},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[]},"removed":{"block_hashes":[]}}}}`, "2 variants"},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"parent_hash":null}}}}`, "missing blocks"},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1}]}}}}`, "lacks block_hash or tokens_hash"},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"stored":{"blocks":[{"block_hash":1e3,"tokens_hash":2}]}}}}`, "cannot unmarshal"},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"removed":{}}}}`, "missing block_hashes"},
		{`{"worker_id":1,"event":{"event_id":1,"data":{"cleared":{}}}}`, "cleared carries"},
		{`{"worker_id":1,"event":{"event_id":1,"data":"cleared","dp_rank":-1}}`, "cannot unmarshal"},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Decode(%s) error = %v, want one containing %q", tt.in, err, tt.err)
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	if _, err := appendRouterEvent(nil, 1, -1, &kvcache.Event{Kind: kvcache.Cleared}); err == nil {
		t.Error("negative dp_rank accepted")
	}
	if _, err := appendRouterEvent(nil, 1, 0, &kvcache.Event{}); err == nil {
		t.Error("event of no kind accepted")
	}
}

func TestEncodeAllocs(t *testing.T) {
	buf := make([]byte, 0, 4096)
	ev := golden[0].ev
	allocs := testing.AllocsPerRun(100, func() {
		buf, _ = appendRouterEvent(buf[:0], 7, 0, &ev)
	})
	if allocs != 0 {
		t.Errorf("encoding into a large enough buffer allocates %v times, want 0", allocs)
	}
}

func TestSubject(t *testing.T) {
	tests := []struct{ model, want string }{
		{"Qwen3-0-6B", "namespace.mocker.component.Qwen3-0-6B.kv_events"},
		{"meta-llama/Llama-3.1-8B", "namespace.mocker.component.meta-llama_2FLlama-3_2E1-8B.kv_events"},
		{"a_b c*>", "namespace.mocker.component.a_5Fb_20c_2A_3E.kv_events"},
		{"é", "namespace.mocker.component._C3_A9.kv_events"},
		{"", "namespace.mocker.component._.kv_events"},
	}
	for _, tt := range tests {
		if got := Subject(tt.model); got != tt.want {
			t.Errorf("Subject(%q) = %q, want %q", tt.model, got, tt.want)
		}
	}
	if Subject("a.b") == Subject("a_b") || Subject("a/b") == Subject("a_2Fb") {
		t.Error("distinct model names share a subject")
	}
}

// TestPublishSubscribe runs the embedded server, publishes every golden event through a Publisher on
// one connection and reads them back in order on another; then it shuts everything down and checks
// that no goroutine is left behind.
func TestPublishSubscribe(t *testing.T) {
	before := runtime.NumGoroutine()

	ns, url, err := StartEmbedded(0)
	if err != nil {
		t.Fatal(err)
	}
	pubConn, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	subConn, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	subject := Subject("meta-llama/Llama-3.1-8B")
	sub, err := subConn.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := subConn.Flush(); err != nil { // the subscription is known to the server
		t.Fatal(err)
	}

	var want []RouterEvent
	for round := range 50 {
		for _, g := range golden {
			p := NewPublisher(pubConn, subject, g.worker)
			ev := g.ev
			ev.ID += uint64(round) // distinct events, so order is checked
			if err := p.Publish(g.rank, ev); err != nil {
				t.Fatal(err)
			}
			want = append(want, RouterEvent{Worker: g.worker, Rank: g.rank, Tier: StorageTier(ev.Medium), Event: ev})
		}
	}
	if err := pubConn.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		msg, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		got, err := Decode(msg.Data)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("message %d = %+v, want %+v", i, got, w)
		}
	}

	pubConn.Close()
	subConn.Close()
	ns.Shutdown()
	ns.WaitForShutdown()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after shutdown, %d before:\n%s",
				runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartEmbeddedPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	// It fails at once, on its own listen, rather than after the server's readiness wait.
	if ns, _, err := StartEmbedded(port); err == nil {
		ns.Shutdown()
		t.Fatalf("StartEmbedded(%d) succeeded on a port in use", port)
	} else if !strings.Contains(err.Error(), strconv.Itoa(port)) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %q does not name the port, or is not the listen's EADDRINUSE", err)
	}
	if _, _, err := StartEmbedded(-1); err == nil {
		t.Error("StartEmbedded(-1) succeeded")
	}
}

// A client declaring a payload past MaxPayload is refused before anything is allocated, and the
// server keeps delivering.
func TestEmbeddedPayloadBound(t *testing.T) {
	ns, url, err := StartEmbedded(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.WaitForShutdown()
	defer ns.Shutdown()
	for _, size := range []string{"104857600", "9223372036854775807"} {
		raw, err := net.Dial("tcp", ns.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		raw.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := raw.Write([]byte("CONNECT {\"verbose\":false}\r\nPUB x " + size + "\r\n")); err != nil {
			t.Fatal(err)
		}
		// INFO, then an error, then the server closes the connection.
		reply, err := io.ReadAll(raw)
		raw.Close()
		if err != nil {
			t.Fatalf("PUB of %s bytes: the connection stayed open: %v", size, err)
		}
		// A size past int64 fails to parse and is dropped without a word.
		if size == "104857600" && !strings.Contains(string(reply), "-ERR 'Maximum Payload Violation'") {
			t.Errorf("PUB of %s bytes: server replied %q", size, reply)
		}
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.MaxPayload(); got != MaxPayload {
		t.Errorf("max payload %d, want %d", got, MaxPayload)
	}
	sub, err := nc.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("x", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(30 * time.Second); err != nil || string(m.Data) != "ok" {
		t.Fatalf("after the violation: %v, %v", m, err)
	}
}
