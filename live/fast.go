package live

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// APIServer serves the API over HTTP/1.1 on fasthttp, whose connection loop costs about half of
// net/http's per request. Every route is answered by the API's own handlers through a fastExchange,
// except /metrics, a net/http handler run through fasthttp's adaptor. It keeps the server's HTTPLimits:
// headers within ReadHeaderTimeout, a body within ReadTimeout of its headers, IdleTimeout between
// requests, a deadline per write, and at most MaxConns connections open (past it, connections wait in
// the kernel's backlog).
type APIServer struct {
	s       *Server
	fs      *fasthttp.Server
	metrics http.Handler
	adapted fasthttp.RequestHandler // metrics through the adaptor
	pin     int
	pinned  bool

	mu      sync.Mutex
	lns     []*capListener
	conns   map[*capConn]struct{} // open connections, for Close
	closed  bool                  // Shutdown or Close: Serve serves nothing more
	serving sync.WaitGroup        // Serve calls running fasthttp's: Shutdown waits for them to return
	// HTTP/1.0 streams, on connections fasthttp hands over and then no longer counts: Shutdown waits
	// for them too, on drained (made by the first to wait, closed when streams is back to 0).
	streams int
	drained chan struct{}

	watches watchList // exchanges waiting for their answers, watched once they have waited watchDelay
}

// APIServer returns a server for the API; Serve runs it on a listener.
func (s *Server) APIServer() *APIServer { return s.newAPIServer(s.o.Metrics) }

// WorkerAPIServer is the API of worker w alone, for a listener of its own, so that an endpoint picker
// that treats each worker as a pod can address it: every request goes to w, skipping the router's choice
// and its queue (the router still counts it, so requests to the shared API route around it), and
// /metrics is served by metrics (nil: the shared API's). It panics unless w is an aggregated worker.
func (s *Server) WorkerAPIServer(w int, metrics http.Handler) *APIServer {
	s.checkPin(w)
	if metrics == nil {
		metrics = s.o.Metrics
	}
	a := s.newAPIServer(metrics)
	a.pin, a.pinned = w, true
	return a
}

func (s *Server) newAPIServer(metrics http.Handler) *APIServer {
	l := s.o.HTTP
	a := &APIServer{s: s, metrics: metrics, conns: map[*capConn]struct{}{}}
	if metrics != nil {
		a.adapted = fasthttpadaptor.NewFastHTTPHandler(metrics)
	}
	a.fs = &fasthttp.Server{
		Handler: a.serve,
		// The first byte of a new connection and its headers must come within ReadHeaderTimeout (the
		// read deadline from accepting it, as net/http's), then the body within ReadTimeout.
		ReadTimeout: l.ReadHeaderTimeout,
		HeaderReceived: func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{ReadTimeout: l.ReadTimeout}
		},
		IdleTimeout: l.IdleTimeout,
		// Each response's write (one batch of a stream's) is bounded by its own deadline; an unstreamed
		// response's by the server's.
		WriteTimeout:   l.WriteTimeout,
		ReadBufferSize: maxHeaderBytes, // a request's line and headers must fit in it
		// Bodies are read by the handlers, which bound them (413) and read a large one as it comes:
		// fasthttp would otherwise size its buffer for a declared length before the bytes arrive.
		StreamRequestBody:            true,
		MaxRequestBodySize:           smallBody,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		Logger:                       quietLogger{},
	}
	return a
}

// maxHeaderBytes bounds a request's line and headers (431 past it), as vLLM's server (uvicorn's h11)
// does. Every open connection holds a read buffer of this size, idle ones too: net/http's 64 KiB
// would cost 64 MiB for a thousand idle connections.
const maxHeaderBytes = 16 << 10

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// Serve answers the API on ln until Shutdown or Close; it returns nil then.
func (a *APIServer) Serve(ln net.Listener) error {
	cl := &capListener{Listener: ln, a: a, slots: make(chan struct{}, a.s.o.HTTP.MaxConns), done: make(chan struct{})}
	a.mu.Lock()
	if a.closed { // shut down before it served: fasthttp would not know of this listener
		a.mu.Unlock()
		ln.Close()
		return nil
	}
	a.lns = append(a.lns, cl)
	a.serving.Add(1)
	a.mu.Unlock()
	defer a.serving.Done()
	return a.fs.Serve(cl)
}

