package radix

import (
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
)

var pageSizes = []int{1, 4}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{PageSize: 0, NumPages: 1}, {PageSize: 1, NumPages: 0}, {PageSize: -1, NumPages: -1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestMatch pins match_prefix (reference §5): the longest cached prefix, split off as its own node when
// the query leaves an edge (or ends) in its middle; counts never change. MatchLen walks the same way and
// counts the pages Match lists.
func TestMatch(t *testing.T) {
	tests := []struct {
		query string
		ids   []PageID
		tree  string
		nodes int
	}{
		{"abcd", []PageID{0, 1, 2, 3}, "abcd [0 1 2 3]", 1},
		{"abcdef", []PageID{0, 1, 2, 3}, "abcd [0 1 2 3]", 1},
		{"abcd+", []PageID{0, 1, 2, 3}, "abcd [0 1 2 3]", 1}, // a partial page never matches
		{"abxy", []PageID{0, 1}, "ab [0 1]|  cd [2 3]", 2},
		{"ab", []PageID{0, 1}, "ab [0 1]|  cd [2 3]", 2},
		{"a", []PageID{0}, "a [0]|  bcd [1 2 3]", 2},
		{"abc+", []PageID{0, 1, 2}, "abc [0 1 2]|  d [3]", 2},
		{"x", nil, "abcd [0 1 2 3]", 1},
		{"", nil, "abcd [0 1 2 3]", 1},
	}
	for _, ps := range pageSizes {
		for _, byLen := range []bool{false, true} {
			for _, tt := range tests {
				c := newCache(t, ps, 16)
				insertNew(t, c, seq(ps, "abcd"))
				name := "Match"
				var node *Node
				if byLen {
					name = "MatchLen"
					var matched int
					matched, node = c.MatchLen(seq(ps, tt.query))
					if matched != len(tt.ids) {
						t.Errorf("ps %d: MatchLen(%q) = %d, want %d", ps, tt.query, matched, len(tt.ids))
					}
				} else {
					var ids []PageID
					ids, node = c.Match(seq(ps, tt.query), nil)
					if !slices.Equal(ids, tt.ids) {
						t.Errorf("ps %d: Match(%q) ids = %v, want %v", ps, tt.query, ids, tt.ids)
					}
				}
				check(t, c)
				if want := strings.ReplaceAll(tt.tree, "|", "\n") + "\n"; dump(c) != want {
					t.Errorf("ps %d: after %s(%q) tree =\n%swant\n%s", ps, name, tt.query, dump(c), want)
				}
				if got, want := countsOf(c), (counts{free: 12, cached: 4, evictable: 4, nodes: tt.nodes}); got != want {
					t.Errorf("ps %d: after %s(%q) counts = %+v, want %+v", ps, name, tt.query, got, want)
				}
				// The returned node ends at the last matched page: locking it protects exactly the match.
				if (node == c.root) != (len(tt.ids) == 0) {
					t.Errorf("ps %d: %s(%q) node is root: %v", ps, name, tt.query, node == c.root)
				}
				c.Lock(node)
				check(t, c)
				if c.ProtectedPages() != len(tt.ids) || c.EvictablePages() != 4-len(tt.ids) {
					t.Errorf("ps %d: after locking %s(%q): protected %d evictable %d, want %d %d",
						ps, name, tt.query, c.ProtectedPages(), c.EvictablePages(), len(tt.ids), 4-len(tt.ids))
				}
			}
		}
	}
}

// TestInsert: pages already cached are not inserted again; Insert says how many, and the rest becomes a
// new leaf holding the caller's page ids.
func TestInsert(t *testing.T) {
	tests := []struct {
		seq     string
		present int
		tree    string
	}{
		{"abcd", 4, "abcd [0 1 2 3]"},
		{"abef", 2, "ab [0 1]|  cd [2 3]|  ef [6 7]"},
		{"xy", 0, "abcd [0 1 2 3]|xy [4 5]"},
		{"ab", 2, "ab [0 1]|  cd [2 3]"},
		{"abcdef", 4, "abcd [0 1 2 3]|  ef [8 9]"},
		{"", 0, "abcd [0 1 2 3]"},
	}
	for _, ps := range pageSizes {
		for _, tt := range tests {
			c := newCache(t, ps, 16)
			insertNew(t, c, seq(ps, "abcd"))
			pages := seq(ps, tt.seq)
			ids := alloc(t, c, len(pages)) // 4, 5, ...
			present := c.Insert(pages, ids)
			check(t, c)
			if present != tt.present {
				t.Errorf("ps %d: Insert(%q) = %d, want %d", ps, tt.seq, present, tt.present)
			}
			c.Free(ids[:present])
			check(t, c)
			if want := strings.ReplaceAll(tt.tree, "|", "\n") + "\n"; dump(c) != want {
				t.Errorf("ps %d: after Insert(%q) tree =\n%swant\n%s", ps, tt.seq, dump(c), want)
			}
			cached := 4 + len(pages) - present
			if got, want := countsOf(c), (counts{free: 16 - cached, cached: cached, evictable: cached, nodes: strings.Count(tt.tree, "[")}); got != want {
				t.Errorf("ps %d: after Insert(%q) counts = %+v, want %+v", ps, tt.seq, got, want)
			}
		}
	}
}

// TestEvictLRULeavesCascading: the least recently used unlocked leaf goes first, whole; a parent left a
// leaf is a candidate in turn.
func TestEvictLRULeavesCascading(t *testing.T) {
	for _, ps := range pageSizes {
		c := newCache(t, ps, 16)
		abc, abd, xy := seq(ps, "abc"), seq(ps, "abd"), seq(ps, "xy")
		insertNew(t, c, abc) // ids 0 1 2
		insertNew(t, c, abd) // ids 3 4 allocated and freed as duplicates, 5 kept
		insertNew(t, c, xy)  // ids 4 3
		c.Match(abc, nil)    // ab and c are now the most recent
		c.TakeEvents(nil)
		if want := "ab [0 1]\n  c [2]\n  d [5]\nxy [4 3]\n"; dump(c) != want {
			t.Fatalf("ps %d: tree =\n%swant\n%s", ps, dump(c), want)
		}
		steps := []struct {
			evict, freed int
			removed      []uint64
			tree         string
		}{
			{1, 1, []uint64{abd[2].Hash}, "ab [0 1]|  c [2]|xy [4 3]"},
			{1, 2, []uint64{xy[1].Hash, xy[0].Hash}, "ab [0 1]|  c [2]"},
			{2, 3, []uint64{abc[2].Hash, abc[1].Hash, abc[0].Hash}, ""},
			{1, 0, nil, ""},
		}
		for i, s := range steps {
			freed := c.Evict(s.evict)
			check(t, c)
			if freed != s.freed {
				t.Errorf("ps %d step %d: Evict(%d) = %d, want %d", ps, i, s.evict, freed, s.freed)
			}
			var removed []uint64
			for _, ev := range c.TakeEvents(nil) {
				if ev.Kind != kvcache.Removed {
					t.Errorf("ps %d step %d: event %+v", ps, i, ev)
				}
				removed = append(removed, ev.Hashes...)
			}
			if !slices.Equal(removed, s.removed) {
				t.Errorf("ps %d step %d: removed %x, want %x", ps, i, removed, s.removed)
			}
			want := strings.ReplaceAll(s.tree, "|", "\n")
			if want != "" {
				want += "\n"
			}
			if dump(c) != want {
				t.Errorf("ps %d step %d: tree =\n%swant\n%s", ps, i, dump(c), want)
			}
		}
		if c.FreePages() != 16 || c.CachedPages() != 0 || c.Nodes() != 0 {
			t.Errorf("ps %d: emptied cache has %+v", ps, countsOf(c))
		}
	}
}

func TestLockedPathIsNeverEvicted(t *testing.T) {
	for _, ps := range pageSizes {
		c := newCache(t, ps, 16)
		insertNew(t, c, seq(ps, "abc"))
		insertNew(t, c, seq(ps, "abd"))
		insertNew(t, c, seq(ps, "x"))
		_, node := c.Match(seq(ps, "abc"), nil)
		c.Lock(node)
		if freed := c.Evict(100); freed != 2 {
			t.Errorf("ps %d: Evict with abc locked freed %d, want 2 (d and x)", ps, freed)
		}
		check(t, c)
		if want := "ab [0 1] lock=1\n  c [2] lock=1\n"; dump(c) != want {
			t.Errorf("ps %d: tree =\n%swant\n%s", ps, dump(c), want)
		}
		c.Unlock(node)
		check(t, c)
		if freed := c.Evict(100); freed != 3 {
			t.Errorf("ps %d: Evict after unlock freed %d, want 3", ps, freed)
		}
		check(t, c)
	}
}

// TestLockCounters pins evictable_size and protected_size through nested locks on one path.
func TestLockCounters(t *testing.T) {
	c := newCache(t, 4, 16)
	insertNew(t, c, seq(4, "abcd"))
	insertNew(t, c, seq(4, "abxyz"))
	_, ab := c.Match(seq(4, "ab"), nil)
	_, cd := c.Match(seq(4, "abcd"), nil)
	_, xyz := c.Match(seq(4, "abxyz"), nil)
	steps := []struct {
		lock      bool
		node      *Node
		evictable int
		protected int
	}{
		{true, ab, 5, 2},
		{true, cd, 3, 4},
		{true, cd, 3, 4},
		{true, xyz, 0, 7},
		{false, ab, 0, 7},
		{false, xyz, 3, 4},
		{false, cd, 3, 4},
		{false, cd, 7, 0},
		{true, c.root, 7, 0},
		{false, c.root, 7, 0},
	}
	for i, s := range steps {
		if s.lock {
			c.Lock(s.node)
		} else {
			c.Unlock(s.node)
		}
		check(t, c)
		if c.EvictablePages() != s.evictable || c.ProtectedPages() != s.protected {
			t.Errorf("step %d: evictable %d protected %d, want %d %d", i, c.EvictablePages(), c.ProtectedPages(), s.evictable, s.protected)
		}
	}
}

// TestEvents: one Stored per Insert for the pages it adds, parented on the page before them; one Removed
// per Evict listing every page freed, leaves first; ids count from 0.
func TestEvents(t *testing.T) {
	for _, ps := range pageSizes {
		c := newCache(t, ps, 16)
		abcd, abef := seq(ps, "abcd"), seq(ps, "abef")
		insertNew(t, c, abcd)
		insertNew(t, c, abef)
		insertNew(t, c, abcd) // all present: no event, but cd is now more recent than ef
		c.Evict(2)
		c.Evict(10)
		want := []kvcache.Event{
			{ID: 0, Kind: kvcache.Stored, Blocks: abcd},
			{ID: 1, Kind: kvcache.Stored, Parent: abef[1].Hash, HasParent: true, Blocks: abef[2:]},
			{ID: 2, Kind: kvcache.Removed, Hashes: []uint64{abef[3].Hash, abef[2].Hash}},
			{ID: 3, Kind: kvcache.Removed, Hashes: []uint64{abcd[3].Hash, abcd[2].Hash, abcd[1].Hash, abcd[0].Hash}},
		}
		got := c.TakeEvents(nil)
		if len(got) != len(want) {
			t.Fatalf("ps %d: %d events %+v, want %d", ps, len(got), got, len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.ID != w.ID || g.Kind != w.Kind || g.Parent != w.Parent || g.HasParent != w.HasParent ||
				!slices.Equal(g.Blocks, w.Blocks) || !slices.Equal(g.Hashes, w.Hashes) {
				t.Errorf("ps %d: event %d = %+v, want %+v", ps, i, g, w)
			}
		}
		if evs := c.TakeEvents(nil); len(evs) != 0 {
			t.Errorf("ps %d: TakeEvents again = %+v", ps, evs)
		}
	}

	c, _ := New(Options{PageSize: 1, NumPages: 8})
	insertNew(t, c, seq(1, "abc"))
	c.Evict(8)
	if evs := c.TakeEvents(nil); len(evs) != 0 {
		t.Errorf("events without Options.Events: %+v", evs)
	}
}

func TestAllocFree(t *testing.T) {
	c := newCache(t, 1, 3)
	if ids, ok := c.Alloc(2, nil); !ok || !slices.Equal(ids, []PageID{0, 1}) {
		t.Fatalf("Alloc(2) = %v, %v", ids, ok)
	}
	if ids, ok := c.Alloc(2, nil); ok || ids != nil {
		t.Fatalf("Alloc(2) with 1 free = %v, %v; want nothing, false", ids, ok)
	}
	c.Free([]PageID{0})
	check(t, c)
	if ids, ok := c.Alloc(2, []PageID{9}); !ok || !slices.Equal(ids, []PageID{9, 0, 2}) {
		t.Fatalf("Alloc(2) after Free = %v, %v; want the freed page then a new one", ids, ok)
	}
	if c.FreePages() != 0 {
		t.Fatalf("free %d, want 0", c.FreePages())
	}
	check(t, c)
}

func TestMisusePanics(t *testing.T) {
	tests := []struct {
		name string
		f    func(c *Cache)
	}{
		{"double free", func(c *Cache) { ids, _ := c.Alloc(1, nil); c.Free(ids); c.Free(ids) }},
		{"free cached", func(c *Cache) { ids, _ := c.Alloc(1, nil); c.Insert(seq(1, "a"), ids); c.Free(ids) }},
		{"insert free page", func(c *Cache) { c.Insert(seq(1, "a"), []PageID{0}) }},
		{"insert cached page again", func(c *Cache) {
			ids, _ := c.Alloc(1, nil)
			c.Insert(seq(1, "a"), ids)
			c.Insert(seq(1, "b"), ids)
		}},
		{"insert length mismatch", func(c *Cache) { c.Insert(seq(1, "ab"), nil) }},
		{"unlock unlocked", func(c *Cache) {
			ids, _ := c.Alloc(1, nil)
			c.Insert(seq(1, "a"), ids)
			_, n := c.Match(seq(1, "a"), nil)
			c.Unlock(n)
		}},
		{"lock evicted", func(c *Cache) {
			ids, _ := c.Alloc(1, nil)
			c.Insert(seq(1, "a"), ids)
			_, n := c.Match(seq(1, "a"), nil)
			c.Evict(1)
			c.Lock(n)
		}},
	}
	for _, tt := range tests {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tt.name)
				}
			}()
			tt.f(newCache(t, 1, 4))
		}()
	}
}
