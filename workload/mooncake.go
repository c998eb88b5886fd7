package workload

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/tokens"
)

// Mooncake JSONL: one JSON object per line, blank lines skipped. Every
// field has the canonical name the reference writes and, for some, an alias
// it also reads; a line may give a field under one name only.
type mooncakeField uint8

const (
	fTimestamp mooncakeField = iota // ms, the arrival of a standalone request or a session's first turn
	fInput                          // prompt tokens
	fOutput                         // tokens to generate
	fHashIDs                        // prefix-block ids, TraceBlockSize tokens each
	fSession                        // rows sharing it are the turns of one session
	fDelay                          // ms to wait after the previous turn completes
	fOutputIDs                      // planned output tokens
	fRequestID                      // informational
	fPriority                       // informational
	fText                           // AIPerf: the prompt as text, tokenised
	fMessages                       // AIPerf: the prompt as a chat, rendered and tokenised
	fTools                          // AIPerf: tool definitions, accepted and not rendered (as serve)
	fWaitFor                        // agentic: request_ids this request waits on
	fToolWait                       // agentic: ms of tool time after those end
	fParent                         // Bailian: the chat_id of the previous turn, -1 for a first
	fLoRA                           // the LoRA adapter that serves the request
	fImages                         // multimodal: the prompt's images (see images.go)
	numMooncakeFields
)

// mooncakeKeys lists every accepted key with its field.
var mooncakeKeys = [...]struct {
	name  string
	field mooncakeField
}{
	{"timestamp", fTimestamp}, {"created_time", fTimestamp},
	{"input_length", fInput}, {"input_tokens", fInput},
	{"output_length", fOutput}, {"output_tokens", fOutput},
	{"hash_ids", fHashIDs},
	{"session_id", fSession},
	{"delay", fDelay}, {"delay_ms", fDelay},
	{"output_token_ids", fOutputIDs},
	{"request_id", fRequestID}, {"chat_id", fRequestID},
	{"priority", fPriority},
	{"text_input", fText}, {"input_text", fText},
	{"messages", fMessages},
	{"tools", fTools},
	{"wait_for", fWaitFor},
	{"tool_wait_ms", fToolWait},
	{"parent_chat_id", fParent},
	{"lora", fLoRA}, {"lora_name", fLoRA},
	{"images", fImages},
}

// ignoredKeys are fields of peers' traces that mean nothing to the
// simulation, read without a warning: Dynamo's scheduling hints (the
// simulated schedulers have no priorities), and its agentic rows' branches
// (the inverse of wait_for) and prefix_reset (hash_ids say what is shared).
var ignoredKeys = [...]string{"strict_priority", "policy_class", "branches", "prefix_reset"}

// lookupMooncakeKey returns the static name and the field of key. A scan
// of a dozen short strings is as fast as a map and returns a name that does
// not keep the line alive.
func lookupMooncakeKey(key []byte) (string, mooncakeField, bool) {
	for _, k := range mooncakeKeys {
		if k.name == string(key) {
			return k.name, k.field, true
		}
	}
	return "", 0, false
}

// canonical names, for errors about a missing field.
var mooncakeCanonical = [numMooncakeFields]string{
	"timestamp", "input_length", "output_length", "hash_ids", "session_id",
	"delay", "output_token_ids", "request_id", "priority",
	"text_input", "messages", "tools", "wait_for", "tool_wait_ms", "parent_chat_id", "lora",
	"images",
}

// MaxLoRAName bounds the length of an adapter's name.
const MaxLoRAName = 256

// MaxTokens bounds every token count a workload may ask for (prompt or
// output, trace or synthetic): 16 Mi tokens, beyond the longest context
// window of any served model (10 M), so that a request is refused before its
// tokens are made, not after gigabytes of them.
const MaxTokens = 1 << 24

