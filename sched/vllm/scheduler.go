package vllm

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/internal/book"
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
	return sched.ParseEnum("preemption-mode", "lifo or fifo", s, map[string]Preemption{"lifo": LIFO, "fifo": FIFO})
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
	return sched.ParseEnum("vllm-admission", "prompt or chunk", s,
		map[string]Capacity{"prompt": MaxUtilization, "chunk": ChunkFit})
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

	// LoRA adapters: a pass serves requests of MaxLoRAs adapters at most (0: any number), and
	// MaxCPULoRAs adapters stay loaded (LRU; 0: MaxLoRAs, both 0: every adapter once loaded stays).
	MaxLoRAs, MaxCPULoRAs int

	Tiers kvcache.TierOptions // CPU and disk tiers below the pool (with prefix caching)
}

// Validate reports the first invalid option, naming it.
func (o Options) Validate() error {
	if err := sched.ValidatePool("block-size", o.BlockSize, o.NumBlocks, o.MaxNumSeqs, o.MaxModelLen); err != nil {
		return err
	}
	switch {
	case o.Preemption > FIFO:
		return fmt.Errorf("preemption mode %d: unknown", o.Preemption)
	case o.Capacity > ChunkFit:
		return fmt.Errorf("capacity policy %d: unknown", o.Capacity)
	case o.MaxBatchedTokens < 0:
		return fmt.Errorf("max-num-batched-tokens %d: must not be negative", o.MaxBatchedTokens)
	case o.MaxLoRAs < 0:
		return fmt.Errorf("max-loras %d: must not be negative", o.MaxLoRAs)
	case o.MaxCPULoRAs != 0 && o.MaxCPULoRAs < o.MaxLoRAs:
		// vLLM's LoRAConfig: the CPU cache holds at least the adapters of a batch.
		return fmt.Errorf("max-cpu-loras %d: must be at least max-loras %d", o.MaxCPULoRAs, o.MaxLoRAs)
	}
	return o.Spec.Validate()
}

// request is a request's state; its Seq is nil while src holds the prompt.
type request struct {
	book.Request
	table      []kvcache.BlockID
	committed  int  // leading blocks of table that are cached
	prefilling bool // since its (re)admission the request has not yet sampled
	inPass     bool // scheduled in the current pass (its Pass fields are set)
	grows      bool // its next token starts a block (decoding's finding, for PlainStep)
}

// prompt makes the prompt of a request that holds only its source. A waiting request keeps its source
// rather than its blocks (and no buffers) until it reaches the front of the queue: a queue of thousands
// then costs little.
func (s *Scheduler) prompt(r *request) {
	if r.Src == nil {
		return
	}
	s.buffers(r)
	r.MakePrompt("vllm")
}

// need is the blocks r holds or will hold at most: prompt and every output token (GuaranteedNoEvict).
func (s *Scheduler) need(r *request) int {
	return s.blocksFor(r.Seq.Len() - r.Generated + r.MaxTokens + s.opt.Spec.Tokens)
}

