package book

import "testing"

// TestSpares: the buffer put last comes back first, Max bounds what is kept, and an empty list gives the
// zero value.
func TestSpares(t *testing.T) {
	s := Spares[int]{Max: 2}
	for i := 1; i <= 3; i++ {
		s.Put(i)
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
