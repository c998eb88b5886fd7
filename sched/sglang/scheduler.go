package sglang

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/radix"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/internal/book"
	"github.com/mocker-sim/mocker/timing"
)

// Policy orders the waiting queue.
type Policy uint8

const (
	// FCFS serves requests in arrival order (SGLang's default).
	FCFS Policy = iota
	// LPM serves the longest cached prefix first.
	LPM
)

// ParsePolicy parses "fcfs" (or "fifo") and "lpm".
func ParsePolicy(s string) (Policy, error) {
	return sched.ParseEnum("sglang-schedule-policy", "fcfs (or its alias fifo) or lpm", s,
		map[string]Policy{"fcfs": FCFS, "fifo": FCFS, "lpm": LPM})
}

// SGLang's constants (python/sglang/srt/managers/schedule_policy.py, scheduler.py).
const (
	lpmFallbackThreshold   = 128 // LPM only while at most this many wait
	inBatchPrefixThreshold = 32  // tokens: a short tree match, and the prefix length compared in batch
	decaySteps             = 600 // decode steps for new_token_ratio to fall from init to min
)

// Options configure a Scheduler. Zero MaxRunning or MaxModelLen mean unbounded; ChunkedPrefillSize <= 0
// disables chunked prefill.
type Options struct {
	PageSize           int // tokens per KV page
	NumPages           int // pages in the pool
	MaxRunning         int // max_running_requests
	MaxPrefillTokens   int // tokens per extend batch (a single request may exceed it)
	ChunkedPrefillSize int
	ClipMaxNewTokens   int     // cap on a request's remaining output when reserving room for it
	ReservedDecode     int     // decode worker: SGLANG_NUM_RESERVED_DECODE_TOKENS (preallocatable); 0: rule off
	Conservativeness   float64 // schedule_conservativeness
	Policy             Policy
	MixedChunk         bool // decode the running requests in the same pass as a prefill
	PrefixCaching      bool // the radix cache (off: SGLang's --disable-radix-cache)
	MaxModelLen        int
	Events             bool
	Spec               sched.Spec // speculative decoding; Spec.Tokens 0 is off
	Role               sched.Role // disaggregated serving
	// Overlap is SGLang's overlap scheduler (on by default in SGLang, absent from the reference): the event
	// loop forms the next batch as soon as the current one is launched, before it runs, so a request that
	// arrives while a pass runs misses the pass after it too (scheduler.py event_loop_overlap). When
	// nothing else would run, a deferred request is served at once, as SGLang's idle loop does.
	Overlap bool
	// MaxLoRAsPerBatch bounds the distinct adapters of a batch, the base model counting as one (SGLang's
	// max_loras_per_batch; 0: any number); its LoRA memory pool keeps as many adapters loaded (LRU).
	MaxLoRAsPerBatch int

	// Tiers below the pool (with prefix caching): SGLang's HiCache (--enable-hierarchical-cache) writes
	// the pages the radix cache evicts back to host memory, and loads a prompt's host hits back before
	// its prefill.
	Tiers kvcache.TierOptions
}

// Validate reports the first invalid option, naming it.
func (o Options) Validate() error {
	if err := sched.ValidatePool("page-size", o.PageSize, o.NumPages, o.MaxRunning, o.MaxModelLen); err != nil {
		return err
	}
	switch {
	case o.MaxPrefillTokens < 1:
		return fmt.Errorf("sglang-max-prefill-tokens %d: must be at least 1", o.MaxPrefillTokens)
	case o.ChunkedPrefillSize > 0 && o.ChunkedPrefillSize < o.PageSize:
		return fmt.Errorf("sglang-chunked-prefill-size %d: must be at least one page (%d)", o.ChunkedPrefillSize, o.PageSize)
	case o.ReservedDecode < 0:
		return fmt.Errorf("sglang-num-reserved-decode-tokens %d: must not be negative", o.ReservedDecode)
	case o.ClipMaxNewTokens < 1:
		return fmt.Errorf("sglang-clip-max-new-tokens %d: must be at least 1", o.ClipMaxNewTokens)
	case !(o.Conservativeness >= 0 && o.Conservativeness <= 1):
		return fmt.Errorf("sglang-schedule-conservativeness %v: must be in [0, 1]", o.Conservativeness)
	case o.Policy > LPM:
		return fmt.Errorf("schedule policy %d: unknown", o.Policy)
	case o.MaxLoRAsPerBatch < 0:
		return fmt.Errorf("max-loras-per-batch %d: must not be negative", o.MaxLoRAsPerBatch)
	}
	return o.Spec.Validate()
}