// Shutdown stops accepting connections and waits (until ctx ends) for the requests in flight to be
// answered; idle connections are closed, and a busy one once its response is out. If ctx ends first,
// the connections still open are closed (Close): fasthttp would otherwise serve on on them. With
// nothing open it returns nil, whether or not ctx has ended.
func (a *APIServer) Shutdown(ctx context.Context) error {
	err := a.stopAccepting()
	// fasthttp counts a Serve in Accept as a connection open until it sees its listener closed, which
	// with ctx ended would fail an idle server's Shutdown; its listener closed, Serve returns at once.
	a.serving.Wait()
	if serr := a.fs.ShutdownWithContext(ctx); serr != nil {
		return errors.Join(err, serr, a.Close())
	}
	drained := a.streamsDrained()
	if drained == nil {
		return err
	}
	select {
	case <-drained:
	case <-ctx.Done():
		return errors.Join(err, ctx.Err(), a.Close())
	}
	return err
}

// streamsDrained is closed when no HTTP/1.0 stream is open; nil if none is now.
func (a *APIServer) streamsDrained() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streams == 0 {
		return nil
	}
	if a.drained == nil {
		a.drained = make(chan struct{})
	}
	return a.drained
}

func (a *APIServer) streamStarted() {
	a.mu.Lock()
	a.streams++
	a.mu.Unlock()
}

func (a *APIServer) streamEnded() {
	a.mu.Lock()
	if a.streams--; a.streams == 0 && a.drained != nil {
		close(a.drained)
		a.drained = nil
	}
	a.mu.Unlock()
}

// Close stops accepting connections and closes every open one: requests in flight are cancelled.
func (a *APIServer) Close() error {
	err := a.stopAccepting()
	a.mu.Lock()
	for c := range a.conns {
		c.Conn.Close()
	}
	a.mu.Unlock()
	return err
}

// stopAccepting closes the listeners, so that Serve returns, whether or not fasthttp has them yet.
func (a *APIServer) stopAccepting() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	var err error
	for _, ln := range a.lns {
		err = errors.Join(err, ln.close())
	}
	return err
}

func (a *APIServer) serve(ctx *fasthttp.RequestCtx) {
	x := &fastExchange{ctx: ctx, conn: ctx.Conn(), a: a}
	a.s.answer(x, known(ctx.Method()), known(ctx.Path()), a.metrics)
	if x.st == nil {
		x.stopWatch()
	}
}

// known is b as a string, without a copy when it is a method or a route's path.
func known(b []byte) string {
	switch string(b) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "HEAD":
		return "HEAD"
	}
	for i := range routes {
		if string(b) == routes[i].path {
			return routes[i].path
		}
	}
	return string(b)
}

// fastExchange is an exchange on fasthttp, which does not read a connection while its handler runs: a
// request whose handler waits learns that its client went away by watching the connection's descriptor
// with a peek that consumes nothing (watch), once it has waited watchDelay (most requests at a high
// speedup are answered sooner, and the watch costs about a fifth of such a request; the APIServer's
// watchList starts the watches). A stream also learns it from a failed write.
type fastExchange struct {
	ctx  *fasthttp.RequestCtx
	conn net.Conn // ctx's, which the watch reads (fasthttp reuses ctx once the request is answered)
	a    *APIServer
	st   *streamed // a stream's, written as its body
	req  limitedBody
	lent bool // buffer lent the response's body: write hands it back

	mu       sync.Mutex
	gone     chan struct{} // closed when the client goes away; nil until Done
	watching chan struct{} // closed when the watch ends; nil: none
	stopped  bool          // the request is answered: no watch starts

	// Its place in a.watches (1-based; 0: not listed) and the sweep it was listed after; guarded by
	// a.watches.mu.
	slot  int
	since uint64
}

