package radix

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// oracle is a naive model of the cache (STYLE.md: check prefix caches against a naive oracle): a flat
// map of resident pages keyed by their sequence hash, which names a page's whole path, so there is no
// tree. Each page keeps its page id, its lock count (every lock covers a whole path), its last access
// stamp (one tick per Match or Insert, the pages walked get it) and whether a node of the real tree ends
// there ("cut"): where a Match ended, where an Insert's present part ended and where an Insert ended.
// Eviction takes the unlocked leaf page with the oldest stamp, and with it the pages above it up to the
// next cut: the real tree's whole node.
type oracle struct {
	t      *testing.T
	pages  map[uint64]*oPage
	clock  uint64
	evs    []kvcache.Event // expected, not yet compared
	nextID uint64
}

type oPage struct {
	id        PageID
	parent    uint64
	hasParent bool
	lock      int
	stamp     uint64
	cut       bool
}

func (o *oracle) emit(ev kvcache.Event) {
	ev.ID = o.nextID
	o.nextID++
	o.evs = append(o.evs, ev)
}

func (o *oracle) resident(blocks []tokens.Block) int {
	m := 0
	for m < len(blocks) && o.pages[blocks[m].Hash] != nil {
		m++
	}
	return m
}

func (o *oracle) match(blocks []tokens.Block) []PageID {
	o.clock++
	m := o.resident(blocks)
	var ids []PageID
	for _, b := range blocks[:m] {
		p := o.pages[b.Hash]
		p.stamp = o.clock
		ids = append(ids, p.id)
	}
	if m > 0 {
		o.pages[blocks[m-1].Hash].cut = true
	}
	return ids
}

func (o *oracle) insert(blocks []tokens.Block, ids []PageID) int {
	o.clock++
	present := o.resident(blocks)
	for _, b := range blocks[:present] {
		o.pages[b.Hash].stamp = o.clock
	}
	for i := present; i < len(blocks); i++ {
		p := &oPage{id: ids[i], stamp: o.clock}
		if i > 0 {
			p.parent, p.hasParent = blocks[i-1].Hash, true
		}
		o.pages[blocks[i].Hash] = p
	}
	if present > 0 {
		o.pages[blocks[present-1].Hash].cut = true
	}
	if len(blocks) > 0 {
		o.pages[blocks[len(blocks)-1].Hash].cut = true
	}
	if present < len(blocks) {
		ev := kvcache.Event{Kind: kvcache.Stored, Blocks: blocks[present:]}
		if present > 0 {
			ev.Parent, ev.HasParent = blocks[present-1].Hash, true
		}
		o.emit(ev)
	}
	return present
}

func (o *oracle) lock(blocks []tokens.Block, delta int) {
	for _, b := range blocks {
		o.pages[b.Hash].lock += delta
	}
}

func (o *oracle) evict(n int) int {
	freed := 0
	var removed []uint64
	for freed < n {
		hasChild := map[uint64]bool{}
		for _, p := range o.pages {
			if p.hasParent {
				hasChild[p.parent] = true
			}
		}
		var leaf uint64
		var best *oPage
		tie := false
		for h, p := range o.pages {
			if p.lock > 0 || hasChild[h] {
				continue
			}
			switch {
			case best == nil || p.stamp < best.stamp:
				leaf, best, tie = h, p, false
			case p.stamp == best.stamp:
				tie = true
			}
		}
		if best == nil {
			break
		}
		if tie || !best.cut {
			o.t.Fatalf("oracle: oldest leaf %#x (stamp %d) tied %v, ends a node %v", leaf, best.stamp, tie, best.cut)
		}
		for h := leaf; ; {
			p := o.pages[h]
			if p.lock != 0 || p.stamp != best.stamp {
				o.t.Fatalf("oracle: page %#x of an evicted node has lock %d, stamp %d (leaf %d)", h, p.lock, p.stamp, best.stamp)
			}
			delete(o.pages, h)
			removed = append(removed, h)
			freed++
			if !p.hasParent || o.pages[p.parent].cut {
				break
			}
			h = p.parent
		}
	}
	if len(removed) > 0 {
		o.emit(kvcache.Event{Kind: kvcache.Removed, Hashes: removed})
	}
	return freed
}

