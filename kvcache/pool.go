package kvcache

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/mocker-sim/mocker/tokens"
)

// BlockID names one physical block of a pool.
type BlockID int32

const none BlockID = -1

type state uint8

const (
	free    state = iota
	private       // allocated to one request, not (yet) a full computed block
	cached        // full and identified by hash; shareable
)

type block struct {
	hash uint64
	refs int32
	pos  int32   // its place in the LRU queue while it is inactive
	same BlockID // next resident copy of the same hash
	// A first copy's run (see Pool): the first copy of the hash before it in the sequence that committed
	// it (none: it starts a run, and byHash names it), and of the hash after it (none: the run ends). A
	// later copy is in no run: prev is the copy before it. (One field for both keeps a block in 32 bytes.)
	prev, next BlockID
	state      state
	later      bool // a later copy of its hash: not the one lookups find
}

// Options configure a Pool.
type Options struct {
	Capacity      int         // blocks; at least 1
	PrefixCaching bool        // share full blocks between requests by hash
	Events        bool        // record KV events (only with prefix caching)
	Tiers         TierOptions // lower tiers (only with prefix caching)
}

// Pool is a paged KV block pool. It is not safe for concurrent use.
//
// Its blocks' hashes are sequence hashes: a block's hash names its whole prefix, so each resident hash has
// one hash before it in any sequence that holds it. A request's blocks are committed in sequence order,
// each after the one before it, so the first copies of consecutive hashes form runs, linked both ways
// (block.prev, next): a hash is committed into the run of the first copy of the hash before it when that
// run ends there, and starts a run otherwise. Only a run's first block is in the hash index (byHash): a
// lookup of a sequence's next hash checks the block after the previous one before it probes the index,
// and a run's inner blocks are stored and evicted without touching it. The index stays small enough for
// the CPU's caches, where one holding every block missed them on most probes.
type Pool struct {
	capacity int
	caching  bool
	events   bool

	blocks   []block   // grows up to capacity as blocks are first used
	freeList []BlockID // released blocks, reused before new ones
	used     int       // private + cached blocks
	inactive int       // cached blocks with no reference, all in the LRU queue
	byHash   index     // the first copy of each hash that starts a run
	distinct int       // hashes resident (first copies)

	// lru[lruHead:] holds the inactive blocks, least recently released first, and a hole (none) where a
	// block left from the middle, reactivated. Eviction reads it in order, from one array: a list linked
	// through the blocks would chase one cache miss per evicted block, each waiting on the last.
	lru     []BlockID
	lruHead int

	evs     []Event
	nextID  uint64
	removed []uint64 // hashes evicted by the current Allocate
	hashes  []uint64 // the Removed events' hash lists since NewPass, back to back

	tiers      *tiers         // nil: no lower tier
	tierBlocks []tokens.Block // the lower tiers' Stored events' blocks since NewPass, back to back
}

// New returns an empty pool.
func New(o Options) (*Pool, error) {
	if o.Capacity < 1 {
		return nil, fmt.Errorf("kvcache: capacity %d blocks, want at least 1", o.Capacity)
	}
	if err := o.Tiers.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{
		capacity: o.Capacity,
		caching:  o.PrefixCaching,
		events:   o.Events && o.PrefixCaching,
		byHash:   newIndex(0), // grows with the hashes it holds, as blocks does: an idle pool costs ~8 KiB
	}
	if o.Tiers.Enabled() && o.PrefixCaching {
		p.tiers = newTiers(o.Tiers)
	}
	return p, nil
}

// Capacity is the number of blocks in the pool.
func (p *Pool) Capacity() int { return p.capacity }

// Free is the number of blocks holding nothing.
func (p *Pool) Free() int { return p.capacity - p.used }

// Inactive is the number of cached blocks no request references (evictable).
func (p *Pool) Inactive() int { return p.inactive }

// Active is the number of blocks requests reference.
func (p *Pool) Active() int { return p.used - p.inactive }

// Events reports whether the pool records KV events.
func (p *Pool) Events() bool { return p.events }

// PrefixCaching reports whether blocks are shared by hash.
func (p *Pool) PrefixCaching() bool { return p.caching }

