package vllm

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokens"
)

// Preemption chooses the victim when the pool is full.
type Preemption uint8

const (
	// LIFO preempts the newest running request (vLLM's default).
	LIFO Preemption = iota
	// FIFO preempts the oldest running request.
	FIFO
)

// ParsePreemption parses "lifo" or "fifo".
func ParsePreemption(s string) (Preemption, error) {
	switch s {
	case "lifo", "":
		return LIFO, nil
	case "fifo":
		return FIFO, nil
	}
	return 0, fmt.Errorf("preemption mode %q: want lifo or fifo", s)
}

// Capacity is the admission policy.
type Capacity uint8

const (
	// MaxUtilization admits a request when its prompt fits now and preempts when the pool runs out
	// (vLLM).
	MaxUtilization Capacity = iota
	// GuaranteedNoEvict admits a request only if its prompt and its whole output fit beside what every
	// running request may still need, so nothing is ever preempted (TensorRT-LLM's
	// guaranteed_no_evict).
	GuaranteedNoEvict
	// ChunkFit admits a request when the blocks of the chunk it is scheduled now fit, whatever the rest of
	// its prompt will need, and preempts when the pool runs out: vLLM v1's allocate_slots, which allocates
	// for the tokens a step schedules only. Under KV pressure it admits more and preempts more than
	// MaxUtilization, the reference's whole-prompt gate.
	ChunkFit
)

// ParseCapacity parses the vLLM admission gates: "prompt" (MaxUtilization) or "chunk" (ChunkFit).
func ParseCapacity(s string) (Capacity, error) {
	switch s {
	case "prompt", "":
		return MaxUtilization, nil
	case "chunk":
		return ChunkFit, nil
	}
	return 0, fmt.Errorf("vllm admission %q: want prompt or chunk", s)
}

// Options configure a Scheduler. Zero MaxNumSeqs, MaxBatchedTokens or MaxModelLen mean unbounded.
type Options struct {
	BlockSize        int // tokens per KV block
	NumBlocks        int // KV blocks in the pool
	MaxNumSeqs       int // running requests at most
	MaxBatchedTokens int // tokens per pass
	MaxModelLen      int // prompt + output tokens per request
	ChunkedPrefill   bool
	PrefixCaching    bool
	Preemption       Preemption
	Capacity         Capacity
	Events           bool // record KV events (with prefix caching)

	Spec sched.Spec // speculative decoding; Spec.Tokens 0 is off
	Role sched.Role // disaggregated serving

	Tiers kvcache.TierOptions // CPU and disk tiers below the pool (with prefix caching)
}

// Validate reports the first invalid option, naming it.
func (o Options) Validate() error {
	switch {
	case o.BlockSize < 1:
		return fmt.Errorf("block-size %d: must be at least 1", o.BlockSize)
	case o.NumBlocks < 1:
		return fmt.Errorf("num-gpu-blocks %d: must be at least 1", o.NumBlocks)
	case o.MaxNumSeqs < 0:
		return fmt.Errorf("max-num-seqs %d: must not be negative", o.MaxNumSeqs)
	case o.MaxBatchedTokens < 0:
		return fmt.Errorf("max-num-batched-tokens %d: must not be negative", o.MaxBatchedTokens)
	case o.MaxModelLen < 0:
		return fmt.Errorf("max-model-len %d: must not be negative", o.MaxModelLen)
	case o.Preemption > FIFO:
		return fmt.Errorf("preemption mode %d: unknown", o.Preemption)
	case o.Capacity > ChunkFit:
		return fmt.Errorf("capacity policy %d: unknown", o.Capacity)
	}
	return o.Spec.Validate()
}