// request is a request's state; its Seq is nil while src holds the prompt.
type request struct {
	book.Request
	order uint64 // arrival order, for stable tie-breaks
	// KV pages: the first locked are the tree's (not listed: the tree holds their ids), then pages, the
	// private ones, in order. Caching a page moves it from pages to the tree, so the list holds only
	// the pages not cached yet (a chunk's, a decode step's), not a whole prompt's.
	pages  []radix.PageID
	locked int
	node   *radix.Node // deepest locked tree node; nil when none

	// Policy scratch.
	match  int
	demote bool
}

// prompt makes the prompt of a request that holds only its source, when admission tries it or LPM
// matches it: a queue of thousands then holds no prompts (at page size 1, 16 bytes a token each).
func (s *Scheduler) prompt(r *request) {
	if r.Src == nil {
		return
	}
	s.buffers(r)
	// Room for its output too: a decode step appends its token to the same sequence, which would
	// otherwise grow by copying the whole prompt. Grow takes tokens more than the sequence holds, and
	// it holds none yet, so the whole of roomFor.
	r.Seq.Grow(s.roomFor(r))
	r.MakePrompt("sglang")
}

// roomFor is the tokens r's sequence and (without prefix caching) its page list make room for: those it
// holds and its output to come, up to the clip and to as many tokens as its prompt has (no more than
// appending would grow an array to, so a huge max_tokens reserves nothing huge).
func (s *Scheduler) roomFor(r *request) int {
	prompt := r.Length() - r.Generated // a resumed request's sequence holds its output so far
	return r.Length() + min(r.MaxTokens-r.Generated, s.opt.ClipMaxNewTokens, prompt)
}

// Scheduler is an SGLang scheduler with its radix cache. It is not safe for concurrent use.
type Scheduler struct {
	book.Front[*request] // Cancel, Idle, Release, Reserve, Unreserve: the Book answers them

	opt     Options
	cache   *radix.Cache
	waiting []*request // front first
	chunked *request   // the one request whose prompt is being prefilled in chunks
	running []*request
	book    *book.Book[*request]
	arrived uint64

	ratio, initRatio, minRatio, decay float64

	// Overlap scheduling: requests enqueued since the last Step (arrivals), and those enqueued while the
	// pass that just ended ran (deferred: the pass about to start was formed before they arrived).
	arrivals, deferred []*request
	busy               bool // the last Step formed a pass

	private int // pages held privately by requests

	seen map[uint64]bool // LPM in-batch prefixes

	// Buffers of finished requests, for the next prompts made.
	seqs      book.SeqSpares              // at most maxSpare
	pageLists book.Spares[[]radix.PageID] // at most maxSpare

	// Disaggregation: a decode worker's requests whose KV has arrived, waiting for a running slot
	// (SGLang's prebuilt queue, admitted up to max_running_requests).
	activated []*request

	// LoRA adapters: those of the running and scheduled requests while admitting (the base model's as ""),
	// those loaded in the memory pool (least recently used first), and loads so far.
	batchLoRAs, resident []string
	loraLoads            int64

	tier book.Loads[*request] // requests loading their prefix back from a lower KV tier (tier.go)
}

// New returns an idle scheduler with an empty cache.
func New(o Options) (*Scheduler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ro := radix.Options{PageSize: o.PageSize, NumPages: o.NumPages, Events: o.Events && o.PrefixCaching}
	if o.PrefixCaching {
		ro.Tiers = o.Tiers
	}
	c, err := radix.New(ro)
	if err != nil {
		return nil, err
	}
	init := min(0.7*o.Conservativeness, 1)
	s := &Scheduler{opt: o, cache: c, seen: make(map[uint64]bool), ratio: init, initRatio: init, minRatio: 0.14 * init}
	s.decay = (s.initRatio - s.minRatio) / decaySteps
	s.seqs.Max, s.pageLists.Max = maxSpare, maxSpare
	l := book.Limits{MaxModelLen: o.MaxModelLen, BlockSize: o.PageSize, NumBlocks: o.NumPages, Unit: "pages"}
	s.book = book.New(book.Hooks[*request]{New: s.newRequest, Room: s.room, Remove: s.remove, Free: s.release}, l, o.Role, o.Spec)
	s.Front = s.book.Front()
	return s, nil
}

// Cache exposes the radix cache, for inspection.
func (s *Scheduler) Cache() *radix.Cache { return s.cache }

// NewTokenRatio is the current new_token_ratio.
func (s *Scheduler) NewTokenRatio() float64 { return s.ratio }

func (s *Scheduler) pagesFor(tokens int) int { return (tokens + s.opt.PageSize - 1) / s.opt.PageSize }

// lazyQueue is the queue length from which a request given with its sequence and its source waits as its
// source (one given without a sequence always does).
const lazyQueue = 32

