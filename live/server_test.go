package live

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/metrics"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/tokens"
)

const testModel = "test-model"

// testOptions is a one-worker vLLM server with fixed timing, scaled by speedup (math.Inf(1): passes take
// no time).
func testOptions(prefillMs, decodeMs, speedup float64) Options {
	ro := router.DefaultOptions()
	ro.BlockSize = 16
	ro.QueueThreshold = 0
	return Options{
		Engine: engine.Options{
			VLLM: vllm.Options{BlockSize: 16, NumBlocks: 1024, MaxNumSeqs: 64, MaxBatchedTokens: 2048,
				ChunkedPrefill: true, PrefixCaching: true, Events: true},
			Timing: timing.Scaled{Model: timing.Fixed{PrefillMs: prefillMs, DecodeMs: decodeMs}, Speedup: speedup, DecodeSpeedup: 1},
		},
		Router:    ro,
		ModelName: testModel,
		Tokenizer: tokenize.Builtin(),
	}
}

// start runs a server on a loopback port, its API on fasthttp (APIServer), and returns it with an OpenAI
// client for it.
func start(t testing.TB, o Options) (*Server, *testServer, openai.Client) {
	t.Helper()
	s, _, hs := startAPI(t, o)
	c := openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	return s, hs, c
}

// startAPI runs a server and serves its API on a loopback port; at cleanup the API closes, then the
// server.
func startAPI(t testing.TB, o Options) (*Server, *APIServer, *testServer) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close) // after the API's cleanup, which serveAPI registers below
	api := s.APIServer()
	return s, api, serveAPI(t, api)
}

// testServer is an API served on a loopback port.
type testServer struct {
	URL    string
	client *http.Client
}

// Client is an HTTP client of the server's own, whose idle connections close with it.
func (ts *testServer) Client() *http.Client { return ts.client }

// dialServed starts a server with o, serves its API and dials it: a raw connection for the tests that
// write requests by hand (pipelined, HTTP/1.0) and stop the API under them. Each closes at cleanup: the
// connection, then the API, then the server.
func dialServed(t testing.TB, o Options) (*Server, *APIServer, net.Conn) {
	t.Helper()
	s, api, hs := startAPI(t, o)
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, api, conn
}

// serveAPI serves api on a loopback port until the test ends; Serve must then return nil.
func serveAPI(t testing.TB, api *APIServer) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- api.Serve(ln) }()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		api.Close()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{URL: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr}}
}

const longPrompt = "The quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill, " +
	"and the farmer counts his sheep in the early morning light before the rain begins to fall on the hills."

func TestCompletionUsageAndPrefixCache(t *testing.T) {
	_, _, c := start(t, testOptions(5, 1, math.Inf(1)))
	ctx := context.Background()
	n := len(tokenize.Builtin().Encode(longPrompt))
	params := openai.CompletionNewParams{
		Model:     testModel,
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)},
		MaxTokens: openai.Int(7),
	}
	first, err := c.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.Usage.CompletionTokens; got != 7 {
		t.Errorf("completion_tokens = %d, want 7", got)
	}
	if got := first.Usage.PromptTokens; got != int64(n) {
		t.Errorf("prompt_tokens = %d, want %d", got, n)
	}
	if got := first.Usage.PromptTokensDetails.CachedTokens; got != 0 {
		t.Errorf("first request: cached_tokens = %d, want 0", got)
	}
	if len(first.Choices) != 1 || first.Choices[0].FinishReason != "length" || first.Choices[0].Text == "" {
		t.Fatalf("choices = %+v", first.Choices)
	}
	second, err := c.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := second.Usage.PromptTokensDetails.CachedTokens, int64(n/16*16); got != want {
		t.Errorf("repeated prompt: cached_tokens = %d, want %d (its full blocks)", got, want)
	}
}

func TestCompletionTokenIDPrompt(t *testing.T) {
	_, _, c := start(t, testOptions(5, 1, math.Inf(1)))
	ids := make([]int64, 40)
	for i := range ids {
		ids[i] = int64(1000 + i)
	}
	res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:     testModel,
		Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids},
		MaxTokens: openai.Int(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.PromptTokens != 40 || res.Usage.CompletionTokens != 3 {
		t.Errorf("usage = %+v, want 40 prompt and 3 completion tokens", res.Usage)
	}
}