// watchDelay is how long a request waits before its connection is watched: a client that leaves is
// seen this late, to half as long again (watchSweep).
const watchDelay = 20 * time.Millisecond

func (x *fastExchange) context() context.Context { return x }

// The exchange is its request's context: Done arms the watch on first use.
func (x *fastExchange) Deadline() (time.Time, bool) { return time.Time{}, false }
func (x *fastExchange) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gone == nil {
		x.gone = make(chan struct{})
		if !x.stopped {
			x.a.watches.add(x)
		}
	}
	return x.gone
}
func (x *fastExchange) Err() error {
	select {
	case <-x.Done():
		return context.Canceled
	default:
		return nil
	}
}
func (x *fastExchange) Value(key any) any {
	if _, ok := key.(pinKey); ok && x.a.pinned {
		return x.a.pin
	}
	return nil
}

func (x *fastExchange) header(name string) string { return string(x.ctx.Request.Header.Peek(name)) }

func (x *fastExchange) contentLength() int64 {
	switch n := x.ctx.Request.Header.ContentLength(); {
	case n >= 0:
		return int64(n)
	case n == -1: // chunked
		return -1
	}
	return 0 // no body
}

func (x *fastExchange) body(limit int64) io.Reader {
	x.req = limitedBody{r: x.ctx.RequestBodyStream(), left: limit, limit: limit}
	if x.req.r == nil {
		x.req.r = http.NoBody
	}
	return &x.req
}

// limitedBody reads a request body, failing past its limit as http.MaxBytesReader does (held in the
// exchange: one of those is an allocation a request).
type limitedBody struct {
	r           io.Reader
	left, limit int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	n, err := l.r.Read(p[:min(int64(len(p)), l.left+1)])
	if l.left -= int64(n); l.left < 0 {
		return n, &http.MaxBytesError{Limit: l.limit}
	}
	return n, err
}

// buffer lends the response's pooled body, which write hands back (grown, perhaps): fasthttp returns it
// to its pool once the response is written.
func (x *fastExchange) buffer() []byte {
	x.lent = true
	return x.ctx.Response.SwapBody(nil)[:0]
}

func (x *fastExchange) write(status int, contentType string, b []byte) {
	r := &x.ctx.Response
	if contentType != "" {
		r.Header.SetContentType(contentType)
	}
	r.SetStatusCode(status)
	if x.lent {
		x.lent = false
		r.SwapBody(b)
		return
	}
	r.SetBodyRaw(b)
}

func (x *fastExchange) writeError(e *apiError) {
	h := &x.ctx.Response.Header
	if e.allow != "" {
		h.Set("Allow", e.allow)
	}
	if e.status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
	if e.status == http.StatusRequestEntityTooLarge {
		h.SetConnectionClose() // the rest of the body is not read
		if cc, ok := x.conn.(*capConn); ok {
			cc.linger.Store(true)
		}
	}
	x.write(e.status, "application/json", errorBody(e))
}

