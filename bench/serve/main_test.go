package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/live"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokenize"
)

// TestCheckLoad: a load the benchmark cannot run is refused with the flag named; rates from 0.001 a
// second (so long as the phase starts within a day) to 1e6 run, and 0 is the closed loop.
func TestCheckLoad(t *testing.T) {
	for _, c := range []struct {
		requests, phases, warmup, clients, runs int
		rate                                    float64
		want                                    string
	}{
		{20000, 2, 4000, 64, 1, 0, ""},
		{20000, 2, 4000, 64, 1, 1e6, ""},
		{87, 2, 4000, 64, 1, 0.001, ""}, // the 87th starts at 86,000 s, within a day
		{88, 2, 4000, 64, 1, 0.001, "-rate 0.001: 88 requests would take 87000 s to start; at most 24h0m0s"},
		{1, 2, 4000, 64, 1, 0.001, ""},
		{20000, 2, 4000, 64, 1, 1e-300, "-rate 1e-300: want 0 (closed loop) or 0.001 to 1e6 requests a second"},
		{20000, 2, 4000, 64, 1, -1, "-rate -1: want 0 (closed loop) or 0.001 to 1e6 requests a second"},
		{20000, 2, 4000, 64, 1, 2e6, "-rate 2e+06: want 0 (closed loop) or 0.001 to 1e6 requests a second"},
		{0, 2, 4000, 64, 1, 0, "-requests 0: want at least 1"},
		{20000, 2, -1, 64, 1, 0, "-warmup -1: want at least 0"},
		{480_000, 2, 40_000, 64, 1, 0, ""},
		{480_000, 2, 40_001, 64, 1, 0, "-requests 480000 in 2 phases and -warmup 40001: want 1000000 prompts at most (they are numbered in six digits)"},
		{1_000_000, 1, 0, 64, 1, 0, ""},
		{1_000_000, 1, 1, 64, 1, 0, "-requests 1000000 in 1 phases and -warmup 1: want 1000000 prompts at most (they are numbered in six digits)"},
		{20000, 2, 4000, 0, 1, 0, "-clients 0: want at least 1"},
		{20000, 2, 4000, 64, 0, 0, "-runs 0: want at least 1"},
	} {
		err := checkLoad(c.requests, c.phases, c.warmup, c.clients, c.runs, c.rate)
		if got := errString(err); got != c.want {
			t.Errorf("checkLoad(%d, %d, %d, %d, %d, %v) = %q, want %q", c.requests, c.phases, c.warmup, c.clients, c.runs, c.rate, got, c.want)
		}
	}
	if err := checkLoad(1, 1, 0, 1, 1, math.NaN()); err == nil {
		t.Error("checkLoad accepts a rate of NaN")
	}
}

