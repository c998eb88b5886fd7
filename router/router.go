package router

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// Target is where a request can go: one data-parallel rank of one worker.
type Target struct{ Worker, Rank int }

func (t Target) String() string { return fmt.Sprintf("%d/%d", t.Worker, t.Rank) }

// Options configure a Router. Start from DefaultOptions: a zero OverlapScoreWeight and a false
// TrackPrefillTokens are meaningful settings (a disaggregated decode router), not "unset".
type Options struct {
	Policy Policy

	// KV policy: cost = OverlapScoreWeight × prefill blocks + decode blocks; Temperature 0 takes the
	// lowest cost, T > 0 samples a softmax of the normalised costs.
	OverlapScoreWeight float64
	Temperature        float64
	// LowerHitWeight is what a block the target holds in a lower KV tier (CPU, disk) is worth, beyond its
	// GPU prefix, against 1 for a GPU block: its onboarding costs less than its prefill, but not nothing.
	LowerHitWeight float64

	// BlockSize is the engines' tokens per KV block, the unit of the blocks requests carry.
	BlockSize int

	// Queueing: a target is busy while its active prefill tokens exceed QueueThreshold × MaxBatchedTokens
	// (the engines' token budget per pass); while every target is busy, requests wait in QueuePolicy
	// order. QueueThreshold 0 disables queueing.
	QueueThreshold   float64
	MaxBatchedTokens int
	QueuePolicy      QueuePolicy

	// TrackPrefillTokens counts a routed request's uncached prompt tokens against its target until
	// PrefillDone. Off for a decode router in disaggregated serving, whose requests arrive prefilled (and
	// then no target is ever busy).
	TrackPrefillTokens bool

	// Seed drives every random choice: the random policy, KV tie-breaks and softmax draws.
	Seed uint64
}

// DefaultOptions returns the defaults of Dynamo's KV router (KvRouterConfig): the KV policy, overlap score
// weight 1, temperature 0, queue threshold 4 in FCFS order, prefill tokens tracked; and vLLM's block size
// 64 and 8192 batched tokens. (Dynamo queues only in KV mode: with another policy, set QueueThreshold 0
// to match it.)
func DefaultOptions() Options {
	return Options{
		Policy:             KV,
		OverlapScoreWeight: 1,
		BlockSize:          64,
		QueueThreshold:     4,
		MaxBatchedTokens:   8192,
		QueuePolicy:        FCFS,
		TrackPrefillTokens: true,
	}
}

// Validate reports the first invalid option, named by its flag.
func (o *Options) Validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case o.Policy > LeastLoaded:
		return fmt.Errorf("router: unknown policy %d", o.Policy)
	case !finite(o.OverlapScoreWeight) || o.OverlapScoreWeight < 0:
		return fmt.Errorf("overlap-score-weight %v: want a finite number ≥ 0", o.OverlapScoreWeight)
	case !finite(o.LowerHitWeight) || o.LowerHitWeight < 0 || o.LowerHitWeight > 1:
		return fmt.Errorf("router-cpu-hit-weight %v: want a number in [0, 1]", o.LowerHitWeight)
	case !finite(o.Temperature) || o.Temperature < 0:
		return fmt.Errorf("router-temperature %v: want a finite number ≥ 0", o.Temperature)
	case o.BlockSize < 1:
		return fmt.Errorf("block-size %d: want at least 1", o.BlockSize)
	case !finite(o.QueueThreshold) || o.QueueThreshold < 0:
		return fmt.Errorf("router-queue-threshold %v: want a finite number ≥ 0 (0 disables queueing)", o.QueueThreshold)
	case o.QueueThreshold > 0 && o.MaxBatchedTokens < 1:
		return fmt.Errorf("max-num-batched-tokens %d: router-queue-threshold needs it at least 1", o.MaxBatchedTokens)
	case o.QueuePolicy > WSPT:
		return fmt.Errorf("router-queue-policy: unknown policy %d", o.QueuePolicy)
	}
	return nil
}

