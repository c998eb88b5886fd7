package live

import (
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func signalled(s *Stream) bool {
	select {
	case <-s.Ready():
		return true
	default:
		return false
	}
}

// An unstreamed response's stream wakes its handler once, when the request ends, however many passes
// it took; the tokens of every pass are still there, with no pass's end kept.
func TestQuietStreamSignalsOnlyItsEnd(t *testing.T) {
	s := newStream(1, 3, time.Time{}, nil)
	s.quiet = true
	s.push([]uint32{1}, false)
	s.push([]uint32{2, 3}, false)
	if signalled(s) {
		t.Fatal("a quiet stream signalled a pass that did not end it")
	}
	s.push([]uint32{4}, true)
	if !signalled(s) {
		t.Fatal("a quiet stream did not signal its end")
	}
	toks, ends, done, err := s.Next(nil, nil)
	if !slices.Equal(toks, []uint32{1, 2, 3, 4}) || len(ends) != 0 || !done || err != nil {
		t.Fatalf("Next = %v, %v, %v, %v; want [1 2 3 4], [], true, nil", toks, ends, done, err)
	}
}

// A quiet stream hands its handler the buffer expect sized rather than a copy, and tokens pushed after
// a hand-over go on in the rest of that buffer without touching what was handed over.
func TestQuietStreamHandsOver(t *testing.T) {
	s := newStream(1, 3, time.Time{}, nil)
	s.quiet = true
	s.expect(4)
	buf := s.pending[:4]
	s.push([]uint32{1, 2}, false)
	first, _, done, _ := s.Next(nil, nil)
	if !slices.Equal(first, []uint32{1, 2}) || done || &first[0] != &buf[0] {
		t.Fatalf("first Next = %v (at %p), done %v; want [1 2] at the expected buffer %p, not done", first, &first[0], done, &buf[0])
	}
	s.push([]uint32{3, 4}, true)
	rest, _, done, _ := s.Next(first[:0], nil)
	if !slices.Equal(rest, []uint32{3, 4}) || !done || &rest[0] != &buf[2] {
		t.Fatalf("second Next = %v (at %p), done %v; want [3 4] at %p, done", rest, &rest[0], done, &buf[2])
	}
	if !slices.Equal(first, []uint32{1, 2}) || !slices.Equal(buf, []uint32{1, 2, 3, 4}) {
		t.Fatalf("after both: first %v, buffer %v; want [1 2], [1 2 3 4]", first, buf)
	}
	if s.ends != nil {
		t.Fatalf("a quiet stream kept ends %v", s.ends)
	}
}

func TestQuietStreamSignalsFailure(t *testing.T) {
	s := newStream(1, 3, time.Time{}, nil)
	s.quiet = true
	s.push([]uint32{1}, false)
	s.fail(errCancelled)
	if !signalled(s) {
		t.Fatal("a quiet stream did not signal its failure")
	}
	if _, _, done, err := s.Next(nil, nil); !done || !errors.Is(err, errCancelled) {
		t.Fatalf("Next: done %v, err %v; want true, %v", done, err, errCancelled)
	}
}

// A streamed response's stream signals every pass: each is a chunk.
func TestStreamSignalsEveryPass(t *testing.T) {
	s := newStream(1, 3, time.Time{}, nil)
	for i := range 3 {
		s.push([]uint32{uint32(i)}, false)
		if !signalled(s) {
			t.Fatalf("pass %d: no signal", i)
		}
	}
}

// writes records each Write of a response.
type writes struct {
	*httptest.ResponseRecorder
	each []string
}

func (w *writes) Write(b []byte) (int, error) {
	w.each = append(w.each, string(b))
	return w.ResponseRecorder.Write(b)
}

// A stream's last chunks, the usage chunk and [DONE] leave in one write (one system call, not two, per
// stream), and the stream's bytes are what they were.
func TestStreamEndsInOneWrite(t *testing.T) {
	s := instantServer(t)
	for _, body := range []string{
		`{"model":"test-model","prompt":"hi there","max_tokens":4,"ignore_eos":true,"stream":true}`,
		`{"model":"test-model","prompt":"hi there","max_tokens":4,"ignore_eos":true,"stream":true,"n":2,"stream_options":{"include_usage":true}}`,
	} {
		w := &writes{ResponseRecorder: httptest.NewRecorder()}
		s.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
		if w.Code != 200 {
			t.Fatalf("%s: status %d: %s", body, w.Code, w.Body)
		}
		last := w.each[len(w.each)-1]
		if !strings.HasPrefix(last, "data: {") || !strings.Contains(last, `"finish_reason":"length"`) || !strings.HasSuffix(last, "data: [DONE]\n\n") {
			t.Errorf("%s: the last write is %q, want the last chunk through [DONE]", body, last)
		}
		if got, want := strings.Count(w.Body.String(), `"finish_reason":"length"`), strings.Count(body, `"n":2`)+1; got != want {
			t.Errorf("%s: %d choices finished, want %d:\n%s", body, got, want, w.Body)
		}
		if strings.Contains(body, "include_usage") && !strings.Contains(last, `"usage":{"prompt_tokens"`) {
			t.Errorf("%s: the last write has no usage: %q", body, last)
		}
	}
}
