// Package book is the request bookkeeping that sched/vllm and sched/sglang share, so that a fix to it lands
// once: a Request's common state (identity, tokens, progress, this pass's work), and a Book that keeps the
// live, held and reserved requests, checks what is enqueued or reserved, recycles finished requests, owns
// the Pass with its admissions, preemptions and output tokens, counts preemptions and prefix hits, and
// lists the adapters in use; and Loads, the requests loading their prefix back from a lower KV tier.
//
// What differs stays in each scheduler: admission, eviction, preemption or retraction, and the KV cache
// (vLLM's block pool, SGLang's radix tree). A Book reaches its scheduler through Hooks: make an empty
// request, find room for a reservation, take a request out of its queues, free its KV.
//
// The hot paths stay plain loops in the schedulers: the Book's per-pass helpers (Seq, Sample, Request.Plain)
// take the *Request a scheduler's request embeds, so no pass makes an indirect call per request or token.
// Start reading at Book.
package book

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/timing"
)

// Req is a scheduler's request type: a pointer to a struct that embeds Request.
type Req interface {
	comparable
	request() *Request
}

// Hooks are what a Book asks of its scheduler.
type Hooks[P Req] struct {
	// New returns an empty request (taking one from Book.Reuse when it can), with a sequence unless bare.
	New func(bare bool) P
	// Room finds the KV room for a reservation (r's prompt is in its sequence): it shares the prompt's cached
	// prefix and allocates the rest, reporting the cached tokens, or ok false when the KV does not fit now.
	Room func(r P, maxTokens int) (cached int, ok bool)
	// Remove takes a live request out of the scheduler's queues (it is cancelled).
	Remove func(P)
	// Free releases the KV a request holds (it ends, is cancelled, transferred or unreserved).
	Free func(P)
}

// Limits are what a request must fit to be served at all (Check).
type Limits struct {
	MaxModelLen int // prompt + output tokens; 0: unbounded
	// MaxBatchedTokens, when set, is a pass's token budget that a whole request must fit: vLLM without
	// chunked prefill, whose recompute after a preemption is one pass.
	MaxBatchedTokens int
	BlockSize        int
	NumBlocks        int
	Extra            int    // tokens the pool must hold beside the request's (GuaranteedNoEvict: the drafts)
	Unit             string // what a block is called in messages: "blocks", "pages"
}

// Book keeps one scheduler's requests: live ones (waiting or running, in the scheduler's queues), a
// prefill worker's held ones (finished, their KV kept for its transfer) and a decode worker's reserved ones
// (their KV room kept while it arrives). It owns the Pass each Step returns. Finished requests are reused
// for new ones, but only from the next Step on: until then the Pass may still refer to them.
type Book[P Req] struct {
	Pass      sched.Pass
	Scheduled []P // this pass's work, in scheduling order

	Live, Held, Reserved map[uint64]P

	hooks           Hooks[P]
	limits          Limits
	role            sched.Role
	drafts          int
	spec            *sched.Sampler
	tokens          []uint32
	finished, spare []P

	preemptions   int64
	prefixQueries int64
	prefixHits    int64

	WithLoRA int // requests held here that name an adapter (a scheduler lists adapters only then)
}

// New returns an empty Book.
func New[P Req](h Hooks[P], l Limits, role sched.Role, spec sched.Spec) *Book[P] {
	return &Book[P]{Live: make(map[uint64]P), Held: make(map[uint64]P), Reserved: make(map[uint64]P),
		hooks: h, limits: l, role: role, drafts: spec.Tokens, spec: sched.NewSampler(spec)}
}

