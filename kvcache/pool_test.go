package kvcache

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/mocker-sim/mocker/tokens"
)

// seqBlocks returns the block identities of a token sequence cut into blocks of bs.
func seqBlocks(bs int, toks ...uint32) []tokens.Block {
	s := tokens.NewSequence(bs)
	s.Append(toks...)
	return s.Blocks()
}

func newPool(t *testing.T, capacity int, caching bool) *Pool {
	t.Helper()
	p, err := New(Options{Capacity: capacity, PrefixCaching: caching, Events: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func check(t *testing.T, p *Pool, free, active, inactive int) {
	t.Helper()
	if err := p.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if p.Free() != free || p.Active() != active || p.Inactive() != inactive {
		t.Fatalf("free/active/inactive = %d/%d/%d, want %d/%d/%d", p.Free(), p.Active(), p.Inactive(), free, active, inactive)
	}
}

// admit does what a scheduler does for a new request: share its cached prefix, allocate the rest, and
// commit every full block as computed.
func admit(t *testing.T, p *Pool, blocks []tokens.Block, total int) []BlockID {
	t.Helper()
	hits, _ := p.Match(blocks, nil)
	if !p.CanAllocate(hits, total-len(hits)) {
		t.Fatalf("cannot allocate %d blocks", total-len(hits))
	}
	table := p.Acquire(nil, hits)
	table = p.Allocate(table, total-len(hits))
	p.Commit(table, blocks, len(hits), len(blocks))
	return table
}

func TestNewRejectsEmptyPool(t *testing.T) {
	if _, err := New(Options{Capacity: 0}); err == nil {
		t.Fatal("capacity 0 accepted")
	}
}

func TestPrefixHitsAndReactivation(t *testing.T) {
	p := newPool(t, 8, true)
	a := seqBlocks(4, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3)
	ta := admit(t, p, a, 3) // 2 full blocks + 1 partial
	check(t, p, 5, 3, 0)

	// While a holds its blocks, b shares them at no capacity cost.
	b := seqBlocks(4, 1, 1, 1, 1, 2, 2, 2, 2, 9, 9, 9, 9)
	if hits, active := p.Match(b, nil); len(hits) != 2 || active != 2 || hits[0] != ta[0] || hits[1] != ta[1] {
		t.Fatalf("Match = %v hits, %d active; want a's blocks, 2 active", hits, active)
	}
	p.Release(ta)
	check(t, p, 6, 0, 2) // the partial block is freed, the two full ones stay cached
	if hits, active := p.Match(b, nil); len(hits) != 2 || active != 0 {
		t.Fatalf("after release Match = %v hits, %d active; want 2, 0", hits, active)
	}
	tb := admit(t, p, b, 3)
	check(t, p, 5, 3, 0)
	if tb[0] != ta[0] || tb[1] != ta[1] {
		t.Fatalf("b did not reuse a's blocks: %v vs %v", tb, ta)
	}
}

func TestCanAllocateDiscountsInactiveHits(t *testing.T) {
	p := newPool(t, 4, true)
	a := seqBlocks(1, 1, 2, 3)
	p.Release(admit(t, p, a, 3))
	check(t, p, 1, 0, 3)
	// Reusing the 3 inactive blocks leaves only 1 free block for fresh ones.
	hits, _ := p.Match(a, nil)
	if !p.CanAllocate(hits, 1) || p.CanAllocate(hits, 2) {
		t.Fatal("CanAllocate must not count the hits being reactivated as evictable")
	}
	if !p.CanAllocate(nil, 4) || p.CanAllocate(nil, 5) {
		t.Fatal("without hits, free + inactive blocks are available")
	}
}

func TestEvictionIsLRULeafFirst(t *testing.T) {
	p := newPool(t, 3, true)
	a := seqBlocks(1, 10, 11, 12)
	p.Release(admit(t, p, a, 3))
	p.TakeEvents(nil)
	// Each fresh block evicts the oldest inactive: a's leaf first, its root last.
	var table []BlockID
	for i, want := range []uint64{a[2].Hash, a[1].Hash, a[0].Hash} {
		table = p.Allocate(table, 1)
		evs := p.TakeEvents(nil)
		if len(evs) != 1 || evs[0].Kind != Removed || !slices.Equal(evs[0].Hashes, []uint64{want}) {
			t.Fatalf("allocation %d: events %+v, want Removed[%#x]", i, evs, want)
		}
	}
	check(t, p, 0, 3, 0)
}

func TestEvictionPrefersOlderRequests(t *testing.T) {
	p := newPool(t, 4, true)
	a, b := seqBlocks(1, 1, 2), seqBlocks(1, 3, 4)
	ta, tb := admit(t, p, a, 2), admit(t, p, b, 2)
	p.Release(ta)
	p.Release(tb)
	p.TakeEvents(nil)
	p.Allocate(nil, 3)
	evs := p.TakeEvents(nil)
	want := []uint64{a[1].Hash, a[0].Hash, b[1].Hash}
	if len(evs) != 1 || !slices.Equal(evs[0].Hashes, want) {
		t.Fatalf("events %+v, want one Removed %x", evs, want)
	}
	if hits, _ := p.Match(b, nil); len(hits) != 1 {
		t.Fatalf("b's root must survive: %d hits", hits)
	}
}

func TestStoredEventsGroupConsecutiveNewBlocks(t *testing.T) {
	p := newPool(t, 16, true)
	a := seqBlocks(2, 1, 1, 2, 2, 3, 3, 4, 4)
	ta := admit(t, p, a, 4)
	evs := p.TakeEvents(nil)
	if len(evs) != 1 || evs[0].Kind != Stored || evs[0].HasParent || !slices.Equal(evs[0].Blocks, a) || evs[0].ID != 0 {
		t.Fatalf("first request: events %+v, want one Stored of all 4 blocks with no parent", evs)
	}
	// b shares block 0 by hit, then computes blocks 1..3; its block 2 duplicates nothing resident but
	// block 1 duplicates a's block 1 because b computed it privately (it did not match past block 0).
	b := seqBlocks(2, 1, 1, 2, 2, 5, 5, 6, 6)
	hits, _ := p.Match(b[:1], nil)
	tb := p.Acquire(nil, hits)
	tb = p.Allocate(tb, 3)
	p.Commit(tb, b, 1, 4)
	evs = p.TakeEvents(nil)
	if len(evs) != 1 || !evs[0].HasParent || evs[0].Parent != b[1].Hash || !slices.Equal(evs[0].Blocks, b[2:4]) || evs[0].ID != 1 {
		t.Fatalf("second request: events %+v, want Stored(parent=b1, blocks b2,b3) id 1", evs)
	}
	check(t, p, 9, 7, 0) // the duplicate copy of block 1 takes capacity

	// Releasing and evicting one copy of the duplicated hash announces nothing; the last copy does.
	p.Release(tb)
	p.Release(ta)
	p.TakeEvents(nil)
	p.Allocate(nil, 16)
	evs = p.TakeEvents(nil)
	var removed []uint64
	for _, e := range evs {
		removed = append(removed, e.Hashes...)
	}
	slices.Sort(removed)
	want := []uint64{a[0].Hash, a[1].Hash, a[2].Hash, a[3].Hash, b[2].Hash, b[3].Hash}
	slices.Sort(want)
	if len(evs) != 1 || !slices.Equal(removed, want) {
		t.Fatalf("removed %x in %d events, want each hash once in one event: %x", removed, len(evs), want)
	}
}

func TestDuplicateBreaksStoredRun(t *testing.T) {
	p := newPool(t, 16, true)
	a := seqBlocks(1, 1, 2, 3)
	admit(t, p, a[:2], 2) // blocks 0,1 resident
	p.TakeEvents(nil)
	// A request that computed all three privately: 0 and 1 are duplicates, 2 is new.
	tb := p.Allocate(nil, 3)
	p.Commit(tb, a, 0, 3)
	evs := p.TakeEvents(nil)
	if len(evs) != 1 || evs[0].Parent != a[1].Hash || !slices.Equal(evs[0].Blocks, a[2:]) {
		t.Fatalf("events %+v, want Stored(parent a1, [a2])", evs)
	}
}

func TestPrefixCachingOff(t *testing.T) {
	p := newPool(t, 4, false)
	a := seqBlocks(1, 1, 2)
	ta := admit(t, p, a, 2)
	if hits, _ := p.Match(a, nil); len(hits) != 0 {
		t.Fatal("hit with prefix caching off")
	}
	p.Release(ta)
	check(t, p, 4, 0, 0)
	if evs := p.TakeEvents(nil); len(evs) != 0 {
		t.Fatalf("events with prefix caching off: %+v", evs)
	}
}

// oracle is a naive model of the pool: the blocks in use, with their release order, and each resident
// hash's copies in the order the pool keeps them.
type oracle struct {
	capacity int
	copies   []*oCopy
	chains   map[uint64][]*oCopy // each resident hash's copies: the first copy, then the later ones, newest first
	clock    int
}

type oCopy struct {
	id       BlockID // the pool's block that holds it
	hash     uint64
	private  bool
	refs     int
	released int // clock at the last release to zero refs
}

// share is the copy of hash a hit references: one some request references, if any, else the first copy.
func (o *oracle) share(hash uint64) *oCopy {
	chain := o.chains[hash]
	for _, c := range chain {
		if c.refs > 0 {
			return c
		}
	}
	return chain[0]
}

// commit makes a private copy cached as hash: the first copy of a hash not resident, else the newest of
// its later copies.
func (o *oracle) commit(c *oCopy, hash uint64) {
	c.private, c.hash = false, hash
	chain := o.chains[hash]
	if len(chain) == 0 {
		o.chains[hash] = []*oCopy{c}
		return
	}
	o.chains[hash] = slices.Insert(chain, 1, c)
}

// take is a fresh private copy, evicting the least recently released unreferenced copy if the pool is full.
func (o *oracle) take() *oCopy {
	if len(o.copies) == o.capacity {
		victim := -1
		for vi, c := range o.copies {
			if !c.private && c.refs == 0 && (victim < 0 || c.released < o.copies[victim].released) {
				victim = vi
			}
		}
		v := o.copies[victim]
		o.copies = slices.Delete(o.copies, victim, victim+1)
		o.chains[v.hash] = slices.DeleteFunc(o.chains[v.hash], func(x *oCopy) bool { return x == v })
		if len(o.chains[v.hash]) == 0 {
			delete(o.chains, v.hash)
		}
	}
	c := &oCopy{private: true, refs: 1}
	o.copies = append(o.copies, c)
	return c
}

func (o *oracle) resident() map[uint64]int {
	m := map[uint64]int{}
	for h, chain := range o.chains {
		m[h] = len(chain)
	}
	return m
}

// TestPoolAgainstOracle drives the pool and a naive model with the same random requests and compares the
// resident hashes, the copies hits share, the accounting, and the set of hashes announced by events after
// every operation. Requests are admitted uncommitted and commit their blocks in chunks on later steps,
// as passes compute them, so two requests compute the same prefix at once and later copies take over
// from first copies that are evicted.
func TestPoolAgainstOracle(t *testing.T) {
	laterCopies := 0
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			const bs, capacity = 2, 24
			p := newPool(t, capacity, true)
			o := &oracle{capacity: capacity, chains: map[uint64][]*oCopy{}}
			type live struct {
				table     []BlockID
				blocks    []tokens.Block
				copies    []*oCopy
				committed int // table[:committed] is cached
			}
			var running []*live
			announced := map[uint64]bool{}
			for step := 0; step < 600; step++ {
				var pending []*live // live requests with full blocks still to commit
				for _, r := range running {
					if r.committed < len(r.blocks) {
						pending = append(pending, r)
					}
				}
				switch a := rng.IntN(8); {
				case len(running) > 0 && (a < 1 || p.Free()+p.Inactive() < 6):
					i := rng.IntN(len(running))
					r := running[i]
					running = slices.Delete(running, i, i+1)
					p.Release(r.table)
					for j := len(r.copies) - 1; j >= 0; j-- {
						c := r.copies[j]
						if c.private {
							o.copies = slices.DeleteFunc(o.copies, func(x *oCopy) bool { return x == c })
							continue
						}
						if c.refs--; c.refs == 0 {
							o.clock++
							c.released = o.clock
						}
					}
				case len(pending) > 0 && a < 3:
					r := pending[rng.IntN(len(pending))]
					to := r.committed + 1 + rng.IntN(len(r.blocks)-r.committed)
					p.Commit(r.table, r.blocks, r.committed, to)
					for k := r.committed; k < to; k++ {
						if len(o.chains[r.blocks[k].Hash]) > 0 {
							laterCopies++
						}
						o.commit(r.copies[k], r.blocks[k].Hash)
					}
					r.committed = to
				default:
					// A sequence from a small family of shared prefixes.
					n := 1 + rng.IntN(9)
					toks := make([]uint32, n)
					root := uint32(rng.IntN(3))
					for k := range toks {
						toks[k] = root*100 + uint32(k)
						if k >= 2+int(root) {
							toks[k] = uint32(rng.IntN(4))
						}
					}
					blocks := seqBlocks(bs, toks...)
					total := (n + bs - 1) / bs
					hitIDs, active := p.Match(blocks, nil)
					hits := len(hitIDs)
					r := &live{blocks: blocks, committed: hits}
					for k, b := range blocks[:hits] {
						c := o.share(b.Hash)
						if c.refs > 0 {
							active--
						}
						if hitIDs[k] != c.id {
							t.Fatalf("step %d: hit %d shares block %d, the oracle block %d", step, k, hitIDs[k], c.id)
						}
						r.copies = append(r.copies, c)
					}
					if active != 0 {
						t.Fatalf("step %d: Match counts %d more active hits than the oracle", step, active)
					}
					if !p.CanAllocate(hitIDs, total-hits) {
						continue
					}
					r.table = p.Acquire(nil, hitIDs)
					r.table = p.Allocate(r.table, total-hits)
					for _, c := range r.copies {
						c.refs++
					}
					for _, id := range r.table[hits:] {
						c := o.take()
						c.id = id
						r.copies = append(r.copies, c)
					}
					running = append(running, r)
				}
				if err := p.CheckInvariants(); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				for _, e := range p.TakeEvents(nil) {
					for _, b := range e.Blocks {
						if announced[b.Hash] {
							t.Fatalf("step %d: %#x stored twice", step, b.Hash)
						}
						announced[b.Hash] = true
					}
					for _, h := range e.Hashes {
						if !announced[h] {
							t.Fatalf("step %d: %#x removed but never stored", step, h)
						}
						delete(announced, h)
					}
				}
				want := o.resident()
				if len(want) != len(announced) {
					t.Fatalf("step %d: %d hashes announced, oracle has %d resident", step, len(announced), len(want))
				}
				// The pool read in place (a router's Mirror) holds what the events announced.
				if p.Cached() != len(announced) {
					t.Fatalf("step %d: Cached %d, %d hashes announced", step, p.Cached(), len(announced))
				}
				probe := make([]uint32, 1+rng.IntN(9))
				for k := range probe {
					probe[k] = uint32(rng.IntN(3))*100 + uint32(k)
					if k >= 2 && rng.IntN(2) == 0 {
						probe[k] = uint32(rng.IntN(4))
					}
				}
				pb := seqBlocks(bs, probe...)
				lead := 0
				for lead < len(pb) && announced[pb[lead].Hash] {
					lead++
				}
				if got := p.Prefix(pb); got != lead {
					t.Fatalf("step %d: Prefix %d, the events announced the first %d of %d blocks", step, got, lead, len(pb))
				}
				copiesOf := map[uint64]int{}
				for _, b := range p.blocks {
					if b.state == cached {
						copiesOf[b.hash]++
					}
				}
				if len(copiesOf) != len(want) {
					t.Fatalf("step %d: %d hashes resident, oracle %d", step, len(copiesOf), len(want))
				}
				for h, n := range want {
					if !announced[h] {
						t.Fatalf("step %d: resident %#x not announced", step, h)
					}
					if copies := copiesOf[h]; copies != n {
						t.Fatalf("step %d: hash %#x has %d copies, oracle %d", step, h, copies, n)
					}
				}
				if used := len(o.copies); p.Free() != capacity-used {
					t.Fatalf("step %d: free %d, oracle %d", step, p.Free(), capacity-used)
				}
			}
		})
	}
	t.Logf("%d later copies committed", laterCopies)
	if laterCopies < 100 {
		t.Fatalf("%d later copies committed: the driver no longer has requests compute a prefix at once", laterCopies)
	}
}

