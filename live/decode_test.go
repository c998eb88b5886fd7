package live

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// FuzzDecodeAgrees: the v2 decoder, with v1Options, accepts exactly the bodies encoding/json accepts and
// decodes them into the same requests, completions and chats alike, and what decodeSimple accepts
// encoding/json decodes into the same completion (decodeBody relies on both).
func FuzzDecodeAgrees(f *testing.F) {
	for _, s := range []string{
		`{"model": "m", "prompt": "hi", "max_tokens": 16, "stream": false}`,
		`{"MODEL": "m", "Prompt": ["a", "b"], "max_TOKENS": 3, "model": "n"}`,
		`{"model": "m", "prompt": [1, 2, 3], "n": 2, "stop": ["x", "y"], "stop_token_ids": [1], "seed": -1, "logprobs": 2, "echo": true}`,
		`{"model": "m", "prompt": "a\u00e9\ud83d\ude00", "stream_options": {"include_usage": true, "continuous_usage_stats": true}, "stream": true}`,
		`{"model": "m", "prompt": "bad ` + "\xff" + `", "stop": "s", "ignore_eos": true, "min_tokens": 2}`,
		`{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5, "logprobs": true, "top_logprobs": 3}`,
		`{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "include_stop_str_in_output": true}`,
		`{"model": null, "prompt": null, "max_tokens": null, "n": null}`,
		`{"model": "m", "max_tokens": 9223372036854775808}`,
		`{"model": "m", "max_tokens": 1.5}`,
		`{"model": "m", "max_tokens": 1e2}`,
		`{"model": "m", "stream": "yes"}`,
		`{"model": 7}`,
		`{"prompt": "x"} trailing`,
		`{"prompt": "x",}`,
		`[]`, `"x"`, `null`, ``, `{`, `{"a": [}`, ` {"model" : "m" } `,
		`{"model": "m", "unknown": {"deep": [1, {"x": null}]}, "prompt": "p"}`,
		`{"model": "m", "n": -0, "seed": 18446744073709551615}`,
		`{"model": "m", "stop": ["` + "\x00" + `"]}`,
		`{"model":"m","prompt":"p","max_tokens":16,"stream":true,"temperature":0.7,"top_p":1e-1,"user":"u"}`,
		`{"model": "m", "prompt": "é", "n": 2, "seed": -9223372036854775808, "echo": false, "logprobs": null}`,
		`{"model": "m", "prompt": "p", "max_tokens": 016}`,
		`{"model": "m", "prompt": "p", "max_tokens": 2, "max_tokens": 3}`,
		`{"model": "m", "prompt": "p", "Temperature": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		agree(t, body, func() any { return new(completionRequest) })
		agree(t, body, func() any { return new(chatRequest) })
		var std completionRequest
		simple, orig := untouched()
		if decodeSimple(body, &simple) {
			if err := json.Unmarshal(body, &std); err != nil || !reflect.DeepEqual(simple, std) {
				t.Fatalf("%q: decodeSimple gives %+v; encoding/json %+v, %v", body, simple, std, err)
			}
		} else if !reflect.DeepEqual(simple, orig) || *orig.N != 7 || *orig.Model != "kept" {
			t.Fatalf("%q: refused, but the request became %+v", body, simple)
		}
	})
}

// untouched is a request with a field of each kind set, twice: one to decode into, one to compare it
// with (its pointers are the same, so a write through one shows).
func untouched() (completionRequest, completionRequest) {
	n, m := 7, "kept"
	r := completionRequest{common: common{Model: &m, N: &n, Stream: true}, Echo: true}
	return r, r
}

// TestDecodeSimple: the bodies decodeSimple reads, and what it makes of them; the bodies it leaves to the
// general decoders (which refuse some of them, and decode the others in ways it does not).
func TestDecodeSimple(t *testing.T) {
	n := func(v int) *int { return &v }
	s := func(v string) *string { return &v }
	seed := int64(-9223372036854775808)
	for body, want := range map[string]completionRequest{
		`{"model":"m","prompt":"Request 1, é","max_tokens":16,"stream":false}`: {
			common: common{Model: s("m"), MaxTokens: n(16)}, Prompt: promptField{text: "Request 1, é", plain: true}},
		" {\n\t\"stream\" : true , \"n\":2,\"ignore_eos\":true,\"min_tokens\":-0 ,\"seed\":-9223372036854775808}\r\n": {
			common: common{Stream: true, N: n(2), IgnoreEOS: true, MinTokens: n(0), Seed: &seed}},
		`{"model":null,"max_tokens":null,"stream":null,"echo":true,"logprobs":3,"include_stop_str_in_output":true}`: {
			common: common{IncludeStopStrInOutput: true}, Echo: true, Logprobs: n(3)},
		`{"temperature":0.7,"top_p":1E+0,"user":"x","frequency_penalty":-1.5e-3,"logit_bias":null,"best_of":1}`: {},
		`{}`: {},
	} {
		var got completionRequest
		if !decodeSimple([]byte(body), &got) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v; want %+v", body, got, want)
		}
	}
	for _, body := range []string{
		`{"prompt":"a\nb"}`,     // an escape
		`{"prompt":["a","b"]}`,  // not a string
		`{"prompt":null}`,       // promptField sees null
		"{\"prompt\":\"\xff\"}", // invalid UTF-8: replaced
		`{"max_tokens":1.0}`, `{"max_tokens":1e2}`, `{"max_tokens":016}`, `{"max_tokens":-}`,
		`{"max_tokens":9223372036854775808}`, `{"seed":"1"}`, `{"stream":1}`,
		`{"n":1,"n":2}`,                     // a name twice
		`{"Model":"m"}`, `{"MAX_TOKENS":3}`, // names match without case
		`{"stop":"x"}`, `{"stop_token_ids":[1]}`, `{"stream_options":{}}`,
		`{"temperature":[1]}`, `{"x":{}}`, `{"temperature":.5}`,
		`{"model":"m",}`, `{"model":"m"} x`, `{"model" "m"}`, `{`, ``, `[]`, `null`, `{"model":"m"`,
	} {
		r, orig := untouched()
		if decodeSimple([]byte(body), &r) || !reflect.DeepEqual(r, orig) || *orig.N != 7 || *orig.Model != "kept" {
			t.Errorf("%q: decoded (%+v); want it left to the general decoders, the request untouched", body, r)
		}
	}
}

// TestDecodeSimpleKnowsEveryField: every JSON name of completionRequest, its embedded common's too, is
// one decodeSimple knows, reading it or leaving its body to the general decoders: a field added to
// either would otherwise be skipped as an unknown name, its value lost.
func TestDecodeSimpleKnowsEveryField(t *testing.T) {
	var check func(reflect.Type)
	check = func(typ reflect.Type) {
		for f := range typ.Fields() {
			if f.Anonymous {
				check(f.Type)
				continue
			}
			if !f.IsExported() { // the handler's own room (check's sampling), no decoder's
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				t.Errorf("%s.%s has no JSON name: decodeSimple matches names exactly", typ, f.Name)
				continue
			}
			if _, known := simpleField([]byte(name)); !known {
				t.Errorf("%s.%s (%q) is not a field decodeSimple knows", typ, f.Name, name)
			}
		}
	}
	check(reflect.TypeFor[completionRequest]())
}

// TestDecodeSimpleAllocs: decodeSimple allocates a request's strings and, only if the body sets one
// of the pointer fields, one block for all their values; a body it refuses costs nothing.
func TestDecodeSimpleAllocs(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector allocates")
	}
	for body, want := range map[string]float64{
		`{"prompt":"a\nb"}`: 0, `{"prompt":["a"]}`: 0, `{"stop":"x"}`: 0, `{}`: 0,
		`{"prompt":"hello","stream":true}`:                                  1,
		`{"prompt":"hello","max_tokens":16,"n":2,"seed":1}`:                 2,
		`{"model":"mo","prompt":"hello","max_tokens":16,"stream":false}`:    3,
		`{"model":null,"prompt":"hello","max_tokens":null,"logprobs":null}`: 1,
	} {
		var r completionRequest
		b := []byte(body)
		if got := testing.AllocsPerRun(100, func() { decodeSimple(b, &r) }); got != want {
			t.Errorf("%s: %v allocations, want %v", body, got, want)
		}
	}
}

func agree(t *testing.T, body []byte, fresh func() any) {
	a, b := fresh(), fresh()
	errA := json.Unmarshal(body, a)
	errB := jsonv2.Unmarshal(body, b, v1Options)
	switch {
	case (errA == nil) != (errB == nil):
		t.Fatalf("%q into %T: encoding/json: %v; v2 with v1Options: %v", body, a, errA, errB)
	case errA == nil && !reflect.DeepEqual(a, b):
		t.Fatalf("%q into %T: encoding/json gives %+v; v2 with v1Options %+v", body, a, a, b)
	}
}

// TestPlainText: plainText, which reads eight bytes at a time, agrees with a byte-by-byte reading for
// every byte value at every position of strings of 1 to 17 bytes, around ASCII or UTF-8 text.
func TestPlainText(t *testing.T) {
	naive := func(s []byte) bool {
		return !bytes.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == '\\' }) && utf8.Valid(s)
	}
	for _, fill := range []string{"a", "é"} {
		for n := 1; n <= 17; n++ {
			for i := range n {
				for c := range 256 {
					s := []byte(strings.Repeat(fill, n))[:n]
					s[i] = byte(c)
					if got, want := plainText(s), naive(s); got != want {
						t.Fatalf("%q: %v; want %v", s, got, want)
					}
				}
			}
		}
	}
}