func (x *fastExchange) stream(st *streamed) {
	h := &x.ctx.Response.Header
	h.SetContentType("text/event-stream")
	h.Set("Cache-Control", "no-cache")
	x.ctx.SetStatusCode(http.StatusOK)
	if !x.ctx.Request.Header.IsHTTP11() {
		// An HTTP/1.0 client must not be sent chunks (RFC 9112 §6.1), and fasthttp chunks a body of
		// unknown length: the stream goes out on the connection itself, its end the connection's close.
		h.SetContentLength(-2) // neither a length nor chunks; the connection closes
		x.st = st
		x.a.streamStarted()
		if cc, ok := x.conn.(*capConn); ok {
			cc.handOver.Store(x)
		}
		x.ctx.HijackSetNoResponse(true)
		x.ctx.Hijack(x.streamBare)
		return
	}
	if st.endsFirst(x) {
		// Its first write would carry the whole stream (a batch at most), and fasthttp's end of the
		// chunks a second (a system call each, the costliest part of a short stream): the body goes out
		// with a length instead, in one write with the headers. Answered by the handler, as a whole
		// response is: its watch ends with it (x.st nil).
		st.write(fastBody{&x.ctx.Response}, x)
		return
	}
	x.st = st
	x.ctx.SetWriteDeadline(time.Now().Add(x.a.s.o.HTTP.WriteTimeout)) // each write sets its own from here on
	x.ctx.Response.SetBodyStream(fastStream{x}, -1)
}

// fastBody collects a stream that ended before its first write into its response's body.
type fastBody struct{ r *fasthttp.Response }

func (b fastBody) write(p []byte) error {
	b.r.AppendBody(p)
	return nil
}

func (x *fastExchange) serveHTTP(h http.Handler) {
	// The adaptor reads the whole body first: only what the API would read is let through.
	if n := x.contentLength(); n < 0 || n > x.a.s.o.MaxBodyBytes {
		x.writeError(&apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
			message: "a request body of unknown length or over the limit"})
		return
	}
	x.a.adapted(x.ctx)
}

// fastStream is a stream's body: fasthttp calls WriteTo with a writer that frames each write as a chunk
// and flushes it, after the handler, on the connection's goroutine. Close ends the watch, and runs a
// stream that never got to WriteTo as its client gone, so its requests are cancelled.
type fastStream struct{ x *fastExchange }

func (f fastStream) SupportsBodyWriteTo() bool { return true }
func (f fastStream) Read([]byte) (int, error) {
	return 0, errors.New("live: a stream is written, not read")
}
func (f fastStream) WriteTo(w io.Writer) (int64, error) {
	out := &fastChunks{w: w, conn: f.x.conn, timeout: f.x.a.s.o.HTTP.WriteTimeout}
	st := f.x.st
	f.x.st = nil
	st.write(out, f.x)
	return out.n, out.err
}

func (f fastStream) Close() error {
	if f.x.st != nil { // its response was never written
		f.x.abandon()
	}
	f.x.stopWatch()
	return nil
}

// abandon runs a stream that will not be written as its client gone, so that its requests are
// cancelled.
func (x *fastExchange) abandon() {
	st := x.st
	x.st = nil
	x.goneNow()
	st.write(failedChunks{}, x)
}

type fastChunks struct {
	w       io.Writer
	conn    net.Conn
	timeout time.Duration
	n       int64
	err     error
}

func (c *fastChunks) write(b []byte) error {
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return err
}

var errNotWritten = errors.New("the response was not written")

// streamBare writes an HTTP/1.0 client's stream on its connection, c, handed over by fasthttp after the
// handler (on a goroutine of its own, which Shutdown waits for), headers first, each batch as it comes;
// fasthttp closes c afterwards. fasthttp closes c without handing it over if it fails to set a deadline
// or to flush before: capConn.Close then ends the stream (bareFailed), whichever of the two takes it.
func (x *fastExchange) streamBare(c net.Conn) {
	if cc, ok := x.conn.(*capConn); ok && !cc.handOver.CompareAndSwap(x, nil) {
		return // closed first: the stream has ended
	}
	out := &fastChunks{w: c, conn: x.conn, timeout: x.a.s.o.HTTP.WriteTimeout}
	if out.write(x.ctx.Response.Header.Header()) != nil {
		x.bareFailed()
		return
	}
	st := x.st
	x.st = nil
	st.write(out, x)
	x.stopWatch()
	x.a.streamEnded()
}

// bareFailed ends an HTTP/1.0 stream that will not be written: its requests are cancelled, and
// Shutdown no longer waits for it.
func (x *fastExchange) bareFailed() {
	x.abandon()
	x.stopWatch()
	x.a.streamEnded()
}

