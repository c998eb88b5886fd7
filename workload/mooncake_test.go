package workload

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMooncakeAliases(t *testing.T) {
	tests := []struct {
		line string
		want Request // compared on the exported fields set here
	}{
		{`{"timestamp": 5, "input_length": 10, "output_length": 3}`, Request{InputLen: 10, OutputLen: 3}},
		{`{"created_time": 5, "input_length": 10, "output_length": 3}`, Request{InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_tokens": 10, "output_length": 3}`, Request{InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_length": 10, "output_tokens": 3}`, Request{InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_length": 10, "output_token_ids": [7, 8]}`, Request{InputLen: 10, OutputLen: 2, OutputTokenIDs: []uint32{7, 8}}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 2, "output_token_ids": [7, 4294967295]}`, Request{InputLen: 10, OutputLen: 2, OutputTokenIDs: []uint32{7, 4294967295}}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 0}`, Request{InputLen: 10}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 3, "request_id": "r-1", "priority": -2}`, Request{ID: "r-1", InputLen: 10, OutputLen: 3, Priority: -2}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 3, "request_id": 42}`, Request{ID: "42", InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 3, "request_id": "a\"b\u00e9"}`, Request{ID: "a\"bé", InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_length": 10.0, "output_length": 3e0, "session_id": null}`, Request{InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_length": 0.07e2, "output_length": 3}`, Request{InputLen: 7, OutputLen: 3}},
		{` { "timestamp" : 5 , "input_length" : 10 , "output_length" : 3 } `, Request{InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 3, "session_id": 9}`, Request{InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 3, "session_id": "s"}`, Request{InputLen: 10, OutputLen: 3}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 3, "lora": "sql-lora"}`, Request{InputLen: 10, OutputLen: 3, LoRA: "sql-lora"}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 3, "lora_name": "x"}`, Request{InputLen: 10, OutputLen: 3, LoRA: "x"}},
		{`{"timestamp": 5, "input_length": 10, "output_length": 3, "lora": null}`, Request{InputLen: 10, OutputLen: 3}},
	}
	for _, tt := range tests {
		got := readMooncakeString(t, tt.line, TraceOptions{})[0].Turns[0]
		tt.want.Line = 1
		if got.ID != tt.want.ID || got.Line != tt.want.Line || got.At != 0 || got.InputLen != tt.want.InputLen ||
			got.OutputLen != tt.want.OutputLen || !slices.Equal(got.OutputTokenIDs, tt.want.OutputTokenIDs) ||
			got.Priority != tt.want.Priority || got.LoRA != tt.want.LoRA || got.Turn != 0 || got.History {
			t.Errorf("%s\n got %+v\nwant %+v", tt.line, got, tt.want)
		}
	}
}