// mooncakeRow is one parsed line. name[f] is the key field f was given
// under ("" if absent); has[f] is whether it had a non-null value.
type mooncakeRow struct {
	name [numMooncakeFields]string
	has  [numMooncakeFields]bool

	timestamp, delay time.Duration
	input, output    int
	hashOff, hashN   int // the row's hash ids in the loader's arena
	blockSize        int // tokens per hash id
	outputIDs        []uint32
	session, id      string
	priority         int
	text             string             // text_input, or messages rendered as serve renders a chat
	waitFor          []string           // request_ids
	toolWait         time.Duration      // tool_wait_ms
	unknown          []string           // keys neither read nor ignored
	parent           string             // parent_chat_id
	lora             string             // lora
	images           []tokens.Item      // images
	chat             []tokenize.Message // messages with image_url parts: their roles
	pieces           [][]string         // and their text cut at the images
	urls             []string           // the images' URLs
}

// rowTimes is what the session pass needs of a row beyond its Request.
type rowTimes struct {
	timestamp, delay    time.Duration
	toolWait            time.Duration
	hasTime, hasDelay   bool
	timeName, delayName string
	hashOff, hashN      int
	session             string
	hasSession          bool
	waitFor             []uint64 // Keys of the rows named by wait_for
}

// readMooncake loads a Mooncake JSONL trace: it parses every row, then
// groups rows into sessions, derives delays, normalises times and sorts.
//
// A Bailian trace (Alibaba's Qwen usage traces, as AIPerf replays them) is
// the same with timestamps in seconds, and turns chained by parent_chat_id:
// a row whose parent is -1 starts a session, any other continues its
// parent's.
func readMooncake(lr *lineReader, name string, blockSize int, opts TraceOptions, bailian bool) (*sessionList, error) {
	var (
		reqs    []Request
		times   []rowTimes
		arena   []uint32 // every row's hash ids, back to back
		row     mooncakeRow
		p       fastjson.Parser       // reused across lines: it keeps its buffers
		idKey   = map[string]int{}    // request_id → its row's Key
		ignored = map[string]int{}    // field left unread → its first line
		chatOf  = map[string]string{} // Bailian: chat_id → its session
	)
	tk := opts.Tokenizer
	if tk == nil {
		tk = tokenize.Builtin()
	}
	use := opts.Use
	if use == nil {
		use = new(TraceUse)
	}
	for {
		line, err := lr.record(name)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		row = mooncakeRow{hashOff: len(arena), blockSize: blockSize}
		fail := func(field string, err error) error {
			return &TraceError{Path: name, Line: lr.line, Field: field, Err: err}
		}
		if field, err := row.parse(&p, line, &arena); err != nil {
			return nil, fail(field, err)
		}
		if field, err := row.bailian(bailian, chatOf); err != nil {
			return nil, fail(field, err)
		}
		req, field, err := row.request(blockSize, opts.OutputLen != nil)
		if err != nil {
			return nil, fail(field, err)
		}
		use.BlockSize = use.BlockSize || row.hashN > 0 // 0 for a text row, whose hash ids request ignores
		if row.has[fRequestID] {
			if first, ok := idKey[row.id]; ok {
				return nil, fail(row.name[fRequestID], fmt.Errorf("%q is also the id of line %d", row.id, reqs[first].Line))
			}
			idKey[row.id] = len(reqs)
		}
		var waitFor []uint64
		for _, id := range row.waitFor {
			k, ok := idKey[id]
			if !ok || k == len(reqs) {
				return nil, fail(row.name[fWaitFor], fmt.Errorf("%q is the request_id of no earlier row", id))
			}
			waitFor = append(waitFor, uint64(k))
		}
		slices.Sort(waitFor)
		waitFor = slices.Compact(waitFor)
		req.Key = uint64(len(reqs))
		req.Line = lr.line
		if text := row.has[fText] || row.has[fMessages]; text {
			field := row.name[fText] + row.name[fMessages] // one of them
			use.Tokenizer = true
			if len(row.urls) > 0 {
				if row.has[fImages] {
					return nil, fail(row.name[fImages], errors.New("conflicts with the image_url parts of messages (give one)"))
				}
				use.ImageTokens = true
				size := opts.ImageTokens
				if size <= 0 {
					size = DefaultImageTokens
				}
				var starts []int
				req.prompt, starts = tokenize.EncodeChatImages(tk, row.chat, row.pieces, size)
				for k, u := range row.urls {
					row.images = append(row.images, tokens.Item{Key: ImageKey(u), Start: starts[k], Len: size})
				}
			} else {
				req.prompt = tk.Encode(row.text)
			}
			req.InputLen = len(req.prompt)
			switch {
			case req.InputLen == 0:
				return nil, fail(field, fmt.Errorf("encodes to no tokens (%s)", tk.Name()))
			case req.InputLen > MaxTokens:
				return nil, fail(field, fmt.Errorf("encodes to %d tokens, more than %d", req.InputLen, MaxTokens))
			}
			for _, f := range [...]mooncakeField{fInput, fHashIDs} {
				if k := row.name[f]; k != "" {
					row.unknown = append(row.unknown, k+" (beside "+field+")")
				}
			}
		}
		if err := checkImages(row.images, req.InputLen); err != nil {
			sub := err.(*subFieldError)
			return nil, fail(row.name[fImages]+sub.sub, sub.err)
		}
		req.Images = row.images
		if !row.has[fOutput] && !row.has[fOutputIDs] {
			use.OutputLen = true
			if req.OutputLen = opts.OutputLen(req.Key); req.OutputLen < 0 || req.OutputLen > MaxTokens {
				return nil, fail(mooncakeCanonical[fOutput], fmt.Errorf("drawn output length %d is not in [0, %d]", req.OutputLen, MaxTokens))
			}
		}
		for _, k := range row.unknown {
			if _, ok := ignored[k]; !ok {
				ignored[k] = lr.line
			}
		}
		reqs = append(reqs, req)
		times = append(times, rowTimes{
			timestamp: row.timestamp, hasTime: row.has[fTimestamp], timeName: row.name[fTimestamp],
			delay: row.delay, hasDelay: row.has[fDelay], delayName: row.name[fDelay],
			toolWait: row.toolWait, waitFor: waitFor,
			hashOff: row.hashOff, hashN: row.hashN,
			session: row.session, hasSession: row.has[fSession],
		})
	}
	if len(ignored) > 0 && opts.Warn != nil {
		opts.Warn(ignoredWarning(name, ignored))
	}
	return buildSessions(name, reqs, times, arena)
}

