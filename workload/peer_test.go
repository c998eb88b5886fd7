package workload

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/tokenize"
)

// peerOptions reads the fixtures of testdata/peer as predict does, with an output length of 100 + Key
// for rows that give none, and records the warnings.
func peerOptions(warnings *[]string) TraceOptions {
	return TraceOptions{TraceBlockSize: 4, OutputLen: func(key uint64) int { return 100 + int(key) },
		Warn: func(msg string) { *warnings = append(*warnings, msg) }}
}

// TestPeerTraces: each trace variant peers' tools accept loads, with every row's arrival, wait and
// lengths as AIPerf or Dynamo would replay it, and one warning (or none) naming the fields left unread.
func TestPeerTraces(t *testing.T) {
	enc := func(s string) int { return len(tokenize.Builtin().Encode(s)) }
	chat := func(m ...tokenize.Message) int { return enc(tokenize.ChatPrompt(m)) }
	sys, user := tokenize.Message{Role: "system", Content: "You are terse."}, tokenize.Message{Role: "user", Content: "Weather in Paris?"}
	type row struct {
		line, turn int
		id         string
		at, delay  time.Duration
		in, out    int
		after      []uint64
		awaited    bool
		history    bool
	}
	ms := time.Millisecond
	tests := []struct {
		file string
		want []row // in the order the source yields them
		warn string
	}{
		{"aiperf_text.jsonl", []row{
			{1, 0, "", 0, 0, 7, 20, nil, false, false},
			{2, 0, "", 0, 0, 8, 100, nil, false, false},
			{3, 0, "", 0, 0, 7, 102, nil, false, false}, // no output_length: drawn for Key 2
		}, ""},
		{"aiperf_messages.jsonl", []row{
			{1, 0, "", 0, 0, 23, 12, nil, false, false}, // a first turn's delay of 0
			{2, 1, "", 500 * ms, 500 * ms, 39, 8, nil, false, false},
			{3, 0, "", 350 * ms, 0, 2, 4, nil, false, false}, // timestamp 100 + first-turn delay 250: after chat-1 starts
		}, `trace testdata/peer/aiperf_messages.jsonl: ignoring fields the replay does not read: input_length (beside text_input) (line 3)`},
		{"dynamo_priority.jsonl", []row{
			{1, 0, "", 0, 0, 8, 2, nil, false, false},
			{2, 0, "", 10 * ms, 0, 8, 3, nil, false, false},
			{3, 0, "", 20 * ms, 0, 4, 1, nil, false, false},
		}, `trace testdata/peer/dynamo_priority.jsonl: ignoring fields the replay does not read: model (line 1), tenant (line 2)`},
		{"agentic_mooncake.jsonl", []row{
			{1, 0, "root", 0, 0, 8, 2, nil, false, false},
			{2, 1, "tool-1", 5 * ms, 5 * ms, 12, 1, nil, false, false}, // delay 2 + tool_wait_ms 3 after root ends
			{3, 2, "tool-2", 45 * ms, 40 * ms, 16, 1, nil, false, false},
			{4, 0, "other", 5 * ms, 0, 4, 1, nil, false, false},
		}, ""},
		// Dynamo's converter's rows: subagents' sessions start when the parent's request that launched
		// them ends; the parent's next request waits for them (its previous turn is implicit).
		{"agentic_subagents.jsonl", []row{
			{1, 0, "parent-1", 0, 0, 8, 2, nil, true, false},
			{5, 1, "parent-2", 500 * ms, 5 * ms, 12, 1, []uint64{2, 3}, false, false},
			{2, 0, "child-1", 0, 10 * ms, 8, 4, []uint64{0}, false, false}, // waits: At 0, sorted first
			{4, 1, "child-3", 300 * ms, 50 * ms, 12, 1, nil, true, false},
			{3, 0, "child-2", 0, 30 * ms, 4, 1, []uint64{0}, true, false}, // delay 10 + tool_wait_ms 20
		}, ""},
		// A session of model calls and tool calls: each later call reads the conversation so far (History)
		// plus the tool's output, the tool's latency after the call before it ends.
		{"applied_compute_agentic.jsonl", []row{
			{1, 0, "", 0, 0, 16, 4, nil, false, false},
			{1, 1, "", 0, 500 * ms, 8, 6, nil, false, true},
			{1, 2, "", 0, 1250 * ms, 10, 3, nil, false, true},
			{2, 0, "", 0, 0, 5, 2, nil, false, false},
		}, `trace testdata/peer/applied_compute_agentic.jsonl: ignoring fields the replay does not read: task (line 2)`},
		// Bailian: seconds, turns chained by parent_chat_id, 16 tokens per hash id (set below).
		{"bailian.jsonl", []row{
			{1, 0, "159", 0, 0, 40, 13, nil, false, false},
			{3, 1, "160", 1386 * ms, 1386 * ms, 70, 8, nil, false, false},
			{2, 0, "161", 386 * ms, 0, 20, 5, nil, false, false},
		}, ""},
	}
	// The literal token counts are the built-in tokenizer's: check them against it.
	if enc("What is the capital of France?") != 7 || enc("Hello there") != 2 || chat(sys, user) != 23 ||
		chat(sys, user, tokenize.Message{Role: "assistant"}, tokenize.Message{Role: "tool", Content: "Sunny, 21 C"}) != 39 {
		t.Fatal("the built-in tokenizer's counts changed: update the table")
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var warnings []string
			opts := peerOptions(&warnings)
			if tt.file == "bailian.jsonl" {
				opts.TraceBlockSize = 16
			}
			src, err := OpenTrace(filepath.Join("testdata", "peer", tt.file), opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			for _, r := range requests(collect(t, src)) {
				got = append(got, row{r.Line, r.Turn, r.ID, r.At, r.Delay, r.InputLen, r.OutputLen, r.After, r.Awaited, r.History})
				if n := len(r.AppendTokens(nil)); n != r.InputLen {
					t.Errorf("line %d: %d tokens for input %d", r.Line, n, r.InputLen)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("rows\n got %v\nwant %v", got, tt.want)
			}
			switch {
			case tt.warn == "" && len(warnings) != 0:
				t.Errorf("warnings %q, want none", warnings)
			case tt.warn != "" && (len(warnings) != 1 || warnings[0] != tt.warn):
				t.Errorf("warnings %q, want exactly %q", warnings, tt.warn)
			}
		})
	}
}

