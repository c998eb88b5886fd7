package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live"
	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/live/natsevents/planetest"
	"github.com/mocker-sim/mocker/live/vllmevents"
	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/tokens"
)

// runServe runs `mocker serve` in-process with cfg on free ports, its log to stderr; it returns what it
// started and a stop that ends it and returns serve's error.
func runServe(t *testing.T, cfg config.Config, stderr io.Writer) (*serving, func() error) {
	t.Helper()
	cfg.Port, cfg.NATSPort = 0, 0
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *serving, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, &cfg, stderr, ready) }()
	select {
	case info := <-ready:
		return info, func() error { cancel(); return <-done }
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
		return nil, nil
	}
}

// startServe runs `mocker serve` in-process with cfg (free ports) and returns what it started and a
// client; the server stops when the test ends.
func startServe(t *testing.T, cfg config.Config) (*serving, openai.Client) {
	t.Helper()
	info, stop := runServe(t, cfg, io.Discard)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve ended with %v", err)
		}
	})
	c := openai.NewClient(option.WithBaseURL("http://"+info.Addr+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	return info, c
}

// serveConfig is a fast server: built-in timing profile scaled far above real time, every request
// generating its max_tokens.
func serveConfig() config.Config {
	cfg := config.Default()
	cfg.Router = "kv"
	cfg.SpeedupRatio = 1000
	cfg.OutputLengthDist = "fixed"
	return cfg
}

func complete(t *testing.T, c openai.Client, prompt string, maxTokens int64) *openai.Completion {
	t.Helper()
	res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:     "llama-3.1-8b",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(maxTokens),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// serveTokens are text's prompt tokens as serve counts them for the default model, Llama-3.1-8B: the
// built-in tokenizer's, after Llama-3's BOS.
func serveTokens(text string) []uint32 {
	return tokenize.WithBOS(tokenize.Builtin(), 128000).Encode(text)
}

const servePrompt = "In the beginning the simulator had no GPU, and the requests were without form; and the " +
	"scheduler moved upon the face of the queue, and said: let there be tokens."

// TestServeNATSEvents: a NATS subscriber receives Stored events whose hashes are those of the prompt's
// blocks, computed from its tokens: by default in Dynamo's event-plane envelopes on Dynamo's subject,
// with --kv-events-format json as bare RouterEvent JSON.
func TestServeNATSEvents(t *testing.T) {
	for _, c := range []struct{ format, subject string }{
		{"dynamo", "namespace.dynamo.component.backend.kv-events"},
		{"json", "namespace.mocker.component.llama-3_2E1-8b.kv_events"},
	} {
		t.Run(c.format, func(t *testing.T) {
			cfg := serveConfig()
			cfg.KVEventsFormat = c.format
			info, oc := startServe(t, cfg)
			if info.Subject != c.subject {
				t.Fatalf("subject %q, want %q", info.Subject, c.subject)
			}
			nc, err := nats.Connect(info.NATSURL)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			sub, err := nc.SubscribeSync(info.Subject)
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			complete(t, oc, servePrompt, 4)
			checkPromptBlocks(t, func() (natsevents.RouterEvent, error) {
				m, err := sub.NextMsg(30 * time.Second)
				if err != nil {
					return natsevents.RouterEvent{}, err
				}
				if c.format == "json" {
					return natsevents.Decode(m.Data)
				}
				env, err := planetest.Envelope(m.Data)
				if err != nil {
					return natsevents.RouterEvent{}, err
				}
				return planetest.RouterEvent(env.Payload)
			})
		})
	}
}

// checkPromptBlocks reads events until they have stored servePrompt's blocks, on worker 0, rank 0.
func checkPromptBlocks(t *testing.T, next func() (natsevents.RouterEvent, error)) {
	t.Helper()
	seq := tokens.NewSequence(16)
	seq.Append(serveTokens(servePrompt)...)
	want := seq.Blocks()
	var got []tokens.Block
	for len(got) < len(want) {
		ev, err := next()
		if err != nil {
			t.Fatalf("after %d of %d blocks: %v", len(got), len(want), err)
		}
		if ev.Worker != 0 || ev.Rank != 0 || ev.Event.Kind != kvcache.Stored {
			t.Fatalf("event %+v", ev)
		}
		got = append(got, ev.Event.Blocks...)
	}
	for i, b := range want {
		if got[i] != b {
			t.Fatalf("block %d: got %+v, want %+v", i, got[i], b)
		}
	}
}

// TestServeDynamoZMQ: with --dynamo-zmq-broker the workers connect to a broker's XSUB (here a SUB that
// binds) and lead every message with the subject of the configured namespace and component.
func TestServeDynamoZMQ(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sub := zmq4.NewSub(ctx)
	defer func() { cancel(); sub.Close() }()
	if err := sub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	const subject = "namespace.team%2Ea.component.mock.kv-events"
	if err := sub.SetOption(zmq4.OptionSubscribe, subject); err != nil {
		t.Fatal(err)
	}
	cfg := serveConfig()
	cfg.NATS = "none"
	cfg.DynamoZMQBroker = "tcp://" + sub.Addr().String()
	cfg.DynamoNamespace, cfg.DynamoComponent = "team.a", "mock"
	info, oc := startServe(t, cfg)
	if info.PlaneAddrs != nil {
		t.Fatalf("a connecting sink listens on %v", info.PlaneAddrs)
	}
	// A PUB socket drops what it sends before the subscription arrives; retry until one is seen.
	msgs := make(chan zmq4.Msg, 1024)
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	var first zmq4.Msg
	for i, deadline := 0, time.Now().Add(30*time.Second); first.Frames == nil; i++ {
		complete(t, oc, fmt.Sprint(i, servePrompt), 1) // new blocks each time
		select {
		case first = <-msgs:
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no event after 30 s")
			}
		}
	}
	topic, env, err := planetest.ZMQ(first.Frames)
	if err != nil {
		t.Fatal(err)
	}
	if topic != subject || env.Topic != "kv-events" {
		t.Fatalf("topic frame %q, envelope topic %q", topic, env.Topic)
	}
	if _, err := planetest.RouterEvent(env.Payload); err != nil {
		t.Fatal(err)
	}
}

// subscribeZMQ subscribes to everything the ZMQ publisher on 127.0.0.1:port sends, buffering n messages;
// the channel closes when the test ends.
func subscribeZMQ(t *testing.T, port, n int) <-chan zmq4.Msg {
	sub := zmq4.NewSub(context.Background())
	t.Cleanup(func() { sub.Close() })
	if err := sub.Dial(fmt.Sprintf("tcp://127.0.0.1:%d", port)); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	msgs := make(chan zmq4.Msg, n)
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	return msgs
}

// sentPrompt is the prompt, among those sent, whose first blocks event s stores: an event can arrive
// after the next prompt was sent (late, on a busy machine). ok is false for an event that continues a
// sequence (a block that decoding filled).
func sentPrompt(t *testing.T, s vllmevents.BlockStored, sent []string) (text string, ok bool) {
	t.Helper()
	if s.ParentBlockHash != nil {
		return "", false
	}
	for _, text := range sent {
		p := serveTokens(text)
		if len(s.TokenIDs) <= len(p) && slices.Equal(s.TokenIDs, p[:len(s.TokenIDs)]) {
			return text, true
		}
	}
	t.Fatalf("an event stores tokens %v, the start of no prompt sent", s.TokenIDs)
	return "", false
}

// TestServeZMQEvents: a ZMQ SUB socket decodes vLLM-format batches whose block hashes are vLLM's
// sha256_cbor hashes of the prompt's tokens (with the configured PYTHONHASHSEED), with their token ids.
func TestServeZMQEvents(t *testing.T) {
	cfg := serveConfig()
	cfg.NATS = "none"
	cfg.ZMQKVEventsPort = freePort(t)
	cfg.KVHashSeed = "42"
	_, c := startServe(t, cfg)

	msgs := subscribeZMQ(t, cfg.ZMQKVEventsPort, 64)

	// The subscription reaches the publisher asynchronously and PUB drops what nobody subscribed to:
	// send distinct prompts until one's events arrive, then check that one.
	hasher := vllmevents.NewHasher("42")
	var stored vllmevents.BlockStored
	var prompt []uint32
	var sent []string
	deadline := time.Now().Add(30 * time.Second)
	for try := 0; stored.BlockHashes == nil; try++ {
		if time.Now().After(deadline) {
			t.Fatalf("no vLLM-format events arrived after %d requests", try)
		}
		sent = append(sent, fmt.Sprintf("attempt %d: %s", try, servePrompt))
		complete(t, c, sent[try], 2)
		select {
		case m := <-msgs:
			if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
				t.Fatalf("frames %q: want topic, 8-byte sequence, payload", m.Frames)
			}
			b, err := vllmevents.DecodeBatch(m.Frames[2])
			if err != nil {
				t.Fatal(err)
			}
			s, ok := b.Events[0].(vllmevents.BlockStored)
			if !ok {
				t.Fatalf("first event %T, want BlockStored", b.Events[0])
			}
			if text, ok := sentPrompt(t, s, sent); ok {
				stored, prompt = s, serveTokens(text)
			}
		case <-time.After(200 * time.Millisecond): // then another prompt, in case PUB dropped this one's
		}
	}
	chain := hasher.AppendChain(nil, prompt, 16)
	if len(stored.BlockHashes) != len(chain) {
		t.Fatalf("stored %d blocks, want the prompt's %d", len(stored.BlockHashes), len(chain))
	}
	for i, h := range chain {
		if stored.BlockHashes[i] != vllmevents.External(h) {
			t.Fatalf("block %d: hash %x, want vLLM's %x", i, stored.BlockHashes[i], vllmevents.External(h))
		}
	}
	if stored.ParentBlockHash != nil || stored.BlockSize != 16 {
		t.Errorf("parent %v, block size %d: want none and 16", stored.ParentBlockHash, stored.BlockSize)
	}
	if n := len(chain) * 16; len(stored.TokenIDs) != n || fmt.Sprint(stored.TokenIDs) != fmt.Sprint(prompt[:n]) {
		t.Errorf("token ids %v, want the prompt's first %d", stored.TokenIDs, n)
	}
}

