package live

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokenize"
)

var errBusy = errors.New("too many requests waiting")

// apiError is an error answered with an HTTP status and OpenAI's error JSON.
type apiError struct {
	status  int
	typ     string // OpenAI's error type
	code    string // OpenAI's error code; "" is null
	param   string // the offending field; "" is null
	message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, message: fmt.Sprintf(format, args...)}
}

// appendError appends e as OpenAI's error object: {"error":{"message","type","param","code"}}.
func appendError(b []byte, e *apiError) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendJSONString(b, e.message)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.typ)
	b = appendNullable(append(b, `,"param":`...), e.param)
	b = appendNullable(append(b, `,"code":`...), e.code)
	return append(b, "}}"...)
}

func writeError(w http.ResponseWriter, e *apiError) {
	b := append(appendError(make([]byte, 0, 256), e), '\n')
	w.Header().Set("Content-Type", "application/json")
	if e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(e.status)
	w.Write(b)
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

func (s *Server) routes() {
	mux := http.NewServeMux()
	// Each route also answers its path's other methods with 405 and Allow, as vLLM (FastAPI) does.
	handle := func(method, path string, h http.Handler) {
		mux.Handle(method+" "+path, h)
		allow := method
		if method == http.MethodGet {
			allow = "GET, HEAD"
		}
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error",
				message: "method " + r.Method + " not allowed on " + path + "; use " + method})
		})
	}
	handle("POST", "/v1/completions", s.auth(s.completions))
	handle("POST", "/v1/chat/completions", s.auth(s.chatCompletions))
	handle("GET", "/v1/models", s.auth(s.models))
	handle("GET", "/health", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	if s.o.Metrics != nil {
		handle("GET", "/metrics", s.o.Metrics)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "not_found_error", message: "no route " + r.Method + " " + r.URL.Path})
	})
	s.mux = mux
}

