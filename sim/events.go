package sim

import (
	"math"
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
	phaseWorkerDown               // a worker fails (Options.Failures): after the passes ending then
	phaseWorkerUp                 // a failed worker comes back
	phaseWorkerReady              // a worker the planner started begins serving
	phaseTransfer                 // KV transfers complete (disaggregated serving)
	phaseClientEnd                // the frontend sends a request's last chunk (Options.FrontendPerChunk)
	phaseRoute                    // a request leaves the frontend and is routed (Options.FrontendLatency)
	phaseArrival                  // a request arrives
	phaseKVEvents                 // delayed KV events reach a router (--router-event-delay-ms)
	phasePlanner                  // the planner ticks
)

type event struct {
	at    time.Duration
	phase phase
	epoch uint32 // pass end: the worker's epoch when the pass started (a failure voids it)
	key   uint64 // stable tie-break within a phase: worker serial, request id, session number, generation, failure
	w     *worker
	sess  *session
	kv    *delayedEvents
}

// delayedEvents are KV events held back from a router.
type delayedEvents struct {
	pool   *pool
	epoch  uint32 // the worker's when they were published
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

// timeline is the pending events in two heaps: the workers' own (pass ends, and KV events on their way
// to a router) and the others, which may route a request or change the pools (arrivals, routes,
// transfers, the planner's), so that lookahead reads its bound off the second heap's top. Events come
// out in the order of one heap over both.
type timeline struct {
	own, others eventHeap
}

func (t *timeline) push(ev event) {
	if ev.phase == phasePassEnd || ev.phase == phaseKVEvents {
		t.own.push(ev)
	} else {
		t.others.push(ev)
	}
}

func (t *timeline) len() int { return len(t.own) + len(t.others) }

// first returns the heap holding the earliest event; it must not be called on an empty timeline.
func (t *timeline) first() *eventHeap {
	if len(t.others) == 0 || len(t.own) > 0 && t.own[0].before(&t.others[0]) {
		return &t.own
	}
	return &t.others
}

// next is the time of the earliest event; the timeline must not be empty.
func (t *timeline) next() time.Duration { return (*t.first())[0].at }

func (t *timeline) pop() event { return t.first().pop() }

// bound is the time of the earliest event other than a worker's own, or the end of time.
func (t *timeline) bound() time.Duration {
	if len(t.others) == 0 {
		return time.Duration(math.MaxInt64)
	}
	return t.others[0].at
}
