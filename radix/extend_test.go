package radix

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// cachedHashes returns the sequence hash of every page in the tree.
func cachedHashes(c *Cache) map[uint64]bool {
	m := map[uint64]bool{}
	stack := []*Node{c.root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n != c.root {
			for _, h := range c.appendSeqHashes(nil, n) {
				m[h] = true
			}
		}
		for ch := n.first; ch != nil; ch = ch.next {
			stack = append(stack, ch)
		}
	}
	return m
}

// TestExtendGrowsOwnLeaf: a request caching its pages as it decodes grows its own leaf in place, and the
// result matches like one Insert of the whole sequence.
func TestExtendGrowsOwnLeaf(t *testing.T) {
	c := newCache(t, 1, 64)
	s := tokens.NewSequence(1)
	s.Append(toks(1, 2, 3)...)
	table, _ := c.Alloc(3, nil)
	present, node := c.Extend(nil, s.Blocks(), table, 0)
	c.Lock(node)
	if present != 0 || c.Nodes() != 1 {
		t.Fatalf("first extend: present %d, %d nodes", present, c.Nodes())
	}
	for i := range 5 {
		s.Append(uint32(10 + i))
		table, _ = c.Alloc(1, table)
		_, next := c.Extend(node, s.Blocks()[len(table)-1:], table[len(table)-1:], 0)
		c.Lock(next)
		c.Unlock(node)
		node = next
		if err := c.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if c.Nodes() != 1 || c.CachedPages() != 8 || c.ProtectedPages() != 8 {
		t.Fatalf("%d nodes, %d cached, %d protected; want one node of 8 locked pages", c.Nodes(), c.CachedPages(), c.ProtectedPages())
	}
	c.Unlock(node)
	ids, _ := c.Match(s.Blocks(), nil)
	if len(ids) != 8 || c.EvictablePages() != 8 {
		t.Fatalf("match %d pages, %d evictable", len(ids), c.EvictablePages())
	}
}

// TestExtendFreesDuplicates: pages already cached below the node are taken from the tree and the caller's
// copies freed.
func TestExtendFreesDuplicates(t *testing.T) {
	c := newCache(t, 1, 64)
	a := tokens.NewSequence(1)
	a.Append(toks(1, 2, 3, 4)...)
	ta, _ := c.Alloc(4, nil)
	c.Insert(a.Blocks(), ta)
	b := tokens.NewSequence(1)
	b.Append(toks(1, 2, 3, 4, 5)...)
	tb, _ := c.Alloc(5, nil)
	free := c.FreePages()
	present, node := c.Extend(nil, b.Blocks(), tb, 0)
	if present != 4 || c.FreePages() != free+4 || tb[3] != ta[3] || node == nil {
		t.Fatalf("present %d, free %d (was %d), ids %v vs %v", present, c.FreePages(), free, tb, ta)
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestExtendChurn drives requests that decode and cache page by page with Extend, under eviction
// pressure, and checks the tree against an indexer fed only by the events after every step.
func TestExtendChurn(t *testing.T) {
	for _, ps := range []int{1, 4} {
		for seed := uint64(1); seed <= 30; seed++ {
			t.Run(fmt.Sprintf("page%d/seed%d", ps, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(ps)))
				c, err := New(Options{PageSize: ps, NumPages: 48, Events: true})
				if err != nil {
					t.Fatal(err)
				}
				w := &churn{c: c, ps: ps, rng: rng, priorities: 1}
				indexed := map[uint64]bool{}
				for step := 0; step < 400; step++ {
					w.step()
					if err := c.CheckInvariants(); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					for _, ev := range c.TakeEvents(nil) {
						for _, b := range ev.Blocks {
							if indexed[b.Hash] {
								t.Fatalf("step %d: %x stored twice", step, b.Hash)
							}
							indexed[b.Hash] = true
						}
						if ev.Kind == kvcache.Removed {
							for _, h := range ev.Hashes {
								if !indexed[h] {
									t.Fatalf("step %d: %x removed, never stored", step, h)
								}
								delete(indexed, h)
							}
						}
					}
					cached := cachedHashes(c)
					if len(cached) != len(indexed) || len(cached) != c.CachedPages() {
						t.Fatalf("step %d: tree %d pages, indexer %d, counter %d", step, len(cached), len(indexed), c.CachedPages())
					}
					for h := range cached {
						if !indexed[h] {
							t.Fatalf("step %d: cached %x never announced", step, h)
						}
					}
				}
			})
		}
	}
}

func toks(t ...uint32) []uint32 { return t }

// TestExtendRoom: a leaf made with room for the pages its request will add grows into it without moving
// its edge (the copy room saves), and Trim gives back room an early end leaves; neither changes the tree.
func TestExtendRoom(t *testing.T) {
	c := newCache(t, 1, 64)
	s := tokens.NewSequence(1)
	s.Append(toks(1, 2, 3, 4)...)
	table, _ := c.Alloc(4, nil)
	_, node := c.Extend(nil, s.Blocks(), table, 8)
	c.Lock(node)
	edge := &node.keys.hashes[0] // its pages' ids, consecutive, are one run
	if cap(node.keys.hashes) < 12 || !node.ids.inRuns || len(node.ids.firsts) != 1 {
		t.Fatalf("leaf of 4 pages with room 8: capacity %d hashes, want at least 12; ids %v %v, want one run", cap(node.keys.hashes), node.ids.firsts, node.ids.lens)
	}
	for i := range 3 {
		s.Append(uint32(10 + i))
		table, _ = c.Alloc(1, table)
		_, next := c.Extend(node, s.Blocks()[len(table)-1:], table[len(table)-1:], 7-i)
		if next != node || &node.keys.hashes[0] != edge {
			t.Fatalf("page %d: the leaf moved (new node %v, edge copied %v)", i, next != node, &node.keys.hashes[0] != edge)
		}
	}
	c.Trim(node) // 7 pages, room for 5 more: kept
	if &node.keys.hashes[0] != edge || len(node.ids.firsts) != 1 || node.pages() != 7 {
		t.Error("Trim copied an edge whose room is smaller than itself")
	}
	s2 := tokens.NewSequence(1)
	s2.Append(toks(7)...)
	t2, _ := c.Alloc(1, nil)
	_, leaf := c.Extend(nil, s2.Blocks(), t2, 100)
	c.Trim(leaf) // its request ended at once: 100 pages of room for a 1-page edge go
	if cap(leaf.ids.firsts) > 8 || cap(leaf.keys.hashes) > 8 || leaf.pages() != 1 || leaf.ids.firsts[0] != t2[0] {
		t.Errorf("trimmed leaf: %d pages, capacity %d ids and %d hashes", leaf.pages(), cap(leaf.ids.firsts), cap(leaf.keys.hashes))
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestSplitCopiesTheShorterHalf: a split moves the shorter half of an edge, counting the room past its end
// as the lower half's, to arrays of its own, the longer one keeping the edge's; the lower half keeps the
// room (an upper half kept in the edge's arrays shows none spare). An upper half cut from a leaf with much
// room (a running request's) gets arrays of its own, rather than pinning the request's room for the
// interior node's life (its capacity, clipped to its pages, would not show it: where its arrays start
// does). The room is what the leaf's arrays got, which Grow may round up past what was asked: the half to
// copy is reckoned from it, and the cases are chosen so that each half is copied at least once.
func TestSplitCopiesTheShorterHalf(t *testing.T) {
	copies := map[bool]int{}
	for _, tc := range []struct{ k, room int }{
		{2, 6},    // 2 pages above, 8 and room for 6 below: the upper half copied
		{8, 1},    // 8 pages above, 2 and room for 1 (or a few) below: the lower half
		{8, 2000}, // 8 pages above, 2 and room for 2000 below: the upper half
		{9, 2000}, // likewise
		{5, 0},    // a tie (10 pages, no room): the upper half
		{9, 0},    // the lower half, unless Grow rounds past 17 pages
	} {
		c := newCache(t, 1, 4096)
		s := tokens.NewSequence(1)
		s.Append(toks(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)...)
		table, _ := c.Alloc(10, nil)
		_, leaf := c.Extend(nil, s.Blocks(), table, tc.room)
		hashes := leaf.keys.hashes // the edge's array (its page ids are one run)
		upperCopy := tc.k <= cap(hashes)-tc.k
		copies[upperCopy]++
		_, upper := c.Match(s.Blocks()[:tc.k], nil)
		if upper == leaf || upper.pages() != tc.k || leaf.pages() != 10-tc.k || leaf.parent != upper {
			t.Fatalf("k=%d room %d: match split the leaf into %d and %d pages", tc.k, tc.room, upper.pages(), leaf.pages())
		}
		kept, copied, at, which := upper, leaf, 0, "lower" // at: where the kept half starts in the edge's arrays
		if upperCopy {
			kept, copied, at, which = leaf, upper, tc.k, "upper"
		}
		if &kept.keys.hashes[0] != &hashes[at] || &copied.keys.hashes[0] == &hashes[0] {
			t.Errorf("k=%d room %d (capacity %d): want the %s half copied out and the other keeping the edge's arrays", tc.k, tc.room, cap(hashes), which)
		}
		if !upperCopy && upper.keys.spare() != 0 {
			t.Errorf("k=%d room %d: the upper half, kept in the edge's array, shows room for %d more pages, want none (the room is the lower half's)", tc.k, tc.room, upper.keys.spare())
		}
		if got, want := slices.Concat(upper.ids.appendTo(nil, tc.k), leaf.ids.appendTo(nil, 10-tc.k)), table; !slices.Equal(got, want) {
			t.Errorf("k=%d room %d: the halves hold pages %v, want %v", tc.k, tc.room, got, want)
		}
		if room := cap(leaf.keys.hashes) - leaf.pages(); room < tc.room {
			t.Errorf("k=%d room %d: the lower half has room for %d more pages, want the edge's %d", tc.k, tc.room, room, tc.room)
		}
		check(t, c)
	}
	if copies[true] == 0 || copies[false] == 0 {
		t.Errorf("the upper half copied in %d cases, the lower in %d: want each at least once", copies[true], copies[false])
	}
}
