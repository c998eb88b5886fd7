package live

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHandlerAllocs pins the allocations of one completion (a 100-token prompt, infinite speedup)
// through the API's handler and its worker, the test's own request aside: every allocation is paid
// for in the malloc and GC share of a request's CPU. A short answer (16 tokens), a 4 KiB one (700
// tokens) and an echoed one cost the same: a whole response's buffers are sized for its text at once.
func TestHandlerAllocs(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector allocates")
	}
	for _, tc := range allocCases {
		t.Run(fmt.Sprintf("stream=%v,max_tokens=%d,echo=%v", tc.stream, tc.maxTokens, tc.echo), func(t *testing.T) {
			s := instantServer(t)
			h := s.Handler()
			const runs = 200
			reqs := make([]*http.Request, runs+1) // AllocsPerRun runs f once more to warm up
			ws := make([]*discard, runs+1)
			for i := range reqs {
				var err error
				reqs[i], err = http.NewRequest("POST", "/v1/completions", strings.NewReader(tc.body(i)))
				if err != nil {
					t.Fatal(err)
				}
				ws[i] = &discard{header: http.Header{}, code: 200}
			}
			i := 0
			got := testing.AllocsPerRun(runs, func() {
				h.ServeHTTP(ws[i], reqs[i])
				i++
			})
			for i, w := range ws {
				if w.code != 200 || w.n == 0 {
					t.Fatalf("request %d: status %d, %d bytes", i, w.code, w.n)
				}
			}
			if got != tc.handler {
				t.Errorf("%v allocations per completion, want %v", got, tc.handler)
			}
		})
	}
}

// TestAPIServerAllocs pins the allocations of one completion through the APIServer (fasthttp, its
// connection loop included) as TestHandlerAllocs does the net/http handler's: each request on a
// connection of its own, in memory. Its own: the exchange and its done channel (a waiting exchange is
// listed for its watch, with no timer of its own), and fasthttp's; an unstreamed answer is rendered into
// fasthttp's pooled body instead of a buffer of its own.
func TestAPIServerAllocs(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector allocates")
	}
	for _, tc := range allocCases {
		t.Run(fmt.Sprintf("stream=%v,max_tokens=%d,echo=%v", tc.stream, tc.maxTokens, tc.echo), func(t *testing.T) {
			s := instantServer(t)
			api := s.APIServer()
			const runs = 200
			conns := make([]*memConn, runs+1) // AllocsPerRun runs f once more to warm up
			for i := range conns {
				conns[i] = &memConn{}
				conns[i].in.Reset([]byte(rawRequest(tc.body(i))))
			}
			i := 0
			got := testing.AllocsPerRun(runs, func() {
				api.fs.ServeConn(conns[i])
				i++
			})
			for i, c := range conns {
				if string(c.head[:]) != "HTTP/1.1 200 OK\r\n" || c.n < 400 {
					t.Fatalf("request %d: %q..., %d bytes", i, c.head, c.n)
				}
			}
			if got != tc.api {
				t.Errorf("%v allocations per completion, want %v", got, tc.api)
			}
		})
	}
}

// allocCases are the completions whose allocations TestHandlerAllocs and TestAPIServerAllocs pin: through
// the net/http handler, and through the APIServer.
var allocCases = []allocCase{
	{false, 16, false, 18, 17},
	{true, 16, false, 23, 22},
	{false, 700, false, 18, 17},
	{false, 16, true, 18, 17},
}

type allocCase struct {
	stream       bool
	maxTokens    int
	echo         bool
	handler, api float64 // allocations per completion
}

// body is the case's i'th request: a prompt of 100 tokens (26 + 74), each request's its own.
func (tc allocCase) body(i int) string {
	filler := strings.Repeat(" Please", 74)
	return fmt.Sprintf(`{"model":"test-model","prompt":"Request %06d asks the simulated model a short question about the weather in a city it has never seen, politely.%s","max_tokens":%d,"echo":%v,"stream":%v}`, i, filler, tc.maxTokens, tc.echo, tc.stream)
}

// instantServer starts a server whose passes take no time, closed at cleanup.
func instantServer(t testing.TB) *Server {
	t.Helper()
	s, err := New(testOptions(5, 1, math.Inf(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// memConn is a connection in memory: it reads in, and counts what is written (keeping its first bytes).
type memConn struct {
	in   bytes.Reader
	head [17]byte
	n    int
}

var memAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}

func (c *memConn) Read(b []byte) (int, error) { return c.in.Read(b) }
func (c *memConn) Write(b []byte) (int, error) {
	if c.n < len(c.head) {
		copy(c.head[c.n:], b)
	}
	c.n += len(b)
	return len(b), nil
}
func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return memAddr }
func (c *memConn) RemoteAddr() net.Addr             { return memAddr }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
