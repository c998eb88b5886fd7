package live

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/zeebo/xxh3"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/tokens"
	"github.com/mocker-sim/mocker/workload"
)

var errBusy = errors.New("too many requests waiting")

// apiError is an error answered with an HTTP status and OpenAI's error JSON.
type apiError struct {
	status  int
	typ     string // OpenAI's error type
	code    string // OpenAI's error code; "" is null
	codeNum int    // a numeric code instead, as vLLM sends its status
	param   string // the offending field; "" is null
	message string
	allow   string // a 405's Allow header
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
	if e.codeNum != 0 {
		b = strconv.AppendInt(append(b, `,"code":`...), int64(e.codeNum), 10)
	} else {
		b = appendNullable(append(b, `,"code":`...), e.code)
	}
	return append(b, "}}"...)
}

// errorBody is e's JSON, as a response's body.
func errorBody(e *apiError) []byte {
	return append(appendError(make([]byte, 0, 256), e), '\n')
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// models lists the base model, then its LoRA adapters as vLLM does: root the adapter's path, parent the
// base model, no max_model_len of their own.
func (s *Server) models(x exchange) {
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
	b = append(b, '}')
	for _, m := range *s.loras.Load() {
		b = append(b, `,{"id":`...)
		b = appendJSONString(b, m.Name)
		b = append(b, `,"object":"model","created":`...)
		b = strconv.AppendInt(b, s.created, 10)
		b = append(b, `,"owned_by":"mocker","root":`...)
		b = appendJSONString(b, m.Path)
		b = append(b, `,"parent":`...)
		b = appendJSONString(b, s.o.ModelName)
		b = append(b, `,"max_model_len":null}`...)
	}
	b = append(b, "]}\n"...)
	x.write(http.StatusOK, "application/json", b)
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
	// ContinuousUsageStats (vLLM's extension, with IncludeUsage) puts the running usage in every chunk.
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// common are the fields both generation APIs share.
type common struct {
	Model         *string        `json:"model"`
	MaxTokens     *int           `json:"max_tokens"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	// IgnoreEOS (vLLM's extension) generates exactly max_tokens; without it the output-length model
	// may end a choice early.
	IgnoreEOS              bool            `json:"ignore_eos"`
	N                      *int            `json:"n"`
	Stop                   json.RawMessage `json:"stop"` // a string or a list of strings
	StopTokenIDs           []int64         `json:"stop_token_ids"`
	IncludeStopStrInOutput bool            `json:"include_stop_str_in_output"`
	MinTokens              *int            `json:"min_tokens"` // vLLM's: no end before this many tokens
	Seed                   *int64          `json:"seed"`

	sampling sampling // what check makes of the fields, kept here to save it an allocation
}

type completionRequest struct {
	common
	Prompt   promptField `json:"prompt"`
	Echo     bool        `json:"echo"`
	Logprobs *int        `json:"logprobs"`

	prompt [1]prompt // a single prompt's room, for completionPrompts
}

type chatRequest struct {
	common
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	Messages            []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Logprobs    bool `json:"logprobs"`
	TopLogprobs *int `json:"top_logprobs"`
}

// Bounds on what one request may ask for, beyond what vLLM bounds: each choice is an engine request,
// and stop strings are searched for in every choice's text.
const (
	maxChoices      = 256 // n × prompts
	maxStops        = 64
	maxStopBytes    = 1024
	maxLogprobs     = 20 // vLLM's default --max-logprobs
	maxStopTokenIDs = 64
)

// sampling is what a request asks of its choices, validated.
type sampling struct {
	n         int
	maxTokens int // 0: not set; each prompt gets the default
	minTokens int
	maxName   string
	ignoreEOS bool
	stop      []string
	stopIDs   []uint32
	keepStop  bool  // include_stop_str_in_output
	seed      int64 // hashed into the choices' keys when seeded
	seeded    bool
	logprobs  int // top logprobs per token; -1: no logprobs
	echo      bool
	stream    bool
	usage     bool // stream: a usage chunk at the end
	running   bool // stream: usage in every chunk (continuous_usage_stats)

	lora string // the adapter named by the model field, "" for the base model
}

// readBody appends to dst a request body of at most --max-request-body-mb (413 past it). A small body
// of known length is read into one allocation at most (ReadFrom wants MinRead bytes free to see the
// end); a larger one grows as it arrives, so a client that declares a length and sends slowly holds
// no more than a small body's room.
func (s *Server) readBody(x exchange, dst []byte) ([]byte, *apiError) {
	b := bytes.NewBuffer(dst)
	if n := x.contentLength(); n > 0 {
		b.Grow(int(min(n, smallBody, s.o.MaxBodyBytes)) + bytes.MinRead)
	}
	_, err := b.ReadFrom(x.body(s.o.MaxBodyBytes))
	body := b.Bytes()
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

// v1Options make the JSON v2 decoder decode as encoding/json does (names matched without case, the
// last of duplicate names, invalid UTF-8 replaced...), at about half its cost: it reads a body once,
// where encoding/json validates it before decoding it (FuzzDecodeAgrees checks they agree).
var v1Options = jsonv1.DefaultOptionsV1()

// decodeBody decodes a JSON body into v, turning every failure into a 400 that says what is wrong. A
// completion of the usual shape takes decodeSimple; a body the v2 decoder refuses is decoded again by
// encoding/json, whose errors the API's messages are made of.
func decodeBody(body []byte, v any) *apiError {
	if r, ok := v.(*completionRequest); ok && decodeSimple(body, r) {
		return nil
	}
	if jsonv2.Unmarshal(body, v, v1Options) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
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
func (s *Server) check(c *common, max *int, maxName string) (*sampling, *apiError) {
	p := &c.sampling
	*p = sampling{n: 1, maxName: maxName, ignoreEOS: c.IgnoreEOS, keepStop: c.IncludeStopStrInOutput, logprobs: -1, stream: c.Stream}
	switch {
	case c.Model == nil || *c.Model == "":
		return nil, badRequest("model", "field \"model\" is required")
	case *c.Model != s.o.ModelName && !s.isLoRA(*c.Model):
		return nil, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
			message: fmt.Sprintf("The model `%s` does not exist.", *c.Model)}
	case c.N != nil && (*c.N < 1 || *c.N > maxChoices):
		return nil, badRequest("n", "n = %d: must be in [1, %d]", *c.N, maxChoices)
	case c.StreamOptions != nil && !c.Stream:
		return nil, badRequest("stream_options", "Stream options can only be defined when `stream=True`.")
	}
	if *c.Model != s.o.ModelName {
		p.lora = *c.Model
	}
	if c.N != nil {
		p.n = *c.N
	}
	if c.MinTokens != nil {
		switch {
		case *c.MinTokens < 0:
			return nil, badRequest("min_tokens", "min_tokens must be at least 0, got %d", *c.MinTokens)
		case max != nil && *c.MinTokens > *max:
			return nil, badRequest("min_tokens", "min_tokens must be less than or equal to %s=%d, got %d", maxName, *max, *c.MinTokens)
		}
		p.minTokens = *c.MinTokens
	}
	if c.StreamOptions != nil {
		p.usage = c.StreamOptions.IncludeUsage
		p.running = p.usage && c.StreamOptions.ContinuousUsageStats
	}
	if c.Seed != nil {
		p.seed, p.seeded = *c.Seed, true
	}
	if e := p.parseStop(c); e != nil {
		return nil, e
	}
	if max == nil {
		return p, nil
	}
	switch {
	case *max < 1:
		return nil, badRequest(maxName, "%s must be at least 1, got %d", maxName, *max)
	case *max >= s.capacity && (s.o.MaxModelLen == 0 || *max < s.o.MaxModelLen):
		// Refused before the prompt is tokenised: it could never be served, whatever its length. (Past
		// max_model_len, vLLM's error, which counts the prompt, is given once it is tokenised.)
		return nil, badRequest(maxName, "%s %d: the request can never be served: a worker's KV cache holds %d tokens, prompt included", maxName, *max, s.capacity)
	}
	p.maxTokens = *max
	return p, nil
}

// parseStop reads stop (a string or a list of strings) and stop_token_ids.
func (p *sampling) parseStop(c *common) *apiError {
	raw := bytes.TrimSpace(c.Stop)
	if len(raw) > 0 && string(raw) != "null" {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			p.stop = []string{one}
		} else if json.Unmarshal(raw, &p.stop) != nil {
			return badRequest("stop", "field \"stop\": expected a string or a list of strings")
		}
	}
	if len(p.stop) > maxStops {
		return badRequest("stop", "%d stop strings: at most %d", len(p.stop), maxStops)
	}
	for i, st := range p.stop {
		if st == "" || len(st) > maxStopBytes {
			return badRequest("stop", "stop[%d]: a stop string must have 1 to %d bytes, got %d", i, maxStopBytes, len(st))
		}
	}
	if len(c.StopTokenIDs) > maxStopTokenIDs {
		return badRequest("stop_token_ids", "%d stop token ids: at most %d", len(c.StopTokenIDs), maxStopTokenIDs)
	}
	for i, id := range c.StopTokenIDs {
		if id < 0 || id > math.MaxUint32 {
			return badRequest("stop_token_ids", "stop_token_ids[%d] = %d: not a token id", i, id)
		}
		p.stopIDs = append(p.stopIDs, uint32(id))
	}
	return nil
}

// wholeTokens bounds what an unstreamed response holds until it is written: its choices' max_tokens,
// each token counted once more per logprob it carries. (A stream holds at most one batch.)
const wholeTokens = 1 << 23

func (p *sampling) wholeBudget(maxes []int) *apiError {
	if p.stream {
		return nil
	}
	per := 1
	if p.logprobs >= 0 {
		per += p.logprobs + 1
	}
	units := 0
	for _, m := range maxes { // m ≤ the pool, n ≤ maxChoices, per ≤ 22: no overflow
		units += m * p.n * per
	}
	if units > wholeTokens {
		return badRequest("n", "an unstreamed response of %d choices of up to %d tokens (logprobs counted) would hold %d token entries, over %d: stream it, or ask for fewer", len(maxes)*p.n, slices.Max(maxes), units, wholeTokens)
	}
	return nil
}

// prompt is one prompt of a request: its tokens, and its text for echo.
type prompt struct {
	ids     []uint32
	text    string
	decoded bool          // text is ids decoded, for echo: the prompt came as ids
	images  []tokens.Item // a chat's image_url parts, in ids
}

// contextError is vLLM's 400 for a request over max_model_len: its message, type, param and numeric code.
func contextError(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "BadRequestError", param: param, codeNum: http.StatusBadRequest,
		message: fmt.Sprintf(format, args...)}
}

// fit checks a prompt's length against max_model_len and the pool, as vLLM does (its prompt, then its
// prompt + max_tokens), and returns the tokens it may generate.
func (s *Server) fit(p *sampling, n int) (int, *apiError) {
	if n == 0 {
		return 0, badRequest("prompt", "the prompt is empty")
	}
	ml := s.o.MaxModelLen
	if ml > 0 && n >= ml {
		return 0, contextError("input_tokens", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", ml, n)
	}
	max := p.maxTokens
	switch {
	case max == 0:
		max = s.o.DefaultMaxTokens
		if ml > 0 {
			max = min(max, ml-n)
		}
	case ml > 0 && max > ml-n: // max is at most max_model_len or the pool: no overflow
		return 0, contextError(p.maxName, "'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			max, ml, n, max, ml, n)
	}
	if max > s.capacity-n {
		// Refused before its blocks are hashed; the engine would refuse it too.
		return 0, badRequest("prompt", "the request can never be served: prompt (%d tokens) + max_tokens (%d) need more KV than a worker's pool holds (%d tokens)", n, max, s.capacity)
	}
	return max, nil
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
	case errors.Is(err, errWorkerLost):
		return &apiError{status: http.StatusServiceUnavailable, typ: "service_unavailable", message: err.Error() + "; retry later"}
	case errors.Is(err, errTransfer):
		return &apiError{status: http.StatusServiceUnavailable, typ: "service_unavailable", message: errTransfer.Error() + "; retry later"}
	}
	return &apiError{status: http.StatusInternalServerError, typ: "internal_error", message: err.Error()}
}

func (s *Server) completions(x exchange) {
	var req completionRequest
	p, prompts, e := s.completionInput(x, &req)
	if e != nil {
		x.writeError(e)
		return
	}
	s.generate(x, p, false, prompts)
}

// completionInput decodes a completion request and tokenises its prompts.
func (s *Server) completionInput(x exchange, req *completionRequest) (*sampling, []prompt, *apiError) {
	release, e := s.decodeRequest(x, req)
	if e != nil {
		return nil, nil, e
	}
	defer release()
	p, e := s.check(&req.common, req.MaxTokens, "max_tokens")
	if e != nil {
		return nil, nil, e
	}
	if lp := req.Logprobs; lp != nil {
		if *lp < 0 || *lp > maxLogprobs {
			return nil, nil, badRequest("logprobs", "Requested sample logprobs of %d, which is outside [0, %d]", *lp, maxLogprobs)
		}
		p.logprobs = *lp
	}
	p.echo = req.Echo
	prompts, e := s.completionPrompts(req.Prompt, p.n, &req.prompt)
	return p, prompts, e
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

// bodyBufs hold small request bodies while they are decoded: what a request keeps of its body is
// copied out of it, so the buffer serves the next request.
var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// decodeRequest reads r's body and decodes it into v within the body budget; release gives the body's
// share back once its prompt is tokenised.
func (s *Server) decodeRequest(x exchange, v any) (release func(), e *apiError) {
	buf := bodyBufs.Get().(*[]byte)
	body, e := s.readBody(x, (*buf)[:0])
	defer func() {
		if body != nil && cap(body) < smallBody {
			*buf = body[:0]
			bodyBufs.Put(buf)
		}
	}()
	if e != nil {
		return nil, e
	}
	if release, e = s.reserveBody(x.context(), body); e != nil {
		return nil, e
	}
	if e := decodeBody(body, v); e != nil {
		release()
		return nil, e
	}
	return release, nil
}

// reserveBody takes body's share of the budget; release gives it back.
func (s *Server) reserveBody(ctx context.Context, body []byte) (release func(), e *apiError) {
	n := int64(len(body))
	if n < smallBody {
		return func() {}, nil
	}
	if err := s.bodies.Acquire(ctx, n); err != nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", message: "the client left before its request was decoded"}
	}
	return func() { s.bodies.Release(n) }, nil
}

// promptField is a completion's prompt as sent: its JSON, or its text when that is a plain string.
type promptField struct {
	raw   json.RawMessage
	text  string
	plain bool // text holds the prompt, a string without escapes
}

// UnmarshalJSON keeps a plain string's text and any other value's JSON, which completionPrompts reads.
// A string without escapes or invalid UTF-8 is its bytes between the quotes, as json.Unmarshal would
// decode it; reading it here spares decoding it from a copy a second time (a prompt is most of a body).
func (p *promptField) UnmarshalJSON(b []byte) error {
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b[1:n-1], '\\') < 0 && utf8.Valid(b[1:n-1]) {
		p.text, p.plain = string(b[1:n-1]), true
		return nil
	}
	p.raw = append(p.raw[:0], b...)
	return nil
}

// completionPrompts accepts what vLLM accepts: a string, a list of token ids, or a list of either (a
// batch: each prompt gets its n choices).
func (s *Server) completionPrompts(field promptField, n int, one *[1]prompt) ([]prompt, *apiError) {
	if field.plain { // a plain string, in one's room
		one[0] = prompt{ids: s.o.Tokenizer.Encode(field.text), text: field.text}
		return one[:], nil
	}
	raw := bytes.TrimSpace(field.raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "field \"prompt\" is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []prompt{{ids: s.o.Tokenizer.Encode(text), text: text}}, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		p, e := s.tokenIDs(ids)
		return []prompt{p}, e
	}
	var texts []string
	var idLists [][]int64
	switch {
	case json.Unmarshal(raw, &texts) == nil:
		if e := batchSize(len(texts), n); e != nil {
			return nil, e
		}
		out := make([]prompt, len(texts))
		for i, t := range texts {
			out[i] = prompt{ids: s.o.Tokenizer.Encode(t), text: t}
		}
		return out, nil
	case json.Unmarshal(raw, &idLists) == nil:
		if e := batchSize(len(idLists), n); e != nil {
			return nil, e
		}
		out := make([]prompt, len(idLists))
		for i, l := range idLists {
			var e *apiError
			if out[i], e = s.tokenIDs(l); e != nil {
				return nil, e
			}
		}
		return out, nil
	}
	return nil, badRequest("prompt", "field \"prompt\": expected a string, a list of token ids, or a list of either")
}

func batchSize(prompts, n int) *apiError {
	if prompts == 0 {
		return badRequest("prompt", "the prompt list is empty")
	}
	if prompts > maxChoices/n {
		return badRequest("prompt", "%d prompts × n = %d: at most %d choices per request", prompts, n, maxChoices)
	}
	return nil
}

// tokenIDs checks a prompt of token ids against the tokenizer's vocabulary (and max_model_len and the
// pool: a longer prompt is refused before it is copied).
func (s *Server) tokenIDs(ids []int64) (prompt, *apiError) {
	if ml := s.o.MaxModelLen; ml > 0 && len(ids) >= ml {
		return prompt{}, contextError("input_tokens", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", ml, len(ids))
	}
	if len(ids) > s.capacity {
		return prompt{}, badRequest("prompt", "the request can never be served: its %d prompt tokens are more than a worker's KV cache holds (%d tokens)", len(ids), s.capacity)
	}
	vocab := int64(s.o.Tokenizer.VocabSize())
	if vocab <= 0 {
		vocab = 1 << 32
	}
	out := make([]uint32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= vocab {
			return prompt{}, badRequest("prompt", "token id %d at position %d is out of vocabulary [0, %d)", id, i, vocab)
		}
		out[i] = uint32(id)
	}
	return prompt{ids: out}, nil // its text is decoded only for echo
}

func (s *Server) chatCompletions(x exchange) {
	var req chatRequest
	p, pr, e := s.chatInput(x, &req)
	if e != nil {
		x.writeError(e)
		return
	}
	s.generate(x, p, true, []prompt{pr})
}

// chatInput decodes a chat request and tokenises its rendered conversation.
func (s *Server) chatInput(x exchange, req *chatRequest) (*sampling, prompt, *apiError) {
	release, e := s.decodeRequest(x, req)
	if e != nil {
		return nil, prompt{}, e
	}
	defer release()
	max, name := req.MaxCompletionTokens, "max_completion_tokens"
	if max == nil {
		max, name = req.MaxTokens, "max_tokens"
	}
	p, e := s.check(&req.common, max, name)
	if e != nil {
		return nil, prompt{}, e
	}
	if k := req.TopLogprobs; k != nil {
		switch {
		case *k < 0 || *k > maxLogprobs:
			return nil, prompt{}, badRequest("top_logprobs", "top_logprobs = %d: must be in [0, %d]", *k, maxLogprobs)
		case *k > 0 && !req.Logprobs:
			return nil, prompt{}, badRequest("top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true.")
		}
	}
	if req.Logprobs {
		p.logprobs = 0
		if req.TopLogprobs != nil {
			p.logprobs = *req.TopLogprobs
		}
	}
	if len(req.Messages) == 0 {
		return nil, prompt{}, badRequest("messages", "field \"messages\" must hold at least one message")
	}
	msgs := make([]tokenize.Message, len(req.Messages))
	segs := make([][]string, len(req.Messages))
	var images []string
	for i, m := range req.Messages {
		if m.Role == "" {
			return nil, prompt{}, badRequest("messages", "messages[%d]: field \"role\" is required", i)
		}
		var ims []string
		var e *apiError
		if segs[i], ims, e = messageContent(m.Content, i); e != nil {
			return nil, prompt{}, e
		}
		msgs[i] = tokenize.Message{Role: m.Role, Content: segs[i][0]}
		images = append(images, ims...)
	}
	if len(images) == 0 {
		return p, prompt{ids: s.o.Tokenizer.Encode(tokenize.ChatPrompt(msgs))}, nil
	}
	return p, s.imagePrompt(msgs, segs, images), nil
}

// messageContent reads a message's content: a string, or a list of text and image_url parts. It returns
// the text before, between and after the images (one more piece than images) and the images' URLs. A
// malformed part is a 400 naming messages[i].content[j].
func messageContent(raw json.RawMessage, i int) ([]string, []string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return []string{""}, nil, nil // an assistant message with tool calls has no content
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []string{text}, nil, nil
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		ImageURL *struct {
			URL    *string `json:"url"`
			Detail string  `json:"detail"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, nil, badRequest("messages", "messages[%d].content: expected a string or a list of content parts", i)
	}
	var (
		b      strings.Builder
		segs   []string
		images []string
	)
	for j, p := range parts {
		bad := func(format string, args ...any) *apiError {
			param := fmt.Sprintf("messages[%d].content[%d]", i, j)
			return badRequest(param, param+": "+format, args...)
		}
		switch p.Type {
		case "text":
			if p.Text == nil {
				return nil, nil, bad("a text part needs \"text\", a string")
			}
			b.WriteString(*p.Text)
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == nil {
				return nil, nil, bad("an image_url part needs \"image_url\": {\"url\": ...}")
			}
			if err := checkImageURL(*p.ImageURL.URL); err != nil {
				return nil, nil, bad("image_url.url: %v", err)
			}
			switch p.ImageURL.Detail {
			case "", "auto", "low", "high", "original":
			default:
				return nil, nil, bad("image_url.detail %q: want auto, low, high or original", p.ImageURL.Detail)
			}
			images = append(images, *p.ImageURL.URL)
			segs = append(segs, b.String())
			b.Reset()
		default:
			return nil, nil, bad("unsupported part type %q (want text or image_url)", p.Type)
		}
	}
	return append(segs, b.String()), images, nil
}

// checkImageURL accepts what vLLM fetches or decodes, without doing either: a data: URL with its payload
// (base64 or not), or an http(s) URL with a host. The simulator never fetches an image; its identity is
// the URL itself.
func checkImageURL(u string) error {
	switch {
	case strings.HasPrefix(u, "data:"):
		meta, data, ok := strings.Cut(u[len("data:"):], ",")
		switch {
		case !ok:
			return errors.New("a data: URL needs a comma before its data")
		case data == "":
			return errors.New("the data: URL has no data")
		case meta != "" && !strings.HasPrefix(meta, "image/"):
			return fmt.Errorf("the data: URL's media type %q is not an image", strings.TrimSuffix(meta, ";base64"))
		case strings.HasSuffix(meta, ";base64"):
			if _, err := base64.StdEncoding.DecodeString(data); err != nil {
				return fmt.Errorf("invalid base64 data: %v", err)
			}
		}
		return nil
	case strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "https://"):
		pu, err := url.Parse(u)
		if err != nil || pu.Host == "" {
			return errors.New("not a valid http(s) URL")
		}
		return nil
	}
	return errors.New("want a data: URL or an http(s) URL")
}