// Scheduler is a vLLM v1 scheduler with its KV block pool. It is not safe for concurrent use.
type Scheduler struct {
	book.Front[*request] // Cancel, Idle, Release, Reserve, Unreserve: the Book answers them

	opt        Options
	blockShift int // log2(BlockSize) for a power of two, else -1
	pool       *kvcache.Pool
	waiting    queue
	running    []*request
	book       *book.Book[*request]
	hits       []kvcache.BlockID

	// Buffers of finished requests, for the next ones to run.
	seqs   book.SeqSpares
	tables book.Spares[[]kvcache.BlockID]

	// LoRA adapters: those of the requests scheduled in this pass (vLLM's scheduled_loras), those
	// loaded (least recently used first), and loads so far.
	passLoRAs, resident []string
	loraLoads           int64

	tier book.Loads[*request] // requests onboarding their prefix from a lower KV tier (tier.go)

	decodeFresh int // blocks allocated by the decode pass decoding last found (for PlainBatch)
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
	s := &Scheduler{opt: o, blockShift: shift, pool: pool}
	l := book.Limits{MaxModelLen: o.MaxModelLen, BlockSize: o.BlockSize, NumBlocks: o.NumBlocks, Unit: "blocks"}
	if !o.ChunkedPrefill {
		l.MaxBatchedTokens = o.MaxBatchedTokens
	}
	if o.Capacity == GuaranteedNoEvict {
		l.Extra = o.Spec.Tokens // admission asks for room for the drafts too (see Scheduler.need)
	}
	free := func(r *request) { s.pool.Release(r.table) }
	s.book = book.New(book.Hooks[*request]{New: s.newRequest, Room: s.room, Remove: s.remove, Free: free}, l, o.Role, o.Spec)
	s.Front = s.book.Front()
	return s, nil
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
	// Behind a queue of lazyQueue requests, a request waits as its source if it has one: copying its
	// sequence would cost memory for as long as it waits, while making the prompt again costs its hashing
	// once.
	lazy := r.Source != nil && r.Prompt == nil && (r.Seq == nil || s.waiting.len() >= lazyQueue)
	req, err := s.book.Enqueue(r, lazy)
	if err != nil {
		return err
	}
	if lazy {
		req.Src, req.SrcLen = r.Source, r.Source.PromptLen()
	}
	s.waiting.pushBack(req)
	return nil
}

// room finds the blocks of a reservation (Reserve): it shares the prompt's cached prefix and allocates the
// rest, unless the pool cannot hold the prompt now (GuaranteedNoEvict: the whole request).
func (s *Scheduler) room(req *request, maxTokens int) (cached int, ok bool) {
	blocks := req.Seq.Blocks()
	var activeHits int
	s.hits, activeHits = s.pool.Match(blocks, s.hits[:0])
	need := s.blocksFor(req.Seq.Len())
	fresh := need - len(s.hits)
	// GuaranteedNoEvict: the whole request must fit beside what every other request may still claim, as
	// at admission (an activated transfer is admitted without that check, and nothing preempts).
	noRoom := s.opt.Capacity == GuaranteedNoEvict &&
		s.blocksFor(req.Seq.Len()+maxTokens+s.opt.Spec.Tokens)-activeHits > s.pool.Capacity()-s.pool.Active()-s.promised()
	if noRoom || !s.pool.CanAllocate(s.hits, fresh) {
		return 0, false
	}
	req.table = s.pool.Acquire(slices.Grow(req.table[:0], need), s.hits)
	req.table = s.pool.Allocate(req.table, fresh)
	req.committed = len(s.hits)
	return len(s.hits) * s.opt.BlockSize, true
}

// promised is the blocks the requests holding KV may still claim (GuaranteedNoEvict): running ones,
// activated transfers waiting, and reservations.
func (s *Scheduler) promised() int {
	n := s.claims()
	for i := 0; s.waiting.transfers > 0 && i < s.waiting.len(); i++ {
		if r := s.waiting.at(i); len(r.table) > 0 {
			n += s.need(r) - len(r.table)
		}
	}
	for _, r := range s.book.Reserved {
		n += s.need(r) - len(r.table)
	}
	return n
}

// Activate queues a reserved request whose prompt KV has arrived: it decodes its first token when
// admitted (its prompt counts as computed but for the last token, which that decode step recomputes).
func (s *Scheduler) Activate(id uint64) bool {
	r := s.book.Activate(id)
	if r == nil {
		return false
	}
	s.commit(r)
	s.waiting.pushBack(r)
	return true
}