// Enqueue adds a request at the back of the waiting queue, or rejects one that can never be served.
func (s *Scheduler) Enqueue(r *sched.Request) error {
	// Behind a short queue, copying a router's sequence saves hashing the prompt again; behind a long one,
	// holding it would cost memory for as long as the request waits.
	lazy := r.Source != nil && r.Prompt == nil && (r.Seq == nil || len(s.waiting)+len(s.arrivals)+len(s.deferred) >= lazyQueue)
	req, err := s.book.Enqueue(r, lazy)
	if err != nil {
		return err
	}
	if lazy {
		req.Src, req.SrcLen = r.Source, r.Source.PromptLen()
	}
	req.order = s.arrived
	s.arrived++
	if s.opt.Overlap {
		s.arrivals = append(s.arrivals, req)
	} else {
		s.waiting = append(s.waiting, req)
	}
	return nil
}

// room finds the pages of a reservation (Reserve): it locks the prompt's cached prefix and allocates pages
// for the rest, unless the pool cannot hold the prompt now, or could not keep decoding what it holds with
// it (preallocatable).
func (s *Scheduler) room(req *request, maxTokens int) (cached int, ok bool) {
	if !s.preallocatable(req.Seq.Len(), maxTokens) {
		return 0, false
	}
	var node *radix.Node
	hits := 0
	if s.opt.PrefixCaching {
		// Only the pages before the last prompt token, which the first decode step recomputes: with
		// one-token pages the last one would be shared from the tree, and Activate frees it.
		blocks := req.Seq.Blocks()
		hits, node = s.cache.MatchLen(blocks[:min(len(blocks), s.pagesFor(req.Seq.Len()-1))])
		s.cache.Lock(node)
	}
	need := s.pagesFor(req.Seq.Len()) - hits
	if !s.reserve(need) {
		if node != nil {
			s.cache.Unlock(node)
		}
		return 0, false
	}
	req.order = s.arrived
	s.arrived++
	req.pages = s.pageList(req, need)
	req.locked, req.node = hits, node
	req.pages, _ = s.cache.Alloc(need, req.pages)
	s.private += need
	return hits * s.opt.PageSize, true
}

// preallocatable reports whether a decode worker takes a prompt of prompt tokens and up to maxNew
// output tokens now, by the rule of SGLang's decode preallocation queue (disaggregation/decode.py,
// DecodePreallocQueue.pop_preallocated and _allocatable_tokens): of the free room (here free and
// evictable pages), it keeps ReservedDecode tokens for every request it holds (running, receiving or
// waiting to run), and at least what the longest-to-finish running request still needs if all the
// others were retracted (min(max_new_tokens, clip) + its prompt − the tokens the running requests
// hold); retracted requests keep their whole length and the reserve. The prompt then needs its own
// length + ReservedDecode, and its whole length less what the running requests hold. Without
// this rule a decode worker fills its pool with prompts and retracts as they grow, where SGLang's
// waits: its prefill server does not start a prompt before the decode server has preallocated it.
// An idle worker takes any prompt its pool holds; ReservedDecode 0 turns the rule off.
func (s *Scheduler) preallocatable(prompt, maxNew int) bool {
	held, retractable, single := len(s.running)+len(s.book.Reserved)+len(s.activated), 0, 0
	if s.opt.ReservedDecode == 0 || held == 0 && len(s.waiting) == 0 {
		return true // off; or idle, where SGLang would wait for ever on a prompt the rule never admits
	}
	for _, r := range s.running {
		retractable += r.Seq.Len()
	}
	for _, r := range s.running {
		single = max(single, min(r.MaxTokens, s.opt.ClipMaxNewTokens)+r.Seq.Len()-r.Generated-retractable)
	}
	allocatable := (s.cache.FreePages()+s.cache.EvictablePages())*s.opt.PageSize - max(s.opt.ReservedDecode*held, single)
	for _, r := range s.waiting {
		allocatable -= r.Length() + s.opt.ReservedDecode
	}
	need := max(prompt+s.opt.ReservedDecode, prompt+min(maxNew, s.opt.ClipMaxNewTokens)-retractable)
	return need <= allocatable
}

// Activate queues a reserved request whose prompt KV has arrived to join the running requests as soon as
// max_running_requests allows: its first decode step recomputes its last prompt token and samples its
// first output token.
func (s *Scheduler) Activate(id uint64) bool {
	r := s.book.Activate(id)
	if r == nil {
		return false
	}
	// The prompt's full pages arrived complete; only the tail page waits for the recomputed token.
	keep := s.pagesFor(r.Computed) - r.locked
	s.cache.Free(r.pages[keep:])
	s.private -= len(r.pages) - keep
	r.pages = r.pages[:keep]
	s.cacheFull(r)
	s.activated = append(s.activated, r)
	return true
}