// imagePrompt renders a chat with images: each is Options.ImageTokens placeholder tokens in its place,
// whose blocks carry the image's key (workload.ImageKey of its URL).
func (s *Server) imagePrompt(msgs []tokenize.Message, segs [][]string, images []string) prompt {
	ids, starts := tokenize.EncodeChatImages(s.o.Tokenizer, msgs, segs, s.o.ImageTokens)
	pr := prompt{ids: ids}
	for k, url := range images {
		pr.images = append(pr.images, tokens.Item{Key: workload.ImageKey(url), Start: starts[k], Len: s.o.ImageTokens})
	}
	return pr
}

// choice is one generated sequence of a request: the j-th of a prompt's n, an engine request of its own
// (as vLLM runs n > 1). Its length and how it ends are decided when it is admitted: the output-length
// model draws where its end-of-sequence comes (unless ignore_eos), and its synthetic text, known in
// advance, says where a stop string or stop token comes first.
type choice struct {
	index  int // in the response: prompt × n + j, as vLLM numbers a batch's choices
	prompt int
	st     *Stream
	tokens int    // what the engine generates
	finish string // "stop" or "length"
	reason []byte // stop_reason: a JSON string or number; nil is null
	limit  int    // bytes of output text shown (a stop string cuts it); -1: all

	// Written by the handler as the output arrives.
	generated int
	shown     int  // bytes of output text so far, shown or cut
	chars     int  // characters of text shown so far, echo included (completions' text_offset)
	started   bool // its first chunk (which carries echo's prompt) is out
	done      bool
	text      []byte   // whole responses: the text
	lps       logprobs // whole responses: the logprobs
}