// newRequest returns an empty request with a sequence, or without one (to hold a source) when bare.
func (s *Scheduler) newRequest(bare bool) *request {
	r := s.book.Reuse()
	if r == nil {
		r = &request{}
	} else {
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
	if r.Seq != nil {
		s.seqs.Put(r.Seq)
	}
	if cap(r.table) > 0 {
		s.tables.Put(r.table[:0])
	}
	r.Seq, r.table = nil, nil
}

// buffers gives r an empty sequence and block table, reusing a finished request's.
func (s *Scheduler) buffers(r *request) {
	r.Seq = s.seqs.Take(s.opt.BlockSize)
	r.table = s.tables.Take()
}

// remove takes a cancelled request out of the queue or the running set; the Book then frees its blocks
// (a waiting request holds blocks too when it is an activated transfer).
func (s *Scheduler) remove(r *request) {
	r.Src = nil
	if !s.waiting.remove(r) {
		s.running = slices.DeleteFunc(s.running, func(x *request) bool { return x == r })
		s.tier.Remove(r)
	}
}

// Waiting implements sched.Scheduler.
func (s *Scheduler) Waiting() int { return s.waiting.len() }

// Metrics reports the scheduler's state.
func (s *Scheduler) Metrics() sched.Metrics {
	m := s.book.Metrics(len(s.running), s.Waiting(), s.pool.Active(), s.pool.Inactive(), s.pool.Capacity())
	m.Tiers = s.pool.TierStats()
	m.LoRALoads = s.loraLoads
	front, back := s.waiting.parts()
	s.book.ListLoRAs(&m, s.running, front, back)
	return m
}

// Step plans one forward pass and applies it: admissions, preemptions, cache changes, sampled tokens and
// completions. The returned Pass is valid until the next Step.
func (s *Scheduler) Step() *sched.Pass {
	for _, r := range s.book.Begin() {
		s.freeBuffers(r)
	}
	s.pool.NewPass()
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
	s.tier.Await(&s.book.Pass)
	return &s.book.Pass
}

// PlainDecode reports whether the next pass is a plain decode step: nothing waits, and every running
// request computes exactly its next token with no block to allocate or complete and without finishing.
// Such a pass changes nothing but the requests' tokens: no admission, KV event or completion.
func (s *Scheduler) PlainDecode() bool {
	if s.waiting.len() > 0 {
		return false
	}
	fresh, full, ok := s.decoding(nil)
	return ok && fresh == 0 && full == 0
}

// DecodePass reports whether the next pass is a decode pass: a plain decode step (PlainDecode) but that a
// request may start a block with its token, which the pool holds without preempting anyone (free or
// evicting an inactive block), or complete one, which is cached (KV events), and that requests may wait
// that the pass cannot admit (admitsNone, headBlocked). PlainStep applies it as Step would. Not over lower
// KV tiers, where an evicted block is written back, in time.
func (s *Scheduler) DecodePass() bool {
	if s.pool.Tiered() {
		return s.PlainDecode()
	}
	var head *request
	if s.waiting.len() > 0 && !s.admitsNone() {
		head = s.waiting.front()
		if s.waiting.transfers > 0 || s.opt.MaxLoRAs > 0 && head.LoRA != "" {
			return false // admission may pass over the front or start a transfer
		}
		s.prompt(head) // as Step's admission would
	}
	fresh, _, ok := s.decoding(head)
	if !ok || fresh > s.pool.Free()+s.pool.Inactive() {
		return false
	}
	return head == nil || s.headBlocked(head, fresh)
}

// decoding reports whether every running request's next pass computes exactly its next token without
// finishing, with its adapter loaded, and how many of them start a block with it (fresh) and complete one
// (full). With head (the front of the queue), no completed block may be one of head's prompt blocks (at
// the same place in its sequence, where alone its hash can be): it could lengthen head's cached prefix, or
// make a block of it active, before the pass's admission looks. It marks the requests that start a block
// (grows) and keeps their count (s.decodeFresh): PlainBatch and PlainStep read them rather than count again.
func (s *Scheduler) decoding(head *request) (fresh, full int, ok bool) {
	if len(s.running) == 0 || s.tier.Len() > 0 || !s.book.Plain() ||
		s.opt.MaxBatchedTokens > 0 && len(s.running) > s.opt.MaxBatchedTokens {
		return 0, 0, false
	}
	var prompt []tokens.Block
	if head != nil {
		prompt = head.Seq.Blocks()
	}
	for _, r := range s.running {
		if r.prefilling || !r.Plain() || r.LoRA != "" && !slices.Contains(s.resident, r.LoRA) {
			return 0, 0, false // a prompt token, the last token, or an adapter to load first
		}
		next := r.Computed + 1
		if r.grows = s.blocksFor(next) > len(r.table); r.grows {
			fresh++
		}
		if s.fullBlocks(next) > r.committed {
			full++
			if c := r.committed; c < len(prompt) && prompt[c].Hash == r.Seq.Blocks()[c].Hash {
				return 0, 0, false
			}
		}
	}
	s.decodeFresh = fresh
	return fresh, full, true
}

// admitsNone reports whether a decode pass leaves its admission no budget or no sequence.
func (s *Scheduler) admitsNone() bool {
	return s.opt.MaxBatchedTokens > 0 && len(s.running) >= s.opt.MaxBatchedTokens ||
		s.opt.MaxNumSeqs > 0 && len(s.running) >= s.opt.MaxNumSeqs
}

// headBlocked reports whether the admission of a decode pass that allocates fresh blocks cannot admit
// head, the front of the queue, for reasons the pass's own changes cannot undo: no room for its prompt
// beside the active blocks (not with ChunkFit, which asks only for the chunk), or (without chunked
// prefill) a budget too small for its uncached part. Looked at before the pass, its cached prefix is as
// long and as active as it will be (evictions only shorten it; decoding ruled out the blocks that would
// lengthen it), and the pass's blocks are counted as allocated. Whether the blocks of its chunk can be
// allocated is not such a reason: evicting its inactive hits frees room.
func (s *Scheduler) headBlocked(head *request, fresh int) bool {
	var activeHits int
	s.hits, activeHits = s.pool.Match(head.Seq.Blocks(), s.hits[:0])
	// The pass's fresh blocks count as taken: beside the active ones, or under GuaranteedNoEvict within the
	// running requests' claims, which hold them already.
	claimed := fresh
	if s.opt.Capacity == GuaranteedNoEvict {
		claimed = s.claims()
	}
	budget := math.MaxInt
	if s.opt.MaxBatchedTokens > 0 {
		budget = s.opt.MaxBatchedTokens - len(s.running) // each running request decodes one token
	}
	_, noRoom, overBudget := s.gate(head, activeHits, claimed, budget)
	return noRoom || overBudget
}

// claims is the blocks the running requests may still claim (GuaranteedNoEvict: their whole output).
func (s *Scheduler) claims() int {
	n := 0
	for _, r := range s.running {
		n += s.need(r) - len(r.table)
	}
	return n
}

// gate is the arithmetic of admitting r, whose prompt the pool matched in s.hits (activeHits of them
// active), with claimed blocks spoken for beside the active ones and budget tokens left in the pass: the
// cached blocks it reuses (hits), and whether it cannot start for lack of room (noRoom) or, without
// chunked prefill, of budget (overBudget). admitFIFO and headBlocked both ask it, so a decode pass
// predicts the admission it stands for.
func (s *Scheduler) gate(r *request, activeHits, claimed, budget int) (hits int, noRoom, overBudget bool) {
	bs := s.opt.BlockSize
	length := r.Seq.Len()
	hits = len(s.hits)
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
	// The whole prompt (GuaranteedNoEvict: the whole request; ChunkFit: only the chunk, which the caller
	// allocates) must fit beside the active blocks and the claims; active prefix blocks are shared for free.
	if s.opt.Capacity != ChunkFit {
		want := s.blocksFor(length)
		if s.opt.Capacity == GuaranteedNoEvict {
			want = s.need(r)
		}
		noRoom = want-activeHits > s.pool.Capacity()-s.pool.Active()-claimed
	}
	overBudget = !s.opt.ChunkedPrefill && length-hits*bs > budget
	return hits, noRoom, overBudget
}

// PlainBatch fills b with the next pass when PlainDecode or DecodePass, called last, holds, without
// applying it.
func (s *Scheduler) PlainBatch(b *timing.Batch) {
	b.Seqs = b.Seqs[:0]
	for _, r := range s.running {
		b.Seqs = append(b.Seqs, r.PlainSeq())
	}
	// Step's batch counts the blocks the pass allocates. (Coast's timing models that price a batch, not
	// its counts alone, read it: timing.Polynomial, the profile's planner model.)
	b.ActiveKVTokens = (s.pool.Active() + s.decodeFresh) * s.opt.BlockSize
	b.TotalKVTokens = s.pool.Capacity() * s.opt.BlockSize
}

// PlainStep applies the pass that PlainDecode or DecodePass, called last, found, as Step would, appending
// to dst each running request's id and sampled token, in running order, and returns dst. A decode pass's
// blocks are allocated and committed in that order too, as Step schedules them; TakeEvents then has its KV
// events.
func (s *Scheduler) PlainStep(dst []sched.Sample) []sched.Sample {
	for _, r := range s.running {
		if r.grows {
			r.table = s.pool.Allocate(r.table, 1)
		}
		if r.LoRA != "" {
			s.useLoRA(r.LoRA) // resident (decoding): the least recently used order, as finishPass keeps it
		}
		dst = append(dst, r.PlainStep())
		if s.fullBlocks(r.Computed) > r.committed {
			s.commit(r)
		}
	}
	return dst
}

// TakeEvents appends the KV events of the decode passes PlainStep applied since the last Step or call to
// dst, and returns it. They stay valid until the next Step.
func (s *Scheduler) TakeEvents(dst []kvcache.Event) []kvcache.Event { return s.pool.TakeEvents(dst) }

// scheduleRunning gives the budget to running requests in order, preempting when the pool is full. It
// reports whether anything was preempted.
func (s *Scheduler) scheduleRunning(budget *int) (preempted bool) {
	for i := 0; i < len(s.running) && *budget > 0; {
		r := s.running[i]
		remaining := r.Seq.Len() - r.Computed
		if r.prefilling && !s.opt.ChunkedPrefill && remaining > *budget {
			break
		}
		n := min(remaining, *budget)
		drafts := 0
		if !r.prefilling {
			// A decode step also verifies draft tokens, as far as the budget allows.
			drafts = min(s.opt.Spec.Tokens, *budget-n)
		}
		need := s.blocksFor(r.Computed+n+drafts) - len(r.table)
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
		*budget += v.PassNew
		v.inPass = false
		if k := slices.Index(s.book.Scheduled, v); k >= 0 {
			s.book.Scheduled = slices.Delete(s.book.Scheduled, k, k+1)
		}
	}
	s.pool.Release(v.table)
	v.table = v.table[:0]
	v.committed = 0
	v.prefilling = false
	s.book.Preempt(&v.Request)
	s.waiting.pushFront(v)
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
	// GuaranteedNoEvict: blocks the running requests, and those admitted below, may still claim.
	claimed := 0
	if s.opt.Capacity == GuaranteedNoEvict {
		claimed = s.claims()
	}
	s.passLoRAs = s.passLoRAs[:0]
	for _, r := range s.book.Scheduled {
		s.passLoRAs = book.AppendLoRA(s.passLoRAs, r.LoRA)
	}
	// Requests whose adapter would exceed max-loras are passed over and keep their place (vLLM's
	// skipped_waiting_requests, put back at the front in order).
	skipped := 0
	for s.waiting.len() > skipped && *budget > 0 && (s.opt.MaxNumSeqs == 0 || len(s.running) < s.opt.MaxNumSeqs) {
		r := s.waiting.at(skipped)
		if s.opt.MaxLoRAs > 0 && r.LoRA != "" && len(s.passLoRAs) >= s.opt.MaxLoRAs && !slices.Contains(s.passLoRAs, r.LoRA) {
			skipped++
			continue
		}
		if len(r.table) > 0 {
			s.waiting.removeAt(skipped)
			s.admitTransfer(r, budget)
			continue
		}
		s.prompt(r)
		length := r.Seq.Len()
		blocks := r.Seq.Blocks()
		var activeHits int
		s.hits, activeHits = s.pool.Match(blocks, s.hits[:0])
		if s.pool.Tiered() {
			switch s.onboard(r, skipped, blocks, length) {
			case loadStarted:
				continue
			case loadNoRoom:
				return false
			}
		}
		hits, noRoom, overBudget := s.gate(r, activeHits, claimed, *budget)
		if noRoom {
			return false
		}
		if overBudget {
			return true // the budget, not the room
		}
		cached := hits * bs
		remaining := length - cached
		n := min(remaining, *budget)
		fresh := s.blocksFor(cached+n) - hits
		if !s.pool.CanAllocate(s.hits[:hits], fresh) {
			return false
		}
		s.waiting.removeAt(skipped)
		r.table = s.pool.Acquire(slices.Grow(r.table[:0], s.blocksFor(length)), s.hits[:hits])
		r.committed = hits
		r.Computed = cached
		r.prefilling = true
		s.running = append(s.running, r)
		s.passLoRAs = book.AppendLoRA(s.passLoRAs, r.LoRA)
		s.book.Admit(&r.Request, cached)
		s.schedule(r, n, 0, budget) // cannot fail: CanAllocate checked the fresh blocks
		if s.opt.Capacity == GuaranteedNoEvict {
			claimed += s.need(r) - len(r.table)
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
	s.passLoRAs = book.AppendLoRA(s.passLoRAs, r.LoRA)
	s.book.AdmitTransfer(&r.Request)
	s.schedule(r, r.Seq.Len()-r.Computed, 0, budget)
}

// schedule gives n tokens (and room for drafts draft tokens) to r: allocates their blocks, caches the
// blocks they complete, and records the work. Draft tokens count as computed only once accepted.
func (s *Scheduler) schedule(r *request, n, drafts int, budget *int) {
	if need := s.blocksFor(r.Computed+n+drafts) - len(r.table); need > 0 {
		r.table = s.pool.Allocate(r.table, need)
	}
	r.inPass = true
	r.PassCached = r.Computed
	r.PassNew = n + drafts
	r.PassDrafts = drafts
	r.PassPrefill = r.prefilling
	r.Computed += n
	s.commit(r)
	s.book.Scheduled = append(s.book.Scheduled, r)
	*budget -= n + drafts
}

// commit caches the full blocks r has computed.
func (s *Scheduler) commit(r *request) {
	blocks := r.Seq.Blocks()
	if full := min(s.fullBlocks(r.Computed), len(blocks)); full > r.committed {
		s.pool.Commit(r.table, blocks, r.committed, full)
		r.committed = full
	}
}

// useLoRA marks adapter name used by this pass, loading it if it is not resident (the pass waits for the
// load) and unloading the least recently used one beyond max-cpu-loras.
func (s *Scheduler) useLoRA(name string) {
	if i := slices.Index(s.resident, name); i >= 0 {
		s.resident = append(append(s.resident[:i], s.resident[i+1:]...), name)
		return
	}
	s.book.Pass.LoRALoads++
	s.loraLoads++
	s.resident = append(s.resident, name)
	if c := cmp.Or(s.opt.MaxCPULoRAs, s.opt.MaxLoRAs); c > 0 && len(s.resident) > c {
		s.resident = append(s.resident[:0], s.resident[1:]...)
	}
}

// finishPass samples a token for every request whose computed tokens reach its length, finishes requests,
// and fills the pass's batch, events and metrics.
func (s *Scheduler) finishPass() {
	p := &s.book.Pass
	bs := s.opt.BlockSize
	p.Batch.ActiveKVTokens = s.pool.Active() * bs
	p.Batch.TotalKVTokens = s.pool.Capacity() * bs
	for _, r := range s.book.Scheduled {
		if r.LoRA != "" {
			s.useLoRA(r.LoRA)
		}
		s.book.Seq(&r.Request)
	}
	p.FPM.Fill(&p.Batch, s.waiting.fresh, s.waiting.old)

	kept := s.running[:0]
	for _, r := range s.running {
		r.inPass = false
		if r.Computed < r.Seq.Len() {
			kept = append(kept, r)
			continue
		}
		done := s.book.Sample(&r.Request)
		r.prefilling = false
		if r.PassDrafts > 0 {
			// The accepted drafts' KV is valid; the blocks reserved for rejected ones go back.
			s.commit(r)
			if keep := s.blocksFor(r.Computed); keep < len(r.table) {
				s.pool.Release(r.table[keep:])
				r.table = r.table[:keep]
			}
		}
		if done {
			s.book.Finish(r)
		} else {
			kept = append(kept, r)
		}
	}
	clear(s.running[len(kept):])
	s.running = kept
	// Last: accepted drafts above may complete blocks, whose Stored events belong to this pass.
	p.Events = s.pool.TakeEvents(p.Events)
}
