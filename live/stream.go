package live

import (
	"sync"
	"time"
)

// Stream carries one request's output from the worker that runs it to the HTTP handler that answers
// it. The worker appends and never blocks, however slow the client: tokens wait here until the handler
// takes them (at most the request's max_tokens, so the buffer is bounded).
type Stream struct {
	ID uint64

	mu      sync.Mutex
	pending []uint32
	ends    []int // where each pass's tokens end in pending: one streamed chunk each (none kept when quiet)
	cached  int   // prompt tokens served from the prefix cache
	done    bool
	err     error
	ready   chan struct{} // signalled (without blocking) whenever something changes
	// quiet streams signal only their end: an unstreamed response has nothing to do with a pass's
	// tokens until the last, and waking its handler for each pass costs more than the rest of it.
	quiet bool

	// Written by the worker's loop only (and by Submit before the loop sees the stream).
	enqueued  time.Time // handed to the engine
	arrived   time.Time // accepted by the server
	scheduled time.Time // first admitted into a pass
	first     time.Time // first token's publication
	last      time.Time // last token's publication
	prompt    int
	generated int
	maxTokens int
	rank      int
	admitted  bool

	// finish is how the request ends when it runs its course ("stop" or "length"; "" is "length"):
	// set before it is submitted, for the metrics' finished_reason.
	finish string
}

func (s *Stream) reason() string {
	if s.finish == "" {
		return "length"
	}
	return s.finish
}

// newStream returns a request's stream, signalling ready (nil: a channel of its own; a response's
// choices share one).
func newStream(id uint64, promptTokens int, arrived time.Time, ready chan struct{}) *Stream {
	s := new(Stream)
	s.init(id, promptTokens, arrived, ready)
	return s
}

// init makes the zero s the stream newStream returns.
func (s *Stream) init(id uint64, promptTokens int, arrived time.Time, ready chan struct{}) {
	if ready == nil {
		ready = make(chan struct{}, 1)
	}
	s.ID, s.prompt, s.arrived, s.ready = id, promptTokens, arrived, ready
}

// passRoom is the tokens (and passes) a streamed response's buffers are sized for before its first
// pass: those of a short output, which its handler usually takes before as many more come.
const passRoom = 64

// expect sizes the stream's buffers for its n tokens before they come, rather than growing them pass
// by pass: a quiet stream's for all of them (its handler takes them all at its end), another's for at
// most passRoom (its handler takes them as they come).
func (s *Stream) expect(n int) {
	if !s.quiet {
		n = min(n, passRoom)
		s.ends = make([]int, 0, n)
	}
	s.pending = make([]uint32, 0, n)
}

// Ready is signalled whenever Next has something new to say.
func (s *Stream) Ready() <-chan struct{} { return s.ready }

// Next appends to toks the tokens published since the last call, and to ends where each pass's share
// of them ends (a pass is one chunk of a streamed response; a quiet stream keeps no ends), and reports
// whether the request has finished (err is set when it failed). A quiet stream given an empty toks
// hands its tokens over rather than copying them: they are its handler's alone from then on.
func (s *Stream) Next(toks []uint32, ends []int) ([]uint32, []int, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quiet && len(toks) == 0 {
		n := len(s.pending)
		// Capped at n: later pushes fill the rest of the buffer, never what was handed over.
		toks, s.pending = s.pending[:n:n], s.pending[n:]
		return toks, ends, s.done, s.err
	}
	base := len(toks)
	toks = append(toks, s.pending...)
	for _, e := range s.ends {
		ends = append(ends, base+e)
	}
	s.pending, s.ends = s.pending[:0], s.ends[:0]
	return toks, ends, s.done, s.err
}

// Cached is the number of prompt tokens the engine found in its prefix cache when it admitted the
// request (0 until then).
func (s *Stream) Cached() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cached
}

// ended reports whether the request has finished or failed (Next has yet to say so), and how many
// tokens Next has yet to hand over.
func (s *Stream) ended() (done bool, pending int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done, len(s.pending)
}

func (s *Stream) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *Stream) push(toks []uint32, done bool) {
	s.mu.Lock()
	if len(toks) > 0 {
		s.pending = append(s.pending, toks...)
		if !s.quiet {
			s.ends = append(s.ends, len(s.pending))
		}
	}
	s.done = s.done || done
	wake := s.done || !s.quiet
	s.mu.Unlock()
	if wake {
		s.signal()
	}
}

func (s *Stream) setCached(n int) {
	s.mu.Lock()
	s.cached = n
	s.mu.Unlock()
}

// fail ends the stream with err, unless it has already ended.
func (s *Stream) fail(err error) {
	s.mu.Lock()
	if !s.done {
		s.done, s.err = true, err
	}
	s.mu.Unlock()
	s.signal()
}