// Request is what the router needs of a request. Blocks are the identities of the prompt's full blocks
// (len(Blocks) = PromptTokens / BlockSize). The router keeps the slice while the request is queued; once
// routed it holds copies of what it needs, and the caller may reuse the slice.
type Request struct {
	ID           uint64
	Blocks       []tokens.Block
	PromptTokens int
}

// Decision is where a request goes, and how many leading blocks of its prompt that target has cached
// (the overlap the router credited; reported as the request's expected cache hit).
type Decision struct {
	ID      uint64
	Target  Target
	Overlap int // blocks
}

// Load is a target's active work as the router counts it.
type Load struct {
	Requests      int // routed and not finished
	PrefillTokens int // uncached prompt tokens of requests whose prefill is not done
	Blocks        int // distinct blocks held by those requests, partial blocks included (KV policy only, else 0)
}

// Router routes requests to targets. It is a deterministic state machine driven by calls; it reads no
// clock, starts no goroutine and is not safe for concurrent use.
type Router struct {
	o         Options
	busyAbove float64 // prefill tokens above which a target is busy; +Inf without queueing
	rng       *rand.Rand

	targets []*target // in order of addition: every iteration goes this way
	byID    map[Target]*target
	applied *target // the target Apply found last: a pass's events come one at a time for one target
	next    int     // round-robin position in targets

	ix    *indexer
	nodes nodePool

	reqs  map[uint64]*request // queued and active
	queue queue
	seq   uint64 // arrivals, for queue order
	spare []*request

	// Buffers reused by every decision.
	ov    []int
	costs []float64
	ties  []int
}

type target struct {
	id       Target
	slot     int    // the target's set in the indexer
	mirror   Mirror // nil: the indexer's set holds its GPU blocks
	hears    Hearer // mirror, when it is one
	requests int
	prefill  int // active prefill tokens
	partials int // active requests with a partial block
	seqs     seqTree
	lower    [2]hashSet // the blocks its CPU and disk tiers hold, by their KV events
}

// lowerOverlap is how many leading blocks of blocks (those after its GPU prefix) t holds in a lower tier.
func (t *target) lowerOverlap(blocks []tokens.Block) int {
	if t.lower[0].len() == 0 && t.lower[1].len() == 0 {
		return 0
	}
	for i, b := range blocks {
		if !t.lower[0].has(b.Hash) && !t.lower[1].has(b.Hash) {
			return i
		}
	}
	return len(blocks)
}

func (t *target) activeBlocks() int { return t.seqs.blocks + t.partials }

// Mirror is a target's GPU prefix cache read in place, instead of the copy its KV events build in the
// router: a caller that runs the target in the same process, and applies each of its events as soon as the
// cache emits it, has the two always equal and spares the router the copy, a hash-table update per block
// stored or evicted (a quarter to a third of an 8-worker replay's CPU time). It must hold exactly the
// blocks the target's GPU events so far have announced (a Hearer's: so far heard). A *kvcache.Pool that
// records events is one.
type Mirror interface {
	// Prefix is how many leading blocks of a sequence the cache holds, up to its first missing block.
	Prefix(blocks []tokens.Block) int
	// Cached is the number of distinct blocks it holds.
	Cached() int
	// AppendCached appends the hash of each block it holds, once, and returns dst.
	AppendCached(dst []uint64) []uint64
}

// A Hearer is a Mirror that lags its cache as the cache's events would: it holds the blocks announced by
// the events it has heard, however far the cache has gone on since, so the caller may deliver the events
// late (at a pass's end, after a delay). The router hands it each of its target's events as it gets them,
// in order (a *radix.View is one).
type Hearer interface {
	Mirror
	Heard(ev kvcache.Event)
}

type request struct {
	Request
	full      bool     // prompt is a whole number of blocks (no partial block)
	t         *target  // nil while queued
	prefill   int      // tokens counted in t.prefill until PrefillDone
	end       *seqNode // where the request's chain ends in t.seqs
	seq       uint64   // arrival number
	newTokens int      // WSPT key
	heapAt    int      // index in the queue's heap while queued
}

func (r *request) partial() int {
	if r.full {
		return 0
	}
	return 1
}