// Handler is the server's HTTP API.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.o.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.o.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeError(w, &apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key", message: "invalid or missing API key"})
			return
		}
		h(w, r)
	}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	b := []byte(`{"object":"list","data":[{"id":`)
	b = appendJSONString(b, s.o.ModelName)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, s.created, 10)
	b = append(b, `,"owned_by":"mocker","root":`...)
	b = appendJSONString(b, s.o.ModelName)
	b = append(b, `,"parent":null,"max_model_len":`...)
	if s.o.MaxModelLen > 0 {
		b = strconv.AppendInt(b, int64(s.o.MaxModelLen), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, "}]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// common are the fields both generation APIs share.
type common struct {
	Model         *string        `json:"model"`
	MaxTokens     *int           `json:"max_tokens"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	IgnoreEOS     bool           `json:"ignore_eos"` // accepted: a request always generates max_tokens
	N             *int           `json:"n"`
}

type completionRequest struct {
	common
	Prompt json.RawMessage `json:"prompt"`
}

type chatRequest struct {
	common
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	Messages            []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// readBody reads a request body of at most --max-request-body-mb (413 past it).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
				message: fmt.Sprintf("request body over %d bytes", tooBig.Limit)}
		}
		return nil, badRequest("", "reading the request body: %v", err)
	}
	return body, nil
}

// decodeBody decodes a JSON body into v, turning every failure into a 400 that says what is wrong.
func decodeBody(body []byte, v any) *apiError {
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te) && te.Field == "":
			return badRequest("", "the request body must be a JSON object, got JSON %s", te.Value)
		case errors.As(err, &te):
			field := strings.TrimPrefix(te.Field, "common.")
			return badRequest(field, "field %q: expected %s, got JSON %s", field, jsonKind(te.Type), te.Value)
		case errors.As(err, &se):
			return badRequest("", "malformed JSON at byte %d: %v", se.Offset, err)
		}
		return badRequest("", "malformed JSON")
	}
	return nil
}

// jsonKind names what JSON a Go type decodes, for errors that must not show Go's type names.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// check validates the shared fields; max is the max_tokens field to use (chat prefers
// max_completion_tokens).
func (s *Server) check(c *common, max *int, maxName string) (int, *apiError) {
	switch {
	case c.Model == nil || *c.Model == "":
		return 0, badRequest("model", "field \"model\" is required")
	case *c.Model != s.o.ModelName:
		return 0, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
			message: fmt.Sprintf("The model `%s` does not exist.", *c.Model)}
	case c.N != nil && *c.N != 1:
		return 0, badRequest("n", "n = %d: only n = 1 is supported", *c.N)
	}
	if max == nil {
		return s.o.DefaultMaxTokens, nil
	}
	switch {
	case *max < 1:
		return 0, badRequest(maxName, "%s must be at least 1, got %d", maxName, *max)
	case s.o.MaxModelLen > 0 && *max >= s.o.MaxModelLen:
		return 0, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: maxName, code: "context_length_exceeded",
			message: fmt.Sprintf("%s %d: this model's maximum context length is %d tokens, prompt included", maxName, *max, s.o.MaxModelLen)}
	case *max >= s.capacity:
		// Refused before the prompt is tokenised: it could never be served, whatever its length.
		return 0, badRequest(maxName, "%s %d: the request can never be served: a worker's KV cache holds %d tokens, prompt included", maxName, *max, s.capacity)
	}
	return *max, nil
}

// admit checks a prompt's length and submits it; the stream carries its output.
func (s *Server) admit(ctx context.Context, prompt []uint32, maxTokens int) (*Stream, *apiError) {
	if len(prompt) == 0 {
		return nil, badRequest("prompt", "the prompt is empty")
	}
	// check bounded maxTokens by MaxModelLen and the pool, so these sums cannot overflow; they are
	// compared as differences all the same.
	n := len(prompt)
	if s.o.MaxModelLen > 0 && maxTokens > s.o.MaxModelLen-n {
		return nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded",
			message: fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d in the completion). Please reduce the length of the prompt or completion.",
				s.o.MaxModelLen, n+maxTokens, n, maxTokens)}
	}
	if maxTokens > s.capacity-n {
		// Refused before its blocks are hashed; the engine would refuse it too.
		return nil, badRequest("prompt", "the request can never be served: prompt (%d tokens) + max_tokens (%d) need more KV than a worker's pool holds (%d tokens)", n, maxTokens, s.capacity)
	}
	req := s.newRequest(prompt, maxTokens)
	st := newStream(req.ID, len(prompt), time.Now())
	if err := s.submit(ctx, req, st); err != nil {
		return nil, submitError(err)
	}
	return st, nil
}

func submitError(err error) *apiError {
	var rej *sched.RejectError
	switch {
	case errors.As(err, &rej):
		return badRequest("", "the request can never be served: %s", rej.Reason)
	case errors.Is(err, errBusy):
		return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", message: "too many requests waiting; retry later"}
	case errors.Is(err, errClosed):
		return &apiError{status: http.StatusServiceUnavailable, typ: "service_unavailable", message: "the server is shutting down"}
	case errors.Is(err, errTransfer):
		return &apiError{status: http.StatusServiceUnavailable, typ: "service_unavailable", message: errTransfer.Error() + "; retry later"}
	}
	return &apiError{status: http.StatusInternalServerError, typ: "internal_error", message: err.Error()}
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	maxTokens, prompt, e := s.completionInput(w, r, &req)
	if e != nil {
		writeError(w, e)
		return
	}
	s.generate(w, r, &req.common, false, prompt, maxTokens)
}

// completionInput decodes a completion request and tokenises its prompt.
func (s *Server) completionInput(w http.ResponseWriter, r *http.Request, req *completionRequest) (int, []uint32, *apiError) {
	release, e := s.decodeRequest(w, r, req)
	if e != nil {
		return 0, nil, e
	}
	defer release()
	maxTokens, e := s.check(&req.common, req.MaxTokens, "max_tokens")
	if e != nil {
		return 0, nil, e
	}
	prompt, e := s.completionPrompt(req.Prompt)
	return maxTokens, prompt, e
}

// Decoding and tokenising a body take several times its size (a 10 MB prompt ~55 MB) before the
// request can be refused, so bodies of at least smallBody bytes are decoded and tokenised only within a
// budget of bodyBudget largest bodies (--max-request-body-mb) at once; past it a request waits for its
// turn, or for its client to leave. The budget is taken once a body has arrived: a client that sends
// slowly holds nothing but its connection (bounded by the read timeout), and small requests never wait.
const (
	bodyBudget = 4
	smallBody  = 64 << 10
)

// decodeRequest reads r's body and decodes it into v within the body budget; release gives the body's
// share back once its prompt is tokenised.
func (s *Server) decodeRequest(w http.ResponseWriter, r *http.Request, v any) (release func(), e *apiError) {
	body, e := s.readBody(w, r)
	if e != nil {
		return nil, e
	}
	if release, e = s.reserveBody(r, body); e != nil {
		return nil, e
	}
	if e := decodeBody(body, v); e != nil {
		release()
		return nil, e
	}
	return release, nil
}

// reserveBody takes body's share of the budget; release gives it back.
func (s *Server) reserveBody(r *http.Request, body []byte) (release func(), e *apiError) {
	n := int64(len(body))
	if n < smallBody {
		return func() {}, nil
	}
	if err := s.bodies.Acquire(r.Context(), n); err != nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", message: "the client left before its request was decoded"}
	}
	return func() { s.bodies.Release(n) }, nil
}

// completionPrompt accepts what vLLM accepts for one prompt: a string, a list of token ids, or a list
// holding one of those.
func (s *Server) completionPrompt(raw json.RawMessage) ([]uint32, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "field \"prompt\" is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return s.o.Tokenizer.Encode(text), nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return s.tokenIDs(ids)
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return nil, badRequest("prompt", "%d prompts: exactly one is supported", len(texts))
		}
		return s.o.Tokenizer.Encode(texts[0]), nil
	}
	var idLists [][]int64
	if json.Unmarshal(raw, &idLists) == nil {
		if len(idLists) != 1 {
			return nil, badRequest("prompt", "%d prompts: exactly one is supported", len(idLists))
		}
		return s.tokenIDs(idLists[0])
	}
	return nil, badRequest("prompt", "field \"prompt\": expected a string, a list of token ids, or a list of one of those")
}

// tokenIDs checks a prompt of token ids against the tokenizer's vocabulary (and the pool: a longer
// prompt is refused before it is copied).
func (s *Server) tokenIDs(ids []int64) ([]uint32, *apiError) {
	if len(ids) > s.capacity {
		return nil, badRequest("prompt", "the request can never be served: its %d prompt tokens are more than a worker's KV cache holds (%d tokens)", len(ids), s.capacity)
	}
	vocab := int64(s.o.Tokenizer.VocabSize())
	if vocab <= 0 {
		vocab = 1 << 32
	}
	out := make([]uint32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= vocab {
			return nil, badRequest("prompt", "token id %d at position %d is out of vocabulary [0, %d)", id, i, vocab)
		}
		out[i] = uint32(id)
	}
	return out, nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	maxTokens, prompt, e := s.chatInput(w, r, &req)
	if e != nil {
		writeError(w, e)
		return
	}
	s.generate(w, r, &req.common, true, prompt, maxTokens)
}

// chatInput decodes a chat request and tokenises its rendered conversation.
func (s *Server) chatInput(w http.ResponseWriter, r *http.Request, req *chatRequest) (int, []uint32, *apiError) {
	release, e := s.decodeRequest(w, r, req)
	if e != nil {
		return 0, nil, e
	}
	defer release()
	max, name := req.MaxCompletionTokens, "max_completion_tokens"
	if max == nil {
		max, name = req.MaxTokens, "max_tokens"
	}
	maxTokens, e := s.check(&req.common, max, name)
	if e != nil {
		return 0, nil, e
	}
	if len(req.Messages) == 0 {
		return 0, nil, badRequest("messages", "field \"messages\" must hold at least one message")
	}
	msgs := make([]tokenize.Message, len(req.Messages))
	for i, m := range req.Messages {
		if m.Role == "" {
			return 0, nil, badRequest("messages", "messages[%d]: field \"role\" is required", i)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return 0, nil, badRequest("messages", "messages[%d].content: %v", i, err)
		}
		msgs[i] = tokenize.Message{Role: m.Role, Content: text}
	}
	return maxTokens, s.o.Tokenizer.Encode(tokenize.ChatPrompt(msgs)), nil
}

// messageText reads a message's content: a string, or a list of parts of which the text ones count.
func messageText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil // an assistant message with tool calls has no content
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("expected a string or a list of content parts")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("part %d: only text parts are supported, got type %q", j, p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// generate runs a request and answers it, streamed or whole.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, c *common, chat bool, prompt []uint32, maxTokens int) {
	if f := s.failures.draw(); f != "" {
		writeError(w, s.injected(f))
		return
	}
	st, e := s.admit(r.Context(), prompt, maxTokens)
	if e != nil {
		writeError(w, e)
		return
	}
	rs := &response{s: s, chat: chat, id: st.ID, prompt: len(prompt), created: time.Now().Unix()}
	if c.Stream {
		rs.usage = c.StreamOptions != nil && c.StreamOptions.IncludeUsage
		s.stream(w, r, st, rs)
		return
	}
	s.whole(w, r, st, rs)
}

// errGone reports that the client went away; the request has been cancelled.
var errGone = errors.New("client went away")

// reader reads one request's output for its HTTP handler.
type reader struct {
	s    *Server
	r    *http.Request
	st   *Stream
	toks []uint32 // the tokens of the last next
	ends []int    // where each pass's share of toks ends
}

// next waits until the stream has new tokens or the request has ended, and takes them. Its error is
// the request's failure, or errGone when the client went away (the request is then cancelled).
func (rd *reader) next() (done bool, err error) {
	for {
		rd.toks, rd.ends, done, err = rd.st.Next(rd.toks[:0], rd.ends[:0])
		if len(rd.toks) > 0 || done {
			return done, err
		}
		select {
		case <-rd.st.Ready():
		case <-rd.r.Context().Done():
			rd.s.cancel(rd.st.ID)
			return false, errGone
		}
	}
}

func (s *Server) whole(w http.ResponseWriter, r *http.Request, st *Stream, rs *response) {
	rd := reader{s: s, r: r, st: st}
	var text []byte
	for done := false; !done; {
		var err error
		if done, err = rd.next(); err != nil {
			if err != errGone {
				writeError(w, submitError(err))
			}
			return
		}
		rs.generated += len(rd.toks)
		text = s.appendText(text, rd.toks)
	}
	w.Header().Set("Content-Type", "application/json")
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.o.HTTP.WriteTimeout))
	w.Write(rs.whole(text, st.Cached()))
}

// streamBatch is the most a stream renders before writing: a client that reads slower than tokens
// come gets them in batches of this size, each written (and waited for) before the next is rendered.
const streamBatch = 32 << 10

// sse writes a stream's events; each write has its own deadline, so a stream lasts as long as its
// client keeps reading.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
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

func (s *Server) stream(w http.ResponseWriter, r *http.Request, st *Stream, rs *response) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, rc: http.NewResponseController(w), timeout: s.o.HTTP.WriteTimeout}
	rd := reader{s: s, r: r, st: st}
	var b, text []byte
	if rs.chat { // the role comes first, as vLLM sends it
		if err := out.write(rs.chunk(b[:0], nil, true, false)); err != nil {
			s.cancel(st.ID)
			return
		}
	}
	for done := false; !done; {
		var err error
		done, err = rd.next()
		if err == errGone {
			return
		}
		if err != nil {
			b = appendError(append(b[:0], "data: "...), submitError(err))
			out.write(append(b, "\n\ndata: [DONE]\n\n"...))
			return
		}
		// One chunk per pass, as vLLM streams one per engine step; the last carries finish_reason.
		b = b[:0]
		from := 0
		for i, end := range rd.ends {
			rs.generated += end - from
			text = s.appendText(text[:0], rd.toks[from:end])
			b = rs.chunk(b, text, false, done && i == len(rd.ends)-1)
			from = end
			if len(b) >= streamBatch { // a backlog: written in batches, not rendered whole
				if err := out.write(b); err != nil {
					s.cancel(st.ID)
					return
				}
				b = b[:0]
			}
		}
		if done {
			if len(rd.ends) == 0 { // finished with no new token
				b = rs.chunk(b, nil, false, true)
			}
			if rs.usage {
				b = rs.usageChunk(b, st.Cached())
			}
			b = append(b, "data: [DONE]\n\n"...)
		}
		if len(b) == 0 {
			continue
		}
		if err := out.write(b); err != nil {
			s.cancel(st.ID)
			return
		}
	}
}

// appendText appends the text of generated tokens. Output ids are hashes of (request, index) over the
// whole uint32 range; they are folded into the tokenizer's vocabulary first.
func (s *Server) appendText(b []byte, toks []uint32) []byte {
	one := make([]uint32, 1)
	vocab := uint32(max(s.o.Tokenizer.VocabSize(), 1))
	for _, t := range toks {
		one[0] = t % vocab
		b = append(b, s.o.Tokenizer.Decode(one)...)
	}
	return b
}

// response writes one request's OpenAI response objects.
type response struct {
	s         *Server
	chat      bool
	id        uint64
	prompt    int
	generated int
	created   int64
	usage     bool // stream: send a usage chunk
}

func (rs *response) head(b []byte, object string) []byte {
	b = append(b, `{"id":"`...)
	if rs.chat {
		b = append(b, "chatcmpl-"...)
	} else {
		b = append(b, "cmpl-"...)
	}
	b = strconv.AppendUint(b, rs.id, 10)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, rs.created, 10)
	b = append(b, `,"model":`...)
	return appendJSONString(b, rs.s.o.ModelName)
}

func (rs *response) appendUsage(b []byte, cached int) []byte {
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.generated), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.prompt+rs.generated), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(cached), 10)
	return append(b, "}}"...)
}