type request struct {
	id          uint64
	seq         *tokens.Sequence   // prompt and generated tokens; nil while src holds the prompt
	src         sched.PromptSource // a waiting request's prompt, made when it comes to the front (see prompt)
	srcLen      int                // src's length
	maxTokens   int
	planned     []uint32
	generated   int
	computed    int // tokens whose KV is computed (or scheduled in the current pass)
	table       []kvcache.BlockID
	committed   int // leading blocks of table that are cached
	preemptions int
	prefilling  bool // since its (re)admission the request has not yet sampled

	// The current pass's work, while inPass.
	inPass      bool
	passNew     int // tokens computed, draft tokens included
	passCached  int
	passPrefill bool
	passDrafts  int // draft tokens of a speculative decode step
}

// length is the request's prompt and generated tokens, made or not.
func (r *request) length() int {
	if r.src != nil {
		return r.srcLen
	}
	return r.seq.Len()
}

// prompt makes the prompt of a request that holds only its source. A waiting request keeps its source
// rather than its blocks (and no buffers) until it reaches the front of the queue: a queue of thousands
// then costs little.
func (s *Scheduler) prompt(r *request) {
	if r.src == nil {
		return
	}
	s.buffers(r)
	r.src.AppendSequence(r.seq)
	if r.seq.Len() != r.srcLen {
		panic(fmt.Sprintf("vllm: request %d: its source made %d prompt tokens, it said %d", r.id, r.seq.Len(), r.srcLen))
	}
	r.src = nil
}

// need is the blocks r holds or will hold at most: prompt and every output token (GuaranteedNoEvict).
func (s *Scheduler) need(r *request) int {
	return s.blocksFor(r.seq.Len() - r.generated + r.maxTokens + s.opt.Spec.Tokens)
}

// Scheduler is a vLLM v1 scheduler with its KV block pool. It is not safe for concurrent use.
type Scheduler struct {
	opt        Options
	blockShift int // log2(BlockSize) for a power of two, else -1
	pool       *kvcache.Pool
	waiting    queue
	running    []*request
	byID       map[uint64]*request

	pass      sched.Pass
	scheduled []*request // this pass's work, in scheduling order
	tokenBuf  []uint32
	hits      []kvcache.BlockID

	// Buffers of finished requests, for the next ones to run.
	seqs   []*tokens.Sequence
	tables [][]kvcache.BlockID

	// Finished requests are reused for new ones, but only from the next Step on: until then the
	// current Pass's events may still point into their sequences.
	finished, spare []*request

	// Disaggregation: a prefill worker's finished requests whose KV awaits transfer, and a decode
	// worker's requests whose KV room is reserved while it arrives.
	held, reserved map[uint64]*request

	tier tierState // requests onboarding their prefix from a lower KV tier (tier.go)

	preemptions   int64
	prefixQueries int64
	prefixHits    int64

	spec *sched.Sampler
}

// New returns an idle scheduler with an empty pool.
func New(o Options) (*Scheduler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	pool, err := kvcache.New(kvcache.Options{Capacity: o.NumBlocks, PrefixCaching: o.PrefixCaching, Events: o.Events, Tiers: o.Tiers})
	if err != nil {
		return nil, err
	}
	shift := -1
	if o.BlockSize&(o.BlockSize-1) == 0 {
		shift = bits.TrailingZeros(uint(o.BlockSize))
	}
	return &Scheduler{opt: o, blockShift: shift, pool: pool, byID: make(map[uint64]*request),
		held: make(map[uint64]*request), reserved: make(map[uint64]*request), spec: sched.NewSampler(o.Spec)}, nil
}

// Pool exposes the KV block pool, for inspection.
func (s *Scheduler) Pool() *kvcache.Pool { return s.pool }

func (s *Scheduler) blocksFor(tokens int) int {
	return s.fullBlocks(tokens + s.opt.BlockSize - 1)
}

// fullBlocks is tokens / block size, by a shift for the usual power-of-two sizes: a division per request
// per pass shows in profiles.
func (s *Scheduler) fullBlocks(tokens int) int {
	if s.blockShift >= 0 {
		return tokens >> s.blockShift
	}
	return tokens / s.opt.BlockSize
}