// choiceStream is a choice with its stream, allocated together.
type choiceStream struct {
	choice choice
	stream Stream
}

// newChoices returns a request's n choices with their streams, zero, and an empty list with room for
// them: one allocation where n is 1 (most requests), not three.
func newChoices(n int) ([]choiceStream, []*choice) {
	if n == 1 {
		one := new(struct {
			cs   [1]choiceStream
			list [1]*choice
		})
		return one.cs[:], one.list[:0]
	}
	return make([]choiceStream, n), make([]*choice, 0, n)
}

// choiceKey keys a choice's output length: the same request (prompt, choice, seed) draws the same
// length on every run, whatever the order requests come in. It is the XXH3-64 of the prompt's ids (4
// bytes each, little-endian), the choice's index and the seed if any (8 bytes each), hashed in one call:
// a hasher fed 4 bytes at a time costs more than the rest of planning a choice. A prompt too long for
// the stack's buffer is written into buf's, which the request's next choice reuses.
func (buf *planBuf) choiceKey(ids []uint32, j int, p *sampling) uint64 {
	var stack [1024]byte
	b := stack[:0]
	if n := 4*len(ids) + 16; n > len(stack) {
		if cap(buf.key) < n {
			buf.key = make([]byte, 0, n)
		}
		b = buf.key[:0]
	}
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(j))
	if p.seeded {
		b = binary.LittleEndian.AppendUint64(b, uint64(p.seed))
	}
	return xxh3.Hash(b)
}