// Check rejects a request the engine can never serve — malformed, a duplicate, longer than max-model-len
// or (Limits.MaxBatchedTokens) a pass, needing more blocks than the whole pool even alone — with a
// *sched.RejectError.
func (b *Book[P]) Check(r *sched.Request) error {
	reject := func(format string, a ...any) error {
		return &sched.RejectError{ID: r.ID, Reason: fmt.Sprintf(format, a...)}
	}
	if r.PromptLen() == 0 {
		return reject("empty prompt")
	}
	if r.MaxTokens < 0 {
		return reject("max_tokens %d is negative", r.MaxTokens)
	}
	if b.known(r.ID) {
		return reject("duplicate request id")
	}
	// max_tokens comes from the wire and may be near 2^63: limits are compared as differences, never as
	// sums that could overflow and pass.
	l, n := &b.limits, r.PromptLen()
	if l.MaxModelLen > 0 && r.MaxTokens > l.MaxModelLen-n {
		return reject("prompt (%d tokens) + max_tokens (%d) exceeds max-model-len %d", n, r.MaxTokens, l.MaxModelLen)
	}
	if l.MaxBatchedTokens > 0 && r.MaxTokens > l.MaxBatchedTokens-n {
		// vLLM requires max_num_batched_tokens >= max_model_len without chunked prefill; a longer request
		// (or its recompute after preemption) could never be scheduled.
		return reject("prompt (%d tokens) + max_tokens (%d) exceeds max-num-batched-tokens %d with chunked prefill off", n, r.MaxTokens, l.MaxBatchedTokens)
	}
	if r.MaxTokens > l.NumBlocks*l.BlockSize-n-l.Extra {
		if r.MaxTokens > math.MaxInt-n-l.Extra-l.BlockSize {
			return reject("max_tokens %d is beyond any pool", r.MaxTokens)
		}
		need := (n + r.MaxTokens + l.Extra + l.BlockSize - 1) / l.BlockSize
		return reject("needs %d KV %s for prompt (%d tokens) + max_tokens (%d), the pool has %d", need, l.Unit, n, r.MaxTokens, l.NumBlocks)
	}
	return nil
}

// known reports whether request id is live, held or reserved.
func (b *Book[P]) known(id uint64) bool {
	_, live := b.Live[id]
	_, held := b.Held[id]
	_, reserved := b.Reserved[id]
	return live || held || reserved
}

// Enqueue checks r and returns it as a new live request, its prompt in its sequence unless bare (the
// scheduler keeps the prompt's source instead); the scheduler queues it.
func (b *Book[P]) Enqueue(r *sched.Request, bare bool) (P, error) {
	if err := b.Check(r); err != nil {
		return *new(P), err
	}
	req := b.newRequest(r, bare)
	b.Live[r.ID] = req
	return req, nil
}

// newRequest makes a request of r (Hooks.New), its prompt in its sequence unless bare.
func (b *Book[P]) newRequest(r *sched.Request, bare bool) P {
	req := b.hooks.New(bare)
	q := req.request()
	q.ID, q.MaxTokens, q.Planned, q.LoRA = r.ID, r.MaxTokens, r.OutputTokens, r.LoRA
	if q.LoRA != "" {
		b.WithLoRA++
	}
	if !bare {
		r.MovePrompt(&q.Seq)
	}
	return req
}

// Reuse returns a request to reuse, or nil; Hooks.New empties it.
func (b *Book[P]) Reuse() P {
	n := len(b.spare)
	if n == 0 {
		return *new(P)
	}
	r := b.spare[n-1]
	b.spare = b.spare[:n-1]
	return r
}

// Reserve makes room on a decode worker for a request whose prompt KV is about to arrive (Hooks.Room). It
// returns how many prompt tokens the worker lacks (what the transfer must carry), or ok false if the
// pool cannot hold the prompt now (the driver retries when capacity frees). A request that can never run
// is rejected with a *sched.RejectError.
func (b *Book[P]) Reserve(r *sched.Request) (missing int, ok bool, err error) {
	if err := b.Check(r); err != nil {
		return 0, false, err
	}
	req := b.newRequest(r, false)
	q := req.request()
	cached, ok := b.hooks.Room(req, r.MaxTokens)
	if !ok {
		q.Seq.Reset()
		b.unLoRA(q)
		b.spare = append(b.spare, req)
		return 0, false, nil
	}
	b.Reserved[r.ID] = req
	b.prefixQueries += int64(q.Seq.Len())
	b.prefixHits += int64(cached)
	return q.Seq.Len() - cached, true, nil
}

// Activate makes a reserved request whose prompt KV has arrived live and returns it (nil if none is
// reserved as id): its prompt counts as computed but for the last token, which its first decode step
// recomputes. The scheduler queues it.
func (b *Book[P]) Activate(id uint64) P {
	r, ok := b.Reserved[id]
	if !ok {
		return r
	}
	delete(b.Reserved, id)
	q := r.request()
	q.Computed = q.Seq.Len() - 1
	b.Live[id] = r
	return r
}