func TestMooncakeErrors(t *testing.T) {
	const ok = `{"timestamp": 0, "input_length": 4, "output_length": 1}`
	tests := []struct {
		name  string
		text  string
		line  int
		field string
		sub   string
	}{
		{"alias conflict", `{"timestamp": 0, "created_time": 1, "input_length": 4, "output_length": 1}`, 1, "created_time", "conflicts with timestamp"},
		{"alias conflict input", `{"timestamp": 0, "input_length": 4, "input_tokens": 4, "output_length": 1}`, 1, "input_tokens", "conflicts with input_length"},
		{"alias conflict output", `{"timestamp": 0, "input_length": 4, "output_tokens": 1, "output_length": 1}`, 1, "output_length", "conflicts with output_tokens"},
		{"alias conflict delay", `{"timestamp": 0, "input_length": 4, "output_length": 1, "delay": 1, "delay_ms": 1}`, 1, "delay_ms", "conflicts with delay"},
		{"field twice", `{"timestamp": 0, "timestamp": 0, "input_length": 4, "output_length": 1}`, 1, "timestamp", "given twice"},
		{"malformed value", ok + "\n" + `{"timestamp": 0, "input_length": 4x, "output_length": 1}`, 2, "input_length", "invalid JSON at column 35: invalid character 'x'"},
		{"malformed array", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1, 2,]}`, 1, "hash_ids", "invalid JSON"},
		{"unterminated object", `{"timestamp": 0, "input_length": 4, "output_length": 1`, 1, "", "invalid JSON"},
		{"unterminated string", `{"timestamp": 0, "input_length": 4, "output_length": 1, "request_id": "ab`, 1, "request_id", "unexpected end of JSON input"},
		{"bad escape", `{"timestamp": 0, "input_length": 4, "output_length": 1, "request_id": "a\qb"}`, 1, "request_id", `invalid character 'q' in string escape code`},
		{"not an object", `[1, 2]`, 1, "", "want a JSON object"},
		{"trailing garbage", ok + ` x`, 1, "", "after top-level value"},
		{"two objects", ok + ok, 1, "", "after top-level value"},
		{"negative input", `{"timestamp": 0, "input_length": -5, "output_length": 1}`, 1, "input_length", "must be >= 1, got -5"},
		{"negative input alias", `{"timestamp": 0, "input_tokens": -5, "output_length": 1}`, 1, "input_tokens", "must be >= 1, got -5"},
		{"zero input", `{"timestamp": 0, "input_length": 0, "output_length": 1}`, 1, "input_length", "must be >= 1, got 0"},
		{"fractional input", `{"timestamp": 0, "input_length": 1.5, "output_length": 1}`, 1, "input_length", "must be an integer"},
		{"huge input", `{"timestamp": 0, "input_length": 1e12, "output_length": 1}`, 1, "input_length", "must be <= 16777216"},
		{"string input", `{"timestamp": 0, "input_length": "4", "output_length": 1}`, 1, "input_length", "want a number"},
		{"negative output", `{"timestamp": 0, "input_length": 4, "output_length": -1}`, 1, "output_length", "must be >= 0, got -1"},
		{"missing output", `{"timestamp": 0, "input_length": 4}`, 1, "output_length", "missing"},
		{"missing input", `{"timestamp": 0, "output_length": 4}`, 1, "input_length", "missing"},
		{"output disagrees", `{"timestamp": 0, "input_length": 4, "output_length": 3, "output_token_ids": [1]}`, 1, "output_length", "3 disagrees with the 1 output_token_ids"},
		{"output id too big", `{"timestamp": 0, "input_length": 4, "output_token_ids": [4294967296]}`, 1, "output_token_ids", "must be <= 4294967295"},
		{"negative hash id", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1, -2]}`, 1, "hash_ids", "must be >= 0, got -2"},
		{"fractional hash id", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [0.5]}`, 1, "hash_ids", "must be an integer"},
		{"hash id too big", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [18446744073709551615, 18446744073709551616]}`, 1, "hash_ids", "out of range"},
		{"NaN", `{"timestamp": 0, "input_length": NaN, "output_length": 1}`, 1, "input_length", "invalid JSON"},
		{"leading zero", `{"timestamp": 0, "input_length": 04, "output_length": 1}`, 1, "input_length", "invalid JSON"},
		{"nested too deeply", `{"timestamp": 0, "input_length": 4, "output_length": 1, "x": ` + strings.Repeat("[", 400) + strings.Repeat("]", 400) + `}`, 1, "", "nested deeper"},
		{"hash ids not array", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": 3}`, 1, "hash_ids", "want an array"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 4, "output_length": 1}`, 1, "timestamp", "must be >= 0, got -1"},
		{"negative created_time", `{"created_time": -0.5, "input_length": 4, "output_length": 1}`, 1, "created_time", "must be >= 0, got -0.5"},
		{"negative delay", `{"timestamp": 0, "input_length": 4, "output_length": 1, "session_id": 1}` + "\n" +
			`{"input_length": 4, "output_length": 1, "session_id": 1, "delay": -3}`, 2, "delay", "must be >= 0, got -3"},
		{"later turn without delay or timestamp", `{"timestamp": 0, "input_length": 4, "output_length": 1, "session_id": 1}` + "\n" +
			`{"input_length": 4, "output_length": 1, "session_id": 1}`, 2, "delay", "missing"},
		{"later turn before previous", `{"timestamp": 10, "input_length": 4, "output_length": 1, "session_id": 1}` + "\n" +
			`{"timestamp": 9, "input_length": 4, "output_length": 1, "session_id": 1}`, 2, "timestamp", "before the previous turn"},
		{"previous turn without timestamp", `{"timestamp": 10, "input_length": 4, "output_length": 1, "session_id": 1}` + "\n" +
			`{"delay": 1, "input_length": 4, "output_length": 1, "session_id": 1}` + "\n" +
			`{"timestamp": 20, "input_length": 4, "output_length": 1, "session_id": 1}`, 3, "delay", "previous turn (line 2) has no timestamp"},
		{"first turn without timestamp", ok + "\n" + `{"input_length": 4, "output_length": 1, "session_id": "s"}`, 2, "timestamp", "the first turn on line 1 has one"},
		{"text and messages", `{"text_input": "hi", "messages": [{"role": "user", "content": "hi"}], "output_length": 1}`, 1, "messages", "conflicts with text_input"},
		{"text not a string", `{"text_input": 5, "output_length": 1}`, 1, "text_input", "want a string, got number"},
		{"empty text", `{"text_input": "", "output_length": 1}`, 1, "text_input", "encodes to no tokens"},
		{"messages empty", `{"messages": [], "output_length": 1}`, 1, "messages", "at least one message"},
		{"message without role", `{"messages": [{"content": "hi"}], "output_length": 1}`, 1, "messages", "[0]: role: missing"},
		{"message image part without url", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "output_length": 1}`, 1, "messages", `[0]: content[0]: image_url: want {"url": a string}`},
		{"message audio part", `{"messages": [{"role": "user", "content": [{"type": "input_audio"}]}], "output_length": 1}`, 1, "messages", "[0]: content[0]: only text and image_url parts are supported"},
		{"message text part not a string", `{"messages": [{"role": "user", "content": [{"type": "text", "text": 4}]}], "output_length": 1}`, 1, "messages", "[0]: content[0]: text: want a string"},
		{"message images and images", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}], "images": [{"id": "a", "tokens": 1}], "output_length": 1}`, 1, "images", "conflicts with the image_url parts of messages (give one)"},
		{"message content number", `{"messages": [{"role": "user", "content": 3}], "output_length": 1}`, 1, "messages", "[0]: content: want a string or a list of text and image_url parts, got number"},
		{"wait on an unknown id", `{"timestamp": 0, "input_length": 4, "output_length": 1, "session_id": "s", "wait_for": ["x"]}`, 1, "wait_for", `"x" is the request_id of no earlier row`},
		{"wait on itself", `{"request_id": 3, "timestamp": 0, "input_length": 4, "output_length": 1, "wait_for": [3]}`, 1, "wait_for", `"3" is the request_id of no earlier row`},
		{"wait_for not an array", `{"timestamp": 0, "input_length": 4, "output_length": 1, "wait_for": "a"}`, 1, "wait_for", "want an array of request_ids"},
		{"negative tool wait", `{"timestamp": 0, "input_length": 4, "output_length": 1, "tool_wait_ms": -1}`, 1, "tool_wait_ms", "must be >= 0, got -1"},
		{"session id float", `{"timestamp": 0, "input_length": 4, "output_length": 1, "session_id": 1.5}`, 1, "session_id", "string or an integer"},
		{"session id object", `{"timestamp": 0, "input_length": 4, "output_length": 1, "session_id": {}}`, 1, "session_id", "want a string or an integer"},
		{"priority fraction", `{"timestamp": 0, "input_length": 4, "output_length": 1, "priority": 0.5}`, 1, "priority", "must be an integer"},
		{"lora number", `{"timestamp": 0, "input_length": 4, "output_length": 1, "lora": 3}`, 1, "lora", "want a string (an adapter's name), got number"},
		{"lora alias conflict", `{"timestamp": 0, "input_length": 4, "output_length": 1, "lora": "a", "lora_name": "a"}`, 1, "lora_name", "conflicts with lora"},
		{"lora too long", `{"timestamp": 0, "input_length": 4, "output_length": 1, "lora": "` + strings.Repeat("a", 257) + `"}`, 1, "lora", "257 bytes: an adapter's name is at most 256"},
		{"blank lines count", "\n  \n" + ok + "\n\n" + `{"timestamp": 0}`, 5, "input_length", "missing"},
		{"crlf", ok + "\r\n" + `{"timestamp": 0, "input_length": 4}` + "\r\n", 2, "output_length", "missing"},
		{"empty", "\n\n", 0, "", "no requests"},
		// Implausible rows are refused before anything is made of them.
		{"one hash id for 10000 tokens", `{"timestamp": 0, "input_length": 10000, "output_length": 1, "hash_ids": [7]}`, 1, "hash_ids",
			"1 ids do not cover input_length 10000 at 512 tokens per id (want 19 or 20"},
		{"more hash ids than tokens", `{"timestamp": 0, "input_tokens": 512, "output_length": 1, "hash_ids": [1, 2]}`, 1, "hash_ids",
			"2 ids do not cover input_tokens 512 at 512 tokens per id (want 1;"},
		{"input beyond MaxTokens", `{"timestamp": 0, "input_length": 500000000, "output_length": 1}`, 1, "input_length", "must be <= 16777216, got 500000000"},
		{"output beyond MaxTokens", `{"timestamp": 0, "input_length": 1, "output_length": 100000000}`, 1, "output_length", "must be <= 16777216, got 100000000"},
		{"too many hash ids", `{"timestamp": 0, "output_length": 1, "hash_ids": [` + strings.Repeat("1,", 32768) + `1]}`, 1, "hash_ids",
			"32769 ids of 512 tokens are more than 16777216 tokens"},
		{"duplicate request_id", ok + "\n" + `{"request_id": "r1", "timestamp": 0, "input_length": 4, "output_length": 1}` + "\n" +
			`{"request_id": "r1", "timestamp": 0, "input_length": 4, "output_length": 1}`, 3, "request_id", `"r1" is also the id of line 2`},
		{"duplicate request_id number", `{"request_id": 7, "timestamp": 0, "input_length": 4, "output_length": 1}` + "\n" +
			`{"request_id": "7", "timestamp": 0, "input_length": 4, "output_length": 1}`, 2, "request_id", `"7" is also the id of line 1`},
		{"out of order", `{"timestamp": 5, "input_length": 4, "output_length": 1}` + "\n\n" +
			`{"created_time": 4.5, "input_length": 4, "output_length": 1}`, 3, "created_time", "4.5ms is before 5ms on line 1 (sessions must start in time order)"},
		{"session out of order", `{"timestamp": 5, "input_length": 4, "output_length": 1, "session_id": "s"}` + "\n" +
			`{"timestamp": 3, "input_length": 4, "output_length": 1, "session_id": "t"}`, 2, "timestamp", "3ms is before 5ms on line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tt.text), "t.jsonl", TraceOptions{})
			checkTraceError(t, err, "t.jsonl", tt.line, tt.field, tt.sub)
		})
	}
}

func TestReadTraceOptionErrors(t *testing.T) {
	const ok = `{"timestamp": 0, "input_length": 4, "output_length": 1}`
	for _, opts := range []TraceOptions{{TraceBlockSize: -1}, {TraceBlockSize: MaxTokens + 1}, {Format: "parquet"}} {
		_, err := ReadTrace(strings.NewReader(ok), "t.jsonl", opts)
		if err == nil || !strings.HasPrefix(err.Error(), "trace t.jsonl: ") {
			t.Errorf("ReadTrace(%+v) = %v, want an error naming the file", opts, err)
		}
	}
	if _, err := OpenTrace("testdata/does-not-exist.jsonl", TraceOptions{}); err == nil ||
		!strings.Contains(err.Error(), "does-not-exist.jsonl") {
		t.Errorf("OpenTrace of a missing file: %v", err)
	}
}

// TestTraceUse: TraceOptions.Use says which of the options that only some rows read the rows read: the
// tokenizer (text or messages), the output-length draw (no output_length), the block size (hash ids
// that make the prompt, not a text row's, which are ignored), the image size (a messages row's
// image_url part, not an images field's, which sizes its own).
func TestTraceUse(t *testing.T) {
	const (
		lengths = `{"timestamp": 0, "input_length": 4, "output_length": 1}`
		ids     = `{"timestamp": 0, "hash_ids": [1, 2], "output_length": 1}`
		text    = `{"timestamp": 0, "text_input": "hi", "hash_ids": [1], "output_length": 1}`
		undrawn = `{"timestamp": 0, "input_length": 4}`
		images  = `{"timestamp": 0, "input_length": 8, "output_length": 1, "images": [{"id": "a", "tokens": 4}]}`
		url     = `{"timestamp": 0, "output_length": 1, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}]}`
	)
	for _, tc := range []struct {
		rows []string
		want TraceUse
	}{
		{[]string{lengths, images}, TraceUse{}},
		{[]string{lengths, ids}, TraceUse{BlockSize: true}},
		{[]string{text}, TraceUse{Tokenizer: true}},
		{[]string{lengths, undrawn}, TraceUse{OutputLen: true}},
		{[]string{url}, TraceUse{Tokenizer: true, ImageTokens: true}},
	} {
		var got TraceUse
		opts := TraceOptions{Use: &got, OutputLen: func(uint64) int { return 1 }}
		if _, err := ReadTrace(strings.NewReader(strings.Join(tc.rows, "\n")), "t.jsonl", opts); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: Use %+v, want %+v", tc.rows, got, tc.want)
		}
	}
}

// turnSummary prints what the session tests pin down of a request.
func turnSummary(r Request) string {
	return fmt.Sprintf("key=%d line=%d id=%s turn=%d at=%v delay=%v", r.Key, r.Line, r.ID, r.Turn, r.At, r.Delay)
}

func TestMooncakeSessions(t *testing.T) {
	// Times start at 1000 ms: they are normalised so the earliest arrival
	// is 0. Sessions start in time order, and their later turns are
	// interleaved with other rows; b takes its delays from timestamps; "7"
	// and 7 are the same session; x and y arrive together and keep their
	// file order.
	const text = `{"request_id": "b0", "session_id": "b", "timestamp": 1000, "input_length": 4, "output_length": 1}
{"request_id": "x", "timestamp": 1200, "input_length": 4, "output_length": 1}
{"request_id": "b1", "session_id": "b", "timestamp": 1100.5, "input_length": 4, "output_length": 1}

