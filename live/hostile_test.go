package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/tokenize"
)

// patience bounds every wait on the server in these tests: generous, since the machine may be busy;
// a test only fails on it when something hangs.
const patience = 60 * time.Second

var patientClient = &http.Client{Timeout: patience}

// call sends a raw request and returns the response with its body read, and the OpenAI error object
// when the status is not 200.
func call(t *testing.T, method, url, body string) (*http.Response, []byte, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := patientClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode == http.StatusOK {
		return res, data, nil
	}
	var v struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Error == nil {
		t.Fatalf("%s %s: status %d with a body that is not an OpenAI error: %q", method, url, res.StatusCode, data)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := v.Error[k]; !ok {
			t.Errorf("%s %s: error object %q lacks %q", method, url, data, k)
		}
	}
	return res, data, v.Error
}

// backendOptions is testOptions on each backend: vLLM, TensorRT-LLM (vLLM's scheduler with
// guaranteed_no_evict) and SGLang, each pool holding 16,384 tokens.
func backendOptions(b engine.Backend) Options {
	o := testOptions(5, 1, math.Inf(1))
	o.Engine.Backend = b
	switch b {
	case engine.TRTLLM:
		o.Engine.VLLM.Capacity = vllm.GuaranteedNoEvict
	case engine.SGLang:
		o.Engine.SGLang = sglang.Options{PageSize: 16, NumPages: 1024, MaxRunning: 64, MaxPrefillTokens: 16384,
			ChunkedPrefillSize: 2048, ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true, Events: true}
	}
	return o
}

// servesOne checks the server still answers a plain request.
func servesOne(t *testing.T, c openai.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	res, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hello there")}, MaxTokens: openai.Int(3)})
	if err != nil || res.Usage.CompletionTokens != 3 {
		t.Fatalf("a plain request after the hostile ones: %v, %+v", err, res)
	}
}

