package workload

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// FuzzReadTrace: whatever the bytes, ReadTrace returns a valid workload or a *TraceError naming
// the file; never a panic, never an unbounded allocation. Run it with
// go test -run='^$' -fuzz='^FuzzReadTrace$' -fuzztime=45s ./workload/
func FuzzReadTrace(f *testing.F) {
	for _, s := range []string{
		`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}` + "\n" +
			`{"timestamp": 529, "input_length": 28, "output_length": 445, "hash_ids": [298]}`,
		// Agentic: sessions with delays, aliases, ids, planned outputs.
		`{"session_id": "a", "timestamp": 1000, "input_tokens": 600, "output_tokens": 2, "hash_ids": [1, 2], "request_id": "a0"}` + "\n" +
			`{"session_id": "a", "delay": 250, "input_length": 1100, "output_token_ids": [5, 6, 7], "hash_ids": [1, 2, 3]}` + "\n" +
			`{"created_time": 1000.5, "input_length": 4, "output_length": 1, "priority": -3, "request_id": 9}`,
		`{"session_id": 7, "timestamp": 0, "input_length": 4, "output_length": 1}` + "\r\n" + `{"session_id": "7", "delay_ms": 0.5, "input_length": 4, "output_length": 1}`,
		`{"timestamp": 0, "output_length": 1, "hash_ids": [18446744073709551615]}`,
		`{"timestamp": 0, "input_length": 1e3, "output_length": 0.0, "hash_ids": null}`,
		"\xef\xbb\xbf{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}",
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109",
		// Peers' rows: AIPerf's text and chats, no output_length, first-turn delays, no timestamps;
		// Dynamo's priorities and agentic dependencies; Applied Compute's sessions.
		`{"text_input": "What is the capital of France?"}` + "\n" + `{"session_id": 1, "delay": 0, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}, {"role": "assistant", "content": null}], "tools": [], "output_length": 3}`,
		`{"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1, 2], "strict_priority": true, "policy_class": "batch", "extra": {}}`,
		`{"request_id": "p", "session_id": "r", "timestamp": 0, "input_length": 8, "output_length": 2}` + "\n" +
			`{"request_id": "c", "session_id": "s", "timestamp": 5, "input_length": 4, "output_length": 1, "wait_for": ["p"], "delay": 1, "tool_wait_ms": 2.5}` + "\n" +
			`{"request_id": "q", "session_id": "r", "timestamp": 9, "input_length": 8, "output_length": 1, "wait_for": ["p", "c"], "branches": [], "prefix_reset": false}`,
		`{"num_turns": 2, "input_prompt_length": 16, "assistant_response_length": [4, 6], "tool_call_output_length": [8, 0], "tool_call_latency": [0.5, 1e-3], "final_assistant_response_length": 3}`,
		`{"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 40, "output_length": 13, "type": "text", "turn": 1, "hash_ids": [1, 2, 3]}` + "\n" +
			`{"chat_id": 160, "parent_chat_id": 159, "timestamp": 62.5, "input_length": 70, "output_length": 8, "turn": 2, "hash_ids": [1, 2, 3, 4, 5]}`,
		// LoRA adapters, under both names.
		`{"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1, 2], "lora": "sql-lora"}` + "\n" +
			`{"timestamp": 1, "input_length": 8, "output_length": 2, "hash_ids": [1, 2], "lora_name": "chat", "session_id": 3}`,
		// Multimodal rows: images by tokens or pixels, placed by offset or after the previous one.
		`{"timestamp": 0, "input_length": 1200, "output_length": 2, "hash_ids": [1, 2, 3], "images": [{"id": "a", "tokens": 576}, {"id": 3, "width": 640, "height": 480, "offset": 700}]}`,
		`{"timestamp": 0, "output_length": 2, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "a\u0000"}]}]}`,
		// Crashers and bounds: a huge length, too many ids, duplicate ids, out of order.
		`{"timestamp": 0, "input_length": 500000000, "output_length": 1}`,
		`{"request_id": 1, "timestamp": 5, "input_length": 4, "output_length": 1}` + "\n" + `{"request_id": "1", "timestamp": 4, "input_length": 4, "output_length": 1}`,
	} {
		f.Add([]byte(s), uint16(0), false)
	}
	f.Add([]byte(`{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [5, 6]}`), uint16(2), false)
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.5,10,0\r\n"), uint16(0), true)
	f.Fuzz(func(t *testing.T, data []byte, block uint16, csv bool) {
		name := "t.jsonl"
		if csv {
			name = "t.csv"
		}
		warnings := 0
		src, err := ReadTrace(bytes.NewReader(data), name, TraceOptions{TraceBlockSize: int(block),
			OutputLen: func(key uint64) int { return int(key % 5) }, Warn: func(string) { warnings++ }})
		if warnings > 1 {
			t.Fatalf("%d warnings, want at most one", warnings)
		}
		if err != nil {
			var te *TraceError
			if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), "trace "+name) {
				t.Fatalf("error %q (%T) is not a *TraceError naming the file", err, err)
			}
			return
		}
		bs := int(block)
		if bs == 0 {
			bs = DefaultTraceBlockSize
		}
		n := 0
		var last Request
		seen := map[string]bool{}
		byKey := map[uint64]Request{}
		for _, s := range collect(t, src) {
			if len(s.Turns) == 0 {
				t.Fatal("a session without turns")
			}
			if n > 0 && s.Turns[0].At < last.At {
				t.Fatalf("session at %v after one at %v", s.Turns[0].At, last.At)
			}
			last = s.Turns[0]
			for _, r := range turns(s) {
				n++
				switch {
				case r.InputLen < 1 && !r.History || r.InputLen < 0 || r.InputLen > MaxTokens:
					t.Fatalf("line %d: input %d", r.Line, r.InputLen)
				case r.OutputLen < 0 || r.OutputLen > MaxTokens:
					t.Fatalf("line %d: output %d", r.Line, r.OutputLen)
				case r.OutputTokenIDs != nil && len(r.OutputTokenIDs) != r.OutputLen:
					t.Fatalf("line %d: %d output ids for %d tokens", r.Line, len(r.OutputTokenIDs), r.OutputLen)
				case len(r.HashIDs()) > 0 && (len(r.HashIDs()) < r.InputLen/bs || len(r.HashIDs()) > (r.InputLen+bs-1)/bs):
					t.Fatalf("line %d: %d hash ids for %d tokens at %d", r.Line, len(r.HashIDs()), r.InputLen, bs)
				case r.ID != "" && seen[r.ID]:
					t.Fatalf("line %d: request_id %q twice", r.Line, r.ID)
				case r.At < 0 || r.Delay < 0:
					t.Fatalf("line %d: at %v delay %v", r.Line, r.At, r.Delay)
				}
				for _, k := range r.After {
					if k >= r.Key {
						t.Fatalf("line %d: request %d waits on request %d, not an earlier one", r.Line, r.Key, k)
					}
				}
				byKey[r.Key] = r
				seen[r.ID] = true
				end := 0
				for _, im := range r.Images {
					if im.Start < end || im.Len < 1 || im.Start+im.Len > r.InputLen {
						t.Fatalf("line %d: image %+v after token %d of %d", r.Line, im, end, r.InputLen)
					}
					end = im.Start + im.Len
				}
				if r.InputLen <= 1<<16 {
					if got := len(r.AppendTokens(nil)); got != r.InputLen {
						t.Fatalf("line %d: %d tokens for %d", r.Line, got, r.InputLen)
					}
					seq := tokens.NewSequence(16)
					r.AppendSequence(seq)
					if seq.Len() != r.InputLen {
						t.Fatalf("line %d: a sequence of %d tokens for %d", r.Line, seq.Len(), r.InputLen)
					}
				}
			}
		}
		for _, r := range byKey {
			for _, k := range r.After {
				if w, ok := byKey[k]; !ok || !w.Awaited {
					t.Fatalf("line %d waits on request %d, which is missing or not marked awaited", r.Line, k)
				}
			}
		}
		if n != src.Requests() {
			t.Fatalf("yielded %d requests, Requests() = %d", n, src.Requests())
		}
	})
}
