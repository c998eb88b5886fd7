package sched

import (
	"fmt"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokens"
)

// Request is one request for an engine.
type Request struct {
	ID        uint64   // unique among the engine's live requests
	Prompt    []uint32 // prompt token ids; the scheduler hashes them and does not keep the slice
	MaxTokens int      // output tokens to generate; 0 finishes right after prefill with no token
	// OutputTokens, if set, are the ids of the first output tokens (a trace's planned output); later
	// tokens are synthesised by TokenID.
	OutputTokens []uint32
	Rank         int // data-parallel rank that serves the request
	// Seq, if set, is the prompt already hashed at the engine's block size (a router needed it): the
	// scheduler copies its identities instead of hashing Prompt, which may then be nil.
	Seq *tokens.Sequence
	// GiveSeq says the caller lets go of Seq when Enqueue returns: a scheduler that would copy it whole
	// takes it instead and leaves its own empty sequence in Seq, for the caller to reuse (MovePrompt).
	GiveSeq bool
	// Source, if set, makes the prompt again when the scheduler needs its blocks, in place of Prompt or Seq
	// (which may then be nil): a vLLM scheduler with a long queue keeps only the source of a request that
	// waits, so the queue holds no prompts.
	Source PromptSource
	// LoRA names the adapter that serves the request, "" for the base model: its blocks are hashed with
	// the adapter's seed (tokens.LoRASeed), and a vLLM scheduler bounds the adapters per pass.
	LoRA string
	// Images are the prompt's images, sorted by Start: each one's content hash (the extra key of the blocks
	// it overlaps, and its encoder-cache entry) and its placeholder tokens' span, which counts in the
	// prompt's length. A Seq or Source carries them in its hashes already; Images also tell the engine
	// what its vision encoder must run.
	Images []tokens.Item
}

// PromptSource makes a prompt on demand, the same tokens every time (a workload's request), declaring its
// images' items on the sequence (tokens.Sequence.AddItems).
type PromptSource interface {
	PromptLen() int
	AppendSequence(seq *tokens.Sequence)
}

// PromptLen is the prompt's length in tokens.
func (r *Request) PromptLen() int {
	switch {
	case r.Seq != nil:
		return r.Seq.Len()
	case r.Prompt == nil && r.Source != nil:
		return r.Source.PromptLen()
	}
	return len(r.Prompt)
}

// AppendPrompt appends r's prompt to the empty seq, copying r.Seq when it fits seq's block size, else
// hashing it with r's adapter's seed.
func (r *Request) AppendPrompt(seq *tokens.Sequence) {
	if r.LoRA != "" {
		seq.SetSeed(tokens.LoRASeed(r.LoRA))
	}
	if r.Seq != nil && r.Seq.BlockSize() == seq.BlockSize() && (r.Seq.Tokens() != nil || !seq.Keeping()) {
		seq.AppendSequence(r.Seq)
		return
	}
	if r.Prompt == nil && r.Source != nil {
		r.Source.AppendSequence(seq)
		return
	}
	if r.Seq != nil && r.Prompt == nil {
		panic(fmt.Sprintf("sched: request %d: its Seq does not fit the engine (block size %d) and it has no Prompt", r.ID, seq.BlockSize()))
	}
	seq.AddItems(r.Images...)
	seq.Append(r.Prompt...)
}

// MovePrompt is AppendPrompt into *seq, an empty sequence, except that a Seq given up (GiveSeq) that
// AppendPrompt would copy whole, keeping tokens as *seq does, is swapped with *seq instead: the scheduler
// holds the caller's sequence, the caller gets back the empty one. The prompt is the same either way.
func (r *Request) MovePrompt(seq **tokens.Sequence) {
	s := *seq
	if r.GiveSeq && r.Seq != nil && r.Seq.BlockSize() == s.BlockSize() && r.Seq.Keeping() == s.Keeping() &&
		(r.Seq.Tokens() != nil || !s.Keeping()) {
		*seq, r.Seq = r.Seq, s
		return
	}
	r.AppendPrompt(s)
}

