package router

import (
	"math/bits"

	"github.com/mocker-sim/mocker/tokens"
)

// indexer records which targets hold which cached blocks, as their KV events report them.
//
// A sequence hash identifies a block together with its whole prefix (reference §2, package tokens), so the set of blocks a
// target holds is a set of paths from the root of one radix tree over all prompts, and a flat map from
// sequence hash to the targets holding it is that tree: a child's key already names its parent. The walk
// that finds a request's overlap asks, block by block, which targets still hold the next one.
//
// The map is an open-addressing table of entries laid out inline: one key word, then a bitset of targets
// (one bit per target slot, words uint64s wide), so a lookup touches one cache line and the walk answers
// for every target at once. Slot i starts at table[i*stride]. Key 0 marks an empty slot; the hash 0 (as
// likely as any other) lives in a side entry. An entry whose bitset becomes empty is deleted, shifting the
// rest of its probe run back (no tombstones), so the table stays short under constant churn. The table
// grows at 3/4 full: with a million entries the walk is bound by cache misses, and a smaller table misses
// less than shorter probe runs would save.
type indexer struct {
	words  int      // bitset words per entry
	stride int      // 1 + words
	table  []uint64 // entries: key, bitset
	mask   int      // entries in table − 1 (a power of two minus one)
	shift  uint     // 64 − log2(entries in table)
	n      int      // occupied entries
	zero   []uint64 // bitset of the hash 0

	used   []uint64 // bitset of slots in use
	counts []int    // per slot: hashes the slot holds
	alive  []uint64 // scratch: slots still matching during a walk
	out    []int    // scratch: per slot overlap
	sink   uint64   // the prefetching loads' sum, kept so that they are not optimised away
}

const (
	fib           = 0x9e3779b97f4a7c15 // 2^64/φ: spreads keys that are not uniform (hand-made hashes)
	minIndexSlots = 1 << 10
)

func newIndexer() *indexer {
	ix := &indexer{}
	ix.rebuild(minIndexSlots, 1)
	return ix
}

func (ix *indexer) home(h uint64) int { return int((h * fib) >> ix.shift) }

// rebuild reallocates the table with size entries and words bitset words each, keeping every entry that
// still holds some bit (dropping those emptied by clearSlot).
func (ix *indexer) rebuild(size, words int) {
	old, oldStride, oldWords := ix.table, ix.stride, ix.words
	ix.words, ix.stride = words, 1+words
	ix.table = make([]uint64, size*ix.stride)
	ix.mask = size - 1
	ix.shift = uint(64 - bits.TrailingZeros(uint(size)))
	ix.n = 0
	ix.zero = grow(ix.zero, words)
	ix.used = grow(ix.used, words)
	ix.alive = grow(ix.alive, words)
	for e := 0; e < len(old); e += oldStride {
		k := old[e]
		src := old[e+1 : e+1+oldWords]
		if k == 0 || isZero(src) {
			continue
		}
		i := ix.home(k)
		for ix.table[i*ix.stride] != 0 {
			i = (i + 1) & ix.mask
		}
		ix.table[i*ix.stride] = k
		copy(ix.table[i*ix.stride+1:], src)
		ix.n++
	}
}

// grow returns s resized to n words, keeping its contents.
func grow(s []uint64, n int) []uint64 {
	if len(s) >= n {
		return s[:n]
	}
	return append(s, make([]uint64, n-len(s))...)
}

func isZero(s []uint64) bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// addSlot takes the lowest free target slot, widening the bitsets when every slot is taken.
func (ix *indexer) addSlot() int {
	s := 0
	for s < 64*ix.words && ix.used[s>>6]&(1<<(s&63)) != 0 {
		s++
	}
	if s == 64*ix.words {
		ix.rebuild(ix.mask+1, ix.words+1)
	}
	ix.used[s>>6] |= 1 << (s & 63)
	for len(ix.counts) <= s {
		ix.counts = append(ix.counts, 0)
		ix.out = append(ix.out, 0)
	}
	return s
}

// removeSlot forgets everything slot s holds and frees it for reuse.
func (ix *indexer) removeSlot(s int) {
	ix.clearSlot(s)
	ix.used[s>>6] &^= 1 << (s & 63)
}

// clearSlot forgets every hash slot s holds. It costs a pass over the table, which is fine for what calls
// it: a worker leaving or dropping its whole cache.
func (ix *indexer) clearSlot(s int) {
	w, m := 1+s>>6, uint64(1)<<(s&63)
	for e := 0; e < len(ix.table); e += ix.stride {
		ix.table[e+w] &^= m
	}
	ix.zero[w-1] &^= m
	ix.counts[s] = 0
	ix.rebuild(ix.mask+1, ix.words)
}

// entry returns the bitset of hash h, or nil if no target holds it.
func (ix *indexer) entry(h uint64) []uint64 {
	if h == 0 {
		if isZero(ix.zero) {
			return nil
		}
		return ix.zero
	}
	for i := ix.home(h); ; i = (i + 1) & ix.mask {
		e := i * ix.stride
		switch ix.table[e] {
		case h:
			return ix.table[e+1 : e+ix.stride]
		case 0:
			return nil
		}
	}
}