// freePort returns a port that was free a moment ago: the ZMQ sockets are numbered from a flag, so
// the test cannot let them pick their own.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServeMetrics: /metrics parses with the Prometheus text parser and its counts match the requests.
func TestServeMetrics(t *testing.T) {
	info, c := startServe(t, serveConfig())
	var promptTokens int64
	for i := range 3 {
		res := complete(t, c, fmt.Sprintf("%d %s", i, servePrompt), 5)
		promptTokens += res.Usage.PromptTokens
	}
	res, err := http.Get("http://" + info.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no metric %s", name)
		}
		var sum float64
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
		return sum
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vllm:request_success_total", []string{"finished_reason", "length"}, 3},
		{"vllm:prompt_tokens_total", nil, float64(promptTokens)},
		{"vllm:generation_tokens_total", nil, 15},
		{"vllm:time_to_first_token_seconds", nil, 3},
		{"vllm:e2e_request_latency_seconds", nil, 3},
		{"vllm:inter_token_latency_seconds", nil, 12},
		{"vllm:num_requests_running", nil, 0},
		{"vllm:num_requests_waiting", nil, 0},
		{"vllm:prefix_cache_queries_total", nil, float64(promptTokens)},
	}
	for _, ck := range checks {
		if got := value(ck.name, ck.labels...); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
	for _, m := range fams["vllm:num_requests_running"].GetMetric() {
		if !hasLabels(m, []string{"model_name", "llama-3.1-8b", "engine", "0", "worker", "0"}) {
			t.Errorf("series labels %v", m.GetLabel())
		}
	}
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestServeDisaggregated: prefill and decode workers hand requests over through the bootstrap
// rendezvous; a decode worker's first token comes after the transfer, whose delay the bandwidth sets.
func TestServeDisaggregated(t *testing.T) {
	cfg := serveConfig()
	cfg.SpeedupRatio = math.Inf(1) // passes take no time: TTFT is the transfer
	cfg.PrefillWorkers, cfg.DecodeWorkers = 2, 2
	cfg.KVTransferTimingMode = "full_prompt"
	// llama-3.1-8b holds 131,072 bytes of KV per token: 0.0131072 GB/s moves a token in 10 ms.
	cfg.KVTransferBandwidth = 0.0131072
	cfg.CheckInvariants = true // every engine checked after every pass; serve fails at shutdown on a violation
	info, c := startServe(t, cfg)
	if len(info.Bootstrap) != 2 {
		t.Fatalf("bootstrap addresses %v, want one per prefill worker", info.Bootstrap)
	}
	prompt := strings.Repeat("token ", 100)
	n := len(serveTokens(prompt))
	start := time.Now()
	st := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model:         "llama-3.1-8b",
		Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:     openai.Int(6),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var ttft time.Duration
	var chunks int
	var usage openai.CompletionUsage
	for st.Next() {
		ch := st.Current()
		if len(ch.Choices) == 0 {
			usage = ch.Usage
			continue
		}
		if chunks == 0 {
			ttft = time.Since(start)
		}
		chunks++
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks != 6 || usage.CompletionTokens != 6 || usage.PromptTokens != int64(n) {
		t.Fatalf("%d chunks, usage %+v; want 6 tokens of a %d-token prompt", chunks, usage, n)
	}
	// The wall clock decides nothing here: timers never fire early, and the bound above only catches a
	// second transfer, with the transfer's length as margin for a loaded machine.
	want := time.Duration(n) * 10 * time.Millisecond
	if ttft < want || ttft >= 2*want {
		t.Errorf("TTFT %v, want the %v transfer of %d tokens, and less than twice that", ttft, want, n)
	}
	// Many requests at once all complete.
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			_, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
				Model:     "llama-3.1-8b",
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(fmt.Sprintf("%d %s", i, prompt))},
				MaxTokens: openai.Int(3),
			})
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeRoles: the decode workers' engines are built from their own settings (here 2 data-parallel
// ranks of 64 blocks each, TP 2), the prefill workers' from the shared ones; a request must fit both pools.
func TestServeRoles(t *testing.T) {
	cfg := serveConfig()
	cfg.Timing = "polynomial" // profiles are measured at TP 1
	cfg.PrefillWorkers, cfg.DecodeWorkers = 1, 2
	for k, v := range map[string]string{"tp": "2", "dp-size": "2", "num-gpu-blocks": "64", "max-num-seqs": "8"} {
		if err := cfg.Decode.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	d, err := cfg.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	info, c := startServe(t, cfg)
	blocks := func(ws []*live.Worker) (out [][]int) {
		for _, w := range ws {
			var ranks []int
			for _, m := range w.State() {
				ranks = append(ranks, m.TotalBlocks)
			}
			out = append(out, ranks)
		}
		return out
	}
	if got, want := fmt.Sprint(blocks(info.Server.Workers())), fmt.Sprintf("[[%d]]", d.KVBlocks); got != want {
		t.Errorf("prefill workers' ranks' blocks %s, want %s", got, want)
	}
	if got := fmt.Sprint(blocks(info.Server.DecodeWorkers())); got != "[[64 64] [64 64]]" {
		t.Errorf("decode workers' ranks' blocks %s, want [[64 64] [64 64]]", got)
	}
	// The decode pool holds 64 × 16 = 1,024 tokens per rank: a longer request is refused at once.
	_, err = c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:     "llama-3.1-8b",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(servePrompt)},
		MaxTokens: openai.Int(1024),
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "holds 1024 tokens") {
		t.Fatalf("max_tokens 1024 on a 1,024-token decode pool: %v", err)
	}
	if res := complete(t, c, servePrompt, 5); res.Usage.CompletionTokens != 5 {
		t.Fatalf("usage %+v, want 5 tokens", res.Usage)
	}
}