func BenchmarkAdmitRelease(b *testing.B) {
	p, _ := New(Options{Capacity: 4096, PrefixCaching: true})
	seqs := make([][]tokens.Block, 64)
	for i := range seqs {
		toks := make([]uint32, 16*64)
		for k := range toks {
			toks[k] = uint32(i%8*1000 + k/16)
			if k > 16*32 {
				toks[k] += uint32(i) << 20
			}
		}
		seqs[i] = seqBlocks(16, toks...)
	}
	var table, hits []BlockID
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s := seqs[i%len(seqs)]
		hits, _ = p.Match(s, hits[:0])
		table = p.Acquire(table[:0], hits)
		table = p.Allocate(table, len(s)-len(hits))
		p.Commit(table, s, len(hits), len(s))
		p.Release(table)
	}
}

// TestPrefixIsWhatEventsAnnounce: Prefix and Cached read the pool as a consumer of its KV events holds
// it: leading blocks up to the first never stored or since evicted, and nothing without events.
func TestPrefixIsWhatEventsAnnounce(t *testing.T) {
	p := newPool(t, 4, true)
	a := seqBlocks(1, 1, 2, 3)
	ta := admit(t, p, a, 3)
	if got := p.Prefix(seqBlocks(1, 1, 2, 9)); got != 2 {
		t.Fatalf("Prefix of a's first two blocks and another = %d, want 2", got)
	}
	if got := p.Prefix(a); got != 3 || p.Cached() != 3 {
		t.Fatalf("Prefix(a) = %d, Cached %d; want 3, 3", got, p.Cached())
	}
	if got := p.Prefix(seqBlocks(1, 9, 2, 3)); got != 0 {
		t.Fatalf("Prefix of another first block = %d, want 0", got)
	}
	p.Release(ta)
	p.Allocate(nil, 2) // one free block, then a's leaf is evicted
	if got := p.Prefix(a); got != 2 || p.Cached() != 2 {
		t.Fatalf("after evicting a's leaf: Prefix(a) = %d, Cached %d; want 2, 2", got, p.Cached())
	}
	quiet, err := New(Options{Capacity: 4, PrefixCaching: true})
	if err != nil {
		t.Fatal(err)
	}
	admit(t, quiet, a, 3)
	if quiet.Prefix(a) != 0 || quiet.Cached() != 0 {
		t.Fatalf("without events: Prefix %d, Cached %d; want 0, 0 (nothing announced)", quiet.Prefix(a), quiet.Cached())
	}
}