// ignoredWarning is the one warning about the fields a trace gives that
// the replay does not read, each with the first line that has it.
func ignoredWarning(name string, ignored map[string]int) string {
	keys := slices.Collect(maps.Keys(ignored))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(ignored[a], ignored[b]), strings.Compare(a, b))
	})
	const most = 20 // a file of random keys makes a warning, not a page of them
	more := ""
	if len(keys) > most {
		more = fmt.Sprintf(" and %d more", len(keys)-most)
		keys = keys[:most]
	}
	for i, k := range keys {
		keys[i] = fmt.Sprintf("%s (line %d)", k, ignored[k])
	}
	return fmt.Sprintf("trace %s: ignoring fields the replay does not read: %s%s", name, strings.Join(keys, ", "), more)
}

// parse reads one line into r, appending its hash ids to arena. An error
// comes with the key it is about, if any.
func (r *mooncakeRow) parse(p *fastjson.Parser, line []byte, arena *[]uint32) (string, error) {
	// Parse bounds the nesting but is lenient (NaN, leading zeros, unknown
	// escapes); Validate is strict but recursive without bound, so it runs
	// second.
	root, err := p.ParseBytes(line)
	if err == nil {
		err = fastjson.ValidateBytes(line)
	}
	if err != nil {
		return syntaxError(line)
	}
	obj, err := root.Object()
	if err != nil {
		return "", fmt.Errorf("want a JSON object, got %s", root.Type())
	}
	var key string
	// Visit sees every member in order, including each of a repeated key.
	obj.Visit(func(k []byte, v *fastjson.Value) {
		name, f, ok := lookupMooncakeKey(k)
		switch {
		case err != nil: // Visit cannot stop; the first error stands
		case ok:
			key, err = name, r.field(f, name, v, arena)
			if sub, is := err.(*subFieldError); is {
				key, err = name+sub.sub, sub.err
			}
		case !slices.Contains(ignoredKeys[:], string(k)):
			r.unknown = append(r.unknown, string(k))
		}
	})
	return key, err
}