// streamRouter separates the router's random stream from others derived from the same seed.
const streamRouter = 0x726f75746572 // "router"

// New returns a router with no targets.
func New(o Options) (*Router, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	busy := math.Inf(1)
	if o.QueueThreshold > 0 {
		busy = o.QueueThreshold * float64(o.MaxBatchedTokens)
	}
	return &Router{
		o:         o,
		busyAbove: busy,
		rng:       rand.New(rand.NewPCG(o.Seed, streamRouter)),
		byID:      map[Target]*target{},
		ix:        newIndexer(),
		reqs:      map[uint64]*request{},
		queue:     queue{policy: o.QueuePolicy},
	}, nil
}

// Options returns the options the router was made with.
func (r *Router) Options() Options { return r.o }

// AddTarget makes t available; adding a present target does nothing. Queued requests may now be
// routable: call Ready.
func (r *Router) AddTarget(t Target) {
	if r.byID[t] != nil {
		return
	}
	x := &target{id: t, slot: r.ix.addSlot()}
	r.targets = append(r.targets, x)
	r.byID[t] = x
}

// SetMirror makes t's GPU cache m, read in place (see Mirror): from now on t's GPU Stored and Removed
// events are not indexed (a Hearer hears every event), and what they indexed is dropped. Lower tiers are
// still indexed from their events. A nil m returns t to an index of its events, empty until they come. An
// absent target is ignored.
func (r *Router) SetMirror(t Target, m Mirror) {
	if x := r.byID[t]; x != nil {
		x.mirror = m
		x.hears, _ = m.(Hearer)
		r.ix.clearSlot(x.slot)
	}
}

// RemoveTarget forgets t: its cached blocks and its active requests, whose later PrefillDone and
// Finished are ignored (the caller, draining the worker, deals with them). Removing an absent target does
// nothing.
func (r *Router) RemoveTarget(t Target) {
	x := r.byID[t]
	if x == nil {
		return
	}
	delete(r.byID, t)
	if r.applied == x {
		r.applied = nil
	}
	i := slices.Index(r.targets, x)
	r.targets = slices.Delete(r.targets, i, i+1)
	if i < r.next {
		r.next--
	}
	r.ix.removeSlot(x.slot)
	for id, q := range r.reqs { // the order does not matter: each is dropped
		if q.t == x {
			delete(r.reqs, id)
			r.recycle(q)
		}
	}
}

// Targets returns the targets in order of addition, the order of Overlap's result.
func (r *Router) Targets() []Target {
	ts := make([]Target, len(r.targets))
	for i, t := range r.targets {
		ts[i] = t.id
	}
	return ts
}

// Load returns t's active work (zero for an absent target).
func (r *Router) Load(t Target) Load {
	x := r.byID[t]
	if x == nil {
		return Load{}
	}
	l := Load{Requests: x.requests, PrefillTokens: x.prefill}
	if r.o.Policy == KV {
		l.Blocks = x.activeBlocks()
	}
	return l
}

// Queued is the number of requests waiting for a target.
func (r *Router) Queued() int { return r.queue.len() }

// Apply updates t's cached blocks from one of its KV events: Stored adds the blocks' sequence hashes,
// Removed removes the listed ones, Cleared drops them all (every tier's). A sequence hash names its whole
// prefix, so a Stored event's parent adds nothing. A lower tier's events (Medium CPU or Disk) update that
// tier's set, apart from the GPU's. Events of an absent target are ignored (they may trail its removal),
// and so are the GPU's Stored and Removed events of a mirrored target (SetMirror), but for its Hearer.
func (r *Router) Apply(t Target, ev kvcache.Event) {
	x := r.applied
	if x == nil || x.id != t {
		if x = r.byID[t]; x == nil {
			return
		}
		r.applied = x
	}
	if x.hears != nil {
		x.hears.Heard(ev)
	}
	if ev.Medium != kvcache.GPU && ev.Kind != kvcache.Cleared {
		set := &x.lower[min(int(ev.Medium), 2)-1]
		for _, b := range ev.Blocks {
			set.add(b.Hash)
		}
		for _, h := range ev.Hashes {
			set.remove(h)
		}
		return
	}
	if x.mirror != nil && ev.Kind != kvcache.Cleared {
		return
	}
	switch ev.Kind {
	case kvcache.Stored:
		r.ix.storeBlocks(x.slot, ev.Blocks)
	case kvcache.Removed:
		r.ix.removeHashes(x.slot, ev.Hashes)
	case kvcache.Cleared:
		r.ix.clearSlot(x.slot)
		x.lower = [2]hashSet{}
	}
}

