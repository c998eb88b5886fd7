package live

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/live/outlen"
)

// FuzzDecodeRequest feeds arbitrary bodies to the completions and chat routes: every answer is a 200
// (a whole JSON response or a stream ending in [DONE]) or a 4xx OpenAI error object without Go type
// names; nothing panics, hangs or answers 5xx.
func FuzzDecodeRequest(f *testing.F) {
	const msgs = `"messages": [{"role": "user", "content": "hi"}]`
	for _, s := range []struct {
		chat bool
		body string
	}{
		{false, `{"model": "test-model", "prompt": "hi", "max_tokens": 9223372036854775807}`},
		{false, `{"model": "test-model", "prompt": "hi", "max_tokens": 9223372036854775806, "stream": true}`},
		{false, `{"model": "test-model", "prompt": "hi", "max_tokens": 9223372036854775808}`},
		{false, `{"model": "test-model", "prompt": "hi", "max_tokens": -9223372036854775808}`},
		{false, `{"model": "test-model", "prompt": [1, 2, 3], "max_tokens": 4611686018427387904}`},
		{false, `{"model": "test-model", "prompt": [[4294967296]], "max_tokens": 2}`},
		{false, `{"model": "test-model", "prompt": "hi", "max_tokens": 3, "stream": true, "stream_options": {"include_usage": true}}`},
		{false, `{"model": "test-model", "prompt": ["a"], "n": 1}`},
		{true, `{"model": "test-model", ` + msgs + `, "max_completion_tokens": 9223372036854775807}`},
		{true, `{"model": "test-model", ` + msgs + `, "max_tokens": 9223372036854775807, "stream": true}`},
		{true, `{"model": "test-model", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 2}`},
		{true, `{"model": "test-model", ` + msgs + `, "max_completion_tokens": 2, "stream": true}`},
		{true, `[]`},
		{false, `{"model": "test-model", "prompt": ["a b", "c"], "n": 3, "max_tokens": 4, "echo": true, "logprobs": 2, "stop": ["the", " of"]}`},
		{false, `{"model": "test-model", "prompt": [[300, 301], [302]], "n": 2, "stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}}`},
		{false, `{"model": "test-model", "prompt": "hi", "max_tokens": 8, "stop_token_ids": [4294967295, 0], "include_stop_str_in_output": true, "seed": -1}`},
		{true, `{"model": "test-model", ` + msgs + `, "n": 2, "logprobs": true, "top_logprobs": 20, "stop": " and", "stream": true}`},
		{true, `{"model": "test-model", ` + msgs + `, "top_logprobs": 3, "stream_options": {"include_usage": true}}`},
		{false, `{"model": "sql-lora", "prompt": "hi", "max_tokens": 3, "stream": true}`},
		{true, `{"model": "sql-lorb", ` + msgs + `}`},
		{true, `{"model": "test-model", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}, {"type": "text", "text": "a\u0000b"}, {"type": "image_url", "image_url": {"url": "https://h/x.png", "detail": "high"}}]}], "max_tokens": 2}`},
	} {
		f.Add(s.chat, []byte(s.body))
	}
	o := testOptions(5, 1, math.Inf(1))
	o.Engine.VLLM.NumBlocks = 64                // 1,024 tokens: every accepted request is short
	o.OutputLength, _ = outlen.Parse("uniform") // choices end anywhere: stop strings and the end meet
	o.LoRAModules = []LoRAModule{{Name: "sql-lora", Path: "/adapters/sql"}}
	s, err := New(o)
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Start(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, chat bool, body []byte) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		out := rec.Body.String()
		switch {
		case rec.Code == http.StatusOK && rec.Header().Get("Content-Type") == "text/event-stream":
			if !strings.HasSuffix(out, "data: [DONE]\n\n") {
				t.Fatalf("stream does not end with [DONE]: %q", out)
			}
		case rec.Code == http.StatusOK:
			if !json.Valid([]byte(out)) {
				t.Fatalf("200 with invalid JSON: %q", out)
			}
		case rec.Code >= 400 && rec.Code < 500:
			var v struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Error) != 4 || v.Error["message"] == "" {
				t.Fatalf("%d with a body that is not an OpenAI error: %q", rec.Code, out)
			}
			// Decoding errors must name JSON kinds (other messages may quote the client's own strings).
			msg, _ := v.Error["message"].(string)
			if decoding := strings.HasPrefix(msg, "field ") || strings.HasPrefix(msg, "the request body"); decoding &&
				(strings.Contains(msg, "live.") || strings.Contains(msg, "[]") || strings.Contains(msg, "int") && !strings.Contains(msg, "integer")) {
				t.Fatalf("error shows Go types: %q", out)
			}
		default:
			t.Fatalf("status %d: %q", rec.Code, out)
		}
	})
}
