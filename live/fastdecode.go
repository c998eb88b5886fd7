package live

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// decodeSimple decodes a completion body of the shape nearly every client sends (an object of scalars:
// the prompt a plain string, the numbers of the fields it reads integers, no escapes in strings, no name
// twice) without reflection, at about half the v2 decoder's cost for bench/serve's body
// (BenchmarkDecode). It reports false, leaving req as it was, for any other body, which decodeBody then
// decodes (and refuses) as before: what it accepts, encoding/json decodes to the same request
// (FuzzDecodeAgrees checks it).
func decodeSimple(body []byte, req *completionRequest) bool {
	var r completionRequest
	var v *simpleValues // made for the first pointer field set
	d := simpleDecoder{b: body}
	d.space()
	if !d.byte('{') {
		return false
	}
	var seen uint32
	d.space()
	if !d.byte('}') {
		for {
			d.space()
			name, ok := d.str()
			if !ok || !d.colonSpace() {
				return false
			}
			f, known := simpleField(name)
			if known {
				if seen&(1<<f) != 0 { // a name twice: the general decoders say which wins
					return false
				}
				seen |= 1 << f
				if !d.field(&r, &v, f) {
					return false
				}
			} else if !lowerName(name) || !d.scalar() {
				// A name not all lower case may still match a field (names match without case).
				return false
			}
			d.space()
			if d.byte('}') {
				break
			}
			if !d.byte(',') {
				return false
			}
		}
	}
	d.space()
	if d.i != len(d.b) {
		return false
	}
	*req = r
	return true
}

// The fields decodeSimple reads, by their JSON names; every other field of completionRequest sends a
// body to the general decoders.
const (
	fModel = iota
	fPrompt
	fMaxTokens
	fStream
	fIgnoreEOS
	fN
	fMinTokens
	fSeed
	fIncludeStop
	fEcho
	fLogprobs
	fOther // a field decodeSimple does not read (stop, stream_options, stop_token_ids)
)

func simpleField(name []byte) (int, bool) {
	switch string(name) {
	case "model":
		return fModel, true
	case "prompt":
		return fPrompt, true
	case "max_tokens":
		return fMaxTokens, true
	case "stream":
		return fStream, true
	case "ignore_eos":
		return fIgnoreEOS, true
	case "n":
		return fN, true
	case "min_tokens":
		return fMinTokens, true
	case "seed":
		return fSeed, true
	case "include_stop_str_in_output":
		return fIncludeStop, true
	case "echo":
		return fEcho, true
	case "logprobs":
		return fLogprobs, true
	case "stop", "stop_token_ids", "stream_options":
		return fOther, true
	}
	return 0, false
}