// Indexed is the number of blocks t has cached, by its events or its Mirror.
func (r *Router) Indexed(t Target) int {
	if x := r.byID[t]; x != nil {
		return r.cached(x)
	}
	return 0
}

// cached is the number of GPU blocks t holds.
func (r *Router) cached(t *target) int {
	if t.mirror != nil {
		return t.mirror.Cached()
	}
	return r.ix.count(t.slot)
}

// overlapOf is how many leading blocks of blocks t holds on its GPU, up to its first missing block.
func (r *Router) overlapOf(t *target, blocks []tokens.Block) int {
	if t.mirror != nil {
		return t.mirror.Prefix(blocks)
	}
	return r.ix.overlapOf(t.slot, blocks)
}

// Overlap returns, for each target in Targets order, how many leading blocks of blocks it has cached,
// stopping at its first missing block. The slice is reused by the next call.
func (r *Router) Overlap(blocks []tokens.Block) []int {
	return r.overlaps(blocks)
}

func (r *Router) overlaps(blocks []tokens.Block) []int {
	bySlot := r.ix.overlap(blocks) // a mirrored target's empty set answers at once
	r.ov = r.ov[:0]
	for _, t := range r.targets {
		o := bySlot[t.slot]
		if t.mirror != nil {
			o = t.mirror.Prefix(blocks)
		}
		r.ov = append(r.ov, o)
	}
	return r.ov
}

// Route routes req, or queues it (queued true) when there is no target, or queueing is on and requests
// are already waiting or every target is busy. A queued request comes out of a later Ready. Routing an
// ID that is queued or active panics, as does a request whose blocks do not fit its prompt length.
func (r *Router) Route(req Request) (d Decision, queued bool) {
	if r.reqs[req.ID] != nil {
		panic(fmt.Sprintf("router: request %d routed twice", req.ID))
	}
	if n, bs := len(req.Blocks), r.o.BlockSize; req.PromptTokens < n*bs || req.PromptTokens >= (n+1)*bs {
		panic(fmt.Sprintf("router: request %d has %d prompt tokens and %d blocks of %d", req.ID, req.PromptTokens, n, bs))
	}
	q := r.newRequest(req)
	r.reqs[req.ID] = q
	if r.queue.len() > 0 || !r.routable() {
		if r.queue.policy == WSPT {
			best := 0
			for _, o := range r.overlaps(req.Blocks) {
				best = max(best, o)
			}
			q.newTokens = req.PromptTokens - best*r.o.BlockSize
		}
		r.queue.push(q)
		return Decision{}, true
	}
	return r.dispatch(q), false
}

// RouteTo makes req active on one of worker's ranks, the one with the longest cached prefix of it (the
// first added on a tie), without queueing: a caller outside the router (an endpoint picker addressing
// the worker's own port) has chosen the worker. ok is false, and nothing is kept, when the worker has no
// target. It panics as Route does.
func (r *Router) RouteTo(req Request, worker int) (d Decision, ok bool) {
	if r.reqs[req.ID] != nil {
		panic(fmt.Sprintf("router: request %d routed twice", req.ID))
	}
	if n, bs := len(req.Blocks), r.o.BlockSize; req.PromptTokens < n*bs || req.PromptTokens >= (n+1)*bs {
		panic(fmt.Sprintf("router: request %d has %d prompt tokens and %d blocks of %d", req.ID, req.PromptTokens, n, bs))
	}
	best, overlap := -1, -1
	for i, o := range r.overlaps(req.Blocks) {
		if r.targets[i].id.Worker == worker && o > overlap {
			best, overlap = i, o
		}
	}
	if best < 0 {
		return Decision{}, false
	}
	q := r.newRequest(req)
	r.reqs[req.ID] = q
	return r.activate(q, best, overlap), true
}

