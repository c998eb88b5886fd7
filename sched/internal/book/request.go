package book

import (
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokens"
)

// Request is the state every scheduler keeps of a request; a scheduler's own request type embeds it.
type Request struct {
	ID          uint64
	LoRA        string           // adapter, "" for the base model
	Seq         *tokens.Sequence // prompt and generated tokens
	MaxTokens   int
	Planned     []uint32 // the trace's output token ids
	Generated   int
	Computed    int // tokens whose KV is computed, or scheduled in the current pass
	Preemptions int // times preempted (SGLang: retracted); it recomputes when admitted again

	// The current pass's work.
	PassNew     int // tokens computed, draft tokens included
	PassCached  int
	PassPrefill bool
	PassDrafts  int // draft tokens of a speculative decode step
}

func (r *Request) request() *Request { return r }

// Plain reports whether r's next step computes exactly its next token without finishing it: the part of
// a plain decode step (see sched.Scheduler.PlainDecode) that does not depend on the KV cache.
func (r *Request) Plain() bool {
	return r.Computed+1 == r.Seq.Len() && r.Generated+1 < r.MaxTokens
}

// PlainSeq is r's work in a plain decode step.
func (r *Request) PlainSeq() timing.Seq {
	return timing.Seq{New: 1, Cached: r.Computed, Samples: true}
}

// PlainStep applies r's plain decode step: it computes its next token and samples one.
func (r *Request) PlainStep() sched.Sample {
	r.Computed++
	tok := sched.OutputToken(r.ID, r.Generated, r.Planned)
	r.Seq.Append(tok)
	r.Generated++
	return sched.Sample{ID: r.ID, Token: tok}
}