// Match appends to dst, for each leading block of a sequence (its blocks from the first) that is resident,
// the copy a request would share (one some request already references, if any), and returns dst and how
// many of those copies are active: sharing them costs no capacity.
func (p *Pool) Match(blocks []tokens.Block, dst []BlockID) (hits []BlockID, active int) {
	if !p.caching {
		return dst, 0
	}
	first := none
	for _, b := range blocks {
		if first = p.find(first, b.Hash); first == none {
			break
		}
		id := p.activeCopy(first)
		if id != none {
			active++
		} else {
			id = first
		}
		dst = append(dst, id)
	}
	return dst, active
}

// Prefix is how many leading blocks of a sequence (its blocks from the first) have a resident cached copy,
// up to the first that has none: the blocks a consumer of the pool's KV events holds (a router's
// overlap). Without events it is 0: nothing was announced.
func (p *Pool) Prefix(blocks []tokens.Block) int {
	if !p.events {
		return 0
	}
	first := none
	for i, b := range blocks {
		if first = p.find(first, b.Hash); first == none {
			return i
		}
	}
	return len(blocks)
}

// find returns the first copy of hash, which follows the hash whose first copy is prev in a sequence
// (none: hash is a sequence's first), or none if hash is not resident. Its first copy is the block after
// prev in prev's run, or starts a run.
func (p *Pool) find(prev BlockID, hash uint64) BlockID {
	if prev != none {
		if n := p.blocks[prev].next; n != none && p.blocks[n].hash == hash {
			return n
		}
	}
	return p.byHash.get(p.blocks, hash)
}

// firstCopy returns the first copy of the hash block id holds.
func (p *Pool) firstCopy(id BlockID) BlockID {
	for p.blocks[id].later {
		id = p.blocks[id].prev
	}
	return id
}

// Cached is the number of distinct hashes resident: the blocks a consumer of the pool's KV events holds
// (0 without events).
func (p *Pool) Cached() int {
	if !p.events {
		return 0
	}
	return p.distinct
}

// Referenced reports whether some request holds block id.
func (p *Pool) Referenced(id BlockID) bool { return p.blocks[id].refs > 0 }

// activeCopy returns a referenced copy in the chain starting at id, or none.
func (p *Pool) activeCopy(id BlockID) BlockID {
	for ; id != none; id = p.blocks[id].same {
		if p.blocks[id].refs > 0 {
			return id
		}
	}
	return none
}

// CanAllocate reports whether Acquire(hits) followed by Allocate(fresh) would succeed: the fresh blocks
// must come from free blocks or from inactive ones other than the hits being reactivated.
func (p *Pool) CanAllocate(hits []BlockID, fresh int) bool {
	inactiveHits := 0
	for _, id := range hits {
		if p.blocks[id].refs == 0 {
			inactiveHits++
		}
	}
	return fresh <= p.Free()+p.inactive-inactiveHits
}

// Acquire appends to table a reference to each hit (found by Match since the pool last changed) and
// returns the table. Reactivated blocks leave the LRU list.
func (p *Pool) Acquire(table []BlockID, hits []BlockID) []BlockID {
	for _, id := range hits {
		b := &p.blocks[id]
		if b.state != cached {
			panic(fmt.Sprintf("kvcache: acquire of block %d in state %d", id, b.state))
		}
		if b.refs == 0 {
			p.unlink(id)
			p.inactive--
		}
		b.refs++
		table = append(table, id)
	}
	return table
}

// Allocate appends n fresh private blocks to table, evicting least-recently-used inactive blocks when no
// free block is left, and returns the table. The caller must have checked CanAllocate. Hashes whose last
// copy was evicted are reported in one Removed event.
func (p *Pool) Allocate(table []BlockID, n int) []BlockID {
	if n > p.Free()+p.inactive {
		panic(fmt.Sprintf("kvcache: allocate %d blocks with %d free and %d inactive", n, p.Free(), p.inactive))
	}
	p.removed = p.removed[:0]
	p.prefetchTake(n)
	for range n {
		id := p.take()
		b := &p.blocks[id]
		*b = block{state: private, refs: 1, same: none, prev: none, next: none}
		p.used++
		table = append(table, id)
	}
	if len(p.removed) > 0 && p.events {
		// Appending may move the buffer; events already out keep the old array.
		start := len(p.hashes)
		p.hashes = append(p.hashes, p.removed...)
		p.emit(Event{Kind: Removed, Hashes: p.hashes[start:len(p.hashes):len(p.hashes)]})
	}
	if len(p.removed) > 0 && p.tiers != nil {
		p.offload(p.removed)
	}
	return table
}

