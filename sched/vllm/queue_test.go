package vllm

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// TestQueueParts: the two runs of the ring buffer hold the queue's requests in order, whether or not
// they wrap around its end.
func TestQueueParts(t *testing.T) {
	var q queue
	ids := func() []uint64 {
		front, back := q.parts()
		var got []uint64
		for _, r := range slices.Concat(front, back) {
			got = append(got, r.ID)
		}
		return got
	}
	if got := ids(); len(got) != 0 {
		t.Fatalf("empty queue: %v", got)
	}
	push := func(id uint64, front bool) {
		r := &request{}
		r.ID, r.Seq = id, tokens.NewSequence(4)
		if front {
			q.pushFront(r)
		} else {
			q.pushBack(r)
		}
	}
	for id := range uint64(3) {
		push(id+1, false)
	}
	if got := ids(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("got %v, want [1 2 3]", got)
	}
	push(0, true) // wraps: the head moves to the end of the buffer
	if front, back := q.parts(); len(front) != 1 || len(back) != 3 {
		t.Fatalf("runs of %d and %d, want 1 and 3 (the queue wraps)", len(front), len(back))
	}
	if got := ids(); !slices.Equal(got, []uint64{0, 1, 2, 3}) {
		t.Fatalf("got %v, want [0 1 2 3]", got)
	}
}
