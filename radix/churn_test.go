package radix

import (
	"math/rand/v2"
	"slices"

	"github.com/mocker-sim/mocker/tokens"
)

// churn is a random workload on one cache, for the tests that check what its events and views say:
// at most three requests at once match a prompt from a few shared-prefix families, put it into the
// tree with Extend (in up to two chunks with chunked), decode page by page, evicting as they need, and
// end (trimming their path first, half the time, with trim). Two churns made alike with the same rng
// seed make the same moves.
type churn struct {
	c          *Cache
	ps         int
	rng        *rand.Rand
	priorities int  // Extend's priority is drawn from [0, priorities)
	chunked    bool // a prompt goes into the tree in up to two chunks
	trim       bool // an ending request trims its path half the time
	live       []*churnReq
}

type churnReq struct {
	seq    *tokens.Sequence
	table  []PageID // pages of seq, the first locked of them in the tree
	locked int
	node   *Node // the deepest node locked, nil before any
}

// step makes one random move: admit, decode or end a request.
func (w *churn) step() {
	switch k := w.rng.IntN(10); {
	case len(w.live) < 3 && k < 4:
		w.admit()
	case len(w.live) > 0 && k < 8:
		w.decode(w.live[w.rng.IntN(len(w.live))])
	case len(w.live) > 0:
		i := w.rng.IntN(len(w.live))
		r := w.live[i]
		if w.trim && w.rng.IntN(2) == 0 && r.node != nil {
			w.c.Trim(r.node)
		}
		w.release(r)
		w.live = slices.Delete(w.live, i, i+1)
	}
}

// admit starts a request: it locks the prefix it matches, allocates the rest of its prompt (the
// partial tail page too), evicting what that needs, and puts its full pages into the tree.
func (w *churn) admit() {
	c := w.c
	r := &churnReq{seq: tokens.NewSequence(w.ps)}
	r.seq.Append(prefixFamily(w.rng)...)
	ids, node := c.Match(r.seq.Blocks(), nil)
	c.Lock(node)
	r.table, r.locked, r.node = ids, len(ids), node
	need := (r.seq.Len()+w.ps-1)/w.ps - len(ids)
	if c.FreePages() < need {
		c.Evict(need - c.FreePages())
	}
	var ok bool
	if r.table, ok = c.Alloc(need, r.table); !ok {
		w.release(r)
		return
	}
	w.live = append(w.live, r)
	full := len(r.seq.Blocks())
	if w.chunked {
		if mid := r.locked + w.rng.IntN(full-r.locked+1); mid > r.locked && mid < full {
			w.extend(r, mid)
		}
	}
	if full > r.locked {
		w.extend(r, full)
	}
}

// decode appends a page's worth of tokens to r (the prompt's partial tail, if any, fills first and
// stays private until full) and puts its full pages into the tree.
func (w *churn) decode(r *churnReq) {
	c := w.c
	if c.FreePages() < 1 {
		c.Evict(1)
	}
	var ok bool
	if r.table, ok = c.Alloc(1, r.table); !ok {
		return
	}
	for range w.ps {
		r.seq.Append(uint32(w.rng.IntN(3)))
	}
	if full := len(r.seq.Blocks()); full > r.locked {
		w.extend(r, full)
	}
}

// extend puts r's pages up to full into the tree and moves its lock down to their node.
func (w *churn) extend(r *churnReq, full int) {
	_, next := w.c.Extend(r.node, r.seq.Blocks()[r.locked:full], r.table[r.locked:full], w.rng.IntN(w.priorities))
	w.c.Lock(next)
	if r.node != nil {
		w.c.Unlock(r.node)
	}
	r.locked, r.node = full, next
}

// release frees r's pages outside the tree and unlocks its path.
func (w *churn) release(r *churnReq) {
	w.c.Free(r.table[r.locked:])
	if r.node != nil {
		w.c.Unlock(r.node)
	}
}

// probes appends to qs the live requests' sequences and a random prompt, to query views with.
func (w *churn) probes(qs [][]tokens.Block) [][]tokens.Block {
	for _, r := range w.live {
		qs = append(qs, r.seq.Blocks())
	}
	s := tokens.NewSequence(w.ps)
	s.Append(prefixFamily(w.rng)...)
	return append(qs, s.Blocks())
}

// prefixFamily returns a prompt from a few shared-prefix families.
func prefixFamily(rng *rand.Rand) []uint32 {
	n := 2 + rng.IntN(14)
	p := make([]uint32, n)
	fam := uint32(rng.IntN(3))
	for i := range p {
		p[i] = fam*100 + uint32(i)
		if i > n/2 {
			p[i] = uint32(rng.IntN(1000))
		}
	}
	return p
}
