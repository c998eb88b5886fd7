package workload

import (
	"io"
	"strconv"
	"time"

	"github.com/mocker-sim/mocker/tokens"
)

// Request is one request of a workload before its tokens are synthesised.
type Request struct {
	Key       uint64        // unique within the workload (0, 1, 2, ... in source order); salts request-unique tokens
	ID        string        // the trace's request_id, if any
	Line      int           // 1-based line in the trace file; 0 for synthetic requests
	Turn      int           // 0-based index of the request in its session
	At        time.Duration // arrival offset from the workload start; meaningful for Turn 0 (later turns keep their own timestamp here, informational)
	Delay     time.Duration // Turn > 0: time to wait after the previous turn completes before this one arrives
	InputLen  int           // prompt tokens this request contributes (with History: the new tokens only, appended after the history)
	OutputLen int           // tokens to generate (max_tokens; may be 0)

	// Images are the prompt's images (see ImageKey), sorted by Start; their tokens count in InputLen.
	Images []tokens.Item

	OutputTokenIDs []uint32 // planned output token ids (trace field output_token_ids), nil if none; if set, OutputLen == len
	Priority       int      // trace field priority (informational)
	LoRA           string   // the LoRA adapter that serves the request (trace field lora); "" for the base model

	// Agentic traces: After holds the Keys of earlier requests, other than the previous turn of the
	// session, that must end before this one is sent; it is then sent Delay after the last of them
	// (and the previous turn) ends. A first turn with After has At 0 and no arrival time of its own.
	// Awaited says some request's After holds this one's Key.
	After   []uint64
	Awaited bool

	// History means the prompt starts with the session's previous prompt
	// and generated output (synthetic multi-turn chat); the simulator
	// prepends that, the request's own tokens are only the new part.
	History bool

	// How the tokens are made (see AppendTokens). A zero Request makes
	// InputLen request-unique tokens, which is what tests of other packages
	// usually want. The lengths are at most MaxTokens: int32s, next to the
	// bools above, keep a Request to 256 bytes (an overloaded replay holds
	// every waiting conversation's turns).
	blockSize int32    // trace: tokens per hash id
	prefixLen int32    // synthetic: leading tokens taken from the shared prefix group
	imageLen  int32    // synthetic: ImageToken placeholders after the prefix, the images' spans
	prompt    []uint32 // trace: the tokens of a text_input or messages row, InputLen of them
	hashes    []uint32 // trace: low 32 bits of each hash id, one per block of blockSize tokens
	prefix    uint64   // synthetic: seed of the group's prefix tokens
	salt      uint64   // mixed with Key (or entry) into the request-unique tokens
	entry     uint64   // synthetic with a dataset pool: 1 + the entry whose prompt the request repeats; 0: its own
}

// Name is the request's id in the workload: the trace's request_id, else its Key in decimal
// (stable for a file, or for a seed of the generator).
func (r *Request) Name() string {
	if r.ID != "" {
		return r.ID
	}
	return strconv.FormatUint(r.Key, 10)
}

// HashIDs returns the trace's hash ids of the request, each truncated to its
// low 32 bits (the token the block is made of), or nil when it has none.
// The slice is shared; do not modify it.
func (r *Request) HashIDs() []uint32 { return r.hashes }

// Session is an ordered list of turns; a standalone request is a session of
// one turn. Len and Turn see every turn; Turns holds them all but for a synthetic
// conversation (SyntheticOptions.TurnsPerSession > 1), which keeps of its later turns only
// their drawn numbers until Turn makes them: an overloaded replay holds thousands of
// sessions waiting to start, each needing only its first turn.
type Session struct {
	Turns []Request   // the turns held whole, not always all of them: read turn k as Turn(k), k < Len()
	later []laterTurn // the turns after Turns, as Turn makes them
}

// laterTurn is what a synthetic conversation's later turn draws; the rest comes from its first turn.
type laterTurn struct {
	inputLen, outputLen int32 // at most MaxTokens
	delay               time.Duration
}

// Len is the number of turns.
func (s *Session) Len() int { return len(s.Turns) + len(s.later) }

// Turn returns turn i, 0 <= i < Len: one of Turns, or a synthetic conversation's later turn, made
// anew at each call.
func (s *Session) Turn(i int) *Request {
	if i < len(s.Turns) {
		return &s.Turns[i]
	}
	return s.TurnAt(i, new(Request))
}

// TurnAt is Turn making a later turn in r, so that a caller that only reads it holds nothing.
func (s *Session) TurnAt(i int, r *Request) *Request {
	if i < len(s.Turns) {
		return &s.Turns[i]
	}
	l, first := &s.later[i-len(s.Turns)], &s.Turns[0]
	*r = Request{Key: first.Key + uint64(i), Turn: i, At: first.At, Delay: l.delay,
		InputLen: int(l.inputLen), OutputLen: int(l.outputLen), LoRA: first.LoRA, History: true, salt: first.salt}
	return r
}

// History says whether a turn after the first carries the conversation so far (Request.History).
func (s *Session) History() bool {
	if len(s.later) > 0 {
		return true
	}
	for i := 1; i < len(s.Turns); i++ {
		if s.Turns[i].History {
			return true
		}
	}
	return false
}

// Source yields sessions in non-decreasing order of Turns[0].At. Next returns
// io.EOF at the end. Sources are not safe for concurrent use.
type Source interface {
	Next() (*Session, error)
	Requests() int // total number of requests (all turns) the source will yield, -1 if unknown
}

// sessionList is a Source over sessions held in memory (a loaded trace).
type sessionList struct {
	sessions []Session
	next     int
	requests int
}

func (s *sessionList) Next() (*Session, error) {
	if s.next >= len(s.sessions) {
		return nil, io.EOF
	}
	s.next++
	return &s.sessions[s.next-1], nil
}

func (s *sessionList) Requests() int { return s.requests }
