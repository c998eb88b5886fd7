package radix

import (
	"fmt"
	"sync/atomic"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// View is the cache as a consumer of its KV events sees it, read in place: the pages announced by the
// events it has heard so far (Heard), however far the cache has gone on since. A router in the same
// process reads it instead of indexing the events (router.Mirror), which spares it a hash-table update per
// page stored or evicted — with one-token pages, one per token.
//
// The cache records, for each page in the tree, the id of the Stored event that added it (as runs per
// node, storeRun); ids grow along every path from the root, since a page is stored after its parent. A
// page in the tree is in the view when its Stored event has been heard. A page evicted by a Removed
// event not yet heard is still in the view: its node stays aside as a ghost, indexed by its first page's
// sequence hash, until the View hears of its eviction. A prefix in the view is then a walk down the tree
// over heard pages, continued through ghosts, and the ghosts' pages may lead to other ghosts, never back
// to the tree (the argument is in Prefix).
//
// Heard is the consumer's; the rest is the cache's owner's. Heard touches only the view's own counters,
// so a driver may deliver one worker's events while that worker plans its next passes on another
// goroutine. Prefix, Cached and AppendCached only read (several readers may share the view), but not
// while the owner changes the cache; the owner drops the ghosts heard of when it evicts.
type View struct {
	c      *Cache
	heard  atomic.Uint64 // events [0, heard) have been heard
	cached int           // pages in the view

	ghosts map[uint64]*Node // by first page's sequence hash: the earliest-removed ghost, then its next
	queue  []*Node          // queue[head:]: the ghosts in eviction order
	head   int
}

// View returns the cache's view, starting it on the first call, which must come before the cache
// records any event: the view rebuilds the past from what the cache keeps of it, from the start. It
// panics for a cache without events.
func (c *Cache) View() *View {
	if c.view != nil {
		return c.view
	}
	if !c.events {
		panic("radix: a view of a cache that records no events")
	}
	if c.nextID > 0 {
		panic("radix: a view started after the cache's first event")
	}
	c.view = &View{c: c, ghosts: map[uint64]*Node{}}
	return c.view
}

// Heard records that the consumer has been handed ev, the cache's next event. Lower tiers' events count
// for their ids only. It panics on an event out of order (each must be heard once, in the order the cache
// emits them: one missed or repeated would corrupt every later answer) and on a Cleared event, which a
// radix cache never emits and a view cannot honour: it shows this cache's past, not an empty one.
func (v *View) Heard(ev kvcache.Event) {
	if want := v.heard.Load(); ev.ID != want || ev.Kind == kvcache.Cleared {
		panic(fmt.Sprintf("radix: a view heard %v event %d, expected the cache's event %d (not a cleared one)", ev.Kind, ev.ID, want))
	}
	v.heard.Store(ev.ID + 1)
	if ev.Medium != kvcache.GPU {
		return
	}
	switch ev.Kind {
	case kvcache.Stored:
		v.cached += ev.Size()
	case kvcache.Removed:
		v.cached -= ev.Size()
	}
}

// Sole says that the view is the only consumer of the cache's GPU events, which need then say only how
// many pages they store or remove: from now on the cache's Stored and Removed events carry their Count,
// not the pages' hashes, which with one-token pages it would copy per token for no one to read. A caller
// that publishes or records the events must not call it. Lower tiers' events stay whole.
func (v *View) Sole() { v.c.bare = true }

// Cached is the number of pages in the view.
func (v *View) Cached() int { return v.cached }

// bury keeps an evicted node, whose first page's sequence hash is head, as a ghost: the Removed event that
// announces its eviction is the next the cache emits.
func (v *View) bury(n *Node, head uint64) {
	v.prune()
	*n = Node{keys: n.keys, ids: n.ids, runs: n.runs, serial: n.serial, heapIdx: -1, removed: v.c.nextID, head: head}
	v.queue = append(v.queue, n)
	key := head
	g := v.ghosts[key]
	if g == nil {
		v.ghosts[key] = n
		return
	}
	for g.next != nil {
		g = g.next
	}
	g.next = n
}

// prune drops the ghosts whose eviction has been heard, and recycles them. The queue is compacted once
// more than half of it is dropped, so each ghost is moved O(1) times however many wait behind it.
func (v *View) prune() {
	heard := v.heard.Load()
	for v.head < len(v.queue) && v.queue[v.head].removed < heard {
		g := v.queue[v.head]
		key := g.head
		if g.next != nil {
			v.ghosts[key] = g.next // it was first: its chain is in eviction order
		} else {
			delete(v.ghosts, key)
		}
		v.queue[v.head] = nil
		v.c.recycle(g)
		v.head++
	}
	if 2*v.head > len(v.queue) {
		n := copy(v.queue, v.queue[v.head:])
		clear(v.queue[n:])
		v.queue, v.head = v.queue[:n], 0
	}
}

// Close ends the view, whose consumer will hear no more (a worker that left its router): the cache keeps
// no ghosts and no store runs from now on, and the ghosts it kept are recycled. The cache cannot start
// another view, and the closed one must not be read.
func (v *View) Close() {
	for _, g := range v.queue[v.head:] {
		v.c.recycle(g)
	}
	v.queue, v.head, v.ghosts = nil, 0, nil
	v.c.view = nil
}

// Prefix is how many leading pages of a sequence's full pages (prefix first) are in the view, up to the
// first missing one. It only reads: no split, no stamp, and ghosts already heard of are passed over (the
// owner's next eviction drops them).
//
// Each page of the view has one holder: the tree (where the page's Stored event was heard) or a ghost
// (where it was heard and the eviction was not; a page is in the tree once at a time, so two cannot hold
// it). The walk takes the tree's pages while it holds them, then ghosts, each from the page where the
// last left the sequence, as long as they hold it. The holder of the page where one stops starts there:
// a holder that held the page before would be the one the walk was in. The tree never takes over from a
// ghost: a page held by the tree was there when the ghost's node was evicted as a leaf, so it is not a
// child of the ghost's pages. And of the ghosts starting at a page, only the earliest evicted whose
// eviction is not heard can hold it: a later one was stored after that eviction.
func (v *View) Prefix(pages []tokens.Block) int {
	c, heard := v.c, v.heard.Load()
	n, i := c.root, 0
	for i < len(pages) {
		next := c.child(n, pages[i].TokensHash)
		if next == nil {
			break
		}
		k := next.heardPages(next.keys.commonPrefix(pages[i:]), heard)
		i += k
		if k < next.pages() {
			break
		}
		n = next
	}
	for i < len(pages) && len(v.ghosts) > 0 {
		g := v.ghosts[pages[i].Hash]
		for g != nil && g.removed < heard {
			g = g.next
		}
		if g == nil {
			break
		}
		// The first pages' sequence hashes agree (the ghost's key), so the later ones agree where their
		// tokens hashes do: each chains from the one before.
		k := g.heardPages(g.keys.commonPrefix(pages[i:]), heard)
		if k == 0 {
			break
		}
		i += k
	}
	return i
}

// storeRun says that the pages of a node's edge from page at, up to the next run's, were added by the
// Stored event id. A node's runs start at page 0, and their pages and ids increase: a node grows at its
// end (Extend), each time by a new event. Runs whose events have been heard merge into the first, so a
// node keeps one run, and one more per growth not yet heard, rather than an id per page.
type storeRun struct {
	at int32
	id uint64
}

// heardPages is how many of the first k pages of n's edge were added by an event heard.
func (n *Node) heardPages(k int, heard uint64) int {
	for _, r := range n.runs {
		if r.id >= heard {
			return min(k, int(r.at))
		}
	}
	return k
}

// stored records that the pages about to be appended to n's edge are added by the event id, merging the
// runs already heard into one.
func (v *View) stored(n *Node, id uint64) {
	heard := v.heard.Load()
	i := 0
	for i+1 < len(n.runs) && n.runs[i+1].id < heard {
		i++
	}
	if i > 0 {
		n.runs = append(n.runs[:0], n.runs[i:]...)
		n.runs[0].at = 0
	}
	n.runs = append(n.runs, storeRun{at: int32(n.pages()), id: id})
}

// splitRuns divides an edge's runs where a split cuts it after k pages: upper (recycled, its array
// reused) gets the runs of the first k pages, and the runs of the rest start at 0.
func splitRuns(upper, lower []storeRun, k int) ([]storeRun, []storeRun) {
	j := 0 // the last run starting at or before page k
	for j+1 < len(lower) && int(lower[j+1].at) <= k {
		j++
	}
	upper = append(upper[:0], lower[:j]...)
	if int(lower[j].at) < k {
		upper = append(upper, lower[j])
	}
	lower = append(lower[:0], lower[j:]...)
	for i := range lower {
		lower[i].at = max(lower[i].at-int32(k), 0)
	}
	return upper, lower
}

// checkRuns verifies n's runs: from page 0, pages and ids increasing, within the edge.
func (n *Node) checkRuns() error {
	for i, r := range n.runs {
		if i == 0 && r.at != 0 || i > 0 && (r.at <= n.runs[i-1].at || r.id <= n.runs[i-1].id) || int(r.at) >= n.pages() {
			return fmt.Errorf("radix: node %d of %d pages has store runs %v", n.serial, n.pages(), n.runs)
		}
	}
	if len(n.runs) == 0 {
		return fmt.Errorf("radix: node %d has no store runs", n.serial)
	}
	return nil
}

// AppendCached appends to dst the sequence hash of every page in the view, once, and returns it (a
// test's view of a router's index; O(pages)).
func (v *View) AppendCached(dst []uint64) []uint64 {
	heard := v.heard.Load()
	stack := []*Node{v.c.root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n != v.c.root {
			at := len(dst)
			dst = v.c.appendSeqHashes(dst, n)[:at+n.heardPages(n.pages(), heard)]
		}
		for ch := n.first; ch != nil; ch = ch.next {
			stack = append(stack, ch)
		}
	}
	for _, g := range v.queue[v.head:] {
		if g.removed < heard {
			continue // heard of: not in the view
		}
		at := len(dst)
		dst = v.c.appendSeqHashes(dst, g)[:at+g.heardPages(g.pages(), heard)]
	}
	return dst
}