// TestHugeMaxTokens: max_tokens near 2^63 overflowed prompt + max_tokens and passed every check:
// SGLang panicked, vLLM generated until its pool was full and then blocked its queue, TRT-LLM held the
// whole pool. Each is now a 400 naming the field, and the server keeps serving.
func TestHugeMaxTokens(t *testing.T) {
	for _, b := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		for _, maxLen := range []int{0, 64} {
			t.Run(fmt.Sprintf("%s/max-model-len=%d", b, maxLen), func(t *testing.T) {
				o := backendOptions(b)
				o.MaxModelLen = maxLen
				_, hs, c := start(t, o)
				comp, chat := hs.URL+"/v1/completions", hs.URL+"/v1/chat/completions"
				msgs := `"messages": [{"role": "user", "content": "hi"}]`
				for _, tc := range []struct{ url, body, param string }{
					{comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 9223372036854775807}`, "max_tokens"},
					{comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 9223372036854775806, "stream": true}`, "max_tokens"},
					{comp, `{"model": "test-model", "prompt": [1, 2, 3], "max_tokens": 9223372036854775000}`, "max_tokens"},
					{comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 9223372036854775808}`, "max_tokens"},
					{comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 1e300}`, "max_tokens"},
					{comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 16384}`, "max_tokens"},
					{chat, `{"model": "test-model", ` + msgs + `, "max_completion_tokens": 9223372036854775807}`, "max_completion_tokens"},
					{chat, `{"model": "test-model", ` + msgs + `, "max_tokens": 4611686018427387904, "stream": true}`, "max_tokens"},
				} {
					res, data, e := call(t, "POST", tc.url, tc.body)
					if res.StatusCode != http.StatusBadRequest || e["param"] != tc.param {
						t.Errorf("%s: status %d, param %v, want 400 naming %s (%s)", tc.body, res.StatusCode, e["param"], tc.param, data)
					}
					if strings.Contains(string(data), "int") && !strings.Contains(string(data), "integer") {
						t.Errorf("%s: the error shows a Go type: %s", tc.body, data)
					}
				}
				servesOne(t, c)
			})
		}
	}
}

// TestDefaultMaxTokensBounded: a default no request could be served with is refused when the server
// is built.
func TestDefaultMaxTokensBounded(t *testing.T) {
	for _, tc := range []struct {
		def, maxLen int
		want        string
	}{
		{math.MaxInt, 0, "live: default max tokens 9223372036854775807: must be below the 16384 tokens a KV pool holds, which counts the prompt too"},
		{16384, 0, "live: default max tokens 16384: must be below the 16384 tokens a KV pool holds, which counts the prompt too"},
		{64, 64, "live: default max tokens 64: must be below max-model-len 64, which counts the prompt too"},
	} {
		o := testOptions(5, 1, math.Inf(1))
		o.DefaultMaxTokens, o.MaxModelLen = tc.def, tc.maxLen
		s, err := New(o)
		if err == nil {
			s.Close()
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("New(default %d, max-model-len %d) = %v, want %q", tc.def, tc.maxLen, err, tc.want)
		}
	}
}

// promptSink counts the prompts announced to sinks (each a request whose blocks were hashed) and the
// requests that left their worker.
type promptSink struct{ prompts, ended atomic.Int64 }

func (p *promptSink) Prompt(uint64, []uint32, string)  { p.prompts.Add(1) }
func (p *promptSink) Events(int, int, []kvcache.Event) {}
func (p *promptSink) Tokens(int, uint64, []uint32)     {}
func (p *promptSink) Ended(int, uint64)                { p.ended.Add(1) }

// TestNeverFitRefusedBeforeHashing: a request larger than a worker's pool used to be tokenised, hashed
// block by block and announced before the engine refused it (30 such bodies of 10 MB peaked at
// 1.57 GB). It is now refused before its blocks are hashed, and an id list before it is copied.
func TestNeverFitRefusedBeforeHashing(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	sink := &promptSink{}
	o.Sinks = []Sink{sink}
	_, hs, c := start(t, o)
	comp := hs.URL + "/v1/completions"
	ids := strings.TrimSuffix(strings.Repeat("7, ", 20000), ", ")
	text := strings.Repeat("lorem ipsum ", 20000)
	for _, body := range []string{
		`{"model": "test-model", "prompt": [` + ids + `], "max_tokens": 1}`,
		`{"model": "test-model", "prompt": "` + text + `", "max_tokens": 1}`,
		`{"model": "test-model", "prompt": [1, 2, 3], "max_tokens": 16382}`,
	} {
		res, data, e := call(t, "POST", comp, body)
		if res.StatusCode != http.StatusBadRequest || e["param"] != "prompt" || !strings.Contains(e["message"].(string), "can never be served") {
			t.Errorf("%.60s...: status %d, want 400 naming prompt: %s", body, res.StatusCode, data)
		}
	}
	if n := sink.prompts.Load(); n != 0 {
		t.Errorf("%d refused prompts were hashed and announced, want 0", n)
	}
	servesOne(t, c)
	if n := sink.prompts.Load(); n != 1 {
		t.Errorf("%d prompts announced after one served request, want 1", n)
	}
}

// TestTokenIDsWithinVocabulary: ids at or past the tokenizer's vocabulary are refused, as vLLM does.
func TestTokenIDsWithinVocabulary(t *testing.T) {
	_, hs, c := start(t, testOptions(5, 1, math.Inf(1)))
	vocab := 128256 // the built-in tokenizer's
	for _, tc := range []struct {
		prompt string
		status int
	}{
		{fmt.Sprint(`[1, `, vocab-1, `]`), 200},
		{fmt.Sprint(`[1, `, vocab, `]`), 400},
		{fmt.Sprint(`[[`, uint64(1)<<32, `]]`), 400},
		{`[-1]`, 400},
	} {
		res, data, e := call(t, "POST", hs.URL+"/v1/completions", `{"model": "test-model", "max_tokens": 1, "prompt": `+tc.prompt+`}`)
		if res.StatusCode != tc.status || (tc.status == 400 && e["param"] != "prompt") {
			t.Errorf("prompt %s: status %d, want %d: %s", tc.prompt, res.StatusCode, tc.status, data)
		}
	}
	servesOne(t, c)
}

// TestWrongMethodIs405: a real route with the wrong method is 405 with Allow, as vLLM answers; an
// unknown path is still 404.
func TestWrongMethodIs405(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	o.Metrics = http.NotFoundHandler()
	_, hs, _ := start(t, o)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/completions", 405, "POST"},
		{"PUT", "/v1/chat/completions", 405, "POST"},
		{"POST", "/v1/models", 405, "GET, HEAD"},
		{"DELETE", "/health", 405, "GET, HEAD"},
		{"POST", "/metrics", 405, "GET, HEAD"},
		{"GET", "/v1/embeddings", 404, ""},
		{"GET", "/v1/completions/x", 404, ""},
	} {
		res, data, e := call(t, tc.method, hs.URL+tc.path, "")
		if res.StatusCode != tc.status || res.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: status %d, Allow %q; want %d, %q (%s)", tc.method, tc.path, res.StatusCode, res.Header.Get("Allow"), tc.status, tc.allow, data)
		}
		if e == nil {
			t.Errorf("%s %s: no error object", tc.method, tc.path)
		}
	}
}

// TestErrorsShowNoGoTypes: decoding errors name JSON kinds and fields, never Go types.
func TestErrorsShowNoGoTypes(t *testing.T) {
	_, hs, _ := start(t, testOptions(5, 1, math.Inf(1)))
	comp, chat := hs.URL+"/v1/completions", hs.URL+"/v1/chat/completions"
	for _, tc := range []struct{ url, body, param, message string }{
		{comp, `[1, 2]`, "", "the request body must be a JSON object, got JSON array"},
		{comp, `"hi"`, "", "the request body must be a JSON object, got JSON string"},
		{chat, `7`, "", "the request body must be a JSON object, got JSON number"},
		{comp, `{"model": "test-model", "prompt": "hi", "max_tokens": "ten"}`, "max_tokens", `field "max_tokens": expected an integer, got JSON string`},
		{comp, `{"model": "test-model", "prompt": "hi", "max_tokens": 1.5}`, "max_tokens", `field "max_tokens": expected an integer, got JSON number 1.5`},
		{comp, `{"model": "test-model", "prompt": "hi", "stream": 1}`, "stream", `field "stream": expected a boolean, got JSON number`},
		{comp, `{"model": "test-model", "prompt": "hi", "stream_options": []}`, "stream_options", `field "stream_options": expected an object, got JSON array`},
		{chat, `{"model": "test-model", "messages": {}}`, "messages", `field "messages": expected an array, got JSON object`},
		{chat, `{"model": 5, "messages": []}`, "model", `field "model": expected a string, got JSON number`},
	} {
		res, _, e := call(t, "POST", tc.url, tc.body)
		if res.StatusCode != 400 || e["message"] != tc.message || (tc.param != "" && e["param"] != tc.param) {
			t.Errorf("%s: status %d, param %v, message %q; want 400, %q, %q", tc.body, res.StatusCode, e["param"], e["message"], tc.param, tc.message)
		}
	}
}

// TestStreamErrorIsWhole: an error in the middle of a stream is a whole OpenAI error object, with param
// and code like a non-stream one's.
func TestStreamErrorIsWhole(t *testing.T) {
	s, hs, _ := start(t, testOptions(5, 20, 1))
	res, err := patientClient.Post(hs.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model": "test-model", "prompt": "hi", "max_tokens": 2000, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first event %q, %v", line, err)
	}
	s.Close() // the request fails while it streams
	var last string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, "data: {") {
			last = line
		}
	}
	var v struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(last, "data: ")), &v); err != nil || v.Error == nil {
		t.Fatalf("last event %q is not an error object (%v)", last, err)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := v.Error[k]; !ok {
			t.Errorf("stream error %q lacks %q", last, k)
		}
	}
}

// gatedWriter is a ResponseWriter whose client reads nothing until open is closed; it records the
// largest single write.
type gatedWriter struct {
	h       http.Header
	open    chan struct{}
	mu      sync.Mutex
	largest int
	total   int
	body    strings.Builder
}

func (g *gatedWriter) Header() http.Header { return g.h }
func (g *gatedWriter) WriteHeader(int)     {}
func (g *gatedWriter) Write(b []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	g.largest = max(g.largest, len(b))
	g.total += len(b)
	g.body.Write(b)
	return len(b), nil
}

// TestSlowReaderBoundedWrites: a stream whose client stops reading used to render its whole backlog
// into one buffer (~200 bytes per token); it now writes batches of at most streamBatch (plus one chunk),
// each waiting for the client.
func TestSlowReaderBoundedWrites(t *testing.T) {
	const tokens = 4000
	o := testOptions(5, 1, math.Inf(1))
	sink := &promptSink{}
	o.Sinks = []Sink{sink}
	s, _, _ := start(t, o)
	g := &gatedWriter{h: http.Header{}, open: make(chan struct{})}
	req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(fmt.Sprintf(`{"model": "test-model", "prompt": "hi", "max_tokens": %d, "stream": true}`, tokens)))
	done := make(chan struct{})
	go func() {
		s.Handler().ServeHTTP(g, req)
		close(done)
	}()
	// The request finishes generating while its client reads nothing: the whole output is backlog.
	waitUntil(t, "the request to leave its worker", func() bool { return sink.ended.Load() == 1 })
	close(g.open)
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("the stream did not finish")
	}
	if n := strings.Count(g.body.String(), `"text":`); n != tokens {
		t.Fatalf("%d chunks, want %d", n, tokens)
	}
	if g.largest > streamBatch+1024 {
		t.Errorf("largest write %d bytes of %d, want at most %d + one chunk", g.largest, g.total, streamBatch)
	}
}

// limitedServer serves a server's APIServer with the given limits on a loopback port; o is testOptions
// with passes that take no time unless given.
func limitedServer(t *testing.T, l HTTPLimits, o ...Options) (*Server, string, openai.Client) {
	t.Helper()
	if len(o) == 0 {
		o = append(o, testOptions(5, 1, math.Inf(1)))
	}
	o[0].HTTP = l
	s, err := New(o[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	url := serveAPI(t, s.APIServer()).URL
	return s, url, openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// waitUntil polls cond until it holds, failing the test after patience.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSlowBodyIsCut: a client that trickles its body used to hold its connection forever (18k of them
// took the server down); ReadTimeout now cuts it.
func TestSlowBodyIsCut(t *testing.T) {
	_, url, c := limitedServer(t, HTTPLimits{ReadTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	// The server answers (or closes) once the timeout passes; nothing more is sent.
	conn.SetReadDeadline(time.Now().Add(patience))
	_, err = io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the trickling connection was still open after %v", patience)
	}
	servesOne(t, c)
}

// TestStreamOutlivesReadTimeout: ReadTimeout bounds reading the request only; a response that lasts
// longer (20 tokens at 40 ms, at least 800 ms) is cut neither by it nor by the write deadline, which
// bounds each write only. The limits leave a busy machine room to read the request and make a write.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	l := HTTPLimits{ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond}
	_, url, _ := limitedServer(t, l, testOptions(5, 40, 1))
	res, err := patientClient.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model": "test-model", "prompt": "hi", "max_tokens": 20, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `"text":`); n != 20 || !strings.HasSuffix(string(data), "data: [DONE]\n\n") {
		t.Fatalf("%d chunks, want 20 and [DONE]: %q", n, data)
	}
}

// hold opens n connections that send part of a request line and nothing more.
func hold(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		h, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		h.Write([]byte("POST /v1/completions HTTP/1.1\r\n"))
		conns = append(conns, h)
	}
	return conns
}

// health sends GET /health on conn and reads the answer within d.
func health(conn net.Conn, d time.Duration) (*http.Response, error) {
	fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(d))
	return http.ReadResponse(bufio.NewReader(conn), nil)
}

// TestConnectionCap: past MaxConns, connections wait to be accepted instead of each holding a
// descriptor and a goroutine; one is served as soon as a slot frees.
func TestConnectionCap(t *testing.T) {
	const maxConns = 4
	_, url, _ := limitedServer(t, HTTPLimits{MaxConns: maxConns, ReadHeaderTimeout: patience})
	addr := strings.TrimPrefix(url, "http://")
	held := hold(t, addr, maxConns)
	extra, err := net.Dial("tcp", addr) // completes in the kernel's backlog
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	// Not accepted while the four are open. (A slow machine can only make this pass, not fail.)
	var ne net.Error
	if res, err := health(extra, 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a connection past the cap was served: %v, %v", res, err)
	}
	held[0].Close()
	extra.SetReadDeadline(time.Now().Add(patience))
	res, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("after a slot freed: %v, %v", res, err)
	}
}

// TestIdleHoldersAreCut: connections that never finish their headers are cut by ReadHeaderTimeout, so
// a legitimate client gets through a full connection cap without anyone leaving.
func TestIdleHoldersAreCut(t *testing.T) {
	const maxConns = 4
	_, url, c := limitedServer(t, HTTPLimits{MaxConns: maxConns, ReadHeaderTimeout: 200 * time.Millisecond})
	addr := strings.TrimPrefix(url, "http://")
	hold(t, addr, maxConns)
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	res, err := health(extra, patience)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("a client behind %d idle holders: %v, %v", maxConns, res, err)
	}
	servesOne(t, c)
}

// gateTokenizer is the built-in tokenizer whose Encode of a large text (smallBody bytes or more) counts
// itself in entered and then waits for gate.
type gateTokenizer struct {
	tokenize.Tokenizer
	entered atomic.Int32
	gate    chan struct{}
}

func (g *gateTokenizer) Encode(text string) []uint32 {
	if len(text) >= smallBody {
		g.entered.Add(1)
		<-g.gate
	}
	return g.Tokenizer.Encode(text)
}

// TestBodyBudget: large bodies are decoded and tokenised within a budget of bodyBudget largest bodies
// (each costs several times its size before it can be refused). Clients that declare large bodies and
// send one byte hold none of it; four large prompts being tokenised hold it all, so a fifth waits until
// one is done, while a small request is served at once.
func TestBodyBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions(5, 1, math.Inf(1))
		o.MaxBodyBytes = 2 * smallBody
		gt := &gateTokenizer{Tokenizer: tokenize.Builtin(), gate: make(chan struct{})}
		o.Tokenizer = gt
		ps := startPipe(t, o)
		for range bodyBudget {
			conn, err := ps.ln.Dial()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", o.MaxBodyBytes)
		}
		large := `{"model": "test-model", "max_tokens": 1, "prompt": "` + strings.Repeat("a", 120<<10) + `"}`
		answered := make(chan int, bodyBudget+1)
		send := func() {
			go func() {
				res, err := ps.http.Post(ps.url+"/v1/completions", "application/json", strings.NewReader(large))
				if err != nil {
					answered <- 0
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				answered <- res.StatusCode
			}()
		}
		for range bodyBudget {
			send()
		}
		synctest.Wait()
		if n := gt.entered.Load(); n != bodyBudget {
			t.Fatalf("%d large prompts tokenised despite the slow senders, want %d", n, bodyBudget)
		}
		send()
		servesOne(t, ps.openai) // a small request does not wait
		synctest.Wait()         // every goroutine blocked: the fifth large prompt waits for the budget
		if n := gt.entered.Load(); n != bodyBudget {
			t.Fatalf("%d large prompts tokenised at once, want at most %d", n, bodyBudget)
		}
		gt.gate <- struct{}{}
		synctest.Wait()
		if n := gt.entered.Load(); n != bodyBudget+1 {
			t.Fatalf("%d large prompts tokenised once one is done, want %d", n, bodyBudget+1)
		}
		close(gt.gate)
		for range bodyBudget + 1 {
			if code := <-answered; code != 200 {
				t.Errorf("a large prompt was answered %d, want 200", code)
			}
		}
	})
}

// raceDetector is set when the tests run under the race detector (race_test.go).
var raceDetector bool

// A small body of known length is read in one allocation; a larger declared length reserves no more
// than a small body's room before its bytes arrive; one of unknown length or over the limit is read as
// before, and what dst held stays in front.
func TestReadBody(t *testing.T) {
	s := &Server{o: Options{MaxBodyBytes: 1 << 20}}
	data := bytes.Repeat([]byte("0123456789"), 6_000)
	rd := bytes.NewReader(data)
	req := httptest.NewRequest("POST", "/v1/completions", io.NopCloser(rd))
	x := &netExchange{w: httptest.NewRecorder(), r: req}
	var body []byte
	var e *apiError
	read := func() {
		rd.Reset(data)
		body, e = s.readBody(x, nil)
	}
	req.ContentLength = int64(len(data))
	// One for the body, one for http.MaxBytesReader.
	if n := testing.AllocsPerRun(5, read); n != 2 && !raceDetector {
		t.Errorf("known length: %v allocations, want 2", n)
	}
	if e != nil || !bytes.Equal(body, data) {
		t.Errorf("known length: error %v, %d bytes equal %v; want nil, %d, true", e, len(body), bytes.Equal(body, data), len(data))
	}
	req.ContentLength = 1 << 20
	rd.Reset(data[:2])
	if body, e = s.readBody(x, nil); e != nil || string(body) != "01" || cap(body) < smallBody || cap(body) > 2*smallBody {
		t.Errorf("a declared 1 MiB, 2 bytes sent: error %v, %q in %d bytes; want nil, %q in %d to %d", e, body, cap(body), "01", smallBody, 2*smallBody)
	}
	req.ContentLength = -1
	rd.Reset(data)
	if body, e = s.readBody(x, []byte("ab")); e != nil || string(body[:2]) != "ab" || !bytes.Equal(body[2:], data) {
		t.Errorf("unknown length after %q: error %v, %d bytes", "ab", e, len(body))
	}
	s.o.MaxBodyBytes = int64(len(data)) - 1
	req.ContentLength = int64(len(data))
	rd.Reset(data)
	if body, e = s.readBody(x, nil); e == nil || e.status != http.StatusRequestEntityTooLarge || body != nil {
		t.Errorf("over the limit: %v, %d bytes; want a 413 and no body", e, len(body))
	}
}