// TestRemovedHashesReused: Removed events' hash lists stay intact while later evictions happen (until
// NewPass), and after NewPass an evicting admission allocates nothing.
func TestRemovedHashesReused(t *testing.T) {
	p := newPool(t, 4, true)
	seqs := make([][]tokens.Block, 32)
	for i := range seqs {
		b := uint32(10 * i)
		seqs[i] = seqBlocks(2, b, b, b+1, b+1, b+2, b+2, b+3, b+3)
	}
	var table, hits []BlockID
	var evs []Event
	evict := func(i int) []Event {
		hits, _ = p.Match(seqs[i], hits[:0])
		table = p.Acquire(table[:0], hits)
		table = p.Allocate(table, 4-len(hits))
		p.Commit(table, seqs[i], len(hits), 4)
		p.Release(table)
		evs = p.TakeEvents(evs[:0])
		return evs
	}
	evict(0) // fills the pool with cached blocks
	first := slices.Clone(evict(1))
	if len(first) != 2 || first[0].Kind != Removed || len(first[0].Hashes) != 4 {
		t.Fatalf("events %+v: want one Removed of 4 hashes, then one Stored", first)
	}
	kept := slices.Clone(first[0].Hashes)
	evict(2) // no NewPass: the earlier list must survive
	if !slices.Equal(first[0].Hashes, kept) {
		t.Fatalf("a later eviction overwrote the pass's Removed hashes: %x, was %x", first[0].Hashes, kept)
	}
	i := 3
	if allocs := testing.AllocsPerRun(20, func() {
		p.NewPass()
		evict(i % len(seqs))
		i++
	}); allocs != 0 {
		t.Errorf("%.0f allocations per evicting admission after NewPass, want 0", allocs)
	}
}