// TestCheckClient: -client names one of the two load generators, or is refused with the flag named.
func TestCheckClient(t *testing.T) {
	for kind, want := range map[string]string{
		"lean":    "",
		"nethttp": "",
		"wrk":     `-client "wrk": want lean or nethttp`,
		"":        `-client "": want lean or nethttp`,
	} {
		if got := errString(checkClient(kind)); got != want {
			t.Errorf("checkClient(%q) = %q, want %q", kind, got, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// serveMocker serves a one-worker mocker API on a loopback port whose passes take prefill and decode
// milliseconds each, divided by speedup (math.Inf(1): no time); it returns the address.
func serveMocker(t *testing.T, decodeMs, speedup float64) string {
	t.Helper()
	ro := router.DefaultOptions()
	ro.BlockSize = 16
	s, err := live.New(live.Options{
		Engine: engine.Options{
			VLLM: vllm.Options{BlockSize: 16, NumBlocks: 1024, MaxNumSeqs: 64, MaxBatchedTokens: 2048,
				ChunkedPrefill: true, PrefixCaching: true},
			Timing: timing.Scaled{Model: timing.Fixed{PrefillMs: decodeMs, DecodeMs: decodeMs}, Speedup: speedup, DecodeSpeedup: 1},
		},
		Router:    ro,
		ModelName: "llama-3.1-8b",
		Tokenizer: tokenize.Builtin(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := s.APIServer()
	go api.Serve(ln)
	t.Cleanup(func() { api.Close() })
	return ln.Addr().String()
}

// TestClientsAgainstMocker: both clients run both phases against a real mocker API, closed loop and
// open, every answer checked: at infinite speedup with short streams (which mostly end by their first
// output and so come with a length), with long ones, and at 1 ms a pass (a short stream comes in chunks
// or, when its handler wakes after its end, with a length: either is read). A stream longer than the
// server writes whole (32 KiB, about 210 bytes a token) comes in chunks at any speed, which the test
// first checks with net/http: how a stream is framed does not hang on the wall clock.
func TestClientsAgainstMocker(t *testing.T) {
	filler, err := padding(40)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		speedup   float64
		maxTokens int
		chunked   bool // streams surely come in chunks
	}{{"instant", math.Inf(1), 4, false}, {"instant-long", math.Inf(1), 200, true}, {"1ms", 1, 4, false}} {
		t.Run(c.name, func(t *testing.T) {
			addr := serveMocker(t, 1, c.speedup)
			l := load{clients: 3, requests: 10, maxTokens: c.maxTokens, filler: filler}
			body := fmt.Appendf(nil, `{"model":"llama-3.1-8b","prompt":"`+promptHead+`%s","max_tokens":%d,"stream":true}`, 0, filler, c.maxTokens)
			res, err := http.Post("http://"+addr+completionsPath, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if c.chunked && !slices.Equal(res.TransferEncoding, []string{"chunked"}) {
				t.Fatalf("a stream's Transfer-Encoding is %q; the test wants chunks", res.TransferEncoding)
			}
			for _, kind := range []string{"lean", "nethttp"} {
				for _, rate := range []float64{0, 1000} {
					l.client, l.rate = kind, rate
					for _, stream := range []bool{false, true} {
						cl := newClient(kind, addr, l.clients)
						lat, err := l.run(cl, stream, 0)
						cl.close()
						if err != nil {
							t.Fatalf("%s client, rate %v, stream %v: %v", kind, rate, stream, err)
						}
						if slices.Contains(lat, 0) {
							t.Errorf("%s client, rate %v, stream %v: a request was not sent: %v", kind, rate, stream, lat)
						}
					}
				}
			}
		})
	}
}

// TestLeanClientChecksAnswers: the lean client reads an answer's body whole, by its length or its
// chunks (extensions and trailers skipped), refuses an answer that is not 200 or a stream that does
// not end with [DONE], and dials again after an answer that closes its connection.
func TestLeanClientChecksAnswers(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch r.URL.Query().Get("a") {
		case "chunks":
			w.Header().Set("Trailer", "X-End")
			w.Write([]byte("data: {}\n\n"))
			w.(http.Flusher).Flush()
			w.Write([]byte("data: [DONE]\n\n"))
			w.Header().Set("X-End", "yes")
		case "cut":
			w.Write([]byte("data: {}\n\n"))
			w.(http.Flusher).Flush()
		case "fail":
			http.Error(w, "boom", 500)
		case "close":
			w.Header().Set("Connection", "close")
			w.Write([]byte("data: [DONE]\n\n"))
		default:
			w.Header().Set("Content-Length", "14")
			w.Write([]byte("data: [DONE]\n\n"))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	lc := &leanConn{}
	for _, c := range []struct {
		query  string
		stream bool
		body   string
		err    string
		conns  int32
	}{
		{"", true, "data: [DONE]\n\n", "", 1},
		{"chunks", true, "data: {}\n\ndata: [DONE]\n\n", "", 1},
		{"cut", false, "data: {}\n\n", "", 1},
		{"cut", true, "data: {}\n\n", "a stream did not end with [DONE]", 1},
		{"fail", false, "boom\n", "status 500: boom\n", 1},
		{"close", true, "data: [DONE]\n\n", "", 1},
		{"", true, "data: [DONE]\n\n", "", 2},
	} {
		err := lc.roundTrip(addr, "/?a="+c.query, []byte("{}"), c.stream)
		if got := errString(err); got != c.err {
			t.Errorf("?a=%s: error %q, want %q", c.query, got, c.err)
		}
		if string(lc.body) != c.body {
			t.Errorf("?a=%s: body %q, want %q", c.query, lc.body, c.body)
		}
		if n := conns.Load(); n != c.conns {
			t.Errorf("?a=%s: %d connections dialled, want %d", c.query, n, c.conns)
		}
	}
}

// TestLeanClientChunkEnd: a chunk whose CRLF does not follow is refused as such, and one whose connection
// ends before it with the read's own error.
func TestLeanClientChunkEnd(t *testing.T) {
	answers := []string{
		"5\r\nhello",       // the connection closes after the chunk's data
		"5\r\nhelloxx\r\n", // the chunk runs on past its size
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for _, a := range answers {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			// The whole request is read first: a close with unread data would reset the connection.
			if req, err := http.ReadRequest(bufio.NewReader(nc)); err == nil {
				io.Copy(io.Discard, req.Body)
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+a)
			}
			nc.Close()
		}
	}()
	lc := &leanConn{}
	err = lc.roundTrip(ln.Addr().String(), "/", []byte("{}"), true)
	if want := "after a chunk of 5 bytes: EOF"; !errors.Is(err, io.EOF) || err.Error() != want {
		t.Errorf("closed after a chunk: error %v, want %s", err, want)
	}
	err = lc.roundTrip(ln.Addr().String(), "/", []byte("{}"), true)
	if want := "a chunk of 5 bytes does not end with CRLF"; errString(err) != want {
		t.Errorf("a chunk past its size: error %v, want %s", err, want)
	}
}

// promptLog is a client that records the number of each prompt it is sent, and whether it streamed.
type promptLog struct {
	mu   sync.Mutex
	seen map[bool][]int
}

func (p *promptLog) post(body []byte, stream bool) error {
	var n int
	if _, err := fmt.Sscanf(string(body), `{"model":"llama-3.1-8b","prompt":"Request %06d`, &n); err != nil {
		return err
	}
	p.mu.Lock()
	p.seen[stream] = append(p.seen[stream], n)
	p.mu.Unlock()
	return nil
}

func (p *promptLog) close() {}

// TestPromptsAreNumberedApart: the warm-up sends each of its prompts once, split between the phases'
// kinds, and numbered after every phase's; each phase numbers its own after the last one's, so no
// measured prompt was sent before it.
func TestPromptsAreNumberedApart(t *testing.T) {
	l := load{clients: 3, requests: 10, warmup: 5, maxTokens: 1}
	p := promptLog{seen: map[bool][]int{}}
	streams := []bool{false, true}
	if err := l.warmUp(&p, streams); err != nil {
		t.Fatal(err)
	}
	sorted := func(stream bool) []int { return slices.Sorted(slices.Values(p.seen[stream])) }
	if got, want := sorted(false), []int{20, 21}; !slices.Equal(got, want) {
		t.Errorf("warm-up, unstreamed: prompts %v, want %v", got, want)
	}
	if got, want := sorted(true), []int{22, 23, 24}; !slices.Equal(got, want) {
		t.Errorf("warm-up, streamed: prompts %v, want %v", got, want)
	}
	p.seen = map[bool][]int{}
	for k, stream := range streams {
		lat, err := l.run(&p, stream, k*l.requests)
		if err != nil {
			t.Fatal(err)
		}
		if len(lat) != l.requests {
			t.Errorf("phase %d: %d latencies, want %d", k, len(lat), l.requests)
		}
	}
	if got, want := sorted(false), []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(got, want) {
		t.Errorf("unstreamed phase: prompts %v, want %v", got, want)
	}
	if got, want := sorted(true), []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}; !slices.Equal(got, want) {
		t.Errorf("streamed phase: prompts %v, want %v", got, want)
	}
}