// maxSparePages bounds the page list a finished request passes on to the next (64 KiB), and maxSpare the
// sequences and page lists kept for the prompts to come: a pass makes about as many prompts as the last
// one finished requests. (The blocks the kept sequences have room for are bounded too, by
// book.MaxSeqBlocks.)
const (
	maxSparePages = 1 << 14
	maxSpare      = 8
)

// newRequest returns an empty request with a sequence and a page list, or without them (to hold a source)
// when bare.
func (s *Scheduler) newRequest(bare bool) *request {
	r := s.book.Reuse()
	if r == nil {
		r = &request{}
	} else {
		s.freeBuffers(r) // (a reservation that found no room)
		*r = request{}
	}
	if !bare {
		s.buffers(r)
	}
	return r
}

// pageList returns r's page list emptied, with room for the need pages its admission allocates, and, with
// prefix caching, a page more (its first decode step's): caching moves its pages to the tree as they fill.
// Without it the list keeps every page, so it has room for its output too (roomFor). Its chunks and decode
// steps then append to one array, where growing it as they come would copy a long prompt's list several
// times over.
func (s *Scheduler) pageList(r *request, need int) []radix.PageID {
	if s.opt.PrefixCaching {
		return slices.Grow(r.pages[:0], need+1)
	}
	return slices.Grow(r.pages[:0], s.pagesFor(s.roomFor(r)))
}

// held is the number of pages r holds: the tree's it has locked, and its private ones.
func (r *request) held() int { return r.locked + len(r.pages) }

// freeBuffers moves r's sequence and page list to the free lists, for the next prompt made: a request
// that waits as its source holds neither. Beyond maxSpare they are dropped, and so are a long page list
// and a sequence that would take the spares past book.MaxSeqBlocks, rather than kept for every short
// request after them.
func (s *Scheduler) freeBuffers(r *request) {
	if r.Seq != nil {
		s.seqs.Put(r.Seq)
	}
	if c := cap(r.pages); c > 0 && c <= maxSparePages {
		s.pageLists.Put(r.pages[:0])
	}
	r.Seq, r.pages = nil, nil
}

// buffers gives r an empty sequence and page list, reusing a finished request's.
func (s *Scheduler) buffers(r *request) {
	r.Seq = s.seqs.Take(s.opt.PageSize)
	r.pages = s.pageLists.Take()
}

// remove takes a cancelled request out of the queues or the running set; the Book then frees its pages.
func (s *Scheduler) remove(r *request) {
	r.Src = nil
	drop := func(x *request) bool { return x == r }
	switch {
	case r == s.chunked:
		s.chunked = nil
	case slices.Contains(s.running, r):
		s.running = slices.DeleteFunc(s.running, drop)
	default:
		s.waiting = slices.DeleteFunc(s.waiting, drop)
		s.arrivals = slices.DeleteFunc(s.arrivals, drop)
		s.deferred = slices.DeleteFunc(s.deferred, drop)
		s.activated = slices.DeleteFunc(s.activated, drop)
		s.tier.Remove(r)
	}
}

// Waiting implements sched.Scheduler: the chunked prompt counts as waiting.
func (s *Scheduler) Waiting() int {
	n := len(s.waiting) + len(s.arrivals) + len(s.deferred) + len(s.activated) + s.tier.Len()
	if s.chunked != nil {
		n++
	}
	return n
}

// Metrics reports the scheduler's state; blocks are pages.
func (s *Scheduler) Metrics() sched.Metrics {
	m := s.book.Metrics(len(s.running), s.Waiting(), s.cache.ProtectedPages()+s.private, s.cache.EvictablePages(), s.cache.Capacity())
	if t := s.cache.Tiers(); t != nil {
		m.Tiers = t.Stats()
	}
	m.LoRALoads = s.loraLoads
	s.book.ListLoRAs(&m, s.running, []*request{s.chunked}, s.waiting, s.deferred, s.arrivals, s.activated)
	return m
}