// planBuf is what planning a choice writes, kept for a request's next choice: the text plan searches
// for stop strings, and choiceKey's bytes.
type planBuf struct {
	text []byte
	ends []int // where each token's text ends
	key  []byte
}

// plan decides how choice c, of request req, ends: at the output-length model's end-of-sequence, or
// earlier at the first stop token or stop string in its text.
func (s *Server) plan(c *choice, req *sched.Request, p *sampling, maxTokens int, buf *planBuf) {
	c.limit = -1
	c.tokens = maxTokens
	if !p.ignoreEOS {
		c.tokens = max(s.o.OutputLength.Draw(s.o.Engine.Seed, buf.choiceKey(req.Prompt, c.index%p.n, p), maxTokens), min(p.minTokens, maxTokens))
	}
	c.finish = "length"
	if c.tokens < maxTokens {
		c.finish = "stop" // an end-of-sequence token: stop_reason null
	}
	if len(p.stop) == 0 && len(p.stopIDs) == 0 {
		return
	}
	// The choice's text, token by token as it is served: the first stop token ends it, and so does the
	// first stop string, in the text up to there. Nothing stops a choice before min_tokens.
	text, ends := buf.text[:0], buf.ends[:0]
	stopAt, stopID := -1, uint32(0)
	for i := range c.tokens {
		t := s.outputID(sched.OutputToken(req.ID, i, nil))
		if len(p.stop) > 0 {
			text = append(text, s.o.Tokenizer.DecodeToken(t)...)
			ends = append(ends, len(text))
		}
		if i+1 >= p.minTokens && slices.Contains(p.stopIDs, t) {
			stopAt, stopID = i, t
			break
		}
	}
	best, start, which := -1, 0, ""
	for _, st := range p.stop {
		from := 0
		if p.minTokens >= 2 && p.minTokens-2 < len(ends) {
			from = max(ends[p.minTokens-2]-len(st)+1, 0) // an occurrence must end in token min_tokens-1 or later
		}
		k := bytes.Index(text[from:], []byte(st))
		if k < 0 {
			continue
		}
		k += from
		i, _ := slices.BinarySearch(ends, k+len(st)) // the token that completes it
		if best < 0 || i < best || i == best && k < start {
			best, start, which = i, k, st
		}
	}
	buf.text, buf.ends = text, ends
	switch {
	case best >= 0 && (stopAt < 0 || best < stopAt):
		c.tokens, c.finish, c.reason = best+1, "stop", appendJSONString(nil, which)
		c.limit = start
		if p.keepStop {
			c.limit += len(which)
		}
	case stopAt >= 0: // a stop token's text is shown
		c.tokens, c.finish, c.reason = stopAt+1, "stop", strconv.AppendUint(nil, uint64(stopID), 10)
	}
}