// NewPass says that the events taken so far are no longer read (a scheduler's pass, and its events, live
// until its next one is planned), so the memory of their hash lists is reused unless events are pending.
func (p *Pool) NewPass() {
	if len(p.evs) == 0 {
		p.hashes = p.hashes[:0]
		p.tierBlocks = p.tierBlocks[:0]
	}
}

// prefetchTake starts loading the blocks the next n takes return (see prefetchLine): Allocate writes each,
// Commit reads it, and an evicted block's links are followed. The block after the last evicted one in
// the LRU queue is loaded too: it is usually the one before it in its run, whose link the eviction
// clears, and the next eviction's.
func (p *Pool) prefetchTake(n int) {
	line := none
	for i := len(p.freeList) - 1; i >= 0 && n > 0; i-- {
		p.prefetch(p.freeList[i], &line)
		n--
	}
	n -= p.capacity - len(p.blocks) // never used: appended in order
	if n <= 0 {
		return
	}
	for _, id := range p.lru[p.lruHead:] {
		if id != none {
			p.prefetch(id, &line)
			if n--; n < 0 {
				return
			}
		}
	}
}

// prefetch starts loading block id's cache line unless it was the last one asked for (line: its first
// block's id): consecutive blocks, two to a line, are asked for once.
func (p *Pool) prefetch(id BlockID, line *BlockID) {
	if l := id &^ 1; l != *line {
		*line = l
		prefetchLine(unsafe.Pointer(&p.blocks[id]))
	}
}

// take returns a block to reuse: a free one, a never-used one, or the evicted LRU head.
func (p *Pool) take() BlockID {
	if n := len(p.freeList); n > 0 {
		id := p.freeList[n-1]
		p.freeList = p.freeList[:n-1]
		return id
	}
	if n := len(p.blocks); n < p.capacity {
		if n == cap(p.blocks) {
			// Double, up to the capacity: a huge pool that is never filled costs only what it uses.
			p.blocks = slices.Grow(p.blocks, min(max(n, 1024), p.capacity-n))
		}
		p.blocks = append(p.blocks, block{})
		return BlockID(n)
	}
	for p.lru[p.lruHead] == none {
		p.lruHead++
	}
	id := p.lru[p.lruHead]
	p.lruHead++
	p.inactive--
	p.used--
	p.forget(id)
	return id
}

// forget removes a cached block from its hash's copies, noting the hash if no copy is left. A first copy
// hands its place in its run to the next copy; the last copy leaves its run, and the block after it, if
// any, starts one.
func (p *Pool) forget(id BlockID) {
	b := &p.blocks[id]
	switch {
	case b.later:
		p.blocks[b.prev].same = b.same
		if b.same != none {
			p.blocks[b.same].prev = b.prev
		}
	case b.same != none:
		c := &p.blocks[b.same]
		c.later, c.prev, c.next = false, b.prev, b.next
		if b.prev != none {
			p.blocks[b.prev].next = b.same
		} else {
			p.byHash.replace(p.blocks, b.hash, b.same)
		}
		if b.next != none {
			p.blocks[b.next].prev = b.same
		}
	default:
		if b.prev != none {
			p.blocks[b.prev].next = none
		} else {
			p.byHash.delete(p.blocks, b.hash)
		}
		if n := b.next; n != none {
			p.blocks[n].prev = none
			p.byHash.insert(p.blocks, p.blocks[n].hash, n)
		}
		p.distinct--
		p.removed = append(p.removed, b.hash)
	}
	b.state = free
}

