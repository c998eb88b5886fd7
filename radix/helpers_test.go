package radix

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// seq returns the full pages of a sequence written one letter per page: page "a" is ps copies of the
// token 'a'. A trailing "+" adds one more token, a partial page.
func seq(ps int, s string) []tokens.Block {
	sq := tokens.NewSequence(ps)
	for _, r := range s {
		if r == '+' {
			sq.Append(0)
			continue
		}
		for range ps {
			sq.Append(uint32(r))
		}
	}
	return sq.Blocks()
}

// label names a page by its letter (th its tokens hash), for dumps.
func label(ps int, th uint64) string {
	for r := 'a'; r <= 'z'; r++ {
		if seq(ps, string(r))[0].TokensHash == th {
			return string(r)
		}
	}
	return "?"
}

func newCache(t testing.TB, ps, numPages int) *Cache {
	t.Helper()
	c, err := New(Options{PageSize: ps, NumPages: numPages, Events: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dump prints the tree one node a line, children sorted by their labels: "ab [0 1] lock=1" indented
// under its parent.
func dump(c *Cache) string {
	var b strings.Builder
	var walk func(n *Node, depth int)
	walk = func(n *Node, depth int) {
		var kids []*Node
		for ch := n.first; ch != nil; ch = ch.next {
			kids = append(kids, ch)
		}
		key := func(n *Node) string {
			var s strings.Builder
			for _, th := range pageHashes(n) {
				s.WriteString(label(c.pageSize, th))
			}
			return s.String()
		}
		slices.SortFunc(kids, func(a, b *Node) int { return strings.Compare(key(a), key(b)) })
		for _, ch := range kids {
			fmt.Fprintf(&b, "%s%s %v", strings.Repeat("  ", depth), key(ch), ch.ids.appendTo(nil, ch.pages()))
			if ch.lockRef > 0 {
				fmt.Fprintf(&b, " lock=%d", ch.lockRef)
			}
			b.WriteByte('\n')
			walk(ch, depth+1)
		}
	}
	walk(c.root, 0)
	return b.String()
}

// alloc allocates n private pages or fails the test.
func alloc(t testing.TB, c *Cache, n int) []PageID {
	t.Helper()
	ids, ok := c.Alloc(n, nil)
	if !ok {
		t.Fatalf("Alloc(%d) with %d free", n, c.FreePages())
	}
	return ids
}

// insertNew allocates pages for a whole sequence, inserts it and frees what was already cached; it
// returns the present count.
func insertNew(t testing.TB, c *Cache, pages []tokens.Block) int {
	t.Helper()
	ids := alloc(t, c, len(pages))
	present := c.Insert(pages, ids)
	c.Free(ids[:present])
	check(t, c)
	return present
}

func check(t testing.TB, c *Cache) {
	t.Helper()
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	checkTips(t, c)
}

// checkTips verifies what CheckInvariants leaves out as too slow for every pass (a hash per cached page):
// each node's tip is the sequence hash its edge's tokens hashes chain to from its parent's.
func checkTips(t testing.TB, c *Cache) {
	t.Helper()
	stack := []*Node{c.root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for ch := n.first; ch != nil; ch = ch.next {
			ths := pageHashes(ch)
			h := ths[0]
			if n != c.root {
				h = tokens.SeqHash(n.tip, h)
			}
			for _, th := range ths[1:] {
				h = tokens.SeqHash(h, th)
			}
			if h != ch.tip {
				t.Fatalf("node %d: tip %#x, its edge chains to %#x", ch.serial, ch.tip, h)
			}
			stack = append(stack, ch)
		}
	}
}

// counts is the cache's counters in one comparable value.
type counts struct{ free, cached, evictable, protected, nodes int }

func countsOf(c *Cache) counts {
	return counts{c.FreePages(), c.CachedPages(), c.EvictablePages(), c.ProtectedPages(), c.Nodes()}
}

func hashes(pages []tokens.Block) []uint64 {
	h := make([]uint64, len(pages))
	for i, p := range pages {
		h[i] = p.Hash
	}
	return h
}

// pageHashes is the tokens hash of each page of n's edge, its runs spelled out.
func pageHashes(n *Node) []uint64 {
	var ths []uint64
	for i, th := range n.keys.hashes {
		for range n.keys.runLen(i) {
			ths = append(ths, th)
		}
	}
	return ths
}