func (rs *response) whole(text []byte, cached int) []byte {
	b := make([]byte, 0, len(text)+384)
	if rs.chat {
		b = rs.head(b, "chat.completion")
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		b = appendJSONBytes(b, text)
		b = append(b, `},"logprobs":null,"finish_reason":"length"}],`...)
	} else {
		b = rs.head(b, "text_completion")
		b = append(b, `,"choices":[{"index":0,"text":`...)
		b = appendJSONBytes(b, text)
		b = append(b, `,"logprobs":null,"finish_reason":"length"}],`...)
	}
	b = rs.appendUsage(b, cached)
	return append(b, "}\n"...)
}

// chunk appends one SSE event carrying text; role announces the assistant (chat's first chunk).
func (rs *response) chunk(b []byte, text []byte, role, done bool) []byte {
	b = append(b, "data: "...)
	if rs.chat {
		b = rs.head(b, "chat.completion.chunk")
		b = append(b, `,"choices":[{"index":0,"delta":{`...)
		if role {
			b = append(b, `"role":"assistant","content":""`...)
		} else {
			b = append(b, `"content":`...)
			b = appendJSONBytes(b, text)
		}
		b = append(b, `},"logprobs":null,"finish_reason":`...)
	} else {
		b = rs.head(b, "text_completion")
		b = append(b, `,"choices":[{"index":0,"text":`...)
		b = appendJSONBytes(b, text)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
	}
	if done {
		b = append(b, `"length"`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, "}]"...)
	if rs.usage { // with include_usage every chunk carries "usage": null, as OpenAI's do
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

func (rs *response) usageChunk(b []byte, cached int) []byte {
	b = append(b, "data: "...)
	if rs.chat {
		b = rs.head(b, "chat.completion.chunk")
	} else {
		b = rs.head(b, "text_completion")
	}
	b = append(b, `,"choices":[],`...)
	b = rs.appendUsage(b, cached)
	return append(b, "}\n\n"...)
}