// syntaxError explains why fastjson rejected line. Its errors say neither
// where nor in which member, so encoding/json, whose errors do, reads the
// line again: whole for the column, then member by member for the field.
func syntaxError(line []byte) (string, error) {
	var se *json.SyntaxError
	if !errors.As(json.Unmarshal(line, new(json.RawMessage)), &se) {
		// Valid JSON that fastjson rejects is nested beyond its limit (and
		// its error then repeats itself at every level).
		return "", fmt.Errorf("invalid JSON: nested deeper than %d levels", fastjson.MaxDepth)
	}
	err := fmt.Errorf("invalid JSON at column %d: %w", se.Offset, se)
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return "", fmt.Errorf("want a JSON object: %w", err)
	}
	for dec.More() {
		tok, _ := dec.Token()
		key, ok := tok.(string)
		if !ok {
			break // the error is between members
		}
		if dec.Decode(new(json.RawMessage)) != nil {
			return key, err
		}
		// encoding/json ends a number at the first byte that cannot go on
		// with it, but to a reader "4x" is a malformed value all the same.
		if rest := line[dec.InputOffset():]; len(rest) > 0 && !bytes.ContainsAny(rest[:1], " \t\r\n,}") {
			return key, err
		}
	}
	return "", err
}

// field reads v, the value of field f given under key (a static name).
func (r *mooncakeRow) field(f mooncakeField, key string, v *fastjson.Value, arena *[]uint32) error {
	switch prev := r.name[f]; {
	case prev == key:
		return errors.New("given twice")
	case prev != "":
		return fmt.Errorf("conflicts with %s (the same field under another name; give one)", prev)
	}
	r.name[f] = key
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	r.has[f] = true
	var err error
	switch f {
	case fTimestamp:
		r.timestamp, err = millis(v)
	case fDelay:
		r.delay, err = millis(v)
	case fInput:
		r.input, err = length(v)
	case fOutput:
		r.output, err = length(v)
	case fPriority:
		var mag uint64
		var neg bool
		if mag, neg, err = integer(v); err == nil && mag > math.MaxInt32 {
			return fmt.Errorf("%s is out of range", v)
		}
		r.priority = int(mag)
		if neg {
			r.priority = -r.priority
		}
	case fSession:
		r.session, err = stringOrInt(v)
	case fRequestID:
		r.id, err = stringOrInt(v)
	case fHashIDs:
		if a, _ := v.Array(); len(a) > maxHashIDs(r.blockSize) {
			return fmt.Errorf("%d ids of %d tokens are more than %d tokens (the most a request may have)", len(a), r.blockSize, MaxTokens)
		}
		err = eachUint(v, math.MaxUint64, func(id uint64) {
			// The token of a block is the low 32 bits of its id, as in the
			// reference; only that is kept.
			*arena = append(*arena, uint32(id))
			r.hashN++
		})
	case fOutputIDs:
		r.outputIDs = []uint32{}
		err = eachUint(v, math.MaxUint32, func(id uint64) { r.outputIDs = append(r.outputIDs, uint32(id)) })
	case fText:
		var b []byte
		if b, err = v.StringBytes(); err != nil {
			return fmt.Errorf("want a string, got %s", v.Type())
		}
		r.text = string(b)
	case fMessages:
		r.text, r.chat, r.pieces, r.urls, err = renderChat(v)
	case fWaitFor:
		a, aerr := v.Array()
		if aerr != nil {
			return fmt.Errorf("want an array of request_ids, got %s", v.Type())
		}
		for i, e := range a {
			id, err := stringOrInt(e)
			if err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
			r.waitFor = append(r.waitFor, id)
		}
	case fToolWait:
		r.toolWait, err = millis(v)
	case fLoRA:
		b, err := v.StringBytes()
		switch {
		case err != nil:
			return fmt.Errorf("want a string (an adapter's name), got %s", v.Type())
		case len(b) > MaxLoRAName:
			return fmt.Errorf("%d bytes: an adapter's name is at most %d", len(b), MaxLoRAName)
		}
		r.lora = string(b)
	case fParent:
		r.parent, err = stringOrInt(v)
	case fImages:
		r.images, err = readImages(v)
	}
	return err
}

