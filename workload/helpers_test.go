package workload

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// collect drains src.
func collect(t testing.TB, src Source) []*Session {
	t.Helper()
	var out []*Session
	for {
		s, err := src.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, s)
	}
}

// requests flattens sessions into their turns, in order.
func requests(sessions []*Session) []Request {
	var out []Request
	for _, s := range sessions {
		out = append(out, turns(s)...)
	}
	return out
}

// turns returns every turn of s, the later turns of a synthetic conversation made (Session.Turn).
func turns(s *Session) []Request {
	out := make([]Request, s.Len())
	for i := range out {
		out[i] = *s.Turn(i)
	}
	return out
}

// readMooncakeString loads a Mooncake trace given inline, named t.jsonl.
func readMooncakeString(t *testing.T, text string, opts TraceOptions) []*Session {
	t.Helper()
	src, err := ReadTrace(strings.NewReader(text), "t.jsonl", opts)
	if err != nil {
		t.Fatalf("ReadTrace: %v", err)
	}
	return collect(t, src)
}

// checkTraceError checks that err is a *TraceError for the line and field
// and that its message names file, line and field and contains sub.
func checkTraceError(t *testing.T, err error, file string, line int, field, sub string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one about line %d field %q containing %q", line, field, sub)
	}
	var te *TraceError
	if !errors.As(err, &te) {
		t.Fatalf("error %q (%T) is not a *TraceError", err, err)
	}
	if te.Line != line || te.Field != field {
		t.Errorf("error %q: line %d field %q, want line %d field %q", err, te.Line, te.Field, line, field)
	}
	msg := err.Error()
	want := []string{"trace " + file, sub}
	if line > 0 {
		want = append(want, "line "+strconv.Itoa(line)+":")
	}
	if field != "" {
		want = append(want, field+":")
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
}

// dataDir is shared/data beside the repository root, as tests and
// benchmarks read it.
const dataDir = "../../shared/data"

// dataFile returns the path of a shared data file, skipping the test when
// the data is not there.
func dataFile(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(dataDir, rel)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("shared data not available (%v); it lives in ../shared/data relative to the repository root", err)
	}
	return p
}
