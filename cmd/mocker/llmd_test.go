package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/go-zeromq/zmq4"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/mocker-sim/mocker/tokenize"
)

// llmdIndexer consumes vLLM KV events the way llm-d's KV-cache indexer does (llm-d-kv-cache:
// pkg/kvevents/engineadapter/vllm_adapter.go, pkg/kvevents/pool.go, pkg/kvcache/kvblock/token_processor.go),
// written here from reading that code:
//   - a SUB socket filtered on the topic prefix "kv@", which binds (the centralized mode: engines
//     connect to it) or connects to each pod;
//   - a message is exactly (topic, 8-byte big-endian sequence, payload), and the topic
//     kv@<pod>@<model> names the pod and the model; others are dropped;
//   - the payload is vLLM's array-encoded EventBatch [ts, [events], dp_rank?], each event a tagged
//     array; block hashes are integers or bytes, of which the last 8 bytes big-endian are the
//     "engine key";
//   - the index keys blocks by its own "request keys": FNV-64a of the canonical CBOR of
//     [parent key, the block's token ids, extra], chained from the parent block's request key (looked
//     up from the event's parent engine key) or, for a first block, from hash(FNV-64a(seed), nil,
//     model), so the model name from the topic is part of every key;
//   - a prompt scores, per pod, the number of its leading blocks the pod holds.
type llmdIndexer struct {
	blockSize int
	init      uint64 // FNV-64a of the hash seed
	enc       cbor.EncMode
	sub       zmq4.Socket

	mu        sync.Mutex
	toRequest map[uint64]uint64              // engine key → request key
	pods      map[uint64]map[string]struct{} // request key → pods holding it
	models    map[string]string              // pod → the model its topic named
	dropped   int                            // messages whose topic or schema was not llm-d's
	orphans   int                            // blocks whose parent was published before the subscription
}

func newLLMDIndexer(t *testing.T, blockSize int, seed string) *llmdIndexer {
	enc, err := cbor.CanonicalEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	h.Write([]byte(seed))
	ix := &llmdIndexer{blockSize: blockSize, init: h.Sum64(), enc: enc, sub: zmq4.NewSub(context.Background()),
		toRequest: map[uint64]uint64{}, pods: map[uint64]map[string]struct{}{}, models: map[string]string{}}
	t.Cleanup(func() { ix.sub.Close() })
	if err := ix.sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		t.Fatal(err)
	}
	return ix
}

// run reads messages until the socket closes.
func (ix *llmdIndexer) run() {
	for {
		m, err := ix.sub.Recv()
		if err != nil {
			return
		}
		ix.handle(m.Frames)
	}
}

func (ix *llmdIndexer) handle(frames [][]byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(frames) != 3 || len(frames[1]) != 8 {
		ix.dropped++
		return
	}
	parts := strings.Split(string(frames[0]), "@")
	if len(parts) != 3 {
		ix.dropped++
		return
	}
	pod, mdl := parts[1], parts[2]
	var batch []any
	if err := msgpack.Unmarshal(frames[2], &batch); err != nil || len(batch) < 2 {
		ix.dropped++
		return
	}
	events, ok := batch[1].([]any)
	if !ok {
		ix.dropped++
		return
	}
	ix.models[pod] = mdl
	for _, e := range events {
		ev, ok := e.([]any)
		if !ok || len(ev) < 1 {
			ix.dropped++
			continue
		}
		switch ev[0] {
		case "BlockStored":
			if len(ev) < 5 {
				ix.dropped++
				continue
			}
			ix.stored(pod, mdl, ev[1], ev[2], ev[3])
		case "BlockRemoved":
			hashes, _ := ev[1].([]any)
			for _, h := range hashes {
				if rk, ok := ix.toRequest[engineKey(h)]; ok {
					delete(ix.pods[rk], pod)
				}
			}
		case "AllBlocksCleared":
		default:
			ix.dropped++
		}
	}
}

func (ix *llmdIndexer) stored(pod, mdl string, rawHashes, rawParent, rawTokens any) {
	hashes, _ := rawHashes.([]any)
	toks, _ := rawTokens.([]any)
	tokens := make([]uint32, len(toks))
	for i, x := range toks {
		tokens[i] = uint32(engineKey(x))
	}
	var parent uint64 // no parent: the chain starts from the model's root
	if rawParent != nil {
		rk, ok := ix.toRequest[engineKey(rawParent)]
		if !ok {
			ix.orphans++ // llm-d skips a block whose parent it does not know
			return
		}
		parent = rk
	}
	keys := ix.requestKeys(parent, tokens, mdl)
	if len(keys) != len(hashes) {
		ix.dropped++
		return
	}
	for i, h := range hashes {
		ix.toRequest[engineKey(h)] = keys[i]
		if ix.pods[keys[i]] == nil {
			ix.pods[keys[i]] = map[string]struct{}{}
		}
		ix.pods[keys[i]][pod] = struct{}{}
	}
}