// Release frees the KV a prefill worker kept for a finished request once it has been transferred. It
// reports whether the request was held.
func (b *Book[P]) Release(id uint64) bool { return b.drop(b.Held, id) }

// Unreserve drops a reservation (its transfer failed or the request was cancelled).
func (b *Book[P]) Unreserve(id uint64) bool { return b.drop(b.Reserved, id) }

// drop removes request id from m (held or reserved requests) and frees its KV.
func (b *Book[P]) drop(m map[uint64]P, id uint64) bool {
	r, ok := m[id]
	if !ok {
		return false
	}
	delete(m, id)
	b.hooks.Free(r)
	b.unLoRA(r.request())
	b.finished = append(b.finished, r)
	return true
}

// Cancel removes a request wherever it is (waiting, running, held for its transfer, reserved while its
// KV arrives) and frees its KV. It reports whether it was found.
func (b *Book[P]) Cancel(id uint64) bool {
	if b.Release(id) || b.Unreserve(id) {
		return true
	}
	r, ok := b.Live[id]
	if !ok {
		return false
	}
	b.hooks.Remove(r)
	b.hooks.Free(r)
	b.retire(r)
	return true
}

// Finish ends a request that Sample reported done: a prefill worker holds it with its KV until the
// transfer is done, any other frees its KV.
func (b *Book[P]) Finish(r P) {
	q := r.request()
	if b.role == sched.Prefill {
		delete(b.Live, q.ID)
		b.Held[q.ID] = r
		return
	}
	b.hooks.Free(r)
	b.retire(r)
}

// retire drops a request that has left the scheduler; its memory is reused after the next Step.
func (b *Book[P]) retire(r P) {
	q := r.request()
	delete(b.Live, q.ID)
	b.unLoRA(q)
	q.Planned = nil
	b.finished = append(b.finished, r)
}

// unLoRA forgets that a request leaving the scheduler named an adapter.
func (b *Book[P]) unLoRA(q *Request) {
	if q.LoRA != "" {
		b.WithLoRA--
		q.LoRA = ""
	}
}

// Idle reports whether no request is live.
func (b *Book[P]) Idle() bool { return len(b.Live) == 0 }

// Begin starts a Step: it empties the Pass and the scheduled requests, and makes the requests that
// finished before the last Step reusable, returning them.
func (b *Book[P]) Begin() (recycled []P) {
	b.Pass.Reset()
	n := len(b.spare)
	b.spare = append(b.spare, b.finished...)
	clear(b.finished)
	b.finished = b.finished[:0]
	b.Scheduled = b.Scheduled[:0]
	b.tokens = b.tokens[:0]
	return b.spare[n:]
}

// Plain reports whether plain decode steps are possible at all: not with speculative decoding, nor in a
// disaggregated role.
func (b *Book[P]) Plain() bool { return b.drafts == 0 && b.role == sched.Aggregated }

// Admit records r's admission with cached prompt tokens from the prefix cache.
func (b *Book[P]) Admit(r *Request, cached int) {
	b.Pass.Admitted = append(b.Pass.Admitted, sched.Admission{ID: r.ID, Cached: cached, Resumed: r.Preemptions > 0})
	b.prefixQueries += int64(r.Seq.Len())
	b.prefixHits += int64(cached)
}

// AdmitTransfer records the admission of an activated transfer, whose prompt KV arrived.
func (b *Book[P]) AdmitTransfer(r *Request) {
	b.Pass.Admitted = append(b.Pass.Admitted, sched.Admission{ID: r.ID, Cached: r.Computed})
}

// Preempt records that r lost its KV and waits to recompute it, keeping its output.
func (b *Book[P]) Preempt(r *Request) {
	r.Computed = 0
	r.Preemptions++
	b.preemptions++
	b.Pass.Preempted = append(b.Pass.Preempted, r.ID)
}

// Seq adds r's work in this pass to the batch and reports whether r samples a token at its end: its
// computed tokens reach its length and it has output left; a prefill worker's first token comes out of
// its prefill pass at no decode cost (reference §4).
func (b *Book[P]) Seq(r *Request) bool {
	samples := r.Computed >= r.Seq.Len() && r.Generated < r.MaxTokens && b.role != sched.Prefill
	b.Pass.Batch.Seqs = append(b.Pass.Batch.Seqs, timing.Seq{New: r.PassNew, Cached: r.PassCached, Prefill: r.PassPrefill, Samples: samples})
	b.Pass.SeqIDs = append(b.Pass.SeqIDs, r.ID)
	return samples
}

