package sim

import "time"

// phase orders events that fall at the same instant: a pass that ends at t frees its worker before a
// request arriving at t is queued, and both happen before new passes start at t.
type phase uint8

const (
	phasePassEnd phase = iota
	phaseArrival
)

type event struct {
	at     time.Duration
	phase  phase
	key    uint64 // stable tie-break within a phase: worker index, or session sequence number
	worker int
	sess   *session
}

func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.phase != b.phase {
		return a.phase < b.phase
	}
	return a.key < b.key
}

// eventHeap is a binary min-heap of events, container/heap's algorithm on a typed slice so that pushing
// and popping an event does not box it.
type eventHeap []event

func (h *eventHeap) push(ev event) {
	*h = append(*h, ev)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].before(&q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = event{}
	q = q[:n]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && q[l].before(&q[least]) {
			least = l
		}
		if r < n && q[r].before(&q[least]) {
			least = r
		}
		if least == i {
			break
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
	*h = q
	return top
}