// Step runs one iteration: an extend (prefill) pass if anything can be admitted, else a decode step. The
// returned Pass is valid until the next Step.
func (s *Scheduler) Step() *sched.Pass {
	for _, r := range s.book.Begin() {
		s.freeBuffers(r) // for the prompts made next, rather than idle with the request until it is reused
	}
	// Arrived transfers take the free running slots first (SGLang's decode loop merges its prebuilt
	// batch into the running one before it decodes). SGLang checks no adapter there (its LoRA pool
	// would refuse the batch); here one whose adapter would take the running batch past
	// max-loras-per-batch waits, keeping its place, as admission skips it.
	s.batchLoRAs = s.batchLoRAs[:0]
	s.useBatchLoRAs(s.running)
	kept := s.activated[:0]
	for _, r := range s.activated {
		if s.opt.MaxRunning > 0 && len(s.running) >= s.opt.MaxRunning || s.skipLoRA(r.LoRA) {
			kept = append(kept, r)
			continue
		}
		s.running = append(s.running, r)
		s.book.AdmitTransfer(&r.Request)
		s.useBatchLoRAs([]*request{r})
	}
	clear(s.activated[len(kept):])
	s.activated = kept
	s.loaded()

	if s.opt.Overlap {
		// This pass was formed when the previous one started: it sees what arrived before that (deferred),
		// and what arrived since only if no pass ran (the loop was idle).
		s.see(&s.deferred)
		if s.busy {
			s.deferred, s.arrivals = s.arrivals, s.deferred
		} else {
			s.see(&s.arrivals)
		}
	}
	s.schedule()
	if len(s.book.Scheduled) == 0 && len(s.deferred) > 0 {
		// Nothing to run: SGLang's loop would be idle and take them at once.
		s.see(&s.deferred)
		s.schedule()
	}
	s.busy = len(s.book.Scheduled) > 0
	s.finishPass()
	s.tier.Await(&s.book.Pass)
	return &s.book.Pass
}

// schedule forms the pass: an extend batch if anything can be admitted, else (or with mixed chunk, also)
// a decode step.
func (s *Scheduler) schedule() {
	s.order()
	extended := s.admit()
	if !extended || s.opt.MixedChunk {
		s.decode()
	}
}

// see moves the requests of *q to the back of the waiting queue, in arrival order.
func (s *Scheduler) see(q *[]*request) {
	s.waiting = append(s.waiting, *q...)
	clear(*q)
	*q = (*q)[:0]
}

// order sorts the waiting queue by the policy.
func (s *Scheduler) order() {
	if s.opt.Policy != LPM || len(s.waiting) > lpmFallbackThreshold || len(s.waiting) < 2 {
		return
	}
	clear(s.seen)
	prefixPages := s.pagesFor(inBatchPrefixThreshold)
	for _, r := range s.waiting {
		s.prompt(r)
		r.match, r.demote = 0, false
		if s.opt.PrefixCaching {
			hits, _ := s.cache.MatchLen(r.Seq.Blocks())
			r.match = hits * s.opt.PageSize
		}
		// A short tree match whose first tokens another waiting request already has: let that one compute
		// them, so this one hits the cache later (SGLang's in-batch prefix caching).
		if blocks := r.Seq.Blocks(); r.match <= inBatchPrefixThreshold && len(blocks) >= prefixPages {
			key := blocks[prefixPages-1].Hash
			r.demote = s.seen[key]
			s.seen[key] = true
		}
	}
	slices.SortStableFunc(s.waiting, func(a, b *request) int {
		if a.demote != b.demote {
			if a.demote {
				return 1
			}
			return -1
		}
		return cmp.Compare(b.match, a.match)
	})
}

