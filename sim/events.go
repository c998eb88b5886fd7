package sim

import (
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/router"
)

// phase orders events that fall at the same instant, as the reference's replay loop does (pass
// completion, worker ready, transfer completion, admission, telemetry, scaling): a pass that ends at t
// frees its worker and delivers its tokens before a request arriving at t is routed, and all of them
// happen before new passes start at t. With a frontend latency, a request that arrived earlier and
// leaves the frontend at t is routed before one arriving at t (which only enters the frontend).
type phase uint8

const (
	phasePassEnd     phase = iota // a worker's forward pass ends
	phaseWorkerReady              // a worker the planner started begins serving
	phaseTransfer                 // KV transfers complete (disaggregated serving)
	phaseRoute                    // a request leaves the frontend and is routed (Options.FrontendLatency)
	phaseArrival                  // a request arrives
	phaseKVEvents                 // delayed KV events reach a router (--router-event-delay-ms)
	phasePlanner                  // the planner ticks
)

type event struct {
	at    time.Duration
	phase phase
	key   uint64 // stable tie-break within a phase: worker serial, request id, session number, generation
	w     *worker
	sess  *session
	kv    *delayedEvents
}

// delayedEvents are KV events held back from a router.
type delayedEvents struct {
	pool   *pool
	target router.Target
	events []kvcache.Event
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
