package sim

import "time"

// frontend is the API server as one single-threaded process (SGLang's TokenizerManager: one asyncio loop
// takes every request in and streams every output chunk out): a FIFO server that spends PerRequest on
// each arriving request and PerChunk on each chunk of tokens a pass delivers, so that when the engines
// out-produce it, chunks and new requests queue behind it and clients see tokens when it has sent them.
type frontend struct {
	perRequest, perChunk time.Duration
	free                 time.Duration // when the process finishes what it has taken so far
}

func (f *frontend) on() bool { return f.perRequest > 0 || f.perChunk > 0 }

// take queues work costing d that reaches the process at `at` and returns when the process is done with it.
func (f *frontend) take(at, d time.Duration) time.Duration {
	f.free = max(f.free, at) + d
	return f.free
}

// clientEnd ends a request whose last chunk the frontend sends at the event's time: the client sees the
// request end then, and a closed-loop client sends its next one.
func (r *runner) clientEnd(req *request) error {
	r.col.Finished(int(req.id), r.now)
	if r.o.Finished != nil && !r.o.Finished(r.col.Latency(int(req.id))) {
		return ErrStopped
	}
	if r.planner != nil {
		r.planner.completed(req)
	}
	return r.requestEnded(req)
}
