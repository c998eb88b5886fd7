package router

import (
	"math/bits"

	"github.com/mocker-sim/mocker/tokens"
)

// indexer records which targets hold which cached blocks, as their KV events report them.
//
// A sequence hash identifies a block together with its whole prefix (reference §2, package tokens), so the
// blocks a target holds are a set of paths from the root of a radix tree over all prompts, and the set of
// their sequence hashes is that tree: a child's key already names its parent. Finding a request's cached
// prefix on a target is a walk down the request's blocks that stops at the target's first missing block.
//
// Each target slot has its own set: an open-addressing table of hashes. A KV event then touches only its
// own target's table, which is as large as that target's cache and no larger, and stays in the CPU's
// caches while a simulated worker runs pass after pass (a table shared by all targets, with a bitset of
// targets per hash, makes the walk one lookup per block for all targets at once, but every event then
// misses in a table several times larger). The walk costs one lookup per block each target holds, plus
// one for its first missing block.
type indexer struct {
	sets []hashSet // by target slot
	used []bool    // slots in use
	out  []int     // scratch: per slot overlap
}

func newIndexer() *indexer { return &indexer{} }

// addSlot takes the lowest free target slot.
func (ix *indexer) addSlot() int {
	s := 0
	for s < len(ix.used) && ix.used[s] {
		s++
	}
	if s == len(ix.used) {
		ix.used = append(ix.used, false)
		ix.sets = append(ix.sets, hashSet{})
		ix.out = append(ix.out, 0)
	}
	ix.used[s] = true
	return s
}

// removeSlot forgets everything slot s holds and frees it for reuse.
func (ix *indexer) removeSlot(s int) {
	ix.clearSlot(s)
	ix.used[s] = false
}

// clearSlot forgets every hash slot s holds.
func (ix *indexer) clearSlot(s int) {
	ix.sets[s] = hashSet{}
}

// count is the number of hashes slot s holds.
func (ix *indexer) count(s int) int { return ix.sets[s].len() }

// storeBlocks records that slot s holds each block, and removeHashes that it no longer holds each hash.
// Both first load every hash's home slot: those loads are independent, so in a table larger than the
// caches their misses overlap, and the updates that follow, each of which would otherwise stall on its own
// miss, find their lines in cache.
func (ix *indexer) storeBlocks(s int, blocks []tokens.Block) {
	set := &ix.sets[s]
	for _, b := range blocks {
		set.prefetch(b.Hash)
	}
	for _, b := range blocks {
		set.add(b.Hash)
	}
}

func (ix *indexer) removeHashes(s int, hashes []uint64) {
	set := &ix.sets[s]
	for _, h := range hashes {
		set.prefetch(h)
	}
	for _, h := range hashes {
		set.remove(h)
	}
}

// overlap returns, per slot in use, the number of leading blocks the slot holds, counting up to its first
// missing block. The result is indexed by slot and reused by the next call.
func (ix *indexer) overlap(blocks []tokens.Block) []int {
	for s, in := range ix.used {
		if in {
			ix.out[s] = ix.overlapOf(s, blocks)
		}
	}
	return ix.out
}

// overlapBatch is how many blocks' table slots a walk loads at a time: enough misses in flight to hide
// most of the latency, few wasted loads past the first missing block.
const overlapBatch = 16

// overlapOf is overlap for slot s alone.
func (ix *indexer) overlapOf(s int, blocks []tokens.Block) int {
	set := &ix.sets[s]
	if len(blocks) == 0 || !set.has(blocks[0].Hash) {
		return 0 // most targets lack most prompts: no batch of loads for them
	}
	for i := 1; i < len(blocks); i++ {
		if i%overlapBatch == 1 {
			for _, a := range blocks[i:min(i+overlapBatch, len(blocks))] {
				set.prefetch(a.Hash)
			}
		}
		if !set.has(blocks[i].Hash) {
			return i
		}
	}
	return len(blocks)
}

// hashSet is a set of hashes: open addressing with linear probing, key 0 marking an empty slot (the hash
// 0, as likely as any other, is a flag). Deletion shifts the rest of a probe run back instead of leaving
// tombstones, so probe runs stay short under constant churn. The table grows at 3/8 full (maxLoad8): under
// churn (a KV event per block stored or evicted) the probe and shift loops cost more than a larger table's
// cache misses (the 8-worker conversation replay ran 8 % faster than at 3/4, for 1 MiB more per target at
// mocker's default pool).
type hashSet struct {
	keys  []uint64
	shift uint // 64 − log2(len(keys))
	n     int  // non-zero keys held
	zero  bool // holds the hash 0
	sink  uint64
}

// len is the number of hashes t holds.
func (t *hashSet) len() int {
	if t.zero {
		return t.n + 1
	}
	return t.n
}

const (
	fib         = 0x9e3779b97f4a7c15 // 2^64/φ: spreads keys that are not uniform (hand-made hashes)
	minSetSlots = 1 << 10
	// maxLoad8 is the share of slots a set may fill (numerator, over 8) before it doubles.
	maxLoad8 = 3
)

func (t *hashSet) home(h uint64) int { return int((h * fib) >> t.shift) }

// prefetch loads h's home slot (see indexer.storeBlocks).
func (t *hashSet) prefetch(h uint64) {
	if len(t.keys) > 0 {
		t.sink += t.keys[t.home(h)]
	}
}

func (t *hashSet) has(h uint64) bool {
	if h == 0 {
		return t.zero
	}
	if t.n == 0 {
		return false
	}
	mask := len(t.keys) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

// add inserts h and reports whether it was absent.
func (t *hashSet) add(h uint64) bool {
	if h == 0 {
		was := t.zero
		t.zero = true
		return !was
	}
	if 8*(t.n+1) > maxLoad8*len(t.keys) {
		t.resize(max(2*len(t.keys), minSetSlots))
	}
	mask := len(t.keys) - 1
	i := t.home(h)
	for ; t.keys[i] != 0; i = (i + 1) & mask {
		if t.keys[i] == h {
			return false
		}
	}
	t.keys[i] = h
	t.n++
	return true
}

// remove deletes h and reports whether it was present, shifting back the later keys of its probe run
// (Knuth's algorithm R).
func (t *hashSet) remove(h uint64) bool {
	if h == 0 {
		was := t.zero
		t.zero = false
		return was
	}
	if t.n == 0 {
		return false
	}
	mask := len(t.keys) - 1
	i := t.home(h)
	for ; t.keys[i] != h; i = (i + 1) & mask {
		if t.keys[i] == 0 {
			return false
		}
	}
	for j := (i + 1) & mask; t.keys[j] != 0; j = (j + 1) & mask {
		home := t.home(t.keys[j])
		// Move key j into the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.keys[i] = t.keys[j]
			i = j
		}
	}
	t.keys[i] = 0
	t.n--
	return true
}

func (t *hashSet) resize(size int) {
	old := t.keys
	t.keys = make([]uint64, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	mask := size - 1
	for _, k := range old {
		if k == 0 {
			continue
		}
		i := t.home(k)
		for t.keys[i] != 0 {
			i = (i + 1) & mask
		}
		t.keys[i] = k
	}
}

// appendTo appends the hashes t holds to dst.
func (t *hashSet) appendTo(dst []uint64) []uint64 {
	if t.zero {
		dst = append(dst, 0)
	}
	for _, k := range t.keys {
		if k != 0 {
			dst = append(dst, k)
		}
	}
	return dst
}
