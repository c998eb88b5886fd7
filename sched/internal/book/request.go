package book

import (
	"fmt"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokens"
)

// Request is the state every scheduler keeps of a request; a scheduler's own request type embeds it.
type Request struct {
	ID   uint64
	LoRA string           // adapter, "" for the base model
	Seq  *tokens.Sequence // prompt and generated tokens; nil while Src holds the prompt
	// Src is a waiting request's prompt, made into Seq (MakePrompt) when the scheduler first needs
	// its tokens, so that a queue of thousands holds no prompts; SrcLen is its length.
	Src         sched.PromptSource
	SrcLen      int
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

// Length is the request's prompt and generated tokens, made or not.
func (r *Request) Length() int {
	if r.Src != nil {
		return r.SrcLen
	}
	return r.Seq.Len()
}

// MakePrompt makes the prompt Src holds into Seq, an empty buffer the scheduler gives it, seeded for the
// request's adapter, and drops Src. A source that makes another length than it said is a bug (backend
// names the scheduler in the panic).
func (r *Request) MakePrompt(backend string) {
	if r.LoRA != "" {
		r.Seq.SetSeed(tokens.LoRASeed(r.LoRA))
	}
	r.Src.AppendSequence(r.Seq)
	if r.Seq.Len() != r.SrcLen {
		panic(fmt.Sprintf("%s: request %d: its source made %d prompt tokens, it said %d", backend, r.ID, r.Seq.Len(), r.SrcLen))
	}
	r.Src = nil
}

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