// storeBlocks records that slot s holds each block, and removeHashes that it no longer holds each hash.
// Both first load every hash's home slot: those loads are independent, so in a table larger than the
// caches their misses overlap, and the updates that follow, each of which would otherwise stall on its own
// miss, find their lines in cache.
func (ix *indexer) storeBlocks(s int, blocks []tokens.Block) {
	sum := ix.sink
	for _, b := range blocks {
		sum += ix.table[ix.home(b.Hash)*ix.stride]
	}
	ix.sink = sum
	for _, b := range blocks {
		ix.store(s, b.Hash)
	}
}

func (ix *indexer) removeHashes(s int, hashes []uint64) {
	sum := ix.sink
	for _, h := range hashes {
		sum += ix.table[ix.home(h)*ix.stride]
	}
	ix.sink = sum
	for _, h := range hashes {
		ix.remove(s, h)
	}
}

// has reports whether slot s holds hash h.
func (ix *indexer) has(s int, h uint64) bool {
	e := ix.entry(h)
	return e != nil && e[s>>6]&(1<<(s&63)) != 0
}

// store records that slot s holds hash h.
func (ix *indexer) store(s int, h uint64) {
	var e []uint64
	if h == 0 {
		e = ix.zero
	} else {
		if 4*(ix.n+1) > 3*(ix.mask+1) {
			ix.rebuild(2*(ix.mask+1), ix.words)
		}
		i := ix.home(h)
		for ix.table[i*ix.stride] != h && ix.table[i*ix.stride] != 0 {
			i = (i + 1) & ix.mask
		}
		if ix.table[i*ix.stride] == 0 {
			ix.table[i*ix.stride] = h
			ix.n++
		}
		e = ix.table[i*ix.stride+1 : (i+1)*ix.stride]
	}
	if w, m := s>>6, uint64(1)<<(s&63); e[w]&m == 0 {
		e[w] |= m
		ix.counts[s]++
	}
}

// remove records that slot s no longer holds hash h (a no-op if it did not).
func (ix *indexer) remove(s int, h uint64) {
	w, m := s>>6, uint64(1)<<(s&63)
	if h == 0 {
		if ix.zero[w]&m != 0 {
			ix.zero[w] &^= m
			ix.counts[s]--
		}
		return
	}
	i := ix.home(h)
	for ; ix.table[i*ix.stride] != h; i = (i + 1) & ix.mask {
		if ix.table[i*ix.stride] == 0 {
			return
		}
	}
	e := ix.table[i*ix.stride+1 : (i+1)*ix.stride]
	if e[w]&m == 0 {
		return
	}
	e[w] &^= m
	ix.counts[s]--
	if isZero(e) {
		ix.delete(i)
	}
}

// delete empties entry i, shifting back the later entries of its probe run (Knuth's algorithm R).
func (ix *indexer) delete(i int) {
	st := ix.stride
	for j := (i + 1) & ix.mask; ix.table[j*st] != 0; j = (j + 1) & ix.mask {
		home := ix.home(ix.table[j*st])
		// Move entry j into the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			copy(ix.table[i*st:(i+1)*st], ix.table[j*st:(j+1)*st])
			i = j
		}
	}
	clear(ix.table[i*st : (i+1)*st])
	ix.n--
}

// overlap returns, per slot in use, the number of leading blocks the slot holds, counting up to its first
// missing block. The walk ends as soon as no slot matches, so it costs one lookup per block of the longest
// overlap, whatever the number of targets. The result is indexed by slot and reused by the next call.
func (ix *indexer) overlap(blocks []tokens.Block) []int {
	if ix.words == 1 {
		return ix.overlap1(blocks)
	}
	alive := ix.alive
	copy(alive, ix.used)
	for i, b := range blocks {
		e := ix.entry(b.Hash)
		any := uint64(0)
		for w, a := range alive {
			keep := uint64(0)
			if e != nil {
				keep = a & e[w]
			}
			for d := a &^ keep; d != 0; d &= d - 1 {
				ix.out[w<<6+bits.TrailingZeros64(d)] = i
			}
			alive[w] = keep
			any |= keep
		}
		if any == 0 {
			return ix.out
		}
	}
	for w, a := range alive {
		for ; a != 0; a &= a - 1 {
			ix.out[w<<6+bits.TrailingZeros64(a)] = len(blocks)
		}
	}
	return ix.out
}

// overlapOf is overlap for slot s alone, which a policy that ignores the cache needs only for its choice.
func (ix *indexer) overlapOf(s int, blocks []tokens.Block) int {
	for i, b := range blocks {
		if !ix.has(s, b.Hash) {
			return i
		}
	}
	return len(blocks)
}

// overlap1 is overlap for at most 64 slots, the common case, with the probe loop inlined.
func (ix *indexer) overlap1(blocks []tokens.Block) []int {
	alive := ix.used[0]
	out, table, mask := ix.out, ix.table, ix.mask
	for i, b := range blocks {
		if alive == 0 {
			return out
		}
		h, keep := b.Hash, uint64(0)
		if h == 0 {
			keep = alive & ix.zero[0]
		} else {
			for j := ix.home(h); ; j = (j + 1) & mask {
				k := table[2*j]
				if k == h {
					keep = alive & table[2*j+1]
					break
				}
				if k == 0 {
					break
				}
			}
		}
		for d := alive &^ keep; d != 0; d &= d - 1 {
			out[bits.TrailingZeros64(d)] = i
		}
		alive = keep
	}
	for ; alive != 0; alive &= alive - 1 {
		out[bits.TrailingZeros64(alive)] = len(blocks)
	}
	return out
}