// TestServeGracefulShutdown: on shutdown the server stops accepting connections but finishes the
// streams in flight.
func TestServeGracefulShutdown(t *testing.T) {
	cfg := serveConfig()
	cfg.NATS = "none"
	cfg.Timing, cfg.PrefillMs, cfg.DecodeMs, cfg.SpeedupRatio = "fixed", 5, 10, 1
	cfg.Port = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan *serving, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, &cfg, io.Discard, ready) }()
	info := <-ready
	c := openai.NewClient(option.WithBaseURL("http://"+info.Addr+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	st := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model:     "llama-3.1-8b",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(servePrompt)},
		MaxTokens: openai.Int(30), // about 300 ms
	})
	if !st.Next() {
		t.Fatalf("no first chunk: %v", st.Err())
	}
	cancel() // as SIGTERM does
	chunks := 1
	for st.Next() {
		chunks++
	}
	if err := st.Err(); err != nil || chunks != 30 {
		t.Fatalf("the stream in flight got %d of 30 chunks (%v)", chunks, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := http.Get("http://" + info.Addr + "/health"); err == nil {
		t.Error("the server still accepts connections after shutting down")
	}
}

// TestServeShutdownTimeoutNamed: a stream still running when --shutdown-timeout runs out is cut off,
// and serve fails naming the flag and what happened; it failed with a bare "context deadline exceeded".
// The stream would take 100 s (100,000 tokens of 1 ms) and the timeout is 10 ms.
func TestServeShutdownTimeoutNamed(t *testing.T) {
	cfg := serveConfig()
	cfg.NATS = "none"
	cfg.Timing, cfg.PrefillMs, cfg.DecodeMs, cfg.SpeedupRatio = "fixed", 0, 1, 1
	cfg.Port = 0
	cfg.ShutdownTimeoutS = 0.01
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan *serving, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, &cfg, io.Discard, ready) }()
	info := <-ready
	c := openai.NewClient(option.WithBaseURL("http://"+info.Addr+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0))
	st := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model:     "llama-3.1-8b",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(servePrompt)},
		MaxTokens: openai.Int(100000),
	})
	defer st.Close()
	if !st.Next() {
		t.Fatalf("no first chunk: %v", st.Err())
	}
	cancel() // as SIGTERM does
	want := "shutdown: --shutdown-timeout 0.01s ran out with requests still in flight, which were cut off"
	if err := <-done; err == nil || err.Error() != want {
		t.Fatalf("serve: %v, want %q", err, want)
	}
}

