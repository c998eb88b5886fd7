package live

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzFastCompletion checks the fast decoder against json.Unmarshal: whatever it accepts, json.Unmarshal
// accepts too and decodes into the same request.
func FuzzFastCompletion(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"Request 1 asks a question.","max_tokens":16,"stream":false}`,
		` { "model" : "m" , "prompt" : [1, 2, 3], "n": 2, "echo": true, "logprobs": 0, "seed": -9223372036854775808 } `,
		`{"model":"m","prompt":["a\u00e9\"b", [1, 2]],"stop":["x", "y"],"temperature":0.7,"top_p":1e-3,"user":null}`,
		`{"model":"m","prompt":"hi","extra":{"a":[true,false,null,{"b":-0.5E+2}]},"min_tokens":0,"ignore_eos":true}`,
		`{"Model":"m"}`,
		`{"model":"m","max_tokens":1.0}`,
		`{"model":"m","max_tokens":01}`,
		`{"model":"m","max_tokens":9223372036854775808}`,
		`{"model":"m","prompt":null}`,
		`{"model":"m","stop":"s","include_stop_str_in_output":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","prompt":"\ud800"}`,
		`{"model":"m"}x`,
		`{"model":"m",}`,
		`{}`,
		`[]`,
		`{"model":"m","stream":truex}`,
		`{"model":"m","prompt":"caf` + "\xc3\xa9" + `","prompt":"twice"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, slow completionRequest
		if !fastCompletion(body, &fast) {
			return
		}
		if err := json.Unmarshal(body, &slow); err != nil {
			t.Fatalf("the fast decoder accepts %q, json.Unmarshal does not: %v", body, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: the fast decoder made\n%+v\njson.Unmarshal\n%+v", body, fast, slow)
		}
	})
}

// The fast decoder takes the shape real clients send and leaves the rest to json.Unmarshal.
func TestFastCompletionCoverage(t *testing.T) {
	for _, c := range []struct {
		body string
		fast bool
	}{
		{`{"model":"m","prompt":"Request 1 asks a question.","max_tokens":16,"stream":false}`, true},
		{`{"model":"m","prompt":"hi","temperature":0.7,"top_p":1,"user":"u","logit_bias":{"50256":-100}}`, true},
		{`{"model":"m","prompt":[[1,2],[3]],"n":3,"stop":["a","b"],"seed":7,"logprobs":2,"echo":true}`, true},
		{`{"model":"m","prompt":"hi","stream":true,"stream_options":{"include_usage":true}}`, false}, // a struct: left to json
		{`{"model":"m","prompt":"hi","stop_token_ids":[1]}`, false},
		{`{"model":"m","Prompt":"hi"}`, false}, // json matches it to prompt
		{`{"model":"m","prompt":null}`, false},
		{`{"model":"m","max_tokens":16.5}`, false}, // json's error explains it
		{`{"model":"\u006d"}`, false},
		{`{"model":"m"} {}`, false},
	} {
		var req completionRequest
		if got := fastCompletion([]byte(c.body), &req); got != c.fast {
			t.Errorf("fastCompletion(%s) = %v, want %v", c.body, got, c.fast)
		}
	}
}

func TestPlainString(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{`"a prompt"`, "a prompt", true},
		{`"caf` + "\xc3\xa9" + `"`, "café", true},
		{`""`, "", true},
		{`"a\nb"`, "", false},
		{`"` + "\xff" + `"`, "", false}, // json.Unmarshal makes it U+FFFD
		{`"a"b"`, "", false},
		{`"a`, "", false},
		{`[1]`, "", false},
	} {
		got, ok := plainString([]byte(c.raw))
		if got != c.want || ok != c.ok {
			t.Errorf("plainString(%s) = %q, %v; want %q, %v", c.raw, got, ok, c.want, c.ok)
		}
		if ok {
			var slow string
			if err := json.Unmarshal([]byte(c.raw), &slow); err != nil || slow != got {
				t.Errorf("plainString(%s) = %q; json.Unmarshal gives %q, %v", c.raw, got, slow, err)
			}
		}
	}
}

// BenchmarkDecodeCompletion measures decoding the benchmark's request body, fast path and
// json.Unmarshal.
func BenchmarkDecodeCompletion(b *testing.B) {
	body := []byte(`{"model":"llama-3.1-8b","prompt":"Request 1 asks the simulated model a short question about the weather in a city it has never seen, politely.","max_tokens":16,"stream":false}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req completionRequest
			if decodeBody(body, &req) != nil {
				b.Fatal("refused")
			}
			if _, ok := plainString(req.Prompt); !ok {
				b.Fatal("not plain")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req completionRequest
			var text string
			if json.Unmarshal(body, &req) != nil || json.Unmarshal(req.Prompt, &text) != nil {
				b.Fatal("refused")
			}
		}
	})
}
