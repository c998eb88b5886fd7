package book

import (
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// TestSpares: the buffer put last comes back first, Max bounds what is kept, and an empty list gives the
// zero value.
func TestSpares(t *testing.T) {
	s := Spares[int]{Max: 2}
	for i := 1; i <= 3; i++ {
		if kept := s.Put(i); kept != (i <= 2) {
			t.Errorf("Put(%d) kept %v, want %v", i, kept, i <= 2)
		}
	}
	if s.Len() != 2 {
		t.Fatalf("kept %d, want 2", s.Len())
	}
	for _, want := range []int{2, 1, 0} {
		if got := s.Take(); got != want {
			t.Errorf("Take() = %d, want %d", got, want)
		}
	}
	var all Spares[int]
	for i := range 100 {
		all.Put(i)
	}
	if all.Len() != 100 {
		t.Errorf("unbounded: kept %d, want 100", all.Len())
	}
}

// TestSeqSparesBoundedInBlocks: the kept sequences have room for at most MaxSeqBlocks blocks between
// them: one that would take them past it is dropped, taking one gives its room back, and Max bounds
// their number as Spares'. Rooms are the capacities Grow gave, whatever it rounded them to.
func TestSeqSparesBoundedInBlocks(t *testing.T) {
	long := func(blocks int) *tokens.Sequence {
		s := tokens.NewSequence(1)
		s.Grow(blocks)
		s.Append(1, 2, 3)
		return s
	}
	room := func(s *tokens.Sequence) int { return cap(s.Blocks()) }
	// fitting is the longest sequence whose room is at most n blocks.
	fitting := func(n int) *tokens.Sequence {
		for k := n; ; k-- {
			if seq := long(k); room(seq) <= n {
				return seq
			}
		}
	}
	var s SeqSpares
	held := 0
	for range 3 {
		seq := long(MaxSeqBlocks / 4)
		held += room(seq)
		s.Put(seq) // about three quarters of the budget
	}
	s.Put(long(MaxSeqBlocks - held + 1)) // past it: dropped
	last := fitting(MaxSeqBlocks - held)
	s.Put(last) // up to the budget: kept
	held += room(last)
	if n, b := s.Len(), s.Blocks(); n != 4 || b != held || b > MaxSeqBlocks {
		t.Fatalf("%d sequences kept with room for %d blocks; want 4 and %d (at most %d)", n, b, held, MaxSeqBlocks)
	}
	next := s.Take(1)
	if c := room(next); c != room(last) || s.Blocks() != held-c || next.Len() != 0 {
		t.Fatalf("took a sequence of room %d (%d tokens), %d left; want the last kept's %d, empty, and %d", c, next.Len(), s.Blocks(), room(last), held-room(last))
	}
	s.Put(next) // fits again
	if n, b := s.Len(), s.Blocks(); n != 4 || b != held {
		t.Fatalf("%d sequences kept with room for %d blocks; want 4 and %d", n, b, held)
	}
	for s.Len() > 0 {
		s.Take(1)
	}
	if b := s.Blocks(); b != 0 {
		t.Fatalf("none kept with room for %d blocks, want 0", b)
	}
	if seq := s.Take(4); seq == nil || seq.Len() != 0 || seq.BlockSize() != 4 {
		t.Fatalf("none kept: Take(4) = %v, want a new empty sequence of 4-token blocks", seq)
	}
	few := SeqSpares{Spares: Spares[*tokens.Sequence]{Max: 1}}
	first := long(MaxSeqBlocks / 4)
	few.Put(first)
	few.Put(long(MaxSeqBlocks / 4))
	if n, b := few.Len(), few.Blocks(); n != 1 || b != room(first) {
		t.Fatalf("Max 1: %d kept with room for %d blocks, want 1 and %d", n, b, room(first))
	}
}