func TestCompletionStreaming(t *testing.T) {
	_, _, c := start(t, testOptions(5, 1, math.Inf(1)))
	st := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{
		Model:         testModel,
		Prompt:        openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)},
		MaxTokens:     openai.Int(12),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var chunks, finished int
	var usage *openai.CompletionUsage
	for st.Next() {
		ch := st.Current()
		if len(ch.Choices) == 0 {
			u := ch.Usage
			usage = &u
			continue
		}
		chunks++
		if ch.Choices[0].FinishReason == "length" {
			finished++
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks != 12 || finished != 1 {
		t.Errorf("%d chunks, %d finished, want 12 and 1", chunks, finished)
	}
	if usage == nil || usage.CompletionTokens != 12 {
		t.Errorf("usage = %+v, want 12 completion tokens", usage)
	}
}

func TestChatStreamingAndWhole(t *testing.T) {
	_, _, c := start(t, testOptions(5, 1, math.Inf(1)))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:               testModel,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage(longPrompt)},
		MaxCompletionTokens: openai.Int(9),
	}
	whole, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Usage.CompletionTokens != 9 || whole.Choices[0].Message.Role != "assistant" || whole.Choices[0].Message.Content == "" {
		t.Fatalf("chat completion = %+v", whole)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var content int
	for st.Next() {
		ch := st.Current()
		acc.AddChunk(ch)
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			content++
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if content != 9 {
		t.Errorf("%d content chunks, want 9", content)
	}
	if acc.Usage.CompletionTokens != 9 || acc.Usage.PromptTokens != whole.Usage.PromptTokens {
		t.Errorf("streamed usage = %+v, want 9 completion and %d prompt tokens", acc.Usage, whole.Usage.PromptTokens)
	}
	// Same seed, same request order within the worker: the streamed text equals the whole one's only
	// if ids match, which they do not (ids differ); what must hold is that it is non-empty.
	if acc.Choices[0].Message.Content == "" {
		t.Error("streamed content is empty")
	}
	if got := acc.Usage.PromptTokensDetails.CachedTokens; got == 0 {
		t.Error("the repeated chat found nothing in the prefix cache")
	}
}

func TestModelsAndHealth(t *testing.T) {
	_, hs, c := start(t, testOptions(5, 1, math.Inf(1)))
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != testModel {
		t.Errorf("models = %+v", page.Data)
	}
	res, err := http.Get(hs.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("/health: %d", res.StatusCode)
	}
}

// post sends a raw body and returns the status and the decoded error object.
func post(t *testing.T, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var v map[string]any
	if res.StatusCode != 200 {
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("status %d with a body that is not JSON: %q", res.StatusCode, data)
		}
		e, ok := v["error"].(map[string]any)
		if !ok || e["message"] == "" || e["type"] == "" {
			t.Fatalf("status %d: error body %q is not OpenAI-shaped", res.StatusCode, data)
		}
		return res.StatusCode, e
	}
	return res.StatusCode, nil
}