// routable reports whether a request could be routed now: some target exists and, with queueing, one
// is not busy.
func (r *Router) routable() bool {
	for _, t := range r.targets {
		if float64(t.prefill) <= r.busyAbove {
			return true
		}
	}
	return false
}

// Ready appends to dst the queued requests that can now be routed, in queue-policy order, routing each
// as it goes and stopping as soon as every target is busy again, and returns dst. Call it after anything
// that may free capacity: PrefillDone, Finished, AddTarget.
func (r *Router) Ready(dst []Decision) []Decision {
	for r.queue.len() > 0 && r.routable() {
		dst = append(dst, r.dispatch(r.queue.pop()))
	}
	return dst
}

// dispatch chooses q's target and makes q active there.
func (r *Router) dispatch(q *request) Decision {
	i := r.choose(q)
	if r.o.Policy == KV { // it computed every target's overlap
		return r.activate(q, i, r.ov[i])
	}
	return r.activate(q, i, r.overlapOf(r.targets[i], q.Blocks))
}

// activate makes q active on r.targets[i], whose cached prefix of q is overlap blocks long.
func (r *Router) activate(q *request, i, overlap int) Decision {
	t := r.targets[i]
	q.t = t
	t.requests++
	if r.o.TrackPrefillTokens {
		q.prefill = q.PromptTokens - overlap*r.o.BlockSize
		t.prefill += q.prefill
	}
	t.partials += q.partial()
	if r.o.Policy == KV {
		// Only the KV cost reads the active blocks: other policies skip the tree, whose upkeep is a
		// tenth of a replay with thousands of requests queued on a worker.
		q.end = t.seqs.add(q.Blocks, &r.nodes)
	}
	q.Blocks = nil // the caller may reuse them now
	return Decision{ID: q.ID, Target: t.id, Overlap: overlap}
}

// PrefillDone marks a request's prompt as computed: its prefill tokens no longer load its target. Unknown
// or queued requests are ignored, and so is a second call.
func (r *Router) PrefillDone(id uint64) {
	q := r.reqs[id]
	if q == nil || q.t == nil {
		return
	}
	q.t.prefill -= q.prefill
	q.prefill = 0
}

// Finished forgets a request: an active one releases its target's load, a queued one (cancelled) leaves
// the queue. Unknown requests are ignored, so a caller may call it from every path that ends a request.
func (r *Router) Finished(id uint64) {
	q := r.reqs[id]
	if q == nil {
		return
	}
	delete(r.reqs, id)
	if t := q.t; t != nil {
		t.prefill -= q.prefill
		t.requests--
		t.partials -= q.partial()
		if q.end != nil {
			t.seqs.remove(q.end, &r.nodes)
		}
	} else {
		r.queue.removeAt(q.heapAt)
	}
	r.recycle(q)
}

func (r *Router) newRequest(req Request) *request {
	var q *request
	if n := len(r.spare); n > 0 {
		q = r.spare[n-1]
		r.spare = r.spare[:n-1]
	} else {
		q = &request{}
	}
	*q = request{
		Request: req,
		full:    req.PromptTokens == len(req.Blocks)*r.o.BlockSize,
		seq:     r.seq,
		heapAt:  -1,
	}
	r.seq++
	return q
}

func (r *Router) recycle(q *request) {
	*q = request{}
	r.spare = append(r.spare, q)
}

// AppendIndexed appends to dst the hash of every block t has cached, by its events or its Mirror, in no
// particular order, and returns it (a test's view of the index).
func (r *Router) AppendIndexed(t Target, dst []uint64) []uint64 {
	if x := r.byID[t]; x != nil && x.mirror != nil {
		dst = x.mirror.AppendCached(dst)
	} else if x != nil {
		dst = r.ix.sets[x.slot].appendTo(dst)
	}
	return dst
}