// TestPeerTracesBad: a damaged row of each variant fails naming its line and field.
func TestPeerTracesBad(t *testing.T) {
	tests := []struct {
		file, field string
		line        int
		sub         string
	}{
		{"bad_aiperf_text.jsonl", "text_input", 2, "want a string, got array"},
		{"bad_aiperf_messages.jsonl", "messages", 2, "[0]: content[0]: only text and image_url parts are supported"},
		{"bad_dynamo_priority.jsonl", "priority", 2, "want a number, got string"},
		{"bad_agentic_mooncake.jsonl", "wait_for", 2, "want an array of request_ids, got string"},
		{"bad_agentic_subagents.jsonl", "wait_for", 2, `"parent-2" is the request_id of no earlier row`},
		{"bad_applied_compute_agentic.jsonl", "tool_call_output_length", 2, "1 values, want num_turns = 2"},
		{"bad_bailian.jsonl", "parent_chat_id", 2, `"158" is the chat_id of no earlier row`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "peer", tt.file)
			var warnings []string
			opts := peerOptions(&warnings)
			if tt.file == "bad_bailian.jsonl" {
				opts.TraceBlockSize = 16
			}
			_, err := OpenTrace(path, opts)
			checkTraceError(t, err, path, tt.line, tt.field, tt.sub)
		})
	}
}

// TestTextRowTokens: a text row's prompt is its tokenizer's encoding, and rows sharing a text prefix
// share leading tokens, so their KV blocks match.
func TestTextRowTokens(t *testing.T) {
	tk := tokenize.WithBOS(tokenize.Builtin(), 7)
	sessions := readMooncakeString(t, `{"text_input": "the cat sat on the mat", "output_length": 1}`+"\n"+
		`{"text_input": "the cat sat on the hat", "output_length": 1}`, TraceOptions{Tokenizer: tk})
	a, b := sessions[0].Turns[0].AppendTokens(nil), sessions[1].Turns[0].AppendTokens(nil)
	if fmt.Sprint(a) != fmt.Sprint(tk.Encode("the cat sat on the mat")) || a[0] != 7 {
		t.Fatalf("tokens %v, want the tokenizer's %v", a, tk.Encode("the cat sat on the mat"))
	}
	if len(a) != 7 || len(b) != 7 || fmt.Sprint(a[:6]) != fmt.Sprint(b[:6]) || a[6] == b[6] {
		t.Fatalf("tokens %v and %v: want 7 each, the first 6 shared", a, b)
	}
}

// TestMissingOutputWithoutModel: with no output-length model a row must give its length.
func TestMissingOutputWithoutModel(t *testing.T) {
	_, err := ReadTrace(strings.NewReader(`{"text_input": "hi"}`), "t.jsonl", TraceOptions{})
	checkTraceError(t, err, "t.jsonl", 1, "output_length", "missing")
}

// TestIgnoredFieldsWarning: one warning for the whole file, each field named once with the first line
// that has it, in line order; a file of many stray keys names 20 and counts the rest.
func TestIgnoredFieldsWarning(t *testing.T) {
	var warnings []string
	opts := TraceOptions{Warn: func(msg string) { warnings = append(warnings, msg) }}
	readMooncakeString(t, `{"timestamp": 0, "input_length": 4, "output_length": 1, "zeta": 1, "alpha": 2}`+"\n"+
		`{"timestamp": 1, "input_length": 4, "output_length": 1, "alpha": 3, "beta": null}`, opts)
	want := "trace t.jsonl: ignoring fields the replay does not read: alpha (line 1), zeta (line 1), beta (line 2)"
	if len(warnings) != 1 || warnings[0] != want {
		t.Fatalf("warnings %q, want exactly %q", warnings, want)
	}
	var b strings.Builder
	b.WriteString(`{"timestamp": 0, "input_length": 4, "output_length": 1`)
	for i := range 25 {
		fmt.Fprintf(&b, `, "k%02d": 0`, i)
	}
	b.WriteString("}")
	warnings = nil
	readMooncakeString(t, b.String(), opts)
	if len(warnings) != 1 || !strings.HasSuffix(warnings[0], "k18 (line 1), k19 (line 1) and 5 more") {
		t.Fatalf("warnings %q, want one naming k00..k19 and 5 more", warnings)
	}
}

// TestBailianFieldInMooncake: a Bailian row read as Mooncake (seconds taken for milliseconds) is refused.
func TestBailianFieldInMooncake(t *testing.T) {
	_, err := ReadTrace(strings.NewReader(`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 1.5, "input_length": 4, "output_length": 1}`),
		"t.jsonl", TraceOptions{Format: "mooncake"})
	checkTraceError(t, err, "t.jsonl", 1, "parent_chat_id", "give --trace-format bailian")
}