// admit builds the extend batch: the chunked request first, then waiting requests in order. It reports
// whether anything was scheduled.
func (s *Scheduler) admit() bool {
	if len(s.waiting) == 0 && s.chunked == nil {
		return false
	}
	page := s.opt.PageSize
	remTotal := float64((s.cache.FreePages() + s.cache.EvictablePages()) * page)
	for _, r := range s.running {
		remTotal -= float64(min(r.MaxTokens-r.Generated, s.opt.ClipMaxNewTokens)) * s.ratio
	}
	remInput := s.opt.MaxPrefillTokens
	remChunk := math.MaxInt
	if s.opt.ChunkedPrefillSize > 0 {
		remChunk = s.opt.ChunkedPrefillSize
	}
	if s.opt.MixedChunk {
		// The running requests' decode tokens ride in the same pass: SGLang takes one token per
		// running request off every budget (PrefillAdder's mixed_with_decode_tokens).
		n := len(s.running)
		remTotal -= float64(n)
		remInput -= n
		if s.opt.ChunkedPrefillSize > 0 {
			remChunk -= n
		}
	}
	// add tries to schedule the next chunk of r; it reports whether admission should go on.
	add := func(r *request, first bool) (ok, goOn bool) {
		prefix := r.Computed
		var node *radix.Node
		hits := 0
		if first {
			s.prompt(r)
			if s.opt.PrefixCaching {
				// Match at most len−1 tokens: the last one is recomputed for its logits; with speculative
				// decoding one more page, whose hidden states the draft head needs (reference §4).
				n := (r.Seq.Len() - 1) / page
				if s.opt.Spec.Tokens > 0 {
					n = max(n-1, 0)
				}
				hits, node = s.cache.MatchLen(r.Seq.Blocks()[:n])
				if started, wait := s.onboard(r, node, hits, n); started || wait {
					return started, started
				}
			}
			prefix = hits * page
		}
		extend := r.Seq.Len() - prefix
		chunk := extend
		if extend > remChunk {
			chunk = remChunk / page * page
			if chunk <= 0 {
				return false, false
			}
		}
		charged := s.pagesFor(prefix+chunk)*page - prefix
		reserve := 0
		if chunk == extend {
			reserve = min(r.MaxTokens-r.Generated, s.opt.ClipMaxNewTokens)
		}
		// An engine with nothing running takes any request whose pages fit (Enqueue checked the pool),
		// where SGLang's strict comparison could leave it waiting forever.
		busy := len(s.running) > 0 || len(s.book.Scheduled) > 0
		if (float64(charged+reserve) >= remTotal && busy) || (charged > remInput && len(s.book.Scheduled) > 0) {
			return false, false
		}
		if node != nil {
			s.cache.Lock(node) // before evicting, so the eviction cannot take the prefix
		}
		need := s.pagesFor(prefix+chunk) - hits
		if !first {
			need = s.pagesFor(prefix+chunk) - r.held()
		}
		if !s.reserve(need) {
			if node != nil {
				s.cache.Unlock(node)
			}
			s.ratio = s.initRatio // out of memory
			return false, false
		}
		if first {
			r.pages = s.pageList(r, need)
			r.locked, r.node = hits, node
			r.Computed = prefix
			s.book.Admit(&r.Request, prefix)
		}
		r.pages, _ = s.cache.Alloc(need, r.pages)
		s.private += need
		r.PassCached, r.PassNew, r.PassPrefill, r.PassDrafts = r.Computed, chunk, true, 0
		r.Computed += chunk
		s.book.Scheduled = append(s.book.Scheduled, r)
		remTotal -= float64(charged + reserve)
		remInput -= charged
		remChunk -= chunk
		if chunk < extend {
			s.chunked = r
			return true, false
		}
		return true, remChunk > 0
	}

	if r := s.chunked; r != nil {
		s.chunked = nil
		ok, goOn := add(r, false)
		if !ok {
			s.chunked = r
			return false
		}
		if !goOn {
			return true
		}
	}
	s.batchLoRAs = s.batchLoRAs[:0]
	s.useBatchLoRAs(s.running)
	s.useBatchLoRAs(s.book.Scheduled)
	// A request whose adapter would take the batch past max-loras-per-batch is skipped and keeps its
	// place; a base-model one never is (SGLang's get_new_batch_prefill with can_run_lora_batch).
	for i := 0; i < len(s.waiting) && s.chunked == nil && (s.opt.MaxRunning == 0 || len(s.running)+len(s.book.Scheduled) < s.opt.MaxRunning); {
		r := s.waiting[i]
		if s.skipLoRA(r.LoRA) {
			i++
			continue
		}
		ok, goOn := add(r, true)
		if ok {
			if i == 0 {
				s.waiting = s.waiting[1:]
			} else {
				s.waiting = slices.Delete(s.waiting, i, i+1)
			}
			s.useBatchLoRAs([]*request{r})
		}
		if !goOn {
			break
		}
	}
	return len(s.book.Scheduled) > 0
}

// useBatchLoRAs adds the adapters of rs (the base model's as "") to the batch's, while any request names
// one.
func (s *Scheduler) useBatchLoRAs(rs []*request) {
	if s.book.WithLoRA == 0 {
		return
	}
	for _, r := range rs {
		if !slices.Contains(s.batchLoRAs, r.LoRA) {
			s.batchLoRAs = append(s.batchLoRAs, r.LoRA)
		}
	}
}

// skipLoRA reports whether admitting a request of adapter name would take the batch's adapters past
// max-loras-per-batch.
func (s *Scheduler) skipLoRA(name string) bool {
	return name != "" && s.opt.MaxLoRAsPerBatch > 0 && len(s.batchLoRAs) >= s.opt.MaxLoRAsPerBatch &&
		!slices.Contains(s.batchLoRAs, name)
}

// useLoRA marks adapter name used by this pass, loading it into the memory pool if it is not there (the
// pass waits for the load) and unloading the least recently used one beyond max-loras-per-batch.
func (s *Scheduler) useLoRA(name string) {
	if i := slices.Index(s.resident, name); i >= 0 {
		s.resident = append(slices.Delete(s.resident, i, i+1), name)
		return
	}
	s.book.Pass.LoRALoads++
	s.loraLoads++
	s.resident = append(s.resident, name)
	if c := s.opt.MaxLoRAsPerBatch; c > 0 && len(s.resident) > c {
		s.resident = slices.Delete(s.resident, 0, 1)
	}
}

