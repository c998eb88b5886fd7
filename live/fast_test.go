package live

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawRequest is a completion request as bytes on the wire.
func rawRequest(body string) string {
	return fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// TestClientGoneCancels: a client that closes its connection while its request runs cancels it, streamed
// or not. Decode passes take an hour, so the request ends only by its cancel: fasthttp does not read a
// connection while its handler runs, so an unstreamed request learns of it from the watch's peek, a
// stream (which has nothing to write) from the same.
func TestClientGoneCancels(t *testing.T) {
	needsPeek(t)
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			s, hs, _ := start(t, testOptions(1, hourMs, 1))
			conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, rawRequest(fmt.Sprintf(`{"model": "test-model", "prompt": "hi", "max_tokens": 5, "stream": %v}`, stream)))
			w := s.Workers()[0]
			waitUntil(t, "the request to decode", func() bool { return w.InFlight() == 1 && w.State()[0].ActiveBlocks > 0 })
			conn.Close()
			waitUntil(t, "the request to be cancelled", func() bool { return w.InFlight() == 0 && w.State()[0].ActiveBlocks == 0 })
			if err := w.checkInvariants(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestWatchedConnectionServesOn: a connection whose request was watched serves the next request on
// it, and a request sent while the one before it is watched (pipelined) ends the watch with its first
// byte, which the peek leaves to it: both are answered in order, the first one whole.
func TestWatchedConnectionServesOn(t *testing.T) {
	needsPeek(t)
	_, _, conn := dialServed(t, testOptions(1, 20, 1))
	conn.SetDeadline(time.Now().Add(patience))
	br := bufio.NewReader(conn)
	read := func(what string) {
		t.Helper()
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || !strings.Contains(string(body), `"completion_tokens":20`) {
			t.Fatalf("%s: %d %s, %v", what, res.StatusCode, body, err)
		}
	}
	// 20 decode passes of 20 ms: the watch starts after watchDelay, well before the request ends.
	req := rawRequest(`{"model": "test-model", "prompt": "hi", "max_tokens": 20, "ignore_eos": true}`)
	// Each request's watch ends before its answer is written: the next one parks anew.
	for i := range 2 {
		io.WriteString(conn, req)
		waitUntil(t, fmt.Sprintf("request %d's watch", i), func() bool { return parkedWatches() == 1 })
		read(fmt.Sprintf("request %d", i))
		if n := parkedWatches(); n != 0 {
			t.Fatalf("request %d answered with %d watches parked", i, n)
		}
	}
	io.WriteString(conn, req)
	waitUntil(t, "the first pipelined request's watch", func() bool { return parkedWatches() == 1 })
	io.WriteString(conn, req)
	read("first pipelined request")
	read("second pipelined request")
}

// parkedWatches counts the goroutines parked in a watch's peek, from their stacks: the server keeps no
// count of its own for tests to read.
func parkedWatches() int { return inStacks("live.peekClosed(") }

// inStacks counts the frames of function call (a name and its opening parenthesis) in every goroutine's
// stack.
func inStacks(call string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), call)
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestHeaderLimit: a request whose line and headers pass maxHeaderBytes is answered 431, and the server
// serves on.
func TestHeaderLimit(t *testing.T) {
	_, hs, c := start(t, testOptions(5, 1, math.Inf(1)))
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(patience))
	fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", maxHeaderBytes))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("headers over %d bytes: %v, %v; want a 431", maxHeaderBytes, res, err)
	}
	servesOne(t, c)
}

