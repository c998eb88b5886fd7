package workload

import (
	"strings"
	"testing"
	"time"
)

func TestAzure(t *testing.T) {
	// The first row arrives at 0. The last line has no newline, as in the
	// published files.
	const text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n" +
		"2023-11-16 18:15:46.5,10,0\r\n" +
		"2023-11-16 18:15:46.6805900,374,44\r\n" +
		"\r\n" +
		"2023-11-16 18:15:50.9951690,396,109"
	for _, name := range []string{"t.csv", "t.txt"} { // by extension, by content
		src, err := ReadTrace(strings.NewReader(text), name, TraceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := src.Requests(); n != 3 {
			t.Errorf("Requests() = %d, want 3", n)
		}
		got := requests(collect(t, src))
		want := []Request{
			{Key: 0, Line: 2, At: 0, InputLen: 10, OutputLen: 0},
			{Key: 1, Line: 3, At: 180590 * time.Microsecond, InputLen: 374, OutputLen: 44},
			{Key: 2, Line: 5, At: 4495169 * time.Microsecond, InputLen: 396, OutputLen: 109},
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d requests, want %d", name, len(got), len(want))
		}
		for i := range want {
			g := got[i]
			if g.Key != want[i].Key || g.Line != want[i].Line || g.At != want[i].At || g.InputLen != want[i].InputLen ||
				g.OutputLen != want[i].OutputLen || g.Turn != 0 || g.HashIDs() != nil {
				t.Errorf("%s: request %d = %s in=%d out=%d, want %s in=%d out=%d", name, i,
					turnSummary(g), g.InputLen, g.OutputLen, turnSummary(want[i]), want[i].InputLen, want[i].OutputLen)
			}
			if tok := g.AppendTokens(nil); len(tok) != g.InputLen || tok[0]&uniqueBit == 0 {
				t.Errorf("%s: request %d tokens are not %d unique tokens", name, i, g.InputLen)
			}
		}
	}
}

func TestAzureErrors(t *testing.T) {
	const header = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	const ok = "2023-11-16 18:15:46.6805900,374,44\n"
	tests := []struct {
		name  string
		text  string
		line  int
		field string
		sub   string
	}{
		{"bad header", "TIMESTAMP,Context,Generated\n" + ok, 1, "header", `want "TIMESTAMP,ContextTokens,GeneratedTokens"`},
		{"no header", ok, 1, "header", "want"},
		{"empty", "", 0, "", "empty file"},
		{"header only", header, 0, "", "no requests"},
		{"bad timestamp", header + ok + "2023-11-16T18:15:46,1,1\n", 3, "TIMESTAMP", "want a time like"},
		{"zero context", header + "\n" + "2023-11-16 18:15:46.1,0,1\n", 3, "ContextTokens", "[1, 16777216]"},
		{"negative generated", header + "2023-11-16 18:15:46.1,3,-1\n", 2, "GeneratedTokens", "[0, 16777216]"},
		{"too few fields", header + "2023-11-16 18:15:46.1,3\n", 2, "", "want 3 comma-separated fields"},
		{"out of order", header + ok + "\n" + "2023-11-16 18:15:46.5,10,0\n", 4, "TIMESTAMP", "2023-11-16 18:15:46.5 is before line 2's"},
		{"too many fields", header + "2023-11-16 18:15:46.1,3,4,5\n", 2, "", "want 3 comma-separated fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tt.text), "t.csv", TraceOptions{})
			checkTraceError(t, err, "t.csv", tt.line, tt.field, tt.sub)
		})
	}
	// Forcing a format overrides the extension.
	_, err := ReadTrace(strings.NewReader(header+ok), "t.csv", TraceOptions{Format: "mooncake"})
	checkTraceError(t, err, "t.csv", 1, "", "want a JSON object")
}