// family returns a generator of sequences sharing a few prefixes, with tokens from a tiny alphabet so
// that unrelated suffixes also collide now and then.
func family(rng *rand.Rand, ps int) func() []uint32 {
	var prefixes [3][]uint32
	for i := range prefixes {
		prefixes[i] = make([]uint32, ps*(1+rng.IntN(6)))
		for k := range prefixes[i] {
			prefixes[i][k] = uint32(10*(i+1) + rng.IntN(3))
		}
	}
	var seen [][]uint32
	return func() []uint32 {
		if len(seen) > 0 && rng.IntN(3) == 0 {
			return seen[rng.IntN(len(seen))]
		}
		pre := prefixes[rng.IntN(len(prefixes))]
		toks := slices.Clone(pre[:rng.IntN(len(pre)+1)])
		for range ps*rng.IntN(6) + rng.IntN(ps) {
			toks = append(toks, uint32(rng.IntN(3)))
		}
		if len(toks) == 0 {
			toks = append(toks, 1)
		}
		seen = append(seen, toks)
		return toks
	}
}

// TestCacheAgainstOracle drives the cache as a scheduler does, with random admissions, prefill chunks,
// completions, retractions, evictions and probes over requests from a few shared-prefix families, and
// after every operation compares it with the oracle: Match and Insert results, evictions, counters, the
// exact event stream, and an indexer fed only the events, which must hold exactly the resident pages.
func TestCacheAgainstOracle(t *testing.T) {
	seeds := uint64(150)
	if testing.Short() {
		seeds = 20
	}
	for _, ps := range []int{1, 2, 4} {
		for seed := range seeds {
			t.Run(fmt.Sprintf("ps%d/seed%d", ps, seed), func(t *testing.T) {
				runOracle(t, ps, 12+int(seed%4)*8, rand.New(rand.NewPCG(seed, uint64(ps))))
			})
		}
	}
}