// TestStoppedBeforeServing: an APIServer closed or shut down before its Serve runs serves nothing:
// Serve returns nil at once (it used to accept forever, fasthttp not knowing of the listener yet), and
// the listener is closed.
func TestStoppedBeforeServing(t *testing.T) {
	s, err := New(testOptions(5, 1, math.Inf(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, stop := range []func(*APIServer) error{(*APIServer).Close, func(a *APIServer) error { return a.Shutdown(t.Context()) }} {
		api := s.APIServer()
		if err := stop(api); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if err := api.Serve(ln); err != nil {
			t.Errorf("Serve after the server stopped: %v, want nil", err)
		}
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("the listener was left open: Accept = %v", err)
		}
	}
}

// TestStopCancels: stopping the API cancels a request in flight, unstreamed or an HTTP/1.0 stream (on a
// connection fasthttp handed over), by Close or by a Shutdown whose context ends before the request is
// answered. Close closes the connection under the watch, whose peek then fails with the descriptor
// closed: that used to read as "not closed", so the request ran its full hour; and a Shutdown past its
// context left fasthttp serving on the open connections.
func TestStopCancels(t *testing.T) {
	needsPeek(t)
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name string
		stop func(*APIServer) error
		want error
	}{
		{"Close", (*APIServer).Close, nil},
		{"Shutdown past its context", func(a *APIServer) error { return a.Shutdown(ended) }, context.Canceled},
	} {
		for _, req := range []struct{ name, raw string }{
			{"unstreamed", rawRequest(`{"model": "test-model", "prompt": "hi", "max_tokens": 5}`)},
			{"HTTP/1.0 stream", http10(`{"model": "test-model", "prompt": "hi", "max_tokens": 5, "stream": true}`)},
		} {
			t.Run(tc.name+"/"+req.name, func(t *testing.T) {
				s, api, conn := dialServed(t, testOptions(1, hourMs, 1))
				io.WriteString(conn, req.raw)
				w := s.Workers()[0]
				waitUntil(t, "the request to decode", func() bool { return w.InFlight() == 1 && w.State()[0].ActiveBlocks > 0 })
				if err := tc.stop(api); !errors.Is(err, tc.want) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
				}
				waitUntil(t, "the request to be cancelled", func() bool { return w.InFlight() == 0 && w.State()[0].ActiveBlocks == 0 })
				if err := w.checkInvariants(); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestOversizedBodyGets413: a body far over MaxBodyBytes is answered 413, and the client reads the 413
// rather than a reset: the server closed the connection with the rest of the body unread on it, so the
// kernel sent a RST, which often beat the response to the client. It now lingers as net/http did.
func TestOversizedBodyGets413(t *testing.T) {
	o := testOptions(1, 1, math.Inf(1))
	o.MaxBodyBytes = 1 << 20
	_, hs, _ := start(t, o)
	body := bytes.Repeat([]byte("a"), 8<<20)
	for i := range 5 {
		res, err := hs.Client().Post(hs.URL+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v, want a 413", i, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("request %d: %d, want a 413", i, res.StatusCode)
		}
	}
}

// TestHTTP10Stream: a stream asked for over HTTP/1.0 (nginx's default to its upstreams) comes without
// chunked framing, which an HTTP/1.0 client cannot read (RFC 9112 §6.1), and without a length: its end
// is the connection's close.
func TestHTTP10Stream(t *testing.T) {
	_, hs, _ := start(t, testOptions(1, 1, math.Inf(1)))
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(patience))
	io.WriteString(conn, http10(`{"model": "test-model", "prompt": "hi", "max_tokens": 3, "ignore_eos": true, "stream": true}`))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || len(res.TransferEncoding) != 0 || res.ContentLength != -1 || !res.Close {
		t.Errorf("status %d, Transfer-Encoding %q, Content-Length %d, close %v; want 200, none, none, the connection closed",
			res.StatusCode, res.TransferEncoding, res.ContentLength, res.Close)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	if n := strings.Count(string(body), "data: "); !strings.HasPrefix(string(body), "data: ") || !strings.HasSuffix(string(body), "data: [DONE]\n\n") || n != 4 {
		t.Errorf("body %q: want 3 tokens' events, the last with the finish, then [DONE]", body)
	}
}

// TestHTTP10StreamFlows: an HTTP/1.0 stream's events are sent as its tokens come (it used to be held
// until the request ended), and a client that leaves cancels it. Its 10,000 tokens, one a 50 ms pass,
// would take over eight minutes.
func TestHTTP10StreamFlows(t *testing.T) {
	s, hs, _ := start(t, testOptions(1, 50, 1))
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(patience))
	io.WriteString(conn, http10(`{"model": "test-model", "prompt": "hi", "max_tokens": 10000, "ignore_eos": true, "stream": true}`))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	event, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(event, "data: {") || !strings.Contains(event, `"finish_reason":null`) {
		t.Fatalf("first event %q, %v; want the first token's", event, err)
	}
	w := s.Workers()[0]
	conn.Close()
	waitUntil(t, "the request to be cancelled", func() bool { return w.InFlight() == 0 && w.State()[0].ActiveBlocks == 0 })
}

// http10 is a completion request with body as an HTTP/1.0 client sends it.
func http10(body string) string {
	return strings.Replace(rawRequest(body), "HTTP/1.1", "HTTP/1.0", 1)
}

// TestShutdownIdle: Shutdown with nothing open returns nil even when its context has already ended
// (`mocker serve --shutdown-timeout 0`). It used to wait for the HTTP/1.0 streams on a goroutine of its
// own, and so returned the context's error before that goroutine had seen there were none; and fasthttp
// counts a Serve in Accept as a connection open until it sees its listener closed, so its own Shutdown
// also reported a timeout now and then. Each try waits for Serve to accept first.
func TestShutdownIdle(t *testing.T) {
	s, err := New(testOptions(1, 1, math.Inf(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 20 {
		api := s.APIServer()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- api.Serve(ln) }()
		waitUntil(t, "Serve to accept", func() bool { return inStacks("fasthttp.acceptConn(") == 1 })
		if err := api.Shutdown(ended); err != nil {
			t.Fatalf("try %d: Shutdown of an idle API with its context ended: %v, want nil", i, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("try %d: Serve: %v", i, err)
		}
	}
}

// TestHTTP10StreamShutdown: Shutdown waits for an HTTP/1.0 stream, on a connection fasthttp handed over
// and no longer counts, to be written whole.
func TestHTTP10StreamShutdown(t *testing.T) {
	s, api, conn := dialServed(t, testOptions(1, 50, 1))
	conn.SetDeadline(time.Now().Add(patience))
	// 20 decode passes of 50 ms: the stream has about a second to go when Shutdown starts.
	io.WriteString(conn, http10(`{"model": "test-model", "prompt": "hi", "max_tokens": 20, "ignore_eos": true, "stream": true}`))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := bufio.NewReader(res.Body)
	if event, err := body.ReadString('\n'); err != nil || !strings.HasPrefix(event, "data: {") {
		t.Fatalf("first event %q, %v", event, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if err := api.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := s.Workers()[0].InFlight(); n != 0 {
		t.Errorf("Shutdown returned with %d requests in flight", n)
	}
	rest, err := io.ReadAll(body)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") || strings.Count(string(rest), "data: ") != 20 {
		t.Errorf("the rest of the stream %q, %v: want 19 tokens' events, then [DONE]", rest, err)
	}
}

// TestHTTP10HandOverFails: an HTTP/1.0 stream whose connection fasthttp never hands over (a write
// deadline it fails to set, a flush that fails) is cancelled when fasthttp closes that connection, and
// Shutdown does not wait for it. It used to be neither written nor cancelled: its request ran its full
// hour, and Shutdown waited for it until its context ended.
func TestHTTP10HandOverFails(t *testing.T) {
	s, err := New(testOptions(1, hourMs, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	api := s.APIServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- api.Serve(noWriteDeadlines{ln}) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(patience))
	io.WriteString(conn, http10(`{"model": "test-model", "prompt": "hi", "max_tokens": 5, "stream": true}`))
	// fasthttp closes the connection, unanswered, after the handler has submitted the request.
	if b, err := io.ReadAll(conn); err != nil || len(b) != 0 {
		t.Fatalf("read %q, %v; want the connection closed unanswered", b, err)
	}
	w := s.Workers()[0]
	waitUntil(t, "the request to be cancelled", func() bool { return w.InFlight() == 0 && w.State()[0].ActiveBlocks == 0 })
	if err := w.checkInvariants(); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if err := api.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown with nothing open: %v, want nil", err)
	}
	if err := <-errc; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// noWriteDeadlines is a listener whose connections fail to set a write deadline: fasthttp then leaves
// its connection loop between the handler and the hand-over of a hijacked connection.
type noWriteDeadlines struct{ net.Listener }

func (l noWriteDeadlines) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return noWriteDeadline{c}, nil
}

type noWriteDeadline struct{ net.Conn }

func (noWriteDeadline) SetWriteDeadline(time.Time) error { return errors.New("no write deadline") }

// TestEndsFirst: a stream whose every choice has ended by its first output is ready whole, while its
// output fits one batch rendered (reckoned at 200 bytes and the model's name a token: 163 tokens of
// 201 fit streamBatch, 164 do not); one with a choice still running, a chat stream (its roles go out
// first) and one whose client left are not.
func TestEndsFirst(t *testing.T) {
	for _, tc := range []struct {
		name       string
		chat, gone bool
		ended      []bool // by choice
		tokens     []int  // by choice; 1 if none
		want       bool
	}{
		{"all ended", false, false, []bool{true, true}, nil, true},
		{"one running", false, false, []bool{true, false}, nil, false},
		{"chat", true, false, []bool{true}, nil, false},
		{"client gone", false, true, []bool{true}, nil, false},
		{"a batch", false, false, []bool{true, true}, []int{81, 82}, true},
		{"over a batch", false, false, []bool{true, true}, []int{82, 82}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready := make(chan struct{}, 1)
			var cs []*choice
			for i, ended := range tc.ended {
				st := newStream(1, 1, time.Time{}, ready)
				toks := []uint32{7}
				if tc.tokens != nil {
					toks = make([]uint32, tc.tokens[i])
				}
				st.push(toks, ended) // signals ready
				cs = append(cs, &choice{st: st})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.gone {
				<-ready
				cancel()
			}
			s := &Server{o: Options{ModelName: "m"}}
			st := &streamed{ready: ready, rs: response{s: s, p: &sampling{logprobs: -1}, chat: tc.chat, choices: cs}}
			if got := st.endsFirst(ctx); got != tc.want {
				t.Errorf("endsFirst %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStreamEndedFirst: at infinite speedup a short stream has ended when its first output comes (with
// one P, the worker runs every pass before the handler looks): the APIServer sends it in one write,
// with a length rather than chunks, and its events are the bytes net/http's handler streams.
func TestStreamEndedFirst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	body := allocCase{stream: true, maxTokens: 16}.body(0)
	res, got, c := serveRecorded(t, body)
	if c.writes != 1 || len(res.TransferEncoding) != 0 || res.ContentLength != int64(len(got)) {
		t.Errorf("%d writes, Transfer-Encoding %q, Content-Length %d for %d bytes; want one write, a length and no chunks",
			c.writes, res.TransferEncoding, res.ContentLength, len(got))
	}
	sameAsNetHTTP(t, got, body)
}

// TestStreamEndedFirstLong: a stream that has ended by its first output but would not fit one batch
// (4 choices of 500 tokens, ~375 KB) is not rendered whole: it goes out in chunks of at most a batch
// (and one chunk), its events the bytes net/http's handler streams.
func TestStreamEndedFirstLong(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	body := strings.Replace(allocCase{stream: true, maxTokens: 500}.body(0), `"stream"`, `"n":4,"stream"`, 1)
	res, got, c := serveRecorded(t, body)
	if !slices.Equal(res.TransferEncoding, []string{"chunked"}) || res.ContentLength != -1 || c.largest > streamBatch+1024 {
		t.Errorf("Transfer-Encoding %q, Content-Length %d, %d writes of at most %d bytes for %d; want chunks of at most %d + one chunk",
			res.TransferEncoding, res.ContentLength, c.writes, c.largest, len(got), streamBatch)
	}
	if n := bytes.Count(got, []byte(`"text":`)); n != 2000 {
		t.Errorf("%d chunks, want 2000", n)
	}
	sameAsNetHTTP(t, got, body)
}

// serveRecorded has a zero-time server's APIServer answer the completion body on a connection in
// memory, and returns its response, the response's body and the connection.
func serveRecorded(t *testing.T, body string) (*http.Response, []byte, *recConn) {
	t.Helper()
	c := &recConn{}
	c.in.Reset([]byte(rawRequest(body)))
	if err := instantServer(t).APIServer().fs.ServeConn(c); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(&c.out), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, got, c
}

// sameAsNetHTTP checks that got is the stream net/http's handler sends for the completion body, its
// times aside, and each choice's events in the order of its passes (how the events of several choices
// interleave depends on when the handler looks).
func sameAsNetHTTP(t *testing.T, got []byte, body string) {
	t.Helper()
	w := httptest.NewRecorder()
	instantServer(t).Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
	created := regexp.MustCompile(`"created":\d+`)
	want := byChoice(created.ReplaceAll(w.Body.Bytes(), nil))
	if got = created.ReplaceAll(got, nil); !bytes.Equal(byChoice(got), want) || !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) {
		t.Errorf("body\n%s\nwant net/http's\n%s", got, want)
	}
}

// byChoice orders a stream's events by choice, stably: those of no choice (usage, [DONE]) last.
func byChoice(b []byte) []byte {
	evs := bytes.SplitAfter(b, []byte("\n\n"))
	index := regexp.MustCompile(`"choices":\[\{"index":(\d+)`)
	choice := func(ev []byte) int {
		m := index.FindSubmatch(ev)
		if m == nil {
			return math.MaxInt
		}
		i, _ := strconv.Atoi(string(m[1]))
		return i
	}
	slices.SortStableFunc(evs, func(a, b []byte) int { return cmp.Compare(choice(a), choice(b)) })
	return bytes.Join(evs, nil)
}

// TestStreamEndedFirstEndsWatch: a stream answered whole by its handler (TestStreamEndedFirst) ends its
// watch as a whole response does, on a connection that then idles: a watch left armed would start
// watchDelay later, peek at the next request and clear its read deadline.
func TestStreamEndedFirstEndsWatch(t *testing.T) {
	needsPeek(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	_, _, conn := dialServed(t, testOptions(5, 1, math.Inf(1)))
	conn.SetDeadline(time.Now().Add(patience))
	io.WriteString(conn, rawRequest(allocCase{stream: true, maxTokens: 16}.body(0)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil || res.ContentLength != int64(len(body)) {
		t.Fatalf("Content-Length %d for %d bytes (%v): want the stream whole", res.ContentLength, len(body), err)
	}
	time.Sleep(3 * watchDelay)
	if n := parkedWatches(); n != 0 {
		t.Errorf("%d watches parked on the idle connection, want none", n)
	}
}

// recConn is a memConn that keeps what is written, and counts the writes and their largest.
type recConn struct {
	memConn
	out             bytes.Buffer
	writes, largest int
}

func (c *recConn) Write(b []byte) (int, error) {
	c.writes++
	c.largest = max(c.largest, len(b))
	return c.out.Write(b)
}