func TestBadInput(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	o.MaxModelLen = 64
	o.MaxBodyBytes = 4096
	_, hs, c := start(t, o)
	comp, chat := hs.URL+"/v1/completions", hs.URL+"/v1/chat/completions"
	cases := []struct {
		name, url, body string
		status          int
		param           string
	}{
		{"malformed JSON", comp, `{"model": "test-model", "prompt": "hi"`, 400, ""},
		{"not an object", comp, `[1, 2]`, 400, ""},
		{"missing model", comp, `{"prompt": "hi"}`, 400, "model"},
		{"unknown model", comp, `{"model": "gpt-5", "prompt": "hi"}`, 404, "model"},
		{"missing prompt", comp, `{"model": "test-model"}`, 400, "prompt"},
		{"empty prompt", comp, `{"model": "test-model", "prompt": ""}`, 400, "prompt"},
		{"prompt wrong type", comp, `{"model": "test-model", "prompt": {"a": 1}}`, 400, "prompt"},
		{"negative token id", comp, `{"model": "test-model", "prompt": [1, -2]}`, 400, "prompt"},
		{"empty prompt list", comp, `{"model": "test-model", "prompt": []}`, 400, "prompt"},
		{"too many choices", comp, `{"model": "test-model", "prompt": ["a", "b", "c"], "n": 100}`, 400, "prompt"},
		{"max_tokens wrong type", comp, `{"model": "test-model", "prompt": "hi", "max_tokens": "ten"}`, 400, "max_tokens"},
		{"negative max_tokens", comp, `{"model": "test-model", "prompt": "hi", "max_tokens": -1}`, 400, "max_tokens"},
		{"zero max_tokens", comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 0}`, 400, "max_tokens"},
		{"min_tokens over max_tokens", comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 3, "min_tokens": 4}`, 400, "min_tokens"},
		{"negative min_tokens", comp, `{"model": "test-model", "prompt": "hi", "min_tokens": -1}`, 400, "min_tokens"},
		{"n = 0", comp, `{"model": "test-model", "prompt": "hi", "n": 0}`, 400, "n"},
		{"n = 257", comp, `{"model": "test-model", "prompt": "hi", "n": 257}`, 400, "n"},
		{"stop wrong type", comp, `{"model": "test-model", "prompt": "hi", "stop": 3}`, 400, "stop"},
		{"empty stop string", comp, `{"model": "test-model", "prompt": "hi", "stop": ["a", ""]}`, 400, "stop"},
		{"negative stop token", comp, `{"model": "test-model", "prompt": "hi", "stop_token_ids": [-1]}`, 400, "stop_token_ids"},
		{"logprobs over 20", comp, `{"model": "test-model", "prompt": "hi", "logprobs": 21}`, 400, "logprobs"},
		{"logprobs a boolean", comp, `{"model": "test-model", "prompt": "hi", "logprobs": true}`, 400, "logprobs"},
		{"stream_options without stream", comp, `{"model": "test-model", "prompt": "hi", "stream_options": {"include_usage": true}}`, 400, "stream_options"},
		{"top_logprobs without logprobs", chat, `{"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}`, 400, "top_logprobs"},
		{"top_logprobs over 20", chat, `{"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 21}`, 400, "top_logprobs"},
		{"stream wrong type", comp, `{"model": "test-model", "prompt": "hi", "stream": "yes"}`, 400, "stream"},
		{"over max-model-len", comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 100}`, 400, "max_tokens"},
		{"prompt over max-model-len", comp, `{"model": "test-model", "prompt": "` + strings.Repeat("a ", 64) + `"}`, 400, "input_tokens"},
		{"token prompt over max-model-len", comp, `{"model": "test-model", "prompt": [` + strings.Repeat("300, ", 63) + `300]}`, 400, "input_tokens"},
		{"body too large", comp, `{"model": "test-model", "prompt": "` + strings.Repeat("x", 5000) + `"}`, 413, ""},
		{"no messages", chat, `{"model": "test-model", "messages": []}`, 400, "messages"},
		{"message without role", chat, `{"model": "test-model", "messages": [{"content": "hi"}]}`, 400, "messages"},
		{"image part without its url", chat, `{"model": "test-model", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages[0].content[0]"},
		{"messages wrong type", chat, `{"model": "test-model", "messages": "hi"}`, 400, "messages"},
		{"max_completion_tokens negative", chat, `{"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -5}`, 400, "max_completion_tokens"},
		{"unknown route", hs.URL + "/v1/embeddings", `{}`, 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, e := post(t, tc.url, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d (error %v)", status, tc.status, e)
			}
			if tc.param != "" && e["param"] != tc.param {
				t.Errorf("param = %v, want %q (message %q)", e["param"], tc.param, e["message"])
			}
		})
	}
	// Still serving.
	res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hello there")}, MaxTokens: openai.Int(2)})
	if err != nil || res.Usage.CompletionTokens != 2 {
		t.Fatalf("after bad input: %v, %+v", err, res)
	}
}

func TestAPIKey(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	o.APIKey = "sesame"
	_, hs, _ := start(t, o)
	body := `{"model": "test-model", "prompt": "hi", "max_tokens": 1}`
	if status, _ := post(t, hs.URL+"/v1/completions", body); status != 401 {
		t.Errorf("no key: status %d, want 401", status)
	}
	if status, _ := post(t, hs.URL+"/v1/completions", body, "Authorization", "Bearer wrong"); status != 401 {
		t.Errorf("wrong key: status %d, want 401", status)
	}
	if status, _ := post(t, hs.URL+"/v1/completions", body, "Authorization", "Bearer sesame"); status != 200 {
		t.Errorf("right key: status %d, want 200", status)
	}
}