// Scheduler is one data-parallel rank's scheduler, as the engine drives it: requests in, a Pass planned
// per Step, metrics and invariants out; plain decode passes applied without a Pass (the engine's Coast);
// and the disaggregated roles' hand-offs. sched/schedtest holds every implementation to it.
type Scheduler interface {
	Enqueue(*Request) error
	Step() *Pass
	Cancel(id uint64) bool
	Idle() bool
	Metrics() Metrics
	Waiting() int // Metrics().Waiting, cheaply: a live server reads it on every request
	CheckInvariants() error

	// Plain decode passes (the engine's Coast): PlainBatch and PlainStep describe and apply the pass the
	// last PlainDecode found, called just before and reporting true (or, for a scheduler that is also the
	// engine's decoder, its last DecodePass that did).
	PlainDecode() bool
	PlainBatch(*timing.Batch)
	PlainStep([]Sample) []Sample

	// Disaggregation.
	Release(id uint64) bool
	Reserve(*Request) (missing int, ok bool, err error)
	Activate(id uint64) bool
	Unreserve(id uint64) bool
}

// Role is a worker's place in disaggregated serving.
type Role uint8

const (
	// Aggregated workers prefill and decode their requests.
	Aggregated Role = iota
	// Prefill workers compute prompts and keep their KV until it has been transferred: a request
	// finishes with its prompt (its sampled token goes nowhere), and the worker holds its blocks until
	// the driver releases them.
	Prefill
	// Decode workers receive requests whose prompt KV arrives from a prefill worker: the driver reserves
	// the room, transfers, then activates the request, which decodes from its first token on.
	Decode
)

// RejectError reports a request the engine can never serve; it is terminal.
type RejectError struct {
	ID     uint64
	Reason string
}

func (e *RejectError) Error() string { return fmt.Sprintf("request %d rejected: %s", e.ID, e.Reason) }

// Admission records a request entering the running set.
type Admission struct {
	ID      uint64
	Cached  int  // prompt tokens served from the prefix cache
	Resumed bool // the request was preempted before and now recomputes
}

// Output is what one request produced in a pass: tokens, completion, or both.
type Output struct {
	ID     uint64
	Tokens []uint32 // owned by the Pass
	Done   bool     // the request finished; its blocks are released
}

// Sample is the one token a request sampled in a plain decode pass (see engine.Engine.Coast).
type Sample struct {
	ID    uint64
	Token uint32
}

// Pass is one scheduler's share of a forward pass. It is owned by the scheduler and valid until its next
// Step. Consumers act on it in field order: admissions and preemptions happen at the pass start, events
// describe cache changes made while planning, outputs appear at the pass end.
type Pass struct {
	Batch     timing.Batch
	SeqIDs    []uint64 // the request of each of Batch.Seqs, in order
	Admitted  []Admission
	Preempted []uint64
	Events    []kvcache.Event
	Outputs   []Output
	FPM       ForwardPass
	LoRALoads int // LoRA adapters loaded before the pass can run (not resident when first used)
	// Until, when not zero, is when a pass that computes nothing ends: the scheduler waits for KV it
	// onboards from a lower tier (the engine's clock; see vllm.Scheduler.SetNow).
	Until time.Duration
}

// Empty reports whether the pass did nothing.
func (p *Pass) Empty() bool {
	return len(p.Batch.Seqs) == 0 && len(p.Outputs) == 0 && len(p.Admitted) == 0 && len(p.Preempted) == 0 && len(p.Events) == 0 &&
		p.Until == 0
}

// Reset empties the pass, keeping its buffers.
func (p *Pass) Reset() {
	*p = Pass{
		Batch:     timing.Batch{Seqs: p.Batch.Seqs[:0]},
		SeqIDs:    p.SeqIDs[:0],
		Admitted:  p.Admitted[:0],
		Preempted: p.Preempted[:0],
		Events:    p.Events[:0],
		Outputs:   p.Outputs[:0],
	}
}