// reserve makes n pages free, evicting unlocked cached pages if needed.
func (s *Scheduler) reserve(n int) bool {
	if free := s.cache.FreePages(); free < n {
		s.cache.Evict(n - free)
	}
	return s.cache.FreePages() >= n
}

// decode runs one decode step of the running requests, retracting some if their new pages do not fit.
func (s *Scheduler) decode() {
	drafts := s.opt.Spec.Tokens
	// need is the pages the step adds: for the dangling token and the drafts verified after it.
	need := func() int {
		n := 0
		for _, r := range s.running {
			n += s.pagesFor(r.Computed+1+drafts) - r.held()
		}
		return n
	}
	retracted := false
	// A decode worker's activated transfers wait holding their pages: a lone running request that cannot
	// grow goes back too, or neither it nor they would ever run.
	for (len(s.running) > 1 || len(s.running) == 1 && len(s.activated) > 0) && s.cache.FreePages()+s.cache.EvictablePages() < need() {
		s.retract()
		retracted = true
	}
	if r := s.chunked; r != nil && s.cache.FreePages()+s.cache.EvictablePages() < need() {
		// The last running request cannot grow while a half-prefilled prompt holds the pages: send that
		// one back instead (SGLang would run out of memory here).
		s.chunked = nil
		s.requeue(r)
		retracted = true
	}
	if retracted {
		s.ratio = s.initRatio
	}
	if len(s.running) == 0 {
		return
	}
	s.reserve(need())
	for _, r := range s.running {
		// Retraction stops at one request, and a mixed pass's extend takes pages first: a request may lack
		// room for its drafts (it verifies fewer) or even its next token (it skips this pass).
		d := drafts
		for d > 0 && s.pagesFor(r.Computed+1+d)-r.held() > s.cache.FreePages() {
			d--
		}
		if n := s.pagesFor(r.Computed+1+d) - r.held(); n > 0 {
			var ok bool
			if r.pages, ok = s.cache.Alloc(n, r.pages); !ok {
				continue
			}
			s.private += n
		}
		r.PassCached, r.PassNew, r.PassPrefill, r.PassDrafts = r.Computed, 1+d, false, d
		r.Computed++
		s.book.Scheduled = append(s.book.Scheduled, r)
	}
	s.ratio = max(s.minRatio, s.ratio-s.decay)
}

// PlainDecode reports whether the next Step is a plain decode step: nothing waits or is half prefilled,
// and every running request computes exactly its next token with no page to allocate or cache, no
// adapter to load, and without finishing. Such a step changes nothing but the requests' tokens,
// new_token_ratio and the order of the loaded adapters.
func (s *Scheduler) PlainDecode() bool {
	if len(s.waiting) > 0 || len(s.arrivals) > 0 || len(s.deferred) > 0 || s.chunked != nil || len(s.running) == 0 || s.tier.Len() > 0 ||
		!s.book.Plain() {
		return false
	}
	page := s.opt.PageSize
	for _, r := range s.running {
		next := r.Computed + 1
		if !r.Plain() || s.pagesFor(next) > r.held() || s.opt.PrefixCaching && next/page > r.locked ||
			r.LoRA != "" && !slices.Contains(s.resident, r.LoRA) {
			return false
		}
	}
	return true
}

// PlainBatch fills b with the next step when PlainDecode holds, without applying it.
func (s *Scheduler) PlainBatch(b *timing.Batch) {
	b.Seqs = b.Seqs[:0]
	sumCtx := 0
	for _, r := range s.running {
		b.Seqs = append(b.Seqs, r.PlainSeq())
		sumCtx += r.Computed + 1
	}
	b.TotalKVTokens = s.cache.Capacity() * s.opt.PageSize
	b.ActiveKVTokens = min(sumCtx, b.TotalKVTokens)
}

// PlainStep applies the step PlainBatch described, as Step would, appending to dst each running request's
// id and sampled token, in running order, and returns dst.
func (s *Scheduler) PlainStep(dst []sched.Sample) []sched.Sample {
	for _, r := range s.running {
		dst = append(dst, r.PlainStep())
		if r.LoRA != "" {
			s.useLoRA(r.LoRA) // resident (PlainDecode): only its place in the pool's order changes
		}
	}
	s.ratio = max(s.minRatio, s.ratio-s.decay)
	s.busy = true
	return dst
}

// retract sends the running request with the fewest output tokens (then the longest prompt, then the
// newest) back to the front of the queue; it keeps its output, and its cached pages stay in the tree.
func (s *Scheduler) retract() {
	vi := 0
	for i, r := range s.running {
		v := s.running[vi]
		if c := cmp.Or(cmp.Compare(r.Generated, v.Generated), cmp.Compare(v.Seq.Len()-v.Generated, r.Seq.Len()-r.Generated),
			cmp.Compare(v.order, r.order)); c < 0 {
			vi = i
		}
	}
	v := s.running[vi]
	s.running = slices.Delete(s.running, vi, vi+1)
	s.requeue(v)
}