// TestMaxWaiting: with one request running for a long time and one waiting, a third is refused with 429
// and Retry-After.
func TestMaxWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions(5, 50, 1)
		o.Engine.VLLM.MaxNumSeqs = 1
		o.MaxWaiting = 1
		ps := startPipe(t, o)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		send := func() {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, "POST", ps.url+"/v1/completions",
					strings.NewReader(`{"model": "test-model", "prompt": "a long story", "max_tokens": 1000}`))
				if res, err := ps.http.Do(req); err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			})
			synctest.Wait() // the worker has planned its next pass and sleeps until it ends
		}
		state := func() sched.Metrics { return ps.Workers()[0].State()[0] }
		send()
		if m := state(); m.Running != 1 || m.Waiting != 0 {
			t.Fatalf("after one request: %d running, %d waiting; want 1 and 0", m.Running, m.Waiting)
		}
		send()
		if m := state(); m.Running != 1 || m.Waiting != 1 {
			t.Fatalf("after two requests: %d running, %d waiting; want 1 and 1", m.Running, m.Waiting)
		}
		req, _ := http.NewRequest("POST", ps.url+"/v1/completions", strings.NewReader(`{"model": "test-model", "prompt": "hi"}`))
		res, err := ps.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 429 || res.Header.Get("Retry-After") == "" {
			t.Errorf("status %d, Retry-After %q; want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
		}
		cancel()
		wg.Wait()
	})
}

// waitFor polls cond, for tests whose server runs on real sockets (outside a synctest bubble). Its
// deadline only stops a hung test: it is far beyond what a loaded machine needs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// abandonStreams opens n streams at once, stream i with a prompt of words+i words, and has each client
// go away after reading chunks(i) chunks (0: after i ms without reading).
func abandonStreams(c openai.Client, n, words int, chunks func(i int) int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
				Model:     testModel,
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(strings.Repeat("word ", words+i))},
				MaxTokens: openai.Int(10000),
			})
			if k := chunks(i); k > 0 {
				for n := 0; n < k && st.Next(); n++ {
				}
			} else {
				time.Sleep(time.Duration(i) * time.Millisecond)
			}
			cancel()
			st.Close()
		}()
	}
	wg.Wait()
}

// TestCancelledStreamsFreeBlocks: after a burst of streams that clients abandon, every KV block is
// released and the goroutines return to their idle count.
func TestCancelledStreamsFreeBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		labelGoroutines(t)
		ps := startPipe(t, testOptions(2, 5, 1))
		synctest.Wait()
		before := labelledGoroutines(t)
		abandonStreams(ps.openai, 32, 40, func(int) int { return 3 })
		synctest.Wait()
		w := ps.Workers()[0]
		if n := w.InFlight(); n != 0 {
			t.Errorf("%d requests still on the worker", n)
		}
		m := w.State()[0]
		if m.ActiveBlocks != 0 || m.Running != 0 || m.Waiting != 0 {
			t.Errorf("after cancelling: %+v, want no active blocks and no requests", m)
		}
		if err := w.checkInvariants(); err != nil {
			t.Error(err)
		}
		ps.http.CloseIdleConnections()
		synctest.Wait()
		if n := labelledGoroutines(t); n != before {
			t.Errorf("%d goroutines, %d before the burst", n, before)
		}
	})
}

// TestWallClock: at speedup 1 a lone request's TTFT is one prefill pass (prefill + decode ms, as the
// fixed model prices a pass that prefills and samples) and every ITL the decode ms, exactly (the clock
// is synctest's), as the client sees them and as the worker's metrics record them.
func TestWallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ms = time.Millisecond
		o := testOptions(40, 10, 1)
		rec := &timesRecorder{}
		o.Recorder = func(worker, rank int) Recorder { return rec }
		ps := startPipe(t, o)
		start := time.Now()
		st := ps.openai.Completions.NewStreaming(t.Context(), openai.CompletionNewParams{
			Model:     testModel,
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)},
			MaxTokens: openai.Int(21),
		})
		var times []time.Duration
		for st.Next() {
			times = append(times, time.Since(start))
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if len(times) != 21 {
			t.Fatalf("%d chunks, want 21", len(times))
		}
		if times[0] != 50*ms {
			t.Errorf("client: TTFT %v, want 50ms", times[0])
		}
		for i := 1; i < len(times); i++ {
			if d := times[i] - times[i-1]; d != 10*ms {
				t.Errorf("client: ITL %d = %v, want 10ms", i, d)
			}
		}
		synctest.Wait() // the worker records the request's end after the client has it
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.ttft) != 1 || rec.ttft[0] != 50*ms {
			t.Errorf("metrics: TTFT %v, want [50ms]", rec.ttft)
		}
		if len(rec.itl) != 20 {
			t.Errorf("metrics: %d ITLs, want 20", len(rec.itl))
		}
		for i, d := range rec.itl {
			if d != 10*ms {
				t.Errorf("metrics: ITL %d = %v, want 10ms", i, d)
			}
		}
		if len(rec.e2e) != 1 || rec.e2e[0] != 250*ms {
			t.Errorf("metrics: e2e %v, want [250ms]", rec.e2e)
		}
	})
}