// TestServeShutdownTimeoutZero: `--shutdown-timeout 0` is valid, and an idle server given it shuts down
// cleanly: serve returns nil (it used to fail with "context deadline exceeded", exit 1).
func TestServeShutdownTimeoutZero(t *testing.T) {
	cfg := serveConfig()
	cfg.NATS = "none"
	cfg.Port = 0
	cfg.ShutdownTimeoutS = 0
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan *serving, 1)
		done := make(chan error, 1)
		go func() { done <- serve(ctx, &cfg, io.Discard, ready) }()
		select {
		case <-ready:
		case err := <-done:
			cancel()
			t.Fatalf("serve: %v", err)
		}
		cancel() // as SIGTERM does
		if err := <-done; err != nil {
			t.Fatalf("try %d: an idle server with --shutdown-timeout 0: %v, want nil", i, err)
		}
	}
}

// TestServeMetricsBackends: --backend sglang and trtllm export their engines' names, the ones llm-d's
// picker reads for them (queue, running, KV usage, the pool's page size and pages), and no vLLM name.
func TestServeMetricsBackends(t *testing.T) {
	for _, tc := range []struct {
		backend, prefix string
		want            map[string]float64 // gauges after one request
		labels          map[string][]string
	}{
		{"sglang", "sglang:", map[string]float64{"sglang:num_queue_reqs": 0, "sglang:num_running_reqs": 0,
			"sglang:token_usage": 0, "sglang:page_size": 16, "sglang:cache_config_info": 1},
			map[string][]string{"sglang:cache_config_info": {"page_size", "16"}}},
		{"trtllm", "trtllm_", map[string]float64{"trtllm_num_requests_waiting": 0, "trtllm_num_requests_running": 0,
			"trtllm_kv_cache_utilization": 0, "trtllm_kv_cache_tokens_per_block": 16},
			map[string][]string{"trtllm_kv_cache_utilization": {"engine_type", "trtllm"}}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			cfg := serveConfig()
			cfg.NATS = "none"
			cfg.Backend = tc.backend
			cfg.Timing = "fixed"
			if tc.backend == "sglang" {
				cfg.PageSize = 16
			} else {
				cfg.BlockSize = 16
			}
			info, c := startServe(t, cfg)
			res := complete(t, c, servePrompt, 3)
			fams := scrapeURL(t, "http://"+info.Addr+"/metrics")
			for name := range fams {
				if !strings.HasPrefix(name, tc.prefix) {
					t.Errorf("--backend %s exports %s", tc.backend, name)
				}
			}
			for name, want := range tc.want {
				f := fams[name]
				if f == nil || len(f.GetMetric()) != 1 {
					t.Fatalf("%s: %v, want one series", name, f)
				}
				if v := f.GetMetric()[0].GetGauge().GetValue(); v != want {
					t.Errorf("%s = %v, want %v", name, v, want)
				}
			}
			for name, kv := range tc.labels {
				if m := fams[name].GetMetric()[0]; !hasLabels(m, kv) {
					t.Errorf("%s labels %v, want %v", name, m.GetLabel(), kv)
				}
			}
			var gen float64
			for _, m := range fams[tc.prefix+"generation_tokens_total"].GetMetric() {
				gen += m.GetCounter().GetValue()
			}
			if gen != float64(res.Usage.CompletionTokens) {
				t.Errorf("%sgeneration_tokens_total = %v, want %d", tc.prefix, gen, res.Usage.CompletionTokens)
			}
		})
	}
}