// Sample adds to the Pass the output of r, whose computed tokens reach its length, and reports whether r
// is done: its output is complete, or it is a prefill worker's. The output is the token r samples, or after
// a speculative step the bonus token and the accepted drafts, whose KV then counts as computed (the
// scheduler frees what it reserved for the rejected ones); none once its output is complete.
func (b *Book[P]) Sample(r *Request) (done bool) {
	out := sched.Output{ID: r.ID}
	if r.Generated < r.MaxTokens {
		n := 1
		if r.PassDrafts > 0 {
			n = b.spec.Burst(r.PassDrafts, r.MaxTokens-r.Generated)
			r.Computed += n - 1
		}
		start := len(b.tokens)
		for range n {
			tok := sched.OutputToken(r.ID, r.Generated, r.Planned)
			r.Seq.Append(tok)
			r.Generated++
			b.tokens = append(b.tokens, tok)
		}
		out.Tokens = b.tokens[start:len(b.tokens):len(b.tokens)]
	}
	out.Done = r.Generated >= r.MaxTokens || b.role == sched.Prefill
	b.Pass.Outputs = append(b.Pass.Outputs, out)
	return out.Done
}

// Metrics is the scheduler's state: its own counts, and the Book's counters.
func (b *Book[P]) Metrics(running, waiting, active, inactive, total int) sched.Metrics {
	m := sched.Metrics{
		Running:        running,
		Waiting:        waiting,
		ActiveBlocks:   active,
		InactiveBlocks: inactive,
		TotalBlocks:    total,
		Preemptions:    b.preemptions,
		PrefixQueries:  b.prefixQueries,
		PrefixHits:     b.prefixHits,
	}
	m.SpecSteps, m.SpecTokens = b.spec.Counts()
	return m
}

// Front is the part of sched.Scheduler a Book answers alone, for a scheduler to embed.
type Front[P Req] struct{ b *Book[P] }

// Front returns b's Front.
func (b *Book[P]) Front() Front[P] { return Front[P]{b} }

// Release frees the KV a prefill worker kept for a finished request once it has been transferred. It
// reports whether the request was held.
func (f Front[P]) Release(id uint64) bool { return f.b.Release(id) }

// Reserve makes room on a decode worker for a request whose prompt KV is about to arrive: it shares its
// cached prefix and allocates the rest. It returns how many prompt tokens the worker lacks (what the
// transfer must carry), or ok false if the pool cannot hold the prompt now (the driver retries when
// capacity frees). A request that can never run is rejected with a *sched.RejectError.
func (f Front[P]) Reserve(r *sched.Request) (missing int, ok bool, err error) { return f.b.Reserve(r) }

// Unreserve drops a reservation (its transfer failed or the request was cancelled).
func (f Front[P]) Unreserve(id uint64) bool { return f.b.Unreserve(id) }

// Cancel removes a request wherever it is (waiting, running, held for its transfer, reserved while its
// KV arrives) and frees its KV. It reports whether it was found.
func (f Front[P]) Cancel(id uint64) bool { return f.b.Cancel(id) }

// Idle reports whether the scheduler has no request.
func (f Front[P]) Idle() bool { return f.b.Idle() }

// ListLoRAs sets m's RunningLoRAs and WaitingLoRAs: the adapters the running and the waiting requests name,
// each once in the order first met, comma-separated; none while no request here names one. Nil requests
// among the waiting are passed over.
func (b *Book[P]) ListLoRAs(m *sched.Metrics, running []P, waiting ...[]P) {
	if b.WithLoRA == 0 {
		return
	}
	var names []string
	for _, r := range running {
		names = AppendLoRA(names, r.request().LoRA)
	}
	m.RunningLoRAs = strings.Join(names, ",")
	names = names[:0]
	var none P
	for _, q := range waiting {
		for _, r := range q {
			if r != none {
				names = AppendLoRA(names, r.request().LoRA)
			}
		}
	}
	m.WaitingLoRAs = strings.Join(names, ",")
}

// AppendLoRA appends adapter name to names unless it is there or is the base model's.
func AppendLoRA(names []string, name string) []string {
	if name == "" || slices.Contains(names, name) {
		return names
	}
	return append(names, name)
}