// timesRecorder keeps the latencies a worker records.
type timesRecorder struct {
	mu             sync.Mutex
	ttft, itl, e2e []time.Duration
	state          sched.Metrics
}

func (r *timesRecorder) SetState(m sched.Metrics) { r.mu.Lock(); r.state = m; r.mu.Unlock() }
func (r *timesRecorder) Prompt(int, int)          {}
func (r *timesRecorder) Generated(int)            {}
func (r *timesRecorder) Iteration(int)            {}
func (r *timesRecorder) QueueTime(time.Duration)  {}
func (r *timesRecorder) FirstToken(d time.Duration) {
	r.mu.Lock()
	r.ttft = append(r.ttft, d)
	r.mu.Unlock()
}
func (r *timesRecorder) InterToken(d time.Duration) {
	r.mu.Lock()
	r.itl = append(r.itl, d)
	r.mu.Unlock()
}
func (r *timesRecorder) Finished(q metrics.Request) {
	r.mu.Lock()
	r.e2e = append(r.e2e, q.E2E)
	r.mu.Unlock()
}

// TestEventsReachSinks: a sink sees Stored events for the prompt's blocks with the hashes the tokens
// package computes, before the request ends.
func TestEventsReachSinks(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	sk := &recordingSink{}
	o.Sinks = []Sink{sk}
	_, _, c := start(t, o)
	if _, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)}, MaxTokens: openai.Int(2)}); err != nil {
		t.Fatal(err)
	}
	// The response leaves before the worker reports the request's end to the sinks.
	waitFor(t, "the sink to see the request end", func() bool { sk.mu.Lock(); defer sk.mu.Unlock(); return sk.ended > 0 })
	prompt := tokenize.Builtin().Encode(longPrompt)
	want := hashesOf(prompt, 16)
	sk.mu.Lock()
	defer sk.mu.Unlock()
	var got []uint64
	for _, e := range sk.events {
		if e.Kind == kvcache.Stored {
			for _, b := range e.Blocks {
				got = append(got, b.Hash)
			}
		}
	}
	if len(got) < len(want) {
		t.Fatalf("stored %d blocks, want at least the prompt's %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stored block %d hash %x, want %x", i, got[i], want[i])
		}
	}
	if sk.prompts != 1 || sk.ended != 1 {
		t.Errorf("sink saw %d prompts and %d ends, want 1 and 1", sk.prompts, sk.ended)
	}
}

func hashesOf(prompt []uint32, blockSize int) []uint64 {
	seq := tokens.NewSequence(blockSize)
	seq.Append(prompt...)
	var out []uint64
	for _, b := range seq.Blocks() {
		out = append(out, b.Hash)
	}
	return out
}

type recordingSink struct {
	mu             sync.Mutex
	events         []kvcache.Event
	prompts, ended int
	tokens         int
}

func (r *recordingSink) Prompt(id uint64, prompt []uint32, lora string) {
	r.mu.Lock()
	r.prompts++
	r.mu.Unlock()
}
func (r *recordingSink) Events(worker, rank int, evs []kvcache.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range evs {
		e.Blocks = append([]tokens.Block(nil), e.Blocks...)
		e.Hashes = append([]uint64(nil), e.Hashes...)
		r.events = append(r.events, e)
	}
}
func (r *recordingSink) Tokens(worker int, id uint64, toks []uint32) {
	r.mu.Lock()
	r.tokens += len(toks)
	r.mu.Unlock()
}
func (r *recordingSink) Ended(worker int, id uint64) { r.mu.Lock(); r.ended++; r.mu.Unlock() }

