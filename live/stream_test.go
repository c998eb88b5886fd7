package live

import (
	"errors"
	"slices"
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
// it took; the tokens of every pass are still there, pass by pass.
func TestQuietStreamSignalsOnlyItsEnd(t *testing.T) {
	s := newStream(1, 3, time.Time{})
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
	if !slices.Equal(toks, []uint32{1, 2, 3, 4}) || !slices.Equal(ends, []int{1, 3, 4}) || !done || err != nil {
		t.Fatalf("Next = %v, %v, %v, %v; want [1 2 3 4], [1 3 4], true, nil", toks, ends, done, err)
	}
}

func TestQuietStreamSignalsFailure(t *testing.T) {
	s := newStream(1, 3, time.Time{})
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
	s := newStream(1, 3, time.Time{})
	for i := range 3 {
		s.push([]uint32{uint32(i)}, false)
		if !signalled(s) {
			t.Fatalf("pass %d: no signal", i)
		}
	}
}