// engineKey turns a msgpack integer or byte string into llm-d's uint64: bytes by their last 8, big-endian.
func engineKey(x any) uint64 {
	switch v := x.(type) {
	case int8:
		return uint64(v)
	case int16:
		return uint64(v)
	case int32:
		return uint64(v)
	case int64:
		return uint64(v)
	case uint8:
		return uint64(v)
	case uint16:
		return uint64(v)
	case uint32:
		return uint64(v)
	case uint64:
		return v
	case []byte:
		var b [8]byte
		if len(v) >= 8 {
			copy(b[:], v[len(v)-8:])
		} else {
			copy(b[8-len(v):], v)
		}
		return binary.BigEndian.Uint64(b[:])
	}
	return 0
}

func (ix *llmdIndexer) hash(parent uint64, tokens []uint32, extra any) uint64 {
	b, err := ix.enc.Marshal([]any{parent, tokens, extra})
	if err != nil {
		panic(err)
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// requestKeys are the keys of tokens' full blocks, chained from parent (0: the model's root).
func (ix *llmdIndexer) requestKeys(parent uint64, tokens []uint32, mdl string) []uint64 {
	if parent == 0 {
		parent = ix.hash(ix.init, nil, mdl)
	}
	var keys []uint64
	for ; len(tokens) >= ix.blockSize; tokens = tokens[ix.blockSize:] {
		parent = ix.hash(parent, tokens[:ix.blockSize], nil)
		keys = append(keys, parent)
	}
	return keys
}

// score is llm-d's longest-prefix score of a prompt: per pod, how many of its leading blocks it holds.
func (ix *llmdIndexer) score(tokens []uint32, mdl string, pods []string) map[string]int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := map[string]int{}
	for _, pod := range pods {
		for _, k := range ix.requestKeys(0, tokens, mdl) {
			if _, ok := ix.pods[k][pod]; !ok {
				break
			}
			out[pod]++
		}
	}
	return out
}

// freePorts returns the first of n consecutive ports that were free a moment ago.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := freePort(t)
		ok := true
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if ok = err == nil; ok {
				l.Close()
			}
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// TestServeLLMD runs two workers, each a pod on its own port (--worker-ports) with the topic llm-d's
// guides give vLLM (--kv-events-topic kv@{host}:{port}@{model}), and an indexer that subscribes as
// llm-d's does, in both of its modes: centralized (it binds, the workers connect:
// --kv-events-endpoint tcp://HOST:PORT) and per pod (each worker binds, the indexer connects). A prompt
// sent to one pod scores its whole prefix there and nothing on the other; sent there again, as the
// picker would, it is served from that pod's cache. Each pod's own /metrics is the series llm-d's
// picker reads for it.
func TestServeLLMD(t *testing.T) {
	for _, centralized := range []bool{true, false} {
		name := "per-pod"
		if centralized {
			name = "centralized"
		}
		t.Run(name, func(t *testing.T) {
			const served = "meta-llama/Llama-3.1-8B-Instruct"
			cfg := serveConfig()
			cfg.NATS = "none"
			cfg.ModelName = served
			cfg.Workers = 2
			cfg.WorkerPorts = freePorts(t, 2)
			cfg.KVEventsTopic = "kv@{host}:{port}@{model}"
			ix := newLLMDIndexer(t, 16, "")
			var eventPort int
			if centralized {
				eventPort = freePort(t)
				if err := ix.sub.Listen(fmt.Sprintf("tcp://127.0.0.1:%d", eventPort)); err != nil {
					t.Fatal(err)
				}
				cfg.KVEventsEndpoint = fmt.Sprintf("tcp://127.0.0.1:%d", eventPort)
			} else {
				eventPort = freePorts(t, 2)
				cfg.ZMQKVEventsPort = eventPort // worker w binds 127.0.0.1:port + w
			}
			info, _ := startServe(t, cfg)
			if !centralized {
				for w := range 2 {
					if err := ix.sub.Dial(fmt.Sprintf("tcp://127.0.0.1:%d", eventPort+w)); err != nil {
						t.Fatal(err)
					}
				}
			}
			go ix.run()
			pods := info.WorkerAddrs
			if len(pods) != 2 || pods[0] != fmt.Sprintf("127.0.0.1:%d", cfg.WorkerPorts) || pods[1] != fmt.Sprintf("127.0.0.1:%d", cfg.WorkerPorts+1) {
				t.Fatalf("worker addresses %v, want ports %d and %d", pods, cfg.WorkerPorts, cfg.WorkerPorts+1)
			}
			send := func(pod int, prompt []uint32) *openai.Completion {
				t.Helper()
				c := openai.NewClient(option.WithBaseURL("http://"+pods[pod]+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
				ids := make([]int64, len(prompt))
				for i, x := range prompt {
					ids[i] = int64(x)
				}
				res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: served,
					Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids}, MaxTokens: openai.Int(2)})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			tk := tokenize.Builtin()
			// A PUB drops what it sends before a subscription reaches it: warm each pod up until the
			// indexer has heard from it.
			deadline := time.Now().Add(30 * time.Second)
			for pod := range 2 {
				for try := 0; ; try++ {
					ix.mu.Lock()
					_, heard := ix.models[pods[pod]]
					ix.mu.Unlock()
					if heard {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("no event from pod %s after %d requests", pods[pod], try)
					}
					send(pod, tk.Encode(fmt.Sprintf("warm-up %d of pod %d: %s", try, pod, servePrompt)))
					time.Sleep(20 * time.Millisecond)
				}
			}

			prompt := tk.Encode("A prompt that only pod one has seen. " + servePrompt + " " + servePrompt)
			full := len(prompt) / 16
			if full < 3 || len(prompt)%16 == 0 {
				t.Fatalf("prompt of %d tokens: want at least 3 full blocks and a partial one", len(prompt))
			}
			if res := send(1, prompt); res.Usage.PromptTokensDetails.CachedTokens != 0 {
				t.Fatalf("first send: %d cached tokens, want 0", res.Usage.PromptTokensDetails.CachedTokens)
			}
			want := map[string]int{pods[1]: full}
			var got map[string]int
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if got = ix.score(prompt, served, pods); fmt.Sprint(got) == fmt.Sprint(want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("llm-d's scores %v, want %v", got, want)
				}
			}
			// The picker sends it to the pod that scored: it is served from that pod's cache.
			res := send(1, prompt)
			if c := res.Usage.PromptTokensDetails.CachedTokens; c != int64(full*16) {
				t.Errorf("second send to the pod that cached it: %d cached tokens, want %d", c, full*16)
			}
			ix.mu.Lock()
			for _, pod := range pods {
				if ix.models[pod] != served {
					t.Errorf("pod %s: model %q from the topic, want %q", pod, ix.models[pod], served)
				}
			}
			if ix.dropped != 0 {
				t.Errorf("the indexer dropped %d messages or events", ix.dropped)
			}
			ix.mu.Unlock()

			// Each pod's /metrics holds that worker's series alone, as llm-d's picker reads them.
			for w, pod := range pods {
				fams := scrapeURL(t, "http://"+pod+"/metrics")
				for _, name := range []string{"vllm:cache_config_info", "vllm:num_requests_waiting", "vllm:num_requests_running",
					"vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits_total"} {
					f := fams[name]
					if f == nil || len(f.GetMetric()) != 1 || !hasLabels(f.GetMetric()[0], []string{"worker", fmt.Sprint(w)}) {
						t.Fatalf("pod %s: %s = %v, want one series of worker %d", pod, name, f, w)
					}
				}
				ci := fams["vllm:cache_config_info"].GetMetric()[0]
				if !hasLabels(ci, []string{"block_size", "16", "engine", "0"}) {
					t.Errorf("pod %s: cache_config_info labels %v, want block_size 16, engine 0", pod, ci.GetLabel())
				}
				hits := fams["vllm:prefix_cache_hits_total"].GetMetric()[0].GetCounter().GetValue()
				if wantHits := []float64{0, float64(full * 16)}[w]; hits != wantHits {
					t.Errorf("pod %s: prefix_cache_hits_total %v, want %v", pod, hits, wantHits)
				}
			}
			// The shared port has both workers' series, told apart by the worker label.
			all := scrapeURL(t, "http://"+info.Addr+"/metrics")
			for _, name := range []string{"vllm:cache_config_info", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} {
				ms := all[name].GetMetric()
				if len(ms) != 2 || !hasLabels(ms[0], []string{"worker", "0"}) || !hasLabels(ms[1], []string{"worker", "1"}) {
					t.Errorf("shared /metrics: %s has %d series, want workers 0 and 1", name, len(ms))
				}
			}
		})
	}
}

func scrapeURL(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}