// disaggOptions is two prefill and two decode workers whose transfers take 20 ms.
func disaggOptions(prefillMs, decodeMs, speedup float64) Options {
	o := testOptions(prefillMs, decodeMs, speedup)
	o.Workers = 2
	dr := o.Router
	dr.OverlapScoreWeight, dr.TrackPrefillTokens = 0, false
	o.Disagg = &Disagg{DecodeWorkers: 2, Router: dr, BootstrapHost: "127.0.0.1",
		Transfer: disagg.Transfer{GBps: 1, BytesPerToken: 1e6, Mode: disagg.FullPrompt}} // 1 ms per token
	return o
}

// TestDisaggCancelFreesBlocks: streams abandoned while prefilling, in their KV transfer or decoding
// leave no block held or reserved on either side, and no request anywhere.
func TestDisaggCancelFreesBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		labelGoroutines(t)
		o := disaggOptions(3, 5, 1)
		pipeRendezvous(o.Disagg)
		ps := startPipe(t, o)
		synctest.Wait()
		before := labelledGoroutines(t)
		// A third leave at once (while prefilling or transferring), the rest after two tokens (decoding).
		abandonStreams(ps.openai, 24, 10, func(i int) int { return min(i%3, 1) * 2 })
		time.Sleep(time.Minute) // on synctest's clock: every pass, retry and timeout due has run
		synctest.Wait()
		all := ps.allWorkers()
		for i, w := range all {
			if n := w.InFlight(); n != 0 {
				t.Errorf("%s: %d requests in flight, want 0", ps.workerName(i), n)
			}
			if m := w.State()[0]; m.ActiveBlocks != 0 || m.Running != 0 || m.Waiting != 0 {
				t.Errorf("%s after cancelling: %+v, want no active blocks and no requests", ps.workerName(i), m)
			}
			if err := w.checkInvariants(); err != nil {
				t.Errorf("%s: %v", ps.workerName(i), err)
			}
		}
		ps.mu.Lock()
		if n := len(ps.handoffs); n != 0 {
			t.Errorf("%d handoffs left, want 0", n)
		}
		ps.mu.Unlock()
		ps.http.CloseIdleConnections()
		synctest.Wait()
		if n := labelledGoroutines(t); n != before {
			t.Errorf("%d goroutines, %d before the burst", n, before)
		}
	})
}

// TestDisaggTTFT: a disaggregated request's first token comes exactly after its prefill pass, its
// transfer and its first decode pass (the rendezvous runs over in-memory pipes, on synctest's clock).
func TestDisaggTTFT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := disaggOptions(30, 5, 1)
		o.Disagg.Transfer.BytesPerToken = 1e7 // 10 ms per token
		pipeRendezvous(o.Disagg)
		ps := startPipe(t, o)
		prompt := strings.Repeat("word ", 50)
		n := len(tokenize.Builtin().Encode(prompt))
		begin := time.Now()
		st := ps.openai.Completions.NewStreaming(t.Context(), openai.CompletionNewParams{
			Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(4)})
		var times []time.Duration
		for st.Next() {
			times = append(times, time.Since(begin))
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		// Prefill pass 30 ms (the prefill worker samples nothing), transfer 10n ms, decode passes 5 ms.
		first := 30*time.Millisecond + time.Duration(n)*10*time.Millisecond + 5*time.Millisecond
		want := []time.Duration{first, first + 5*time.Millisecond, first + 10*time.Millisecond, first + 15*time.Millisecond}
		if !slices.Equal(times, want) {
			t.Errorf("chunks at %v, want %v", times, want)
		}
	})
}

// TestRoutingAcrossWorkers: behind the KV router a repeated prompt goes back to the worker (and rank)
// that cached it; round-robin sends it elsewhere and finds nothing cached.
func TestRoutingAcrossWorkers(t *testing.T) {
	for _, tc := range []struct {
		policy router.Policy
		cached bool
	}{{router.KV, true}, {router.RoundRobin, false}} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			o := testOptions(5, 1, math.Inf(1))
			o.Workers, o.Engine.DPSize = 3, 2
			o.Router.Policy = tc.policy
			s, _, c := start(t, o)
			params := openai.CompletionNewParams{Model: testModel,
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)}, MaxTokens: openai.Int(2)}
			if _, err := c.Completions.New(context.Background(), params); err != nil {
				t.Fatal(err)
			}
			res, err := c.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Usage.PromptTokensDetails.CachedTokens > 0; got != tc.cached {
				t.Errorf("repeated prompt: cached_tokens = %d, want cached = %v", res.Usage.PromptTokensDetails.CachedTokens, tc.cached)
			}
			// Every rank of every worker is a target.
			s.mu.Lock()
			n := len(s.router.Targets())
			s.mu.Unlock()
			if n != 6 {
				t.Errorf("%d router targets, want 3 workers × 2 ranks", n)
			}
		})
	}
}