// bailian reads a Bailian row's seconds and session, recording its chat_id
// in chatOf; a parent_chat_id in another format is an error.
func (r *mooncakeRow) bailian(on bool, chatOf map[string]string) (string, error) {
	switch {
	case !on && r.name[fParent] != "":
		return r.name[fParent], errors.New("a Bailian field: give --trace-format bailian (whose timestamps are in seconds)")
	case !on:
		return "", nil
	case r.has[fSession]:
		return r.name[fSession], errors.New("a Bailian trace chains its turns by parent_chat_id")
	case !r.has[fRequestID]:
		return "chat_id", errors.New("missing")
	}
	if r.timestamp > math.MaxInt64/1000 {
		return r.name[fTimestamp], fmt.Errorf("%v s is out of range", r.timestamp.Milliseconds())
	}
	// Its request type and turn number say nothing the replay uses.
	r.unknown = slices.DeleteFunc(r.unknown, func(k string) bool { return k == "type" || k == "turn" })
	r.timestamp *= 1000 // read as ms, given in s
	r.session, r.has[fSession] = r.id, true
	if r.has[fParent] && r.parent != "-1" {
		s, ok := chatOf[r.parent]
		if !ok {
			return r.name[fParent], fmt.Errorf("%q is the chat_id of no earlier row", r.parent)
		}
		r.session = s
	}
	chatOf[r.id] = r.session
	return "", nil
}

// renderChat renders an OpenAI messages array as serve renders a chat request:
// each message's role and text content (a string, text parts, or null for
// an assistant message of tool calls) through tokenize.ChatPrompt. Other
// members of a message (tool_calls, name) are not rendered, as in serve.
// A chat with image_url parts comes back as its messages, their text cut at
// the images, and the images' URLs, for tokenize.EncodeChatImages.
func renderChat(v *fastjson.Value) (text string, msgs []tokenize.Message, pieces [][]string, urls []string, err error) {
	a, err := v.Array()
	if err != nil {
		return "", nil, nil, nil, fmt.Errorf("want an array of messages, got %s", v.Type())
	}
	if len(a) == 0 {
		return "", nil, nil, nil, errors.New("must hold at least one message")
	}
	msgs = make([]tokenize.Message, len(a))
	pieces = make([][]string, len(a))
	for i, m := range a {
		if m.Type() != fastjson.TypeObject {
			return "", nil, nil, nil, fmt.Errorf("[%d]: want an object, got %s", i, m.Type())
		}
		role := m.GetStringBytes("role")
		if len(role) == 0 {
			return "", nil, nil, nil, fmt.Errorf("[%d]: role: missing (want a string)", i)
		}
		msgs[i].Role = string(role)
		switch c := m.Get("content"); {
		case c == nil || c.Type() == fastjson.TypeNull:
		case c.Type() == fastjson.TypeString:
			msgs[i].Content = string(c.GetStringBytes())
		case c.Type() == fastjson.TypeArray:
			var b strings.Builder
			for j, part := range c.GetArray() {
				switch text, url := part.Get("text"), part.Get("image_url", "url"); string(part.GetStringBytes("type")) {
				case "text":
					if text == nil || text.Type() != fastjson.TypeString {
						return "", nil, nil, nil, fmt.Errorf("[%d]: content[%d]: text: want a string", i, j)
					}
					b.Write(text.GetStringBytes())
				case "image_url":
					if url == nil || url.Type() != fastjson.TypeString || len(url.GetStringBytes()) == 0 {
						return "", nil, nil, nil, fmt.Errorf("[%d]: content[%d]: image_url: want {\"url\": a string}", i, j)
					}
					urls = append(urls, string(url.GetStringBytes()))
					pieces[i] = append(pieces[i], b.String())
					b.Reset()
				default:
					return "", nil, nil, nil, fmt.Errorf("[%d]: content[%d]: only text and image_url parts are supported", i, j)
				}
			}
			msgs[i].Content = b.String()
		default:
			return "", nil, nil, nil, fmt.Errorf("[%d]: content: want a string or a list of text and image_url parts, got %s", i, c.Type())
		}
		pieces[i] = append(pieces[i], msgs[i].Content)
	}
	if len(urls) > 0 {
		return "", msgs, pieces, urls, nil
	}
	return tokenize.ChatPrompt(msgs), nil, nil, nil, nil
}