// requeue releases r's KV and puts it back at the front of the queue, keeping its output.
func (s *Scheduler) requeue(r *request) {
	s.release(r)
	s.book.Preempt(&r.Request)
	s.waiting = slices.Insert(s.waiting, 0, r)
}

// cacheFull puts r's computed full pages into the tree, so they outlive it.
func (s *Scheduler) cacheFull(r *request) {
	if !s.opt.PrefixCaching || r.Seq == nil { // (a request waiting as its source has computed nothing)
		return
	}
	full := min(r.Computed/s.opt.PageSize, len(r.Seq.Blocks()))
	if full <= r.locked {
		return
	}
	// Extend takes over r's pages (freeing r's duplicates of pages someone cached first) below r's node,
	// leaving room on r's leaf for the pages r's further chunks and output will add, so that caching
	// them does not copy the whole edge again: the rest of its prompt, and of its output at most as many
	// pages as it caches now or a pass's prefill budget, so that a huge max_tokens reserves nothing huge
	// (release trims what an early end leaves).
	prompt := (r.Seq.Len() - r.Generated) / s.opt.PageSize
	room := min(max(prompt+r.MaxTokens/s.opt.PageSize-full, 0), max(prompt-full, 0)+max(full-r.locked, s.pagesFor(s.opt.MaxPrefillTokens)))
	n := full - r.locked
	_, node := s.cache.Extend(r.node, r.Seq.Blocks()[r.locked:full], r.pages[:n], room)
	s.cache.Lock(node)
	if r.node != nil {
		s.cache.Unlock(r.node)
	}
	s.private -= n
	r.pages = r.pages[:copy(r.pages, r.pages[n:])] // the tree has them now
	r.locked, r.node = full, node
}

// release caches r's full pages, frees the rest and unlocks it: r holds nothing afterwards.
func (s *Scheduler) release(r *request) {
	s.cacheFull(r)
	s.cache.Free(r.pages)
	s.private -= len(r.pages)
	if r.node != nil {
		s.cache.Trim(r.node)
		s.cache.Unlock(r.node)
	}
	r.pages, r.locked, r.node = r.pages[:0], 0, nil
}

// finishPass samples tokens for the requests whose computed tokens reach their length, caches their
// complete pages, finishes requests, and fills the batch, events and metrics.
func (s *Scheduler) finishPass() {
	p := &s.book.Pass
	sumCtx := 0
	for _, r := range s.book.Scheduled {
		if r.LoRA != "" {
			s.useLoRA(r.LoRA)
		}
		if s.book.Seq(&r.Request) {
			sumCtx += r.Computed
		}
	}
	total := s.cache.Capacity() * s.opt.PageSize
	p.Batch.TotalKVTokens = total
	p.Batch.ActiveKVTokens = min(sumCtx, total)

	for _, r := range s.book.Scheduled {
		if r.Computed < r.Seq.Len() {
			s.cacheFull(r) // a chunk: its complete pages go into the tree now
			continue
		}
		done := s.book.Sample(&r.Request)
		if r.PassDrafts > 0 {
			// The accepted drafts' KV is valid; the pages reserved for rejected ones go back.
			if keep := max(s.pagesFor(r.Computed)-r.locked, 0); keep < len(r.pages) {
				s.cache.Free(r.pages[keep:])
				s.private -= len(r.pages) - keep
				r.pages = r.pages[:keep]
			}
		}
		s.cacheFull(r)
		if done {
			if !r.PassPrefill { // one that finished in its extend pass never joined the running set
				s.running = slices.DeleteFunc(s.running, func(x *request) bool { return x == r })
			}
			s.book.Finish(r)
		} else if r.PassPrefill {
			s.running = append(s.running, r)
		}
	}
	fresh, retracted := s.queued()
	p.FPM.Fill(&p.Batch, fresh, retracted)
	if s.opt.PrefixCaching {
		p.Events = s.cache.TakeEvents(p.Events)
	}
}

// queued returns the waiting requests' statistics: fresh ones by prompt length, retracted ones by prompt
// and generated tokens.
func (s *Scheduler) queued() (fresh, retracted sched.Moments) {
	count := func(r *request) {
		if r.Preemptions > 0 {
			retracted.Add(r.Seq.Len())
		} else {
			fresh.Add(r.Length())
		}
	}
	for _, q := range [][]*request{s.waiting, s.deferred, s.arrivals} {
		for _, r := range q {
			count(r)
		}
	}
	if s.chunked != nil {
		count(s.chunked)
	}
	return fresh, retracted
}