// TestCancelClearsMetrics: when a client abandons its stream and nothing else reaches the worker, its
// gauges drop at once, before the pass it was in ends, to no request running and no KV in use (they
// stayed up until another request reached the worker).
func TestCancelClearsMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions(5, 10, 1)
		mx := metrics.New(metrics.Options{Model: testModel, MaxModelLen: 4096})
		o.Metrics, o.Recorder = mx.Handler(), func(w, r int) Recorder { return mx.Rank(w, r) }
		ps := startPipe(t, o)
		ctx, cancel := context.WithCancel(t.Context())
		st := ps.openai.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model:     testModel,
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)},
			MaxTokens: openai.Int(1000),
		})
		for i := range 3 {
			if !st.Next() {
				t.Fatalf("chunk %d: %v", i, st.Err())
			}
		}
		if running, kv := gauges(t, ps); running != 1 || kv <= 0 {
			t.Fatalf("while streaming: num_requests_running %v, kv_cache_usage_perc %v; want 1 and > 0", running, kv)
		}
		cancel()
		st.Close()
		synctest.Wait() // the cancel has reached the worker; its pass has not ended (the clock has not moved)
		if running, kv := gauges(t, ps); running != 0 || kv != 0 {
			t.Errorf("as the client left: num_requests_running %v, kv_cache_usage_perc %v; want 0 and 0", running, kv)
		}
		time.Sleep(time.Minute) // on synctest's clock: no other request comes
		if running, kv := gauges(t, ps); running != 0 || kv != 0 {
			t.Errorf("a minute after the client left: num_requests_running %v, kv_cache_usage_perc %v; want 0 and 0", running, kv)
		}
		// vLLM counts the abandoned request as finished, with reason abort.
		fams := scrape(t, ps.http, ps.url)
		for _, m := range fams["vllm:request_success_total"].GetMetric() {
			want := 0.0
			if reason := labelValue(m, "finished_reason"); reason == "abort" {
				want = 1
			}
			if v := m.GetCounter().GetValue(); v != want {
				t.Errorf("request_success_total{%v} = %v, want %v", m.GetLabel(), v, want)
			}
		}
		if h := fams["vllm:e2e_request_latency_seconds"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 {
			t.Errorf("e2e_request_latency_seconds counts %d requests, want the aborted one", h.GetSampleCount())
		}
	})
}

// gauges scrapes the server's /metrics for the worker's running requests and KV usage.
func gauges(t *testing.T, ps *pipeServer) (running, kv float64) {
	t.Helper()
	fams := scrape(t, ps.http, ps.url)
	value := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("metric %s: %v, want one series", name, f)
		}
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	return value("vllm:num_requests_running"), value("vllm:kv_cache_usage_perc")
}

