package live

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"time"
)

// exchange is one API request and its answer, on whichever HTTP server carries it: net/http's (Handler)
// or fasthttp's (APIServer, WorkerAPIServer). The API's handlers are written against it once, so both
// answer the same bytes.
type exchange interface {
	// context is cancelled when the client goes away; it carries a worker's pin (WorkerAPIServer).
	context() context.Context
	header(name string) string
	contentLength() int64 // -1: unknown (chunked)
	// body reads the request body; past limit bytes it fails with an *http.MaxBytesError.
	body(limit int64) io.Reader
	// write answers status with body b in one write under the write timeout; contentType "" sets none.
	write(status int, contentType string, b []byte)
	// buffer is empty room to render a body in for the next write, which then owns it: memory the
	// exchange keeps between requests (fasthttp's pooled body), or nil. The very next call must be
	// write, with that slice or one grown from it.
	buffer() []byte
	// writeError answers e as OpenAI's error object (with Allow for a 405, Retry-After for a 429).
	writeError(e *apiError)
	// stream answers 200 with st's server-sent events, each batch flushed under a deadline of its own,
	// so a stream lasts as long as its client keeps reading. They may be written after stream returns,
	// on the same goroutine (fasthttp writes a response after its handler).
	stream(st *streamed)
	// serveHTTP answers through a net/http handler (the metrics').
	serveHTTP(h http.Handler)
}

// chunkWriter writes a stream's batches; an error is the client's: gone, or no longer reading.
type chunkWriter interface{ write(b []byte) error }

// route is one of the API's paths: the method it answers (GET answers HEAD too), whether it asks for the
// API key, and its handler. Every other method on it is a 405 with Allow, as vLLM (FastAPI) answers.
type route struct {
	method, path string
	auth         bool
	serve        func(s *Server, x exchange)
}

var routes = []route{
	{"POST", "/v1/completions", true, (*Server).completions},
	{"POST", "/v1/chat/completions", true, (*Server).chatCompletions},
	{"GET", "/v1/models", true, (*Server).models},
	{"POST", "/v1/load_lora_adapter", true, (*Server).loadLoRA},
	{"POST", "/v1/unload_lora_adapter", true, (*Server).unloadLoRA},
	{"GET", "/health", false, func(_ *Server, x exchange) { x.write(http.StatusOK, "", nil) }},
}

// answer answers x, a request for method and path; metrics, if not nil, serves GET /metrics.
func (s *Server) answer(x exchange, method, path string, metrics http.Handler) {
	for i := range routes {
		rt := &routes[i]
		if rt.path != path {
			continue
		}
		if !allowed(rt.method, method) {
			s.notAllowed(x, method, path, rt.method)
			return
		}
		if rt.auth && !s.authorized(x) {
			x.writeError(&apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key", message: "invalid or missing API key"})
			return
		}
		rt.serve(s, x)
		return
	}
	if path == "/metrics" && metrics != nil {
		if !allowed("GET", method) {
			s.notAllowed(x, method, path, "GET")
			return
		}
		x.serveHTTP(metrics)
		return
	}
	x.writeError(&apiError{status: http.StatusNotFound, typ: "not_found_error", message: "no route " + method + " " + path})
}

func allowed(want, method string) bool {
	return method == want || want == http.MethodGet && method == http.MethodHead
}

func (s *Server) notAllowed(x exchange, method, path, want string) {
	allow := want
	if want == http.MethodGet {
		allow = "GET, HEAD"
	}
	x.writeError(&apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", allow: allow,
		message: "method " + method + " not allowed on " + path + "; use " + want})
}

func (s *Server) authorized(x exchange) bool {
	return s.o.APIKey == "" || subtle.ConstantTimeCompare([]byte(x.header("Authorization")), s.apiKey) == 1
}

// Handler is the server's HTTP API on net/http.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.answer(&netExchange{w: w, r: r, timeout: s.o.HTTP.WriteTimeout}, r.Method, r.URL.Path, s.o.Metrics)
	})
}

// netExchange is an exchange on net/http, whose server cancels a request's context when its client
// goes away (it reads the idle connection).
type netExchange struct {
	w       http.ResponseWriter
	r       *http.Request
	timeout time.Duration
}

func (x *netExchange) context() context.Context  { return x.r.Context() }
func (x *netExchange) header(name string) string { return x.r.Header.Get(name) }
func (x *netExchange) contentLength() int64      { return x.r.ContentLength }
func (x *netExchange) serveHTTP(h http.Handler)  { h.ServeHTTP(x.w, x.r) }

func (x *netExchange) body(limit int64) io.Reader { return http.MaxBytesReader(x.w, x.r.Body, limit) }

func (x *netExchange) buffer() []byte { return nil }

func (x *netExchange) write(status int, contentType string, b []byte) {
	if contentType != "" {
		x.w.Header()["Content-Type"] = headerValue(contentType)
	}
	http.NewResponseController(x.w).SetWriteDeadline(time.Now().Add(x.timeout)) // unsupported by test recorders
	x.w.WriteHeader(status)
	x.w.Write(b)
}

func (x *netExchange) writeError(e *apiError) {
	h := x.w.Header()
	if e.allow != "" {
		h.Set("Allow", e.allow)
	}
	if e.status == http.StatusTooManyRequests {
		h["Retry-After"] = retryAfter
	}
	x.write(e.status, "application/json", errorBody(e))
}

func (x *netExchange) stream(st *streamed) {
	h := x.w.Header()
	h["Content-Type"], h["Cache-Control"], h["Connection"] = sseType, noCache, keepAlive
	x.w.WriteHeader(http.StatusOK)
	st.write(&sse{w: x.w, rc: *http.NewResponseController(x.w), timeout: x.timeout}, x.r.Context())
}

// sse writes a stream's events on net/http; each write has its own deadline.
type sse struct {
	w       http.ResponseWriter
	rc      http.ResponseController // held by value: a pointer to one escapes, an allocation per stream
	timeout time.Duration
}

func (e *sse) write(b []byte) error {
	e.rc.SetWriteDeadline(time.Now().Add(e.timeout)) // unsupported by test recorders: no deadline there
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	if err := e.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// The values of the headers responses set, shared (net/http only reads them): Header.Set allocates a
// slice per call.
var (
	jsonType   = []string{"application/json"}
	textType   = []string{"text/plain; charset=utf-8"}
	sseType    = []string{"text/event-stream"}
	noCache    = []string{"no-cache"}
	keepAlive  = []string{"keep-alive"}
	retryAfter = []string{"1"}
)

func headerValue(contentType string) []string {
	switch contentType {
	case "application/json":
		return jsonType
	case "text/plain; charset=utf-8":
		return textType
	}
	return []string{contentType}
}
