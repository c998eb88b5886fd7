package live

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// FuzzDecodeAgrees: the v2 decoder, with v1Options, accepts exactly the bodies encoding/json accepts and
// decodes them into the same requests, completions and chats alike (decodeBody relies on it).
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
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		agree(t, body, func() any { return new(completionRequest) })
		agree(t, body, func() any { return new(chatRequest) })
	})
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
