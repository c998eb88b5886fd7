package kvcache

// index maps a block hash to a block: the pool's first copy of each hash that starts a run (see Pool), a
// few hundred at most in the replays, where it once held every resident hash. Slots are small: a slot
// holds the hash's low 32 bits (its tag) and the block id; the home slot is the tag's low bits (hashes
// are already uniform), so probing, resizing and deleting never leave the table, and a full hash is
// confirmed on the block itself only on a tag match. Linear probing, and deletion shifts later entries
// back instead of leaving tombstones, so probe runs stay short under constant churn. The table is kept at
// most 3/8 full (maxLoad8), and a pool never holds more hashes than blocks, which bounds it.
type index struct {
	slots []slot
	mask  uint64
	n     int
}

type slot struct {
	tag uint32
	id  BlockID // none: empty
}

// maxLoad8 is the share of slots the index may fill (numerator, over 8) before it doubles.
const maxLoad8 = 3

func tagOf(hash uint64) uint32 { return uint32(hash) }

func newIndex(hint int) index {
	size := 1024
	for maxLoad8*size < 8*hint && size < 1<<30 {
		size *= 2
	}
	ix := index{}
	ix.resize(size)
	return ix
}

func (ix *index) resize(size int) {
	old := ix.slots
	ix.slots = make([]slot, size)
	for i := range ix.slots {
		ix.slots[i].id = none
	}
	ix.mask = uint64(size - 1)
	ix.n = 0
	for _, s := range old {
		if s.id == none {
			continue
		}
		i := uint64(s.tag) & ix.mask
		for ix.slots[i].id != none {
			i = (i + 1) & ix.mask
		}
		ix.slots[i] = s
		ix.n++
	}
}

// lookup returns the slot holding hash, or the empty slot ending its probe run.
func (ix *index) lookup(blocks []block, hash uint64) uint64 {
	tag := tagOf(hash)
	for i := hash & ix.mask; ; i = (i + 1) & ix.mask {
		s := ix.slots[i]
		if s.id == none || s.tag == tag && blocks[s.id].hash == hash {
			return i
		}
	}
}

// get returns the id stored for hash, or none.
func (ix *index) get(blocks []block, hash uint64) BlockID {
	return ix.slots[ix.lookup(blocks, hash)].id
}

// insert stores id (whose block already carries hash) for an absent hash.
func (ix *index) insert(blocks []block, hash uint64, id BlockID) {
	if 8*(ix.n+1) > maxLoad8*len(ix.slots) {
		ix.resize(2 * len(ix.slots))
	}
	i := ix.lookup(blocks, hash)
	ix.slots[i] = slot{tagOf(hash), id}
	ix.n++
}

// replace stores a new id for a present hash.
func (ix *index) replace(blocks []block, hash uint64, id BlockID) {
	ix.slots[ix.lookup(blocks, hash)].id = id
}

// delete removes a present hash, shifting back the entries of its probe run (Knuth's algorithm R).
func (ix *index) delete(blocks []block, hash uint64) {
	i := ix.lookup(blocks, hash)
	for j := (i + 1) & ix.mask; ix.slots[j].id != none; j = (j + 1) & ix.mask {
		home := uint64(ix.slots[j].tag) & ix.mask
		// Move slot j into the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			ix.slots[i] = ix.slots[j]
			i = j
		}
	}
	ix.slots[i].id = none
	ix.n--
}

func (ix *index) len() int { return ix.n }
