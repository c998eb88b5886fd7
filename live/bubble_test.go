package live

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Tests whose outcome depends on time run inside a testing/synctest bubble, where the clock is fake and
// advances only when every goroutine of the bubble is durably blocked: a pass of 40 ms takes exactly
// 40 ms however busy the machine is. A goroutine blocked on a real socket is not durably blocked, so the
// HTTP server and its clients talk over in-memory pipes.

// pipeListener is a net.Listener whose connections are net.Pipe ends handed out by its dial.
type pipeListener struct {
	addr  pipeAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{addr: "pipe", conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return l.addr }

// Dial connects a new client to the listener.
func (l *pipeListener) Dial() (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		client.Close()
		server.Close()
		return nil, net.ErrClosed
	}
}

type pipeAddr string

func (pipeAddr) Network() string  { return "pipe" }
func (a pipeAddr) String() string { return string(a) }

// pipeRendezvous carries d's bootstrap rendezvous over in-memory pipes: prefill worker i listens on
// "bootstrap-i".
func pipeRendezvous(d *Disagg) {
	var mu sync.Mutex
	lns := map[string]*pipeListener{}
	d.Listen = func(string) (net.Listener, error) {
		mu.Lock()
		defer mu.Unlock()
		l := newPipeListener()
		l.addr = pipeAddr(fmt.Sprintf("bootstrap-%d", len(lns)))
		lns[string(l.addr)] = l
		return l, nil
	}
	d.Dial = func(_ context.Context, addr string) (net.Conn, error) {
		mu.Lock()
		l := lns[addr]
		mu.Unlock()
		if l == nil {
			return nil, fmt.Errorf("no pipe listener %q", addr)
		}
		return l.Dial()
	}
}

// pipeServer is a Server answering HTTP over a pipeListener, with an http.Client and an OpenAI client
// that reach it (the host in their URLs is not resolved).
type pipeServer struct {
	*Server
	ln     *pipeListener
	http   *http.Client
	openai openai.Client
	url    string // base URL, "http://mocker"
}

// startPipe runs a server over in-memory pipes; call it inside a synctest bubble. Everything it starts
// stops when the test ends, so the bubble can finish.
func startPipe(t *testing.T, o Options) *pipeServer {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ln := newPipeListener()
	hs := &http.Server{Handler: s.Handler()}
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(ln)
	}()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return ln.Dial() }}
	hc := &http.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		hs.Close()
		<-served
		s.Close()
	})
	const url = "http://mocker"
	c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHTTPClient(hc))
	return &pipeServer{Server: s, ln: ln, http: hc, openai: c, url: url}
}

// labelGoroutines labels the calling goroutine with the test's name; every goroutine it starts, and
// those start, inherit the label.
func labelGoroutines(t *testing.T) {
	pprof.SetGoroutineLabels(pprof.WithLabels(t.Context(), pprof.Labels("test", t.Name())))
}

// labelledGoroutines counts the goroutines carrying the test's label: what the test started and
// nothing else (runtime.NumGoroutine also counts the finalizer goroutine while it runs, and what other
// tests left behind, exiting).
func labelledGoroutines(t *testing.T) int {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("# labels: {%q:%q}", "test", t.Name())
	n, count := 0, 0
	for line := range strings.Lines(b.String()) {
		if c, _, ok := strings.Cut(line, " @ "); ok {
			count, _ = strconv.Atoi(c)
		} else if strings.TrimSpace(line) == want {
			n += count
		}
	}
	return n
}