// scrape reads the metric families of url's /metrics.
func scrape(t *testing.T, hc *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := hc.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestMetricsBeforeLastToken: a request is counted finished, and no longer running, before its stream
// ends, and its tokens are all counted generated before it is counted finished, so a client that scrapes
// /metrics right after its response finds it there whole.
func TestMetricsBeforeLastToken(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	eng, err := engine.New(o.Engine)
	if err != nil {
		t.Fatal(err)
	}
	st := newStream(1, 40, time.Now(), nil)
	rec := &streamRecorder{st: st}
	w := newWorker(0, 0, eng, sched.Aggregated, true, false, Hooks{Recorder: func(int, int) Recorder { return rec }}, time.Now())
	w.start()
	defer w.close()
	prompt := make([]uint32, 40)
	for i := range prompt {
		prompt[i] = uint32(i)
	}
	seq := tokens.NewSequence(16)
	seq.Append(prompt...)
	if err := w.Submit(&sched.Request{ID: 1, Prompt: prompt, MaxTokens: 5, Seq: seq}, st); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		<-st.Ready()
		_, _, done, err = st.Next(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.finished != 1 || rec.doneFirst || rec.state.Running != 0 || rec.state.ActiveBlocks != 0 {
		t.Errorf("when the stream ended: %d finished (stream done first: %v), state %+v; want 1 finished before, "+
			"nothing running, no active block", rec.finished, rec.doneFirst, rec.state)
	}
	if rec.generatedAtEnd != 5 {
		t.Errorf("%d tokens counted generated when the request was counted finished, want 5", rec.generatedAtEnd)
	}
}

// streamRecorder notes whether a request's stream had ended, and how many tokens were counted generated,
// when the worker counted it finished.
type streamRecorder struct {
	timesRecorder
	st                        *Stream
	finished                  int
	doneFirst                 bool
	generated, generatedAtEnd int
}

func (r *streamRecorder) Generated(n int) { r.mu.Lock(); r.generated += n; r.mu.Unlock() }

func (r *streamRecorder) Finished(metrics.Request) {
	r.st.mu.Lock()
	done := r.st.done
	r.st.mu.Unlock()
	r.mu.Lock()
	r.finished++
	r.doneFirst = r.doneFirst || done
	r.generatedAtEnd = r.generated
	r.mu.Unlock()
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// TestWorkerHandler: a worker's own handler sends every request to that worker, even when the shared
// router would pick another (the prompt is cached on the other worker), serves its /metrics, and the
// shared router's count of the pinned requests returns to zero when they finish.
func TestWorkerHandler(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	o.Workers = 2
	o.Router.Policy = router.KV
	s, _, shared := start(t, o)
	params := openai.CompletionNewParams{Model: testModel,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)}, MaxTokens: openai.Int(2)}
	if _, err := shared.Completions.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	queries := func() [2]int64 {
		var q [2]int64
		for w := range 2 {
			q[w] = s.Workers()[w].State()[0].PrefixQueries
		}
		return q
	}
	first := queries()
	pin := 0 // the worker that has not seen the prompt
	if first[0] > 0 {
		pin = 1
	}
	metricsOf := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the worker's metrics\n") })
	hs := serveAPI(t, s.WorkerAPIServer(pin, metricsOf))
	pinned := openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	for i := range 3 {
		res, err := pinned.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Usage.PromptTokensDetails.CachedTokens; i == 0 && c != 0 {
			t.Errorf("first pinned request found %d cached tokens: it went to the worker that had the prompt", c)
		}
	}
	got := queries()
	n := int64(len(tokenize.Builtin().Encode(longPrompt)))
	want := first
	want[pin] += 3 * n
	if got != want {
		t.Errorf("prompt tokens looked up per worker %v after 3 requests pinned to worker %d, want %v", got, pin, want)
	}
	res, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "the worker's metrics\n" {
		t.Errorf("worker handler's /metrics = %q, want the worker's", body)
	}
	s.mu.Lock()
	load := s.router.Load(router.Target{Worker: pin}).Requests
	s.mu.Unlock()
	if load != 0 {
		t.Errorf("worker %d still carries %d requests in the router after they finished", pin, load)
	}
}

// TestLowerTierServe: a prompt whose blocks another request pushed out of an 8-block pool is served from
// the CPU tier (SGLang's: HiCache's host tier): its second request reports its full blocks cached,
// onboarded at 1 ms a block.
func TestLowerTierServe(t *testing.T) {
	for _, b := range []engine.Backend{engine.VLLM, engine.SGLang} {
		t.Run(b.String(), func(t *testing.T) {
			o := backendOptions(b)
			tiers := kvcache.TierOptions{CPUBlocks: 64, CPUBandwidth: 1, BlockBytes: 1e6}
			o.Engine.VLLM.NumBlocks, o.Engine.SGLang.NumPages = 8, 8
			o.Engine.VLLM.Tiers, o.Engine.SGLang.Tiers = tiers, tiers
			o.CheckInvariants = true
			s, _, c := start(t, o)
			ask := func(prompt string) int64 {
				t.Helper()
				res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: testModel,
					Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(7)})
				if err != nil {
					t.Fatal(err)
				}
				return res.Usage.PromptTokensDetails.CachedTokens
			}
			ask(longPrompt)                                        // 40 tokens: 2 full blocks cached
			ask(strings.Repeat("zebra yak xylophone walrus ", 22)) // the whole pool: both go to the CPU tier
			if got := ask(longPrompt); got != 32 {
				t.Fatalf("cached_tokens %d after onboarding, want 32", got)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