func runOracle(t *testing.T, ps, numPages int, rng *rand.Rand) {
	c := newCache(t, ps, numPages)
	o := &oracle{t: t, pages: map[uint64]*oPage{}}
	next := family(rng, ps)
	var live []*request
	indexer := map[uint64]bool{}
	private := map[PageID]bool{}

	// evict runs Evict on both and compares what they freed.
	evict := func(n int) {
		if got, want := c.Evict(n), o.evict(n); got != want {
			t.Fatalf("Evict(%d) = %d, oracle %d", n, got, want)
		}
	}
	// cache inserts r's computed full pages and re-locks it at its new deepest node, on both.
	cache := func(r *request, full int) {
		blocks := r.seq.Blocks()[:full]
		present := c.Insert(blocks, r.table[:full])
		if want := o.insert(blocks, r.table[:full]); present != want {
			t.Fatalf("Insert(%d pages) = %d, oracle %d", full, present, want)
		}
		for _, id := range r.table[r.locked:present] {
			delete(private, id)
		}
		for _, id := range r.table[present:full] {
			delete(private, id)
		}
		c.Free(r.table[r.locked:present])
		ids, node := c.Match(blocks, nil)
		if want := o.match(blocks); !slices.Equal(ids, want) {
			t.Fatalf("re-Match = %v, oracle %v", ids, want)
		}
		copy(r.table, ids)
		c.Lock(node)
		c.Unlock(r.node)
		o.lock(blocks, +1)
		o.lock(r.seq.Blocks()[:r.locked], -1)
		r.node, r.locked = node, full
	}
	release := func(i int) {
		r := live[i]
		live = slices.Delete(live, i, i+1)
		for _, id := range r.table[r.locked:] {
			delete(private, id)
		}
		c.Free(r.table[r.locked:])
		c.Unlock(r.node)
		o.lock(r.seq.Blocks()[:r.locked], -1)
	}

	for step := range 300 {
		var op string
		switch k := rng.IntN(20); {
		case len(live) == 0 || k < 6 && len(live) < 4:
			op = "admit"
			r := &request{seq: tokens.NewSequence(ps)}
			r.seq.Append(next()...)
			blocks := r.seq.Blocks()
			r.table, r.node = c.Match(blocks, nil)
			if want := o.match(blocks); !slices.Equal(r.table, want) {
				t.Fatalf("step %d: Match = %v, oracle %v", step, r.table, want)
			}
			r.locked = len(r.table)
			r.computed = r.locked * ps
			c.Lock(r.node)
			o.lock(blocks[:r.locked], +1)
			live = append(live, r)
			need := (r.seq.Len()+ps-1)/ps - r.locked
			if short := need - c.FreePages(); short > 0 {
				evict(short)
			}
			n := len(r.table)
			var ok bool
			if r.table, ok = c.Alloc(need, r.table); !ok {
				op = "admit (no room)"
				release(len(live) - 1)
				break
			}
			for _, id := range r.table[n:] {
				if private[id] || slices.ContainsFunc(slices.Collect(maps.Values(o.pages)), func(p *oPage) bool { return p.id == id }) {
					t.Fatalf("step %d: Alloc handed out page %d, which is in use", step, id)
				}
				private[id] = true
			}
		case k < 12:
			op = "prefill"
			r := live[rng.IntN(len(live))]
			if left := r.seq.Len() - r.computed; left > 0 {
				r.computed += 1 + rng.IntN(left)
				cache(r, r.computed/ps)
			}
		case k < 15:
			op = "finish"
			i := rng.IntN(len(live))
			r := live[i]
			if r.computed == r.seq.Len() {
				// Completion: insert, then release (no Match: the request holds nothing more).
				full := r.computed / ps
				present := c.Insert(r.seq.Blocks()[:full], r.table[:full])
				if want := o.insert(r.seq.Blocks()[:full], r.table[:full]); present != want {
					t.Fatalf("step %d: Insert(%d pages) = %d, oracle %d", step, full, present, want)
				}
				for _, id := range r.table[present:full] {
					delete(private, id)
				}
				c.Free(r.table[r.locked:present])
				for _, id := range r.table[r.locked:present] {
					delete(private, id)
				}
				r.table = slices.Delete(r.table, present, full) // now owned by the tree
				r.table = slices.Delete(r.table, r.locked, present)
			} else {
				op = "retract"
			}
			release(i)
		case k < 17:
			op = "evict"
			evict(1 + rng.IntN(numPages/2))
		default:
			op = "probe"
			s := tokens.NewSequence(ps)
			s.Append(next()...)
			ids, _ := c.Match(s.Blocks(), nil)
			if want := o.match(s.Blocks()); !slices.Equal(ids, want) {
				t.Fatalf("step %d: probe Match = %v, oracle %v", step, ids, want)
			}
		}

		if err := c.CheckInvariants(); err != nil {
			t.Fatalf("step %d (%s): %v", step, op, err)
		}
		unlocked := 0
		for _, p := range o.pages {
			if p.lock == 0 {
				unlocked++
			}
		}
		if c.CachedPages() != len(o.pages) || c.EvictablePages() != unlocked || c.FreePages() != numPages-len(o.pages)-len(private) {
			t.Fatalf("step %d (%s): cache %+v; oracle %d cached, %d unlocked, %d private", step, op, countsOf(c), len(o.pages), unlocked, len(private))
		}
		evs := c.TakeEvents(nil)
		if len(evs) != len(o.evs) {
			t.Fatalf("step %d (%s): events %+v, oracle %+v", step, op, evs, o.evs)
		}
		for i, ev := range evs {
			w := o.evs[i]
			if ev.ID != w.ID || ev.Kind != w.Kind || ev.Parent != w.Parent || ev.HasParent != w.HasParent ||
				!slices.Equal(ev.Blocks, w.Blocks) || !slices.Equal(ev.Hashes, w.Hashes) {
				t.Fatalf("step %d (%s): event %+v, oracle %+v", step, op, ev, w)
			}
			for _, b := range ev.Blocks {
				if indexer[b.Hash] {
					t.Fatalf("step %d: event %d stores %#x twice", step, ev.ID, b.Hash)
				}
				if ev.HasParent && !indexer[ev.Parent] && b == ev.Blocks[0] {
					t.Fatalf("step %d: event %d stores under unknown parent %#x", step, ev.ID, ev.Parent)
				}
				indexer[b.Hash] = true
			}
			for _, h := range ev.Hashes {
				if !indexer[h] {
					t.Fatalf("step %d: event %d removes %#x, never stored", step, ev.ID, h)
				}
				delete(indexer, h)
			}
		}
		o.evs = o.evs[:0]
		if len(indexer) != len(o.pages) {
			t.Fatalf("step %d: indexer holds %d pages, %d resident", step, len(indexer), len(o.pages))
		}
		for h := range o.pages {
			if !indexer[h] {
				t.Fatalf("step %d: resident %#x unknown to the indexer", step, h)
			}
		}
	}
}
