package live

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/vllmevents"
	"github.com/mocker-sim/mocker/tokens"
	"github.com/openai/openai-go/v3"
)

// One connection to a KV-event port that declares a huge ZMTP frame must cost that connection only:
// requests are still served. Before the guard, go-zeromq allocated the frame and the process died.
func TestZMQOversizedFrame(t *testing.T) {
	zs, err := NewZMQSink(ZMQOptions{Host: "127.0.0.1", Workers: 1, BlockSize: 16, Topics: []string{"kv"}})
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(5, 1, math.Inf(1))
	o.Sinks = []Sink{zs}
	_, _, c := start(t, o)
	t.Cleanup(func() { zs.Close() })

	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
	copy(greeting[12:], "NULL")
	attack := append(greeting, 0x02, 0x40, 0, 0, 0, 0, 0, 0, 0) // a frame of 2^62 bytes
	nc, err := net.Dial("tcp", zs.pubs[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(attack); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, nc); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server kept the connection open")
	}

	r, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: testModel,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)}, MaxTokens: openai.Int(3)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Usage.CompletionTokens != 3 {
		t.Fatalf("%d completion tokens, want 3", r.Usage.CompletionTokens)
	}
}

func TestExpandTopic(t *testing.T) {
	for _, c := range []struct{ template, want, err string }{
		{"", "", ""},
		{"kv", "kv", ""},
		{"kv@{host}@{model}", "kv@10.0.0.7@meta-llama/Llama-3.1-8B", ""},
		{"kv@{host}:{port}@{model}", "kv@10.0.0.7:8002@meta-llama/Llama-3.1-8B", ""},
		{"w{worker}-{worker}", "w2-2", ""},
		{"kv@{pod}@{model}", "", `topic "kv@{pod}@{model}": unknown placeholder {pod} (want {host}, {port}, {model} or {worker})`},
		{"kv@{host", "", `topic "kv@{host": unclosed {`},
	} {
		got, err := ExpandTopic(c.template, "10.0.0.7", 8002, "meta-llama/Llama-3.1-8B", 2)
		var msg string
		if err != nil {
			msg = err.Error()
		}
		if got != c.want || msg != c.err {
			t.Errorf("ExpandTopic(%q) = %q, %q; want %q, %q", c.template, got, msg, c.want, c.err)
		}
	}
}

// FuzzExpandTopic: a template expands without error exactly when every "{" opens a known placeholder,
// and then to the template with each placeholder replaced by its value.
func FuzzExpandTopic(f *testing.F) {
	for _, s := range []string{"", "kv", "kv@{host}@{model}", "kv@{host}:{port}@{model}", "{worker}{worker}",
		"{", "}", "{}", "{{host}}", "{pod}", "a}b{model"} {
		f.Add(s)
	}
	want := strings.NewReplacer("{host}", "10.0.0.7", "{port}", "8002", "{model}", "org/model", "{worker}", "3")
	f.Fuzz(func(t *testing.T, template string) {
		got, err := ExpandTopic(template, "10.0.0.7", 8002, "org/model", 3)
		if err != nil {
			if !strings.Contains(template, "{") {
				t.Fatalf("ExpandTopic(%q): %v, but it has no placeholder", template, err)
			}
			return
		}
		if w := want.Replace(template); got != w {
			t.Fatalf("ExpandTopic(%q) = %q, want %q", template, got, w)
		}
	})
}

// TestZMQLowerTierMedium: a block the GPU evicts to the CPU tier keeps its vLLM name through the batch
// that removes it from the GPU and stores it below, with the medium vLLM's offloading connector gives
// (no parent, no tokens), until it leaves the last tier.
func TestZMQLowerTierMedium(t *testing.T) {
	s := &ZMQSink{o: ZMQOptions{BlockSize: 4}, hasher: vllmevents.NewHasher(""), blocks: map[uint64]*vblock{}, reqs: map[uint64]*vreq{}}
	toks := []uint32{1, 2, 3, 4, 5}
	s.Prompt(1, toks, "")
	seq := tokens.NewSequence(4)
	seq.Append(toks...)
	blk := seq.Blocks()[0]
	name := vllmevents.External(s.blocks[blk.Hash].hash)
	s.batch([]kvcache.Event{{Kind: kvcache.Stored, Blocks: []tokens.Block{blk}}})
	s.Ended(0, 1)
	s.batch([]kvcache.Event{
		{Kind: kvcache.Removed, Hashes: []uint64{blk.Hash}},
		{Kind: kvcache.Stored, Medium: kvcache.CPU, Blocks: []tokens.Block{{Hash: blk.Hash}}},
	})
	want := []vllmevents.Event{
		vllmevents.BlockRemoved{BlockHashes: []uint64{name}, Medium: "GPU"},
		vllmevents.BlockStored{BlockHashes: []uint64{name}, BlockSize: 4, Medium: "CPU"},
	}
	if !reflect.DeepEqual(s.evs, want) {
		t.Fatalf("events %+v, want %+v", s.evs, want)
	}
	s.batch([]kvcache.Event{{Kind: kvcache.Removed, Medium: kvcache.CPU, Hashes: []uint64{blk.Hash}}})
	want = []vllmevents.Event{vllmevents.BlockRemoved{BlockHashes: []uint64{name}, Medium: "CPU"}}
	if !reflect.DeepEqual(s.evs, want) || s.blocks[blk.Hash] != nil {
		t.Fatalf("events %+v (want %+v); block still named: %v", s.evs, want, s.blocks[blk.Hash] != nil)
	}
}