// Commit marks table[from:to], blocks the request has now fully computed, as cached under the identities
// blocks[from:to] (the request's sequence blocks). A block whose hash was not resident becomes visible;
// each run of consecutive visible blocks is announced by one Stored event whose parent is the block
// before the run. Without prefix caching the blocks stay private.
func (p *Pool) Commit(table []BlockID, blocks []tokens.Block, from, to int) {
	if !p.caching {
		return
	}
	prev := none // the first copy of the hash before block i
	if from > 0 {
		prev = p.firstCopy(table[from-1])
	}
	runStart := -1
	for i := from; i < to; i++ {
		id := table[i]
		b := &p.blocks[id]
		if b.state != private {
			panic(fmt.Sprintf("kvcache: commit of block %d in state %d", id, b.state))
		}
		b.state = cached
		b.hash = blocks[i].Hash
		if first := p.find(prev, b.hash); first != none {
			// A duplicate copy: it takes capacity but the hash is already announced.
			b.later, b.same, b.prev = true, p.blocks[first].same, first
			if b.same != none {
				p.blocks[b.same].prev = id
			}
			p.blocks[first].same = id
			if runStart >= 0 {
				p.storeRun(blocks, runStart, i)
				runStart = -1
			}
			prev = first
			continue
		}
		p.distinct++
		if prev != none && p.blocks[prev].next == none {
			b.prev = prev
			p.blocks[prev].next = id
		} else {
			p.byHash.insert(p.blocks, b.hash, id)
		}
		prev = id
		if runStart < 0 {
			runStart = i
		}
	}
	if runStart >= 0 {
		p.storeRun(blocks, runStart, to)
	}
}

func (p *Pool) storeRun(blocks []tokens.Block, from, to int) {
	if !p.events {
		return
	}
	ev := Event{Kind: Stored, Blocks: blocks[from:to:to]}
	if from > 0 {
		ev.Parent, ev.HasParent = blocks[from-1].Hash, true
	}
	p.emit(ev)
}

// Release drops a request's references to its blocks, last block first, so that among blocks released
// together the suffix is evicted before the prefix. Private blocks are freed; cached blocks whose last
// reference goes become inactive but stay resident.
func (p *Pool) Release(table []BlockID) {
	line := none
	for _, id := range table {
		p.prefetch(id, &line) // the loop below stalled on each block's first load
	}
	for i := len(table) - 1; i >= 0; i-- {
		id := table[i]
		b := &p.blocks[id]
		switch {
		case b.state == private:
			b.state = free
			p.used--
			p.freeList = append(p.freeList, id)
		case b.state == cached && b.refs > 0:
			b.refs--
			if b.refs == 0 {
				p.pushLRU(id)
				p.inactive++
			}
		default:
			panic(fmt.Sprintf("kvcache: release of block %d in state %d with %d refs", id, b.state, b.refs))
		}
	}
}

// pushLRU appends id, newly inactive, to the LRU queue. A full queue is compacted (its evicted entries
// before the head and its holes dropped) in place when at most half of it is blocks, so each compaction
// reclaims at least as many entries as it moves; otherwise into an array twice as large, up to twice the
// pool's capacity, where it always fits in place (append's growth by quarters made a full pool's queue
// ten arrays on the way).
func (p *Pool) pushLRU(id BlockID) {
	if n := len(p.lru); n == cap(p.lru) {
		if 2*p.inactive <= n {
			p.compactLRU(p.lru[:0])
		} else {
			p.compactLRU(make([]BlockID, 0, min(max(2*n, 1024), 2*p.capacity)))
		}
	}
	p.blocks[id].pos = int32(len(p.lru))
	p.lru = append(p.lru, id)
}

// compactLRU moves the queue's blocks, in order, to dst (empty; the queue's own array at its start, which
// the writes never pass) and makes it the queue.
func (p *Pool) compactLRU(dst []BlockID) {
	for _, q := range p.lru[p.lruHead:] {
		if q != none {
			p.blocks[q].pos = int32(len(dst))
			dst = append(dst, q)
		}
	}
	p.lru, p.lruHead = dst, 0
}

// unlink takes an inactive block out of the LRU queue, leaving a hole.
func (p *Pool) unlink(id BlockID) {
	p.lru[p.blocks[id].pos] = none
}

func (p *Pool) emit(ev Event) {
	ev.ID = p.nextID
	p.nextID++
	p.evs = append(p.evs, ev)
}

// TakeEvents appends the events recorded since the last call to dst, in emission order, and returns it.
func (p *Pool) TakeEvents(dst []Event) []Event {
	dst = append(dst, p.evs...)
	clear(p.evs)
	p.evs = p.evs[:0]
	return dst
}

// AppendCached appends to dst the hash of every resident cached block, once per hash, in block order, and
// returns it: the set a consumer of the pool's KV events holds (a test's oracle; O(capacity)).
func (p *Pool) AppendCached(dst []uint64) []uint64 {
	for id := range p.blocks {
		if b := &p.blocks[id]; b.state == cached && !b.later {
			dst = append(dst, b.hash)
		}
	}
	return dst
}
