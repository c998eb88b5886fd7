package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestRule(t *testing.T) {
	tests := []struct {
		fill byte
		text string
		want string
	}{
		// Python's "{:=^50}": an odd leftover goes right.
		{'=', " Serving Benchmark Result ", "============ Serving Benchmark Result ============"},
		{'-', "Time to First Token", "---------------Time to First Token----------------"},
		{'-', "Time per Output Token (excl. 1st token)", "-----Time per Output Token (excl. 1st token)------"},
		{'-', "Inter-token Latency", "---------------Inter-token Latency----------------"},
		{'-', "End-to-end Latency", "----------------End-to-end Latency----------------"},
		{'=', " é ", strings.Repeat("=", 23) + " é " + strings.Repeat("=", 24)},
		{'=', strings.Repeat("x", 60), strings.Repeat("x", 60)},
	}
	for _, tt := range tests {
		var b strings.Builder
		rule(&b, tt.fill, tt.text)
		if got := strings.TrimSuffix(b.String(), "\n"); got != tt.want {
			t.Errorf("rule(%q, %q) = %q, want %q", tt.fill, tt.text, got, tt.want)
		}
	}
}

func TestWriteTableTitle(t *testing.T) {
	var b bytes.Buffer
	if err := (Summary{}).WriteTable(&b, "vllm h200 tp1"); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(b.String(), "\n")
	if want := "================= vllm h200 tp1 =================="; first != want {
		t.Errorf("first line = %q, want %q", first, want)
	}
	for i, line := range strings.Split(b.String(), "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("line %d has trailing space: %q", i, line)
		}
	}
}