{"request_id": "y", "timestamp": 1200, "input_length": 4, "output_length": 1}
{"request_id": "c0", "session_id": 7, "timestamp": 1200, "input_length": 4, "output_length": 1}
{"request_id": "a0", "session_id": "a", "timestamp": 1500, "input_length": 4, "output_length": 1}
{"request_id": "a1", "session_id": "a", "delay": 250, "input_length": 4, "output_length": 1}
{"request_id": "b2", "session_id": "b", "timestamp": 1100.5, "input_length": 4, "output_length": 1}
{"request_id": "a2", "session_id": "a", "timestamp": 9000, "delay_ms": 30, "input_length": 4, "output_length": 1}
{"request_id": "c1", "session_id": "7", "delay": 0, "input_length": 4, "output_length": 1}
`
	src, err := ReadTrace(strings.NewReader(text), "t.jsonl", TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := src.Requests(); n != 10 {
		t.Errorf("Requests() = %d, want 10", n)
	}
	var got []string
	for _, s := range collect(t, src) {
		var turns []string
		for _, r := range s.Turns {
			turns = append(turns, turnSummary(r))
		}
		got = append(got, strings.Join(turns, " | "))
	}
	want := []string{
		"key=0 line=1 id=b0 turn=0 at=0s delay=0s | key=2 line=3 id=b1 turn=1 at=100.5ms delay=100.5ms | key=7 line=9 id=b2 turn=2 at=100.5ms delay=0s",
		"key=1 line=2 id=x turn=0 at=200ms delay=0s",
		"key=3 line=5 id=y turn=0 at=200ms delay=0s",
		"key=4 line=6 id=c0 turn=0 at=200ms delay=0s | key=9 line=11 id=c1 turn=1 at=200ms delay=0s",
		"key=5 line=7 id=a0 turn=0 at=500ms delay=0s | key=6 line=8 id=a1 turn=1 at=750ms delay=250ms | key=8 line=10 id=a2 turn=2 at=8s delay=30ms",
	}
	if !slices.Equal(got, want) {
		t.Errorf("sessions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A line longer than the reader's buffer, and a last line without a newline.
func TestMooncakeLongLine(t *testing.T) {
	ids := make([]string, 30000)
	for i := range ids {
		ids[i] = fmt.Sprint(1000000 + i)
	}
	text := `{"timestamp": 0, "output_length": 1, "hash_ids": [` + strings.Join(ids, ", ") + `]}` + "\n" +
		`{"timestamp": 3, "input_length": 4, "output_length": 1}`
	sessions := readMooncakeString(t, text, TraceOptions{TraceBlockSize: 2})
	if len(sessions) != 2 {
		t.Fatalf("%d sessions, want 2", len(sessions))
	}
	r := sessions[0].Turns[0]
	if r.InputLen != 60000 || len(r.HashIDs()) != 30000 || r.HashIDs()[29999] != 1029999 {
		t.Errorf("long line: InputLen %d, %d hash ids", r.InputLen, len(r.HashIDs()))
	}
	if r := sessions[1].Turns[0]; r.At != 3*time.Millisecond || r.Line != 2 {
		t.Errorf("last line: %s", turnSummary(r))
	}
}

// Hash ids of one row must not alias those of another as the loader's
// arena grows.
func TestMooncakeHashIDsStable(t *testing.T) {
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, `{"timestamp": %d, "output_length": 1, "hash_ids": [%d, %d, %d]}`+"\n", i, i, i+1, i+2)
	}
	for i, r := range requests(readMooncakeString(t, b.String(), TraceOptions{TraceBlockSize: 1})) {
		want := []uint32{uint32(i), uint32(i + 1), uint32(i + 2)}
		if got := r.AppendTokens(nil); !slices.Equal(got, want) {
			t.Fatalf("row %d: tokens %v, want %v", i, got, want)
		}
	}
}

// endless is a file without newlines, like /dev/zero.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	e.n += len(p)
	return len(p), nil
}

// A trace without newlines stops at MaxLineBytes with the line named, for
// both formats, having read little more than that.
func TestTraceLineCap(t *testing.T) {
	for _, name := range []string{"zero.jsonl", "zero.csv"} {
		r := &endless{}
		_, err := ReadTrace(r, name, TraceOptions{})
		checkTraceError(t, err, name, 1, "", "line longer than 1 MiB")
		if r.n > MaxLineBytes+128<<10 {
			t.Errorf("%s: read %d bytes, want about %d", name, r.n, MaxLineBytes)
		}
	}
}