// outputID is the vocabulary id of an engine's output token: output ids are hashes of (request, index)
// over the whole uint32 range, folded into the tokenizer's vocabulary.
func (s *Server) outputID(t uint32) uint32 {
	return t % uint32(max(s.o.Tokenizer.VocabSize(), 1))
}

// generate runs a request's choices and answers it, streamed or whole.
func (s *Server) generate(x exchange, p *sampling, chat bool, prompts []prompt) {
	if f := s.failures.draw(); f != "" {
		x.writeError(s.injected(f))
		return
	}
	maxes := make([]int, len(prompts))
	for i := range prompts {
		var e *apiError
		if maxes[i], e = s.fit(p, len(prompts[i].ids)); e != nil {
			x.writeError(e)
			return
		}
	}
	if e := p.wholeBudget(maxes); e != nil {
		x.writeError(e)
		return
	}
	ready := make(chan struct{}, 1) // shared by the choices' streams: one wait for all of them
	arrived := time.Now()
	var buf planBuf
	all, cs := newChoices(len(prompts) * p.n)
	for i, pr := range prompts {
		for j := range p.n {
			c := &all[i*p.n+j].choice
			c.index, c.prompt = i*p.n+j, i
			req := s.newRequest(pr.ids, maxes[i], p.lora, pr.images...)
			s.plan(c, req, p, maxes[i], &buf)
			req.MaxTokens = c.tokens
			c.st = &all[i*p.n+j].stream
			c.st.init(req.ID, len(pr.ids), arrived, ready)
			c.st.finish, c.st.quiet = c.finish, !p.stream
			c.st.expect(c.tokens)
			if err := s.submit(x.context(), req, c.st); err != nil {
				for _, d := range cs {
					s.cancel(d.st.ID)
				}
				x.writeError(submitError(err))
				return
			}
			cs = append(cs, c)
		}
	}
	if p.echo {
		for i := range prompts {
			if prompts[i].text == "" {
				prompts[i].text, prompts[i].decoded = s.o.Tokenizer.Decode(prompts[i].ids), true
			}
		}
	}
	rs := response{s: s, p: p, chat: chat, id: cs[0].st.ID, prompts: prompts, choices: cs, created: arrived.Unix()} // vLLM stamps a response when its request arrives
	if p.stream {
		x.stream(&streamed{ready: ready, rs: rs})
		return
	}
	s.whole(x, ready, &rs)
}

