package kvcache

// index maps a block hash to the first resident copy of it. It replaces a Go map on the pool's hottest
// path (every block of every request is looked up, inserted and deleted once): keys are already uniform
// 64-bit hashes, so they index an open-addressing table directly with linear probing, and deletion shifts
// later entries back instead of leaving tombstones, so lookups stay short under constant churn. A pool
// never holds more hashes than blocks, which bounds the table.
type index struct {
	slots []slot
	mask  uint64
	n     int
}

type slot struct {
	hash uint64
	id   BlockID // none: empty
}

func newIndex(hint int) index {
	size := 1024
	for size < 2*hint && size < 1<<30 {
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
		if s.id != none {
			ix.putIfAbsent(s.hash, s.id)
		}
	}
}

// get returns the id stored for hash, or none.
func (ix *index) get(hash uint64) BlockID {
	for i := hash & ix.mask; ; i = (i + 1) & ix.mask {
		s := &ix.slots[i]
		if s.id == none || s.hash == hash {
			return s.id
		}
	}
}

// putIfAbsent stores id for hash unless hash is present; it returns the id now stored.
func (ix *index) putIfAbsent(hash uint64, id BlockID) BlockID {
	if 2*(ix.n+1) > len(ix.slots) {
		ix.resize(2 * len(ix.slots))
	}
	for i := hash & ix.mask; ; i = (i + 1) & ix.mask {
		s := &ix.slots[i]
		if s.id == none {
			*s = slot{hash, id}
			ix.n++
			return id
		}
		if s.hash == hash {
			return s.id
		}
	}
}

// replace stores a new id for a present hash.
func (ix *index) replace(hash uint64, id BlockID) { ix.slots[ix.find(hash)].id = id }

// find returns the slot of a present hash.
func (ix *index) find(hash uint64) uint64 {
	i := hash & ix.mask
	for ix.slots[i].hash != hash || ix.slots[i].id == none {
		i = (i + 1) & ix.mask
	}
	return i
}

// delete removes a present hash, shifting back the entries of its probe run (Knuth's algorithm R).
func (ix *index) delete(hash uint64) {
	i := ix.find(hash)
	for j := (i + 1) & ix.mask; ix.slots[j].id != none; j = (j + 1) & ix.mask {
		home := ix.slots[j].hash & ix.mask
		// Move slot j into the hole at i if its home is not cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			ix.slots[i] = ix.slots[j]
			i = j
		}
	}
	ix.slots[i].id = none
	ix.n--
}

func (ix *index) len() int { return ix.n }