// lazyQueue is the queue length from which a request given with its source waits without its prompt.
const lazyQueue = 32

// Enqueue adds a request at the back of the waiting queue. A request the engine can never serve — longer
// than max-model-len, needing more blocks than the whole pool even alone, or (without chunked prefill)
// longer than the token budget — is rejected with a *sched.RejectError, as is a malformed one.
func (s *Scheduler) Enqueue(r *sched.Request) error {
	if err := s.check(r); err != nil {
		return err
	}
	// Behind a queue of lazyQueue requests, a request waits as its source if it has one: copying its
	// sequence would cost memory for as long as it waits, while making the prompt again costs its hashing
	// once.
	lazy := r.Source != nil && r.Prompt == nil && (r.Seq == nil || s.waiting.len() >= lazyQueue)
	req := s.newRequest(lazy)
	req.id, req.maxTokens, req.planned = r.ID, r.MaxTokens, r.OutputTokens
	if lazy {
		req.src, req.srcLen = r.Source, r.Source.PromptLen()
	} else {
		r.AppendPrompt(req.seq)
	}
	s.byID[r.ID] = req
	s.waiting.pushBack(req)
	return nil
}

// check rejects a request the engine can never serve.
func (s *Scheduler) check(r *sched.Request) error {
	reject := func(format string, a ...any) error {
		return &sched.RejectError{ID: r.ID, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case r.PromptLen() == 0:
		return reject("empty prompt")
	case r.MaxTokens < 0:
		return reject("max_tokens %d is negative", r.MaxTokens)
	case s.byID[r.ID] != nil || s.held[r.ID] != nil || s.reserved[r.ID] != nil:
		return reject("duplicate request id")
	}
	// max_tokens comes from the wire and may be near 2^63: limits are compared as differences, never as
	// sums that could overflow and pass.
	n := r.PromptLen()
	if s.opt.MaxModelLen > 0 && r.MaxTokens > s.opt.MaxModelLen-n {
		return reject("prompt (%d tokens) + max_tokens (%d) exceeds max-model-len %d", n, r.MaxTokens, s.opt.MaxModelLen)
	}
	if !s.opt.ChunkedPrefill && s.opt.MaxBatchedTokens > 0 && r.MaxTokens > s.opt.MaxBatchedTokens-n {
		// vLLM requires max_num_batched_tokens >= max_model_len without chunked prefill; a longer request
		// (or its recompute after preemption) could never be scheduled.
		return reject("prompt (%d tokens) + max_tokens (%d) exceeds max-num-batched-tokens %d with chunked prefill off", n, r.MaxTokens, s.opt.MaxBatchedTokens)
	}
	spec := 0
	if s.opt.Capacity == GuaranteedNoEvict {
		spec = s.opt.Spec.Tokens // admission asks for room for the drafts too (see Scheduler.need)
	}
	if r.MaxTokens > s.opt.NumBlocks*s.opt.BlockSize-n-spec {
		if r.MaxTokens > math.MaxInt-n-spec-s.opt.BlockSize {
			return reject("max_tokens %d is beyond any pool", r.MaxTokens)
		}
		return reject("needs %d KV blocks for prompt (%d tokens) + max_tokens (%d), the pool has %d", s.blocksFor(n+r.MaxTokens+spec), n, r.MaxTokens, s.opt.NumBlocks)
	}
	return nil
}

// Release frees the KV a prefill worker kept for a finished request once it has been transferred. It
// reports whether the request was held.
func (s *Scheduler) Release(id uint64) bool { return s.drop(s.held, id) }

// drop removes request id from m (held or reserved requests) and frees its blocks.
func (s *Scheduler) drop(m map[uint64]*request, id uint64) bool {
	r := m[id]
	if r == nil {
		return false
	}
	delete(m, id)
	s.pool.Release(r.table)
	s.finished = append(s.finished, r)
	return true
}

// Reserve makes room on a decode worker for a request whose prompt KV is about to arrive: it shares the
// prompt's cached prefix and allocates the rest. It returns how many prompt tokens the worker lacks (what
// the transfer must carry), or ok false if the pool cannot hold the prompt now (the driver retries when
// capacity frees). A request that can never run is rejected with a *sched.RejectError.
func (s *Scheduler) Reserve(r *sched.Request) (missing int, ok bool, err error) {
	if err := s.check(r); err != nil {
		return 0, false, err
	}
	req := s.newRequest(false)
	r.AppendPrompt(req.seq)
	blocks := req.seq.Blocks()
	var activeHits int
	s.hits, activeHits = s.pool.Match(blocks, s.hits[:0])
	need := s.blocksFor(req.seq.Len())
	fresh := need - len(s.hits)
	// GuaranteedNoEvict: the whole request must fit beside what every other request may still claim, as
	// at admission (an activated transfer is admitted without that check, and nothing preempts).
	noRoom := s.opt.Capacity == GuaranteedNoEvict &&
		s.blocksFor(req.seq.Len()+r.MaxTokens+s.opt.Spec.Tokens)-activeHits > s.pool.Capacity()-s.pool.Active()-s.promised()
	if noRoom || !s.pool.CanAllocate(s.hits, fresh) {
		req.seq.Reset()
		s.spare = append(s.spare, req)
		return 0, false, nil
	}
	req.id, req.maxTokens, req.planned = r.ID, r.MaxTokens, r.OutputTokens
	req.table = s.pool.Acquire(slices.Grow(req.table[:0], need), s.hits)
	req.table = s.pool.Allocate(req.table, fresh)
	req.committed = len(s.hits)
	s.reserved[r.ID] = req
	s.prefixQueries += int64(req.seq.Len())
	s.prefixHits += int64(len(s.hits) * s.opt.BlockSize)
	return req.seq.Len() - len(s.hits)*s.opt.BlockSize, true, nil
}

// promised is the blocks the requests holding KV may still claim (GuaranteedNoEvict): running ones,
// activated transfers waiting, and reservations.
func (s *Scheduler) promised() int {
	n := 0
	for _, r := range s.running {
		n += s.need(r) - len(r.table)
	}
	for i := 0; s.waiting.transfers > 0 && i < s.waiting.len(); i++ {
		if r := s.waiting.at(i); len(r.table) > 0 {
			n += s.need(r) - len(r.table)
		}
	}
	for _, r := range s.reserved {
		n += s.need(r) - len(r.table)
	}
	return n
}

// Activate queues a reserved request whose prompt KV has arrived: it decodes its first token when
// admitted (its prompt counts as computed but for the last token, which that decode step recomputes).
func (s *Scheduler) Activate(id uint64) bool {
	r := s.reserved[id]
	if r == nil {
		return false
	}
	delete(s.reserved, id)
	r.computed = r.seq.Len() - 1
	s.commit(r)
	s.byID[id] = r
	s.waiting.pushBack(r)
	return true
}

// Unreserve drops a reservation (its transfer failed or the request was cancelled).
func (s *Scheduler) Unreserve(id uint64) bool { return s.drop(s.reserved, id) }

// newRequest returns an empty request with a sequence, or without one (to hold a source) when bare.
func (s *Scheduler) newRequest(bare bool) *request {
	r := &request{}
	if n := len(s.spare); n > 0 {
		r = s.spare[n-1]
		s.spare = s.spare[:n-1]
		s.freeBuffers(r)
		*r = request{}
	}
	if !bare {
		s.buffers(r)
	}
	return r
}

// freeBuffers moves r's sequence and block table to the free lists, for the next request to be admitted:
// a request that waits holds none.
func (s *Scheduler) freeBuffers(r *request) {
	if r.seq != nil {
		s.seqs = append(s.seqs, r.seq)
	}
	if cap(r.table) > 0 {
		s.tables = append(s.tables, r.table[:0])
	}
	r.seq, r.table = nil, nil
}

// buffers gives r an empty sequence and block table, reusing a finished request's.
func (s *Scheduler) buffers(r *request) {
	if n := len(s.seqs); n > 0 {
		r.seq = s.seqs[n-1]
		s.seqs = s.seqs[:n-1]
		r.seq.Reset()
	} else {
		r.seq = tokens.NewSequence(s.opt.BlockSize)
	}
	if n := len(s.tables); n > 0 {
		r.table = s.tables[n-1]
		s.tables = s.tables[:n-1]
	}
}

// retire drops a request that has left the scheduler; its memory is reused after the next Step.
func (s *Scheduler) retire(r *request) {
	delete(s.byID, r.id)
	r.planned, r.src = nil, nil
	s.finished = append(s.finished, r)
}

// Cancel removes a request wherever it is (waiting, running, held for its transfer, reserved while its
// KV arrives) and releases its blocks. It reports whether it was found.
func (s *Scheduler) Cancel(id uint64) bool {
	if s.Release(id) || s.Unreserve(id) {
		return true
	}
	r := s.byID[id]
	if r == nil {
		return false
	}
	defer s.retire(r)
	if !s.waiting.remove(r) {
		for i, x := range s.running {
			if x == r {
				s.running = append(s.running[:i], s.running[i+1:]...)
				break
			}
		}
		s.unload(r)
	}
	// A waiting request holds blocks too when it is an activated transfer or onboarding.
	s.pool.Release(r.table)
	return true
}

// Idle reports whether the scheduler has no request.
func (s *Scheduler) Idle() bool { return len(s.byID) == 0 }

// Metrics reports the scheduler's state.
func (s *Scheduler) Metrics() sched.Metrics {
	m := sched.Metrics{
		Running:        len(s.running),
		Waiting:        s.waiting.len(),
		ActiveBlocks:   s.pool.Active(),
		InactiveBlocks: s.pool.Inactive(),
		TotalBlocks:    s.pool.Capacity(),
		Preemptions:    s.preemptions,
		PrefixQueries:  s.prefixQueries,
		PrefixHits:     s.prefixHits,
		Tiers:          s.pool.TierStats(),
	}
	m.SpecSteps, m.SpecTokens = s.spec.Counts()
	return m
}

// Step plans one forward pass and applies it: admissions, preemptions, cache changes, sampled tokens and
// completions. The returned Pass is valid until the next Step.
func (s *Scheduler) Step() *sched.Pass {
	p := &s.pass
	p.Reset()
	s.pool.NewPass()
	for _, r := range s.finished {
		s.freeBuffers(r)
	}
	s.spare = append(s.spare, s.finished...)
	clear(s.finished)
	s.finished = s.finished[:0]
	s.scheduled = s.scheduled[:0]
	s.tokenBuf = s.tokenBuf[:0]

	budget := s.opt.MaxBatchedTokens
	if budget == 0 {
		budget = math.MaxInt
	}
	s.loaded()
	preempted := s.scheduleRunning(&budget)
	if !preempted {
		s.admitWaiting(&budget)
	}
	s.finishPass()
	s.awaitLoads(p)
	return p
}

// PlainDecode reports whether the next pass is a plain decode step: nothing waits, and every running
// request computes exactly its next token with no block to allocate or complete and without finishing.
// Such a pass changes nothing but the requests' tokens: no admission, KV event or completion.
func (s *Scheduler) PlainDecode() bool {
	if s.waiting.len() > 0 || len(s.running) == 0 || len(s.tier.loading) > 0 || s.opt.Spec.Tokens > 0 || s.opt.Role != sched.Aggregated ||
		s.opt.MaxBatchedTokens > 0 && len(s.running) > s.opt.MaxBatchedTokens {
		return false
	}
	for _, r := range s.running {
		next := r.computed + 1
		if r.prefilling || next != r.seq.Len() || r.generated+1 >= r.maxTokens ||
			s.blocksFor(next) > len(r.table) || s.fullBlocks(next) > r.committed {
			return false
		}
	}
	return true
}

// PlainBatch fills b with the next pass when PlainDecode holds, without applying it.
func (s *Scheduler) PlainBatch(b *timing.Batch) {
	b.Seqs = b.Seqs[:0]
	for _, r := range s.running {
		b.Seqs = append(b.Seqs, timing.Seq{New: 1, Cached: r.computed, Samples: true})
	}
	b.ActiveKVTokens = s.pool.Active() * s.opt.BlockSize
	b.TotalKVTokens = s.pool.Capacity() * s.opt.BlockSize
}

// PlainStep applies the pass PlainBatch described, as Step would, appending to dst each running request's
// id and sampled token, in running order, and returns dst.
func (s *Scheduler) PlainStep(dst []sched.Sample) []sched.Sample {
	for _, r := range s.running {
		r.computed++
		tok := sched.OutputToken(r.id, r.generated, r.planned)
		r.seq.Append(tok)
		r.generated++
		dst = append(dst, sched.Sample{ID: r.id, Token: tok})
	}
	return dst
}

// scheduleRunning gives the budget to running requests in order, preempting when the pool is full. It
// reports whether anything was preempted.
func (s *Scheduler) scheduleRunning(budget *int) (preempted bool) {
	for i := 0; i < len(s.running) && *budget > 0; {
		r := s.running[i]
		remaining := r.seq.Len() - r.computed
		if r.prefilling && !s.opt.ChunkedPrefill && remaining > *budget {
			break
		}
		n := min(remaining, *budget)
		drafts := 0
		if !r.prefilling {
			// A decode step also verifies draft tokens, as far as the budget allows.
			drafts = min(s.opt.Spec.Tokens, *budget-n)
		}
		need := s.blocksFor(r.computed+n+drafts) - len(r.table)
		if need > 0 && !s.pool.CanAllocate(nil, need) && s.opt.Capacity == GuaranteedNoEvict {
			break // cannot happen: admission reserved every running request's whole output
		}
		self := false
		for need > 0 && !s.pool.CanAllocate(nil, need) {
			vi := len(s.running) - 1
			if s.opt.Preemption == FIFO {
				vi = 0
			}
			victim := s.running[vi]
			s.preempt(vi, budget)
			preempted = true
			if victim == r {
				self = true
				break
			}
			if vi < i {
				i--
			}
		}
		if self {
			continue // the next request has moved into position i
		}
		s.schedule(r, n, drafts, budget)
		i++
	}
	return preempted
}

// preempt moves running[i] to the front of the waiting queue, releasing its KV and undoing any work
// already planned for it in this pass. It keeps its generated tokens and will recompute everything.
func (s *Scheduler) preempt(i int, budget *int) {
	v := s.running[i]
	s.running = append(s.running[:i], s.running[i+1:]...)
	if v.inPass {
		*budget += v.passNew
		v.inPass = false
		for k, x := range s.scheduled {
			if x == v {
				s.scheduled = append(s.scheduled[:k], s.scheduled[k+1:]...)
				break
			}
		}
	}
	s.pool.Release(v.table)
	v.table = v.table[:0]
	v.committed = 0
	v.computed = 0
	v.prefilling = false
	v.preemptions++
	s.preemptions++
	s.waiting.pushFront(v)
	s.pass.Preempted = append(s.pass.Preempted, v.id)
}

// admitWaiting admits waiting requests strictly in FIFO order, but for activated transfers when the front
// cannot start (see admitActivated).
func (s *Scheduler) admitWaiting(budget *int) {
	// The count spares every other blocked pass a scan of the queue.
	if !s.admitFIFO(budget) && s.waiting.transfers > 0 {
		s.admitActivated(budget)
	}
}

// admitFIFO admits waiting requests in order until one cannot start; it reports whether none was left
// behind for lack of room.
func (s *Scheduler) admitFIFO(budget *int) bool {
	bs := s.opt.BlockSize
	// GuaranteedNoEvict: blocks the running requests may still claim.
	reserved := 0
	if s.opt.Capacity == GuaranteedNoEvict {
		for _, r := range s.running {
			reserved += s.need(r) - len(r.table)
		}
	}
	for s.waiting.len() > 0 && *budget > 0 && (s.opt.MaxNumSeqs == 0 || len(s.running) < s.opt.MaxNumSeqs) {
		r := s.waiting.front()
		if len(r.table) > 0 {
			s.waiting.popFront()
			s.admitTransfer(r, budget)
			continue
		}
		s.prompt(r)
		length := r.seq.Len()
		blocks := r.seq.Blocks()
		var activeHits int
		s.hits, activeHits = s.pool.Match(blocks, s.hits[:0])
		if s.pool.Tiered() {
			switch s.onboard(r, blocks, length) {
			case loadStarted:
				continue
			case loadNoRoom:
				return false
			}
		}
		hits := len(s.hits)
		if hits*bs >= length {
			// Everything is cached: recompute the last block to get logits.
			hits = (length - 1) / bs
		}
		if s.opt.Spec.Tokens > 0 && hits > 0 {
			// The draft head needs the hidden states of the last block too (reference §4).
			hits--
		}
		for _, id := range s.hits[hits:] {
			if s.pool.Referenced(id) {
				activeHits--
			}
		}
		// The whole prompt (GuaranteedNoEvict: the whole request; ChunkFit: only the chunk, below) must
		// fit beside the active blocks and the reservations; active prefix blocks are shared for free.
		want := s.blocksFor(length)
		if s.opt.Capacity == GuaranteedNoEvict {
			want = s.need(r)
		}
		if s.opt.Capacity != ChunkFit && want-activeHits > s.pool.Capacity()-s.pool.Active()-reserved {
			return false
		}
		cached := hits * bs
		remaining := length - cached
		if !s.opt.ChunkedPrefill && remaining > *budget {
			return true // the budget, not the room
		}
		n := min(remaining, *budget)
		fresh := s.blocksFor(cached+n) - hits
		if !s.pool.CanAllocate(s.hits[:hits], fresh) {
			return false
		}
		s.waiting.popFront()
		r.table = s.pool.Acquire(slices.Grow(r.table[:0], s.blocksFor(length)), s.hits[:hits])
		r.committed = hits
		r.computed = cached
		r.prefilling = true
		s.running = append(s.running, r)
		s.pass.Admitted = append(s.pass.Admitted, sched.Admission{ID: r.id, Cached: cached, Resumed: r.preemptions > 0})
		s.prefixQueries += int64(length)
		s.prefixHits += int64(cached)
		s.schedule(r, n, 0, budget) // cannot fail: CanAllocate checked the fresh blocks
		if s.opt.Capacity == GuaranteedNoEvict {
			reserved += s.need(r) - len(r.table)
		}
	}
	return true
}

// admitActivated admits the activated transfers waiting behind a front that cannot start: they hold their
// blocks until they run, and the front (a decode worker's preempted request, which recomputes locally) may
// be waiting for exactly those blocks.
func (s *Scheduler) admitActivated(budget *int) {
	for i := 0; s.waiting.transfers > 0 && *budget > 0 && (s.opt.MaxNumSeqs == 0 || len(s.running) < s.opt.MaxNumSeqs); {
		r := s.waiting.at(i)
		if len(r.table) == 0 {
			i++
			continue
		}
		s.waiting.remove(r)
		s.admitTransfer(r, budget)
	}
}

// admitTransfer starts an activated transfer (the only waiting request with blocks; a one-token prompt's
// has computed 0): its blocks are already reserved; it only decodes.
func (s *Scheduler) admitTransfer(r *request, budget *int) {
	s.running = append(s.running, r)
	s.pass.Admitted = append(s.pass.Admitted, sched.Admission{ID: r.id, Cached: r.computed})
	s.schedule(r, r.seq.Len()-r.computed, 0, budget)
}

// schedule gives n tokens (and room for drafts draft tokens) to r: allocates their blocks, caches the
// blocks they complete, and records the work. Draft tokens count as computed only once accepted.
func (s *Scheduler) schedule(r *request, n, drafts int, budget *int) {
	if need := s.blocksFor(r.computed+n+drafts) - len(r.table); need > 0 {
		r.table = s.pool.Allocate(r.table, need)
	}
	r.inPass = true
	r.passCached = r.computed
	r.passNew = n + drafts
	r.passDrafts = drafts
	r.passPrefill = r.prefilling
	r.computed += n
	s.commit(r)
	s.scheduled = append(s.scheduled, r)
	*budget -= n + drafts
}

// commit caches the full blocks r has computed.
func (s *Scheduler) commit(r *request) {
	blocks := r.seq.Blocks()
	if full := min(s.fullBlocks(r.computed), len(blocks)); full > r.committed {
		s.pool.Commit(r.table, blocks, r.committed, full)
		r.committed = full
	}
}

// finishPass samples a token for every request whose computed tokens reach its length, finishes requests,
// and fills the pass's batch, events and metrics.
func (s *Scheduler) finishPass() {
	p := &s.pass
	bs := s.opt.BlockSize
	p.Batch.ActiveKVTokens = s.pool.Active() * bs
	p.Batch.TotalKVTokens = s.pool.Capacity() * bs
	for _, r := range s.scheduled {
		ready := r.computed >= r.seq.Len()
		p.Batch.Seqs = append(p.Batch.Seqs, timing.Seq{
			New:     r.passNew,
			Cached:  r.passCached,
			Prefill: r.passPrefill,
			// A prefill worker's first token comes out of its prefill pass at no decode cost (reference §4).
			Samples: ready && r.generated < r.maxTokens && s.opt.Role != sched.Prefill,
		})
	}
	p.FPM.Fill(&p.Batch, s.waiting.fresh, s.waiting.old)

	kept := s.running[:0]
	for _, r := range s.running {
		r.inPass = false
		if r.computed < r.seq.Len() {
			kept = append(kept, r)
			continue
		}
		out := sched.Output{ID: r.id}
		if r.generated < r.maxTokens {
			n := 1
			if r.passDrafts > 0 {
				n = s.spec.Burst(r.passDrafts, r.maxTokens-r.generated)
			}
			start := len(s.tokenBuf)
			for range n {
				tok := sched.OutputToken(r.id, r.generated, r.planned)
				r.seq.Append(tok)
				r.generated++
				s.tokenBuf = append(s.tokenBuf, tok)
			}
			out.Tokens = s.tokenBuf[start:len(s.tokenBuf):len(s.tokenBuf)]
			r.prefilling = false
			if r.passDrafts > 0 {
				// The accepted drafts' KV is valid; the blocks reserved for rejected ones go back.
				r.computed += n - 1
				s.commit(r)
				if keep := s.blocksFor(r.computed); keep < len(r.table) {
					s.pool.Release(r.table[keep:])
					r.table = r.table[:keep]
				}
			}
		}
		if r.generated >= r.maxTokens || s.opt.Role == sched.Prefill {
			out.Done = true
			delete(s.byID, r.id)
			if s.opt.Role == sched.Prefill {
				s.held[r.id] = r // its KV stays until the transfer is done
			} else {
				s.pool.Release(r.table)
				r.planned = nil
				s.finished = append(s.finished, r)
			}
		} else {
			kept = append(kept, r)
		}
		p.Outputs = append(p.Outputs, out)
	}
	clear(s.running[len(kept):])
	s.running = kept
	// Last: accepted drafts above may complete blocks, whose Stored events belong to this pass.
	p.Events = s.pool.TakeEvents(p.Events)
}