// errGone reports that the client went away; the request has been cancelled.
var errGone = errors.New("client went away")

// writeFailed is a stream's failed write: the client is gone or stopped reading.
type writeFailed struct{ error }

// follow waits for the choices' output and hands each choice's new tokens (with where each pass's share
// ends) to f, until every choice has ended. Its error is a choice's failure (the others are then
// cancelled), errGone when the client went away (all are cancelled), or f's.
func (s *Server) follow(ctx context.Context, ready <-chan struct{}, cs []*choice, f func(c *choice, toks []uint32, ends []int) error) error {
	var toks []uint32
	var ends []int
	if !cs[0].st.quiet { // a quiet stream hands its buffer over instead
		toks, ends = make([]uint32, 0, passRoom), make([]int, 0, passRoom)
	}
	for {
		left := 0
		for _, c := range cs {
			if c.done {
				continue
			}
			var err error
			toks, ends, c.done, err = c.st.Next(toks[:0], ends[:0])
			if err != nil {
				s.cancelAll(cs)
				return err
			}
			if len(toks) > 0 || c.done {
				if err := f(c, toks, ends); err != nil {
					s.cancelAll(cs)
					return err
				}
			}
			if !c.done {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			s.cancelAll(cs)
			return errGone
		}
	}
}

func (s *Server) cancelAll(cs []*choice) {
	for _, c := range cs {
		if !c.done {
			s.cancel(c.st.ID)
		}
	}
}

// wholeTextRoom is the most a whole response's text is sized for before its tokens come: room for
// wholeTextPerToken bytes a token, which a short output's text fits in one allocation.
const (
	wholeTextRoom     = 4 << 10
	wholeTextPerToken = 8
)

func (s *Server) whole(x exchange, ready <-chan struct{}, rs *response) {
	for _, c := range rs.choices {
		n := min(c.tokens*wholeTextPerToken, wholeTextRoom)
		if rs.p.echo {
			n += len(rs.prompts[c.prompt].text)
		}
		c.text = make([]byte, 0, n)
		if rs.p.echo {
			c.text = append(c.text, rs.prompts[c.prompt].text...)
			rs.echoLogprobs(c, &c.lps)
		}
	}
	err := s.follow(x.context(), ready, rs.choices, func(c *choice, toks []uint32, _ []int) error {
		c.text = rs.appendOutput(c.text, c, toks, &c.lps)
		return nil
	})
	if err != nil {
		if err != errGone {
			x.writeError(submitError(err))
		}
		return
	}
	x.write(http.StatusOK, "application/json", rs.whole(x.buffer()))
}

// streamBatch is the most a stream renders before writing: a client that reads slower than tokens
// come gets them in batches of this size, each written (and waited for) before the next is rendered.
const streamBatch = 32 << 10

// streamRoom is what a stream's buffer is sized for before its first chunk.
const streamRoom = 4 << 10

// streamed is a streamed response on its way: its choices' ready channel and its response (held by
// value: an unstreamed request's stays on the stack).
type streamed struct {
	ready <-chan struct{}
	rs    response
}

// endsFirst waits, as write would before its first write, for the response's first output, and reports
// whether every choice had ended by then with output that fits one batch rendered (its whole stream is
// ready, and small: at a high speedup, a short one usually is). A chat stream writes its roles before
// any output: never. The output stays for write.
func (st *streamed) endsFirst(ctx context.Context) bool {
	if st.rs.chat {
		return false
	}
	select {
	case <-st.ready: // follow reads every choice before it waits: the signal is not needed again
	case <-ctx.Done():
		return false
	}
	toks := 0
	for _, c := range st.rs.choices {
		done, n := c.st.ended()
		if !done {
			return false
		}
		toks += n
	}
	return st.rs.streamBytes(toks) <= streamBatch
}

// write writes the response's events to out, as its choices' output comes; ctx ends when its client
// goes away.
func (st *streamed) write(out chunkWriter, ctx context.Context) {
	s, ready, rs := st.rs.s, st.ready, &st.rs
	b := make([]byte, 0, streamRoom) // a short stream's chunks, written together, fit
	if rs.chat {                     // each choice's role comes first, as vLLM sends it
		for _, c := range rs.choices {
			b = rs.roleChunk(b, c)
		}
		if err := out.write(b); err != nil {
			s.cancelAll(rs.choices)
			return
		}
	}
	var lps logprobs
	var text []byte
	left := len(rs.choices)
	err := s.follow(ctx, ready, rs.choices, func(c *choice, toks []uint32, ends []int) error {
		// One chunk per pass, as vLLM streams one per engine step; the last carries finish_reason.
		b = b[:0]
		from := 0
		for i, end := range ends {
			lps.reset()
			text = text[:0]
			if !c.started && rs.p.echo {
				text = append(text, rs.prompts[c.prompt].text...)
				rs.echoLogprobs(c, &lps)
			}
			c.started = true
			text = rs.appendOutput(text, c, toks[from:end], &lps)
			b = rs.chunk(b, c, text, &lps, c.done && i == len(ends)-1)
			from = end
			if len(b) >= streamBatch { // a backlog: written in batches, not rendered whole
				if err := out.write(b); err != nil {
					return writeFailed{err}
				}
				b = b[:0]
			}
		}
		if c.done && len(ends) == 0 { // finished with no new token
			b = rs.chunk(b, c, nil, nil, true)
		}
		if c.done {
			if left--; left == 0 {
				return nil // the last chunks go out with the end of the stream, in one write
			}
		}
		if len(b) == 0 {
			return nil
		}
		if err := out.write(b); err != nil {
			return writeFailed{err}
		}
		return nil
	})
	_, failed := err.(writeFailed) // follow returns f's error as it is
	switch {
	case err == errGone || failed:
		return
	case err != nil:
		b = appendError(append(b[:0], "data: "...), submitError(err))
		out.write(append(b, "\n\ndata: [DONE]\n\n"...))
		return
	}
	if rs.p.usage {
		b = rs.usageChunk(b)
	}
	out.write(append(b, "data: [DONE]\n\n"...))
}