// ForwardPass is the forward-pass metrics snapshot of reference §4, the planner's view of one pass.
// Prefill lengths are prompt lengths up to the end of the scheduled chunk; KV tokens of a prefill are its
// cached or already computed prefix; a decode's KV tokens are its context. Queued requests are the waiting
// ones: never admitted (prefill, by prompt length) or preempted (decode, by prompt + generated tokens).
type ForwardPass struct {
	NumPrefillRequests     int
	SumPrefillTokens       int // new tokens computed
	VarPrefillLength       float64
	SumPrefillKVTokens     int
	NumDecodeRequests      int
	SumDecodeKVTokens      int
	VarDecodeKVTokens      float64
	NumQueuedPrefill       int
	SumQueuedPrefillTokens int
	VarQueuedPrefillLength float64
	NumQueuedDecode        int
	SumQueuedDecodeTokens  int
	VarQueuedDecodeTokens  float64
}

// Metrics is a scheduler's state, as engine metrics report it.
type Metrics struct {
	Running, Waiting int
	ActiveBlocks     int // blocks referenced by requests
	InactiveBlocks   int // cached blocks nobody references (evictable)
	TotalBlocks      int
	Preemptions      int64 // total
	PrefixQueries    int64 // prompt tokens looked up at admissions
	PrefixHits       int64 // of those, tokens found in the cache
	SpecSteps        int64 // speculative decode steps
	SpecTokens       int64 // tokens those steps emitted (mean accepted length = SpecTokens / SpecSteps)
	// The LoRA adapters of the running and the waiting requests, comma-separated, each once in queue
	// order (vllm:lora_requests_info); empty while no request names one.
	RunningLoRAs, WaitingLoRAs string
	LoRALoads                  int64 // adapters loaded, total

	Tiers kvcache.TierStats // the lower KV tiers' onboardings and write-backs
}

// CacheUsage is the fraction of blocks in use, vLLM's kv_cache_usage_perc.
func (m Metrics) CacheUsage() float64 {
	if m.TotalBlocks == 0 {
		return 0
	}
	return float64(m.ActiveBlocks) / float64(m.TotalBlocks)
}

// OutputToken is request id's index-th output token: the planned one if the request brought it (a trace's
// output token ids), else a synthetic id hashed from both, so outputs are deterministic whatever the order
// requests are served in.
func OutputToken(id uint64, index int, planned []uint32) uint32 {
	if index < len(planned) {
		return planned[index]
	}
	x := id*0x9e3779b97f4a7c15 + uint64(index) + 0x632be59bd9b4e019
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return uint32(x)
}

// Fill computes the forward-pass metrics of a pass from its batch and the waiting queue's statistics:
// fresh requests (never admitted) by prompt length, preempted ones by prompt + generated tokens.
func (f *ForwardPass) Fill(b *timing.Batch, fresh, preempted Moments) {
	var pre, dec Moments
	*f = ForwardPass{}
	for _, q := range b.Seqs {
		if q.Prefill {
			pre.Add(q.Cached + q.New)
			f.SumPrefillTokens += q.New
			f.SumPrefillKVTokens += q.Cached
		} else {
			dec.Add(q.Cached + q.New)
		}
	}
	f.NumPrefillRequests, f.VarPrefillLength = pre.N, pre.Var()
	f.NumDecodeRequests, f.SumDecodeKVTokens, f.VarDecodeKVTokens = dec.N, int(dec.Sum), dec.Var()
	f.NumQueuedPrefill, f.SumQueuedPrefillTokens, f.VarQueuedPrefillLength = fresh.N, int(fresh.Sum), fresh.Var()
	f.NumQueuedDecode, f.SumQueuedDecodeTokens, f.VarQueuedDecodeTokens = preempted.N, int(preempted.Sum), preempted.Var()
}