// maxHashIDs is the most hash ids a row may have at blockSize tokens each.
func maxHashIDs(blockSize int) int { return (MaxTokens + blockSize - 1) / blockSize }

// eachUint calls add with each element of the array v, an integer in
// [0, limit].
func eachUint(v *fastjson.Value, limit uint64, add func(uint64)) error {
	a, err := v.Array()
	if err != nil {
		return fmt.Errorf("want an array, got %s", v.Type())
	}
	for _, e := range a {
		u, neg, err := integer(e)
		switch {
		case err != nil:
			return err
		case neg:
			return fmt.Errorf("must be >= 0, got %s", e)
		case u > limit:
			return fmt.Errorf("must be <= %d, got %s", limit, e)
		}
		add(u)
	}
	return nil
}

// integer reads a whole number as its magnitude and sign. Integers are
// exact over the full uint64 range, which hash ids use; whole numbers
// written with a fraction or exponent (6758.0, 1e3) are accepted too.
func integer(v *fastjson.Value) (mag uint64, neg bool, err error) {
	if u, err := v.Uint64(); err == nil {
		return u, false, nil
	}
	if i, err := v.Int64(); err == nil {
		return uint64(-i), i < 0, nil // -math.MinInt64 wraps to 1<<63, its magnitude
	}
	f, err := float(v)
	switch {
	case err != nil:
		return 0, false, err
	case math.Abs(f) >= 1<<63:
		return 0, false, fmt.Errorf("%s is out of range", v)
	case f != math.Trunc(f):
		return 0, false, fmt.Errorf("must be an integer, got %s", v)
	}
	return uint64(math.Abs(f)), f < 0, nil
}

// float reads a number through strconv, which rounds correctly: fastjson's
// Float64 can miss by an ulp, and 0.07e2 would not be the whole number 7.
func float(v *fastjson.Value) (float64, error) {
	if t := v.Type(); t != fastjson.TypeNumber {
		return 0, fmt.Errorf("want a number, got %s", t)
	}
	f, _ := strconv.ParseFloat(v.String(), 64) // valid JSON: at worst out of range, ±Inf
	return f, nil
}