// lowerName reports whether name is ASCII lower case, digits and underscores: such a name matches a
// field, with or without case, only if it is the field's own name.
func lowerName(name []byte) bool {
	for _, c := range name {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// simpleDecoder reads the JSON of decodeSimple's subset; every method reports false, rather than an
// error, on what it does not read.
type simpleDecoder struct {
	b []byte
	i int
}

func (d *simpleDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *simpleDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *simpleDecoder) colonSpace() bool {
	d.space()
	if !d.byte(':') {
		return false
	}
	d.space()
	return true
}

// str reads a string without escapes or control characters, in valid UTF-8: its bytes are its text.
func (d *simpleDecoder) str() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	end := bytes.IndexByte(d.b[d.i:], '"')
	if end < 0 {
		return nil, false
	}
	s := d.b[d.i : d.i+end]
	d.i += end + 1
	return s, plainText(s)
}

// plainText reports whether s, a JSON string's bytes, holds no escape and no control character and is
// valid UTF-8, eight bytes at a time (a prompt is most of a body).
func plainText(s []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ascii := true
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		// A byte below 0x20, or equal to '\\' (zero once xored with it), sets its high bit here.
		low := (x - 0x20*ones) & ^x & highs
		esc := ((x ^ '\\'*ones) - ones) & ^(x ^ '\\'*ones) & highs
		if low|esc != 0 {
			return false
		}
		ascii = ascii && x&highs == 0
	}
	for _, c := range s[i:] {
		if c < 0x20 || c == '\\' {
			return false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	return ascii || utf8.Valid(s)
}

// null reads null.
func (d *simpleDecoder) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// bool reads true or false into *v; null leaves it.
func (d *simpleDecoder) bool(v *bool) bool {
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		*v = true
		return true
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
		*v = false
		return true
	}
	return d.null()
}

// digits reads a run of decimal digits and says how many there were.
func (d *simpleDecoder) digits() int {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}

// number reads a JSON number and says whether it is an integer (no fraction, no exponent).
func (d *simpleDecoder) number() (integer, ok bool) {
	d.byte('-')
	switch n := d.digits(); {
	case n == 0:
		return false, false
	case n > 1 && d.b[d.i-n] == '0': // a leading zero
		return false, false
	}
	integer = true
	if d.byte('.') {
		if d.digits() == 0 {
			return false, false
		}
		integer = false
	}
	if d.byte('e') || d.byte('E') {
		if !d.byte('+') {
			d.byte('-')
		}
		if d.digits() == 0 {
			return false, false
		}
		integer = false
	}
	return integer, true
}

// int reads an integer that fits in bits bits; set is false for null.
func (d *simpleDecoder) int(bits int) (v int64, set, ok bool) {
	if d.null() {
		return 0, false, true
	}
	start := d.i
	if integer, ok := d.number(); !integer || !ok {
		return 0, false, false
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, bits)
	return n, true, err == nil
}

// scalar reads a value of a field no request reads: a string, number, true, false or null.
func (d *simpleDecoder) scalar() bool {
	if d.i >= len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, ok := d.str()
		return ok
	case c == '-' || '0' <= c && c <= '9':
		_, ok := d.number()
		return ok
	}
	var b bool
	return d.bool(&b)
}

// simpleValues hold what a simply decoded request's pointers point to, in one allocation.
type simpleValues struct {
	model                             string
	maxTokens, n, minTokens, logprobs int
	seed                              int64
}

// field reads the value of field f into r; *vp holds its pointers' values, made when the first is set
// (a body without one, or refused before it, costs no allocation).
func (d *simpleDecoder) field(r *completionRequest, vp **simpleValues, f int) bool {
	values := func() *simpleValues {
		if *vp == nil {
			*vp = new(simpleValues)
		}
		return *vp
	}
	switch f {
	case fModel:
		if d.null() {
			return true
		}
		s, ok := d.str()
		if ok {
			v := values()
			v.model = string(s)
			r.Model = &v.model
		}
		return ok
	case fPrompt: // a plain string, as promptField.UnmarshalJSON keeps it
		s, ok := d.str()
		if ok {
			r.Prompt = promptField{text: string(s), plain: true}
		}
		return ok
	case fStream:
		return d.bool(&r.Stream)
	case fIgnoreEOS:
		return d.bool(&r.IgnoreEOS)
	case fIncludeStop:
		return d.bool(&r.IncludeStopStrInOutput)
	case fEcho:
		return d.bool(&r.Echo)
	case fSeed:
		n, set, ok := d.int(64)
		if set && ok {
			v := values()
			v.seed, r.Seed = n, &v.seed
		}
		return ok
	case fMaxTokens, fN, fMinTokens, fLogprobs:
		n, set, ok := d.int(strconv.IntSize)
		if set && ok {
			v := values()
			switch f {
			case fMaxTokens:
				v.maxTokens, r.MaxTokens = int(n), &v.maxTokens
			case fN:
				v.n, r.N = int(n), &v.n
			case fMinTokens:
				v.minTokens, r.MinTokens = int(n), &v.minTokens
			case fLogprobs:
				v.logprobs, r.Logprobs = int(n), &v.logprobs
			}
		}
		return ok
	}
	return false
}