type failedChunks struct{}

func (failedChunks) write([]byte) error { return errNotWritten }

// watch watches the connection for its client's end, on a goroutine of its own: parked in the runtime's
// poller until the descriptor is readable, then peeking one byte. End of stream or an error: the client
// went away (net/http's background read concludes the same). A byte: a pipelined request, which ends
// the watch. A connection without a descriptor is not watched.
func (x *fastExchange) watch() {
	x.mu.Lock()
	sc, ok := x.conn.(syscall.Conn)
	if x.stopped || !ok {
		x.mu.Unlock()
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		x.mu.Unlock()
		return
	}
	x.conn.SetReadDeadline(time.Time{}) // the request has been read; stopWatch wakes the watch
	x.watching = make(chan struct{})
	x.mu.Unlock()
	defer close(x.watching)
	if peekClosed(rc) {
		x.goneNow()
	}
}

func (x *fastExchange) goneNow() {
	x.Done()
	x.mu.Lock()
	defer x.mu.Unlock()
	select {
	case <-x.gone:
	default:
		close(x.gone)
	}
}

// stopWatch ends the watch, or keeps it from starting, before the connection's next request is read.
func (x *fastExchange) stopWatch() {
	x.mu.Lock()
	x.stopped = true
	if x.gone != nil {
		x.a.watches.remove(x)
	}
	w := x.watching
	x.mu.Unlock()
	if w == nil {
		return
	}
	x.conn.SetReadDeadline(time.Unix(1, 0))
	<-w
	x.conn.SetReadDeadline(time.Time{}) // fasthttp sets the next request's
}

// capListener accepts at most cap(slots) connections open at once: past it, Accept waits for one to
// close and new connections wait in the kernel's backlog, as netutil.LimitListener's.
type capListener struct {
	net.Listener
	a      *APIServer
	slots  chan struct{}
	done   chan struct{}
	closed sync.Once
}

func (l *capListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	cc := &capConn{Conn: c, l: l}
	l.a.mu.Lock()
	if l.a.closed { // accepted as Close ran: it would not be closed
		l.a.mu.Unlock()
		cc.Close()
		return nil, net.ErrClosed
	}
	l.a.conns[cc] = struct{}{}
	l.a.mu.Unlock()
	return cc, nil
}

func (l *capListener) Close() error { return l.close() }

// close closes the listener once; later calls (fasthttp's Shutdown after stopAccepting) do nothing.
func (l *capListener) close() error {
	var err error
	l.closed.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// capConn is an accepted connection, whose Close gives its slot back once.
type capConn struct {
	net.Conn
	l      *capListener
	once   sync.Once
	linger atomic.Bool // answered 413 with its body unread: Close lingers
	// An HTTP/1.0 stream fasthttp is to hand this connection over to: if it is closed instead, Close
	// ends the stream.
	handOver atomic.Pointer[fastExchange]
}

// lingerDelay is how long a connection answered 413 waits, its write side closed, before it closes:
// closing at once with the body unread makes the kernel send a reset, which often reaches the client
// before the 413 does. net/http waits the same (its rstAvoidanceDelay).
const lingerDelay = 500 * time.Millisecond

func (c *capConn) Close() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok && c.linger.Load() {
		// Nothing more is read: a client writing on blocks once the socket's buffers are full, which
		// costs the server nothing (draining a 20 MiB body at loopback speed cost a core).
		tc.CloseWrite()
		time.Sleep(lingerDelay)
	}
	err := c.Conn.Close()
	if x := c.handOver.Swap(nil); x != nil {
		x.bareFailed()
	}
	c.once.Do(func() {
		c.l.a.mu.Lock()
		delete(c.l.a.conns, c)
		c.l.a.mu.Unlock()
		<-c.l.slots
	})
	return err
}

// SyscallConn is the connection's descriptor, for watch.
func (c *capConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