// TestLRUQueueStaysBounded churns a small pool (requests continuing one of a few prefixes, some released
// at once and reactivated by the next, the rest evicted), which leaves holes and evicted entries in the
// LRU queue: compaction keeps its array within twice the pool, whatever the run's length.
func TestLRUQueueStaysBounded(t *testing.T) {
	const bs, capacity = 2, 1000 // past 256 entries append grows a slice by quarters, not doubling
	p := newPool(t, capacity, true)
	rng := rand.New(rand.NewPCG(3, 4))
	var held [][]BlockID
	for i := range 20000 {
		toks := make([]uint32, 2*(1+rng.IntN(8)))
		for k := range toks {
			toks[k] = uint32(i)
			if k < 6 {
				toks[k] = uint32(rng.IntN(4)*10 + k)
			}
		}
		blocks := seqBlocks(bs, toks...)
		hits, _ := p.Match(blocks, nil)
		for len(held) > 0 && !p.CanAllocate(hits, len(blocks)-len(hits)) {
			p.Release(held[0])
			held = held[1:]
		}
		table := p.Acquire(nil, hits)
		table = p.Allocate(table, len(blocks)-len(hits))
		p.Commit(table, blocks, len(hits), len(blocks))
		held = append(held, table)
		if len(held) > 3 {
			p.Release(held[0])
			held = held[1:]
		}
		if err := p.CheckInvariants(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if cap(p.lru) > 2*capacity {
			t.Fatalf("request %d: LRU queue of %d entries (room for %d) for %d inactive blocks in a pool of %d", i, len(p.lru), cap(p.lru), p.Inactive(), capacity)
		}
	}
}

// TestPoolGrowsWithUse: a pool costs what it holds, not its capacity, so a thousand idle live workers with
// mocker's default pool (55,522 blocks) are cheap: a new pool allocates under 16 KiB (its index sized for
// its capacity was 2 MiB); filled to capacity by one sequence, it holds every hash in one run, and its
// index names that run's first block alone.
func TestPoolGrowsWithUse(t *testing.T) {
	const capacity = 55522
	var before, after runtime.MemStats
	pools := make([]*Pool, 100)
	runtime.ReadMemStats(&before)
	for i := range pools {
		pools[i] = newPool(t, capacity, true)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / uint64(len(pools)); per > 16<<10 {
		t.Errorf("a new pool of %d blocks allocates %d bytes, want at most 16 KiB", capacity, per)
	}
	p := pools[0]
	toks := make([]uint32, capacity)
	for i := range toks {
		toks[i] = uint32(i)
	}
	table := admit(t, p, seqBlocks(1, toks...), capacity)
	p.Release(table)
	check(t, p, 0, 0, capacity)
	if p.TierLen(GPU) != capacity || p.byHash.len() != 1 || len(p.byHash.slots) != 1024 {
		t.Errorf("full pool: %d hashes, %d index entries in %d slots, want %d, 1 in 1024", p.TierLen(GPU), p.byHash.len(), len(p.byHash.slots), capacity)
	}
}

// TestBlockIs32Bytes: a pool's blocks are read at random (an evicted block, a released table's), one cache
// miss each; at 32 bytes two share a line and a default pool's 55,522 take 1.7 MiB.
func TestBlockIs32Bytes(t *testing.T) {
	if n := unsafe.Sizeof(block{}); n != 32 {
		t.Errorf("a block takes %d bytes, want 32", n)
	}
}

// TestSuffixOutlivesItsPrefix: a table released prefix first leaves its first block the LRU's oldest, so
// it is evicted while the blocks after it stay. The next block then starts a run of its own: once the
// first hash is cached again (a new block, which no run continues), the whole sequence is found, and
// committing it again stores nothing.
func TestSuffixOutlivesItsPrefix(t *testing.T) {
	p := newPool(t, 5, true)
	x := seqBlocks(1, 1, 2, 3)
	tx := admit(t, p, x, 3)
	p.Release(tx[:1])
	p.Release(tx[1:])
	check(t, p, 2, 0, 3)
	p.TakeEvents(nil)
	p.Release(p.Allocate(nil, 3)) // the two free blocks, then x's first
	check(t, p, 3, 0, 2)
	if evs := p.TakeEvents(nil); len(evs) != 1 || evs[0].Kind != Removed || !slices.Equal(evs[0].Hashes, []uint64{x[0].Hash}) {
		t.Fatalf("events %v, want x's first block removed", evs)
	}
	if got := p.Prefix(x); got != 0 {
		t.Fatalf("Prefix = %d without x's first block, want 0", got)
	}
	t0 := admit(t, p, x[:1], 1)
	check(t, p, 2, 1, 2)
	if evs := p.TakeEvents(nil); len(evs) != 1 || evs[0].Kind != Stored || len(evs[0].Blocks) != 1 || evs[0].Blocks[0] != x[0] {
		t.Fatalf("events %v, want x's first block stored", evs)
	}
	if got := p.Prefix(x); got != 3 {
		t.Fatalf("Prefix = %d with x's blocks all cached, want 3", got)
	}
	hits, active := p.Match(x, nil)
	if want := []BlockID{t0[0], tx[1], tx[2]}; !slices.Equal(hits, want) || active != 1 {
		t.Fatalf("Match = %v, %d active; want %v, 1", hits, active, want)
	}
	p.Release(t0)
	check(t, p, 2, 0, 3)
}

// TestLaterCopyTakesOverARun: two requests compute a prompt's first block at once, and the second commits
// the block after it too, which continues the first copy's run. When the first copy is evicted the later
// copy takes its place in the run, so the second block is still found; evicting that one then leaves the
// first block alone.
func TestLaterCopyTakesOverARun(t *testing.T) {
	p := newPool(t, 3, true)
	a, b := seqBlocks(1, 1), seqBlocks(1, 1, 2)
	ta := p.Allocate(nil, 1)
	tb := p.Allocate(nil, 2)
	p.Commit(ta, a, 0, 1)
	p.Commit(tb, b, 0, 2) // tb[0] is a later copy of ta[0]; tb[1] follows ta[0]
	check(t, p, 0, 3, 0)
	p.Release(ta)
	p.Release(tb)
	p.TakeEvents(nil)
	z := p.Allocate(nil, 1) // evicts ta[0]: tb[0] is left
	check(t, p, 0, 1, 2)
	if z[0] != ta[0] {
		t.Fatalf("allocated block %d, want the evicted %d", z[0], ta[0])
	}
	if evs := p.TakeEvents(nil); len(evs) != 0 {
		t.Fatalf("events %v evicting a copy with another resident, want none", evs)
	}
	if hits, _ := p.Match(b, nil); !slices.Equal(hits, tb) || p.Prefix(b) != 2 {
		t.Fatalf("Match = %v, Prefix %d; want %v, 2", hits, p.Prefix(b), tb)
	}
	p.Release(z)
	p.Release(p.Allocate(nil, 2)) // the free block, then tb[1]
	check(t, p, 2, 0, 1)
	if hits, _ := p.Match(b, nil); !slices.Equal(hits, tb[:1]) || p.Prefix(b) != 1 {
		t.Fatalf("Match = %v, Prefix %d; want %v, 1", hits, p.Prefix(b), tb[:1])
	}
}

// TestLaterCopyTakesOverMidRun: two requests compute the same two blocks at once. Evicting the first
// copy of the second block hands its place after the first block to the later copy.
func TestLaterCopyTakesOverMidRun(t *testing.T) {
	p := newPool(t, 5, true)
	x := seqBlocks(1, 1, 2)
	ta := p.Allocate(nil, 2)
	tb := p.Allocate(nil, 2)
	p.Commit(ta, x, 0, 2)
	p.Commit(tb, x, 0, 2)
	p.Release(ta)
	p.Release(tb)
	check(t, p, 1, 0, 4)
	z := p.Allocate(nil, 2) // the free block, then ta[1]
	check(t, p, 0, 2, 3)
	if hits, _ := p.Match(x, nil); !slices.Equal(hits, []BlockID{ta[0], tb[1]}) || p.Prefix(x) != 2 {
		t.Fatalf("Match = %v, Prefix %d; want [%d %d], 2", hits, p.Prefix(x), ta[0], tb[1])
	}
	p.Release(z)
	check(t, p, 2, 0, 3)
}

// TestForkOutlivesItsParentsFirstCopy: two prompts share their first block and part after it. The second
// prompt's second block starts a run forked from the first copy of the first block, whose run goes on
// with the first prompt's. When that first copy is evicted, the later copy that takes its place is where
// the fork is looked for.
func TestForkOutlivesItsParentsFirstCopy(t *testing.T) {
	p := newPool(t, 4, true)
	x, y := seqBlocks(1, 1, 2), seqBlocks(1, 1, 3)
	ta := p.Allocate(nil, 2)
	tb := p.Allocate(nil, 2)
	p.Commit(ta, x, 0, 2)
	p.Commit(tb, y, 0, 2) // tb[0] is a later copy of ta[0]; tb[1] forks from ta[0]
	check(t, p, 0, 4, 0)
	if hits, _ := p.Match(y, nil); !slices.Equal(hits, []BlockID{ta[0], tb[1]}) || p.Prefix(y) != 2 {
		t.Fatalf("Match = %v, Prefix %d; want [%d %d], 2", hits, p.Prefix(y), ta[0], tb[1])
	}
	p.Release(ta)
	p.Release(tb)
	z := p.Allocate(nil, 2) // evicts ta[1], then ta[0]: tb[0] takes its place
	check(t, p, 0, 2, 2)
	if hits, _ := p.Match(y, nil); !slices.Equal(hits, tb) || p.Prefix(y) != 2 {
		t.Fatalf("Match = %v, Prefix %d; want %v, 2", hits, p.Prefix(y), tb)
	}
	if hits, _ := p.Match(x, nil); !slices.Equal(hits, tb[:1]) || p.Prefix(x) != 1 {
		t.Fatalf("Match = %v, Prefix %d; want %v, 1", hits, p.Prefix(x), tb[:1])
	}
	p.Release(z)
}

// TestForkOutlivesItsParent: a table released out of order (its first block before its fork) leaves the
// fork resident once the block before it is evicted; when that block is cached again, the fork is found
// after the new copy, which nothing forked from.
func TestForkOutlivesItsParent(t *testing.T) {
	p := newPool(t, 3, true)
	x, y := seqBlocks(1, 1, 2), seqBlocks(1, 1, 3)
	ta := admit(t, p, x, 2)
	tb := admit(t, p, y, 2) // shares ta[0]; tb[1] forks from it
	p.Release(tb[:1])
	p.Release(ta)
	p.Release(tb[1:])
	check(t, p, 0, 0, 3)
	p.Release(p.Allocate(nil, 2)) // evicts ta[1], then ta[0]: the fork is left
	check(t, p, 2, 0, 1)
	if p.Prefix(y) != 0 {
		t.Fatalf("Prefix = %d without y's first block, want 0", p.Prefix(y))
	}
	t0 := admit(t, p, x[:1], 1)
	if hits, _ := p.Match(y, nil); !slices.Equal(hits, []BlockID{t0[0], tb[1]}) || p.Prefix(y) != 2 {
		t.Fatalf("Match = %v, Prefix %d; want [%d %d], 2", hits, p.Prefix(y), t0[0], tb[1])
	}
	p.Release(t0)
	check(t, p, 1, 0, 2)
}