// millis reads a non-negative count of milliseconds. Integers convert
// exactly; fractions round to the nanosecond.
func millis(v *fastjson.Value) (time.Duration, error) {
	const maxMillis = math.MaxInt64 / 1_000_000
	if ms, err := v.Uint64(); err == nil {
		if ms > maxMillis {
			return 0, fmt.Errorf("%s ms is out of range", v)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	f, err := float(v)
	switch {
	case err != nil:
		return 0, err
	case f >= maxMillis:
		return 0, fmt.Errorf("%s ms is out of range", v)
	case f < 0:
		return 0, fmt.Errorf("must be >= 0, got %s", v)
	}
	return time.Duration(math.Round(f * 1e6)), nil
}

// length reads a token count; the caller checks its lower bound, so that
// the message can say what the bound is.
func length(v *fastjson.Value) (int, error) {
	u, neg, err := integer(v)
	switch {
	case err != nil:
		return 0, err
	case u > MaxTokens:
		return 0, fmt.Errorf("must be <= %d, got %s", MaxTokens, v)
	case neg:
		return -int(u), nil
	}
	return int(u), nil
}

// stringOrInt reads an id given as a string or an integer; 7 and "7" are the
// same id.
func stringOrInt(v *fastjson.Value) (string, error) {
	switch t := v.Type(); t {
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return string(b), nil
	case fastjson.TypeNumber:
		if _, _, err := integer(v); err != nil {
			return "", errors.New("must be a string or an integer")
		}
		return v.String(), nil
	default:
		return "", fmt.Errorf("want a string or an integer, got %s", t)
	}
}

// request checks the row's values against each other and makes its Request
// (without Key, Line, Turn and times, which the caller and the session pass
// fill in).
// A row with text (text_input or messages) gets its prompt from the
// tokenizer later; its input_length and hash_ids, if any, are ignored (as
// AIPerf does), which the caller reports. A row without an output length
// is an error unless draw says the caller draws one.
func (r *mooncakeRow) request(blockSize int, draw bool) (Request, string, error) {
	req := Request{
		ID:             r.id,
		OutputTokenIDs: r.outputIDs,
		Priority:       r.priority,
		LoRA:           r.lora,
		blockSize:      int32(blockSize), // at most MaxTokens (ReadTrace)
	}
	switch {
	case r.has[fText] && r.has[fMessages]:
		return req, r.name[fMessages], fmt.Errorf("conflicts with %s (give one prompt)", r.name[fText])
	case r.has[fText] || r.has[fMessages]:
		r.hashN = 0
	case r.has[fInput]:
		if r.input < 1 {
			return req, r.name[fInput], fmt.Errorf("must be >= 1, got %d", r.input)
		}
		req.InputLen = r.input
		if r.hashN > 0 {
			// Each id stands for a whole block but the last, which may be
			// partial (the public traces: ceil(input_length / 512) ids)
			// or left out.
			lo, hi := r.input/blockSize, (r.input+blockSize-1)/blockSize
			if r.hashN < lo || r.hashN > hi {
				want := fmt.Sprint(hi)
				if lo != hi {
					want = fmt.Sprintf("%d or %d", lo, hi)
				}
				return req, "hash_ids", fmt.Errorf("%d ids do not cover %s %d at %d tokens per id (want %s; is --trace-block-size right?)",
					r.hashN, r.name[fInput], r.input, blockSize, want)
			}
		}
	case r.hashN > 0:
		if r.hashN > MaxTokens/blockSize {
			return req, "hash_ids", fmt.Errorf("%d blocks of %d tokens is too long a prompt", r.hashN, blockSize)
		}
		req.InputLen = r.hashN * blockSize
	default:
		return req, mooncakeCanonical[fInput], errors.New("missing (give input_length, hash_ids, text_input or messages)")
	}
	switch {
	case r.has[fOutput] && r.has[fOutputIDs] && r.output != len(r.outputIDs):
		return req, r.name[fOutput], fmt.Errorf("%d disagrees with the %d output_token_ids", r.output, len(r.outputIDs))
	case r.has[fOutput] && r.output < 0:
		return req, r.name[fOutput], fmt.Errorf("must be >= 0, got %d", r.output)
	case r.has[fOutput]:
		req.OutputLen = r.output
	case r.has[fOutputIDs]:
		req.OutputLen = len(r.outputIDs)
	case !draw:
		return req, mooncakeCanonical[fOutput], errors.New("missing (give output_length or output_token_ids)")
	}
	return req, "", nil
}

// buildSessions groups rows into sessions (rows sharing session_id, in file
// order), checks that sessions start in time order, derives each later
// turn's Delay and normalises times so that the earliest arrival is 0.
func buildSessions(name string, reqs []Request, times []rowTimes, arena []uint32) (*sessionList, error) {
	if cap(arena) > len(arena)+len(arena)/4 {
		arena = slices.Clone(arena) // drop the slack of appending; the trace keeps it
	}
	// Number the sessions in order of their first row and count turns.
	var (
		sessionOf = make([]int, len(reqs))
		turnCount []int
		byID      = map[string]int{}
		last      = -1 // the row of the latest session start with a timestamp
	)
	for i, t := range times {
		s, ok := byID[t.session]
		if !t.hasSession || !ok {
			// The published traces are sorted by arrival, so a session
			// that starts before the one above it is a damaged file.
			if t.hasTime {
				if last >= 0 && t.timestamp < times[last].timestamp {
					return nil, &TraceError{Path: name, Line: reqs[i].Line, Field: t.timeName,
						Err: fmt.Errorf("%v is before %v on line %d (sessions must start in time order)",
							t.timestamp, times[last].timestamp, reqs[last].Line)}
				}
				last = i
			}
			s = len(turnCount)
			turnCount = append(turnCount, 0)
			if t.hasSession {
				byID[t.session] = s
			}
		}
		sessionOf[i] = s
		turnCount[s]++
	}

	// Lay the turns of each session out contiguously in one slice.
	start := make([]int, len(turnCount)+1)
	for s, n := range turnCount {
		start[s+1] = start[s] + n
	}
	turns := make([]Request, len(reqs))
	rowOf := make([]int, len(reqs))  // turn slot → row
	slotOf := make([]int, len(reqs)) // row (Key) → turn slot
	fill := slices.Clone(start[:len(turnCount)])
	for i := range reqs {
		s := sessionOf[i]
		k := fill[s]
		fill[s]++
		turns[k] = reqs[i]
		turns[k].Turn = k - start[s]
		if t := times[i]; t.hashN > 0 {
			turns[k].hashes = arena[t.hashOff : t.hashOff+t.hashN : t.hashOff+t.hashN]
		}
		rowOf[k] = i
		slotOf[i] = k
	}

	// Check times and derive delays; find the earliest arrival.
	origin := time.Duration(math.MaxInt64)
	for s := range turnCount {
		for k := start[s]; k < start[s+1]; k++ {
			t, req := times[rowOf[k]], &turns[k]
			fail := func(field string, err error) error {
				return &TraceError{Path: name, Line: req.Line, Field: field, Err: err}
			}
			for _, w := range t.waitFor {
				if req.Turn > 0 && w == turns[k-1].Key {
					continue // the session's order waits on it already
				}
				req.After = append(req.After, w)
				turns[slotOf[w]].Awaited = true
			}
			if req.Turn == 0 {
				switch {
				case req.After != nil:
					// It arrives when what it waits on has ended, after its delay and tool time.
					req.Delay = t.delay + t.toolWait
				case t.hasTime:
					origin = min(origin, t.timestamp)
				case last >= 0:
					return nil, fail(mooncakeCanonical[fTimestamp], fmt.Errorf("missing, and the first turn on line %d has one (give every session's first turn one, or none)", reqs[last].Line))
				}
				continue
			}
			prev := times[rowOf[k-1]]
			switch {
			case t.hasDelay:
				req.Delay = t.delay
			case t.waitFor != nil || !t.hasTime && t.toolWait > 0:
				// An agentic turn without a delay: its wait is its tool time alone.
			case !t.hasTime:
				return nil, fail(mooncakeCanonical[fDelay], errors.New("missing, and no timestamp to derive it from"))
			case !prev.hasTime:
				return nil, fail(mooncakeCanonical[fDelay], fmt.Errorf("missing, and the previous turn (line %d) has no timestamp to derive it from", turns[k-1].Line))
			case t.timestamp < prev.timestamp:
				return nil, fail(t.timeName, fmt.Errorf("%v is before the previous turn's %v (line %d) and there is no delay",
					t.timestamp, prev.timestamp, turns[k-1].Line))
			default:
				req.Delay = t.timestamp - prev.timestamp
			}
			req.Delay += t.toolWait
		}
	}
	if last < 0 {
		origin = 0 // no timestamps: every session starts at 0, plus its delay
	}

	// Normalise: the earliest arrival is 0. A later turn without a
	// timestamp gets the earliest time it could arrive.
	sessions := make([]Session, len(turnCount))
	delayed := false
	for s := range turnCount {
		for k := start[s]; k < start[s+1]; k++ {
			t, req := times[rowOf[k]], &turns[k]
			switch {
			case req.Turn == 0 && req.After != nil:
				req.At = 0 // sorted first: the replay holds it until what it waits on ends
				delayed = true
			case req.Turn == 0:
				// A first turn's delay (AIPerf allows one) defers its arrival.
				req.At = t.delay
				if t.hasTime {
					req.At += t.timestamp - origin
				}
				delayed = delayed || t.delay > 0
			case t.hasTime:
				req.At = t.timestamp - origin
			default:
				req.At = turns[k-1].At + req.Delay
			}
		}
		sessions[s] = Session{Turns: turns[start[s]:start[s+1]:start[s+1]]}
	}
	if delayed {
		slices.SortStableFunc(sessions, func(a, b Session) int { return cmp.Compare(a.Turns[0].At, b.Turns[0].At) })
	}
	return &sessionList{sessions: sessions, requests: len(reqs)}, nil
}
