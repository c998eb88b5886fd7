package live

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// fastCompletion decodes the common shape of a completion request without reflection: an object of
// the usual fields with plain values. It decodes a subset of what json.Unmarshal accepts, into exactly
// what json.Unmarshal would make of it, and reports false for anything else (a null, an escaped or
// non-ASCII string or key, a key that differs from its field's name only in case, stream_options,
// stop_token_ids, malformed JSON), which json.Unmarshal then decodes, or explains.
func fastCompletion(body []byte, req *completionRequest) bool {
	d := scanner{b: body}
	if !d.byte('{') {
		return false
	}
	if !d.byte('}') {
		for {
			key, ok := d.key()
			if !ok || !d.byte(':') || !d.field(req, key) {
				return false
			}
			if d.byte(',') {
				continue
			}
			if !d.byte('}') {
				return false
			}
			break
		}
	}
	d.space()
	return d.i == len(d.b)
}

// completionFields are the JSON names of completionRequest's fields, which json.Unmarshal matches
// case-insensitively: a key that is one of them in other case is left to it.
var completionFields = jsonNames(reflect.TypeFor[completionRequest](), map[string]bool{})

// jsonNames adds the JSON names of struct t's fields, embedded structs' included, to names.
func jsonNames(t reflect.Type, names map[string]bool) map[string]bool {
	for f := range t.Fields() {
		if f.Anonymous {
			jsonNames(f.Type, names)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names[name] = true
	}
	return names
}

type scanner struct {
	b []byte
	i int
}

func (d *scanner) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// byte consumes c, after white space, if it comes next.
func (d *scanner) byte(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// plain reads a string of printable ASCII without escapes, after white space.
func (d *scanner) plain() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	for ; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// key reads an object key, which must be lower case ASCII (as every field's name is) so that
// json.Unmarshal's case folding cannot match it to a field differently.
func (d *scanner) key() ([]byte, bool) {
	k, ok := d.plain()
	for _, c := range k {
		if 'A' <= c && c <= 'Z' {
			return nil, false
		}
	}
	return k, ok
}

// field decodes the value of key into req; unknown keys' values are skipped, as json.Unmarshal does.
func (d *scanner) field(req *completionRequest, key []byte) bool {
	switch string(key) {
	case "model":
		b, ok := d.plain()
		s := string(b)
		req.Model = &s
		return ok
	case "prompt":
		req.Prompt, _ = d.raw()
		return req.Prompt != nil
	case "stop":
		req.Stop, _ = d.raw()
		return req.Stop != nil
	case "max_tokens":
		return d.intPtr(&req.MaxTokens)
	case "n":
		return d.intPtr(&req.N)
	case "min_tokens":
		return d.intPtr(&req.MinTokens)
	case "logprobs":
		return d.intPtr(&req.Logprobs)
	case "seed":
		n, ok := d.int()
		req.Seed = &n
		return ok
	case "stream":
		return d.bool(&req.Stream)
	case "ignore_eos":
		return d.bool(&req.IgnoreEOS)
	case "include_stop_str_in_output":
		return d.bool(&req.IncludeStopStrInOutput)
	case "echo":
		return d.bool(&req.Echo)
	}
	if completionFields[string(key)] { // a field this decoder leaves to json.Unmarshal
		return false
	}
	_, ok := d.raw()
	return ok
}

func (d *scanner) bool(v *bool) bool {
	d.space()
	switch {
	case d.literal("true"):
		*v = true
	case d.literal("false"):
		*v = false
	default:
		return false
	}
	return d.delimited()
}

// literal consumes lit if it comes next.
func (d *scanner) literal(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// delimited reports whether a literal or number ends where the scanner is (json.Unmarshal rejects
// "truex" and "12a").
func (d *scanner) delimited() bool {
	if d.i == len(d.b) {
		return true
	}
	switch d.b[d.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// int reads an integer in JSON's grammar (no fraction or exponent, which json.Unmarshal refuses for
// an integer field) that fits an int64.
func (d *scanner) int() (int64, bool) {
	d.space()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || d.b[digits] == '0' && d.i > digits+1 || !d.delimited() {
		return 0, false
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	return n, err == nil
}

func (d *scanner) intPtr(p **int) bool {
	n, ok := d.int()
	v := int(n)
	*p = &v
	return ok && int64(v) == n
}

// maxDepth bounds the nesting the scanner follows; deeper values are left to json.Unmarshal.
const maxDepth = 32

// raw skips a value and returns its bytes; a null (to which json.Unmarshal gives meanings of its
// own) is left to json.Unmarshal unless it is inside an array or object.
func (d *scanner) raw() (json.RawMessage, bool) {
	d.space()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == 'n' || !d.value(0) {
		return nil, false
	}
	return json.RawMessage(d.b[start:d.i]), true
}

// str skips a string, escapes included (a raw value's strings are not decoded, so any bytes but
// control characters may be in them, as json.Unmarshal accepts).
func (d *scanner) str() bool {
	if !d.byte('"') {
		return false
	}
	for d.i < len(d.b) {
		c := d.b[d.i]
		d.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if d.i == len(d.b) {
				return false
			}
			e := d.b[d.i]
			d.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(d.b)-d.i < 4 {
					return false
				}
				for _, h := range d.b[d.i : d.i+4] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				d.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number skips a number in JSON's grammar.
func (d *scanner) number() bool {
	digits := func() int {
		n := 0
		for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	start := d.i
	if n := digits(); n == 0 || n > 1 && d.b[start] == '0' {
		return false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return d.delimited()
}

func (d *scanner) value(depth int) bool {
	if d.i == len(d.b) || depth > maxDepth {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		return d.str()
	case c == 't' || c == 'f':
		var b bool
		return d.bool(&b)
	case c == 'n':
		return d.literal("null") && d.delimited()
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	case c == '[':
		d.i++
		if d.byte(']') {
			return true
		}
		for {
			d.space()
			if !d.value(depth + 1) {
				return false
			}
			if d.byte(',') {
				continue
			}
			return d.byte(']')
		}
	case c == '{':
		d.i++
		if d.byte('}') {
			return true
		}
		for {
			if !d.str() || !d.byte(':') {
				return false
			}
			d.space()
			if !d.value(depth + 1) {
				return false
			}
			if d.byte(',') {
				continue
			}
			return d.byte('}')
		}
	}
	return false
}

// plainString decodes a JSON string that needs no unescaping, as most prompts are, without
// json.Unmarshal: false for any other.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}
