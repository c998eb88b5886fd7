package radix

import (
	"fmt"
	"slices"
)

// CheckInvariants verifies the cache's bookkeeping by walking the whole tree and pool: parent, child and
// index links agree; every node's lock count is its own locks plus its children's lock counts; the heap holds exactly the unlocked leaves, in heap order; the
// page counters match the tree; no page is both free and cached, or cached twice, or free twice. Pages
// held privately by callers are invisible here: they are the ones neither free nor cached. It is
// O(pages + nodes); tests call it after every operation.
func (c *Cache) CheckInvariants() error {
	r := c.root
	if r.parent != nil || r.pages() != 0 || r.lockRef != 0 || r.heapIdx != -1 {
		return fmt.Errorf("radix: root has parent %p, %d pages, lock %d, heap index %d", r.parent, r.pages(), r.lockRef, r.heapIdx)
	}
	seen := make([]bool, len(c.state)) // cached pages found in the tree
	var nodes, pages, unlocked, leaves int
	stack := []*Node{r}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var kids, lockSum int32
		var prev *Node
		for ch := n.first; ch != nil; prev, ch = ch, ch.next {
			if ch.parent != n || ch.prev != prev {
				return fmt.Errorf("radix: node %d: parent %p (want %p), prev %p (want %p)", ch.serial, ch.parent, n, ch.prev, prev)
			}
			if ch.pages() == 0 {
				return fmt.Errorf("radix: node %d has no pages", ch.serial)
			}
			if err := ch.keys.check(ch.pages()); err != nil {
				return fmt.Errorf("radix: node %d: %w", ch.serial, err)
			}
			if c.view != nil {
				if err := ch.checkRuns(); err != nil {
					return err
				}
				// Store ids do not decrease along a path (View.Prefix rests on it): a node only grows
				// or merges its runs while it has no children.
				if n != r {
					if last := n.runs[len(n.runs)-1]; ch.runs[0].id < last.id {
						return fmt.Errorf("radix: node %d's first store run %v comes before its parent %d's last %v", ch.serial, ch.runs[0], n.serial, last)
					}
				}
			}
			if got := c.index[childKey{n.serial, ch.keys.first()}]; got != ch {
				return fmt.Errorf("radix: node %d is not indexed under its parent %d", ch.serial, n.serial)
			}
			kids++
			lockSum += ch.lockRef
			stack = append(stack, ch)
		}
		if kids != n.children {
			return fmt.Errorf("radix: node %d lists %d children, counts %d", n.serial, kids, n.children)
		}
		if n == r {
			continue
		}
		nodes++
		if n.locks < 0 || n.lockRef != n.locks+lockSum {
			return fmt.Errorf("radix: node %d: lock_ref %d, own locks %d, children's %d", n.serial, n.lockRef, n.locks, lockSum)
		}
		if err := n.ids.check(); err != nil {
			return fmt.Errorf("radix: node %d: %w", n.serial, err)
		}
		for _, id := range n.ids.appendTo(nil, n.pages()) {
			if int(id) < 0 || int(id) >= len(c.state) || c.state[id] != pageCached || seen[id] {
				return fmt.Errorf("radix: node %d holds page %d, not a cached page held once", n.serial, id)
			}
			seen[id] = true
		}
		pages += n.pages()
		if n.lockRef == 0 {
			unlocked += n.pages()
		}
		evictable := n.lockRef == 0 && n.children == 0
		if evictable {
			leaves++
		}
		if inHeap := n.heapIdx >= 0 && int(n.heapIdx) < len(c.heap) && c.heap[n.heapIdx] == n; inHeap != evictable {
			return fmt.Errorf("radix: node %d (lock %d, %d children) in heap: %v", n.serial, n.lockRef, n.children, inHeap)
		}
	}
	if nodes != c.nodes || len(c.index) != nodes {
		return fmt.Errorf("radix: %d nodes in the tree, %d counted, %d indexed", nodes, c.nodes, len(c.index))
	}
	if pages != c.cached || unlocked != c.evictable {
		return fmt.Errorf("radix: tree holds %d pages (%d unlocked), counted %d (%d evictable)", pages, unlocked, c.cached, c.evictable)
	}
	if leaves != len(c.heap) {
		return fmt.Errorf("radix: %d evictable leaves, heap holds %d", leaves, len(c.heap))
	}
	for i := 1; i < len(c.heap); i++ {
		if c.heap.Less(i, (i-1)/2) {
			return fmt.Errorf("radix: heap order broken at %d", i)
		}
	}

	var free, cached int
	for _, s := range c.state {
		switch s {
		case pageFree:
			free++
		case pageCached:
			cached++
		}
	}
	if cached != pages {
		return fmt.Errorf("radix: %d pages marked cached, tree holds %d", cached, pages)
	}
	inList := make([]bool, len(c.state))
	for _, id := range c.freeList {
		if int(id) < 0 || int(id) >= len(c.state) || c.state[id] != pageFree || inList[id] {
			return fmt.Errorf("radix: free list holds page %d, not a free page listed once", id)
		}
		inList[id] = true
	}
	if free != len(c.freeList) {
		return fmt.Errorf("radix: %d pages marked free, free list holds %d", free, len(c.freeList))
	}
	if len(c.state) > c.numPages {
		return fmt.Errorf("radix: %d pages handed out, capacity %d", len(c.state), c.numPages)
	}
	if c.view != nil {
		if err := c.view.check(); err != nil {
			return err
		}
	}
	if c.tiers != nil {
		return c.tiers.CheckInvariants()
	}
	return nil
}

// check verifies the view's ghosts: out of the tree, queued in the order of their Removed events (events
// the cache has emitted), and chained under their first page in that order, each once.
func (v *View) check() error {
	if v.head < 0 || v.head > len(v.queue) || slices.ContainsFunc(v.queue[:v.head], func(g *Node) bool { return g != nil }) {
		return fmt.Errorf("radix: the ghost queue's head %d of %d holds on to a dropped ghost", v.head, len(v.queue))
	}
	next := map[uint64]*Node{} // each chain's ghost the queue should come to next
	keys := []uint64{}
	var last uint64
	for i, g := range v.queue[v.head:] {
		if g.parent != nil || g.first != nil || g.pages() == 0 {
			return fmt.Errorf("radix: ghost %d (queued at %d) has parent %p, first child %p, %d pages", g.serial, i, g.parent, g.first, g.pages())
		}
		if g.removed < last || g.removed >= v.c.nextID {
			return fmt.Errorf("radix: ghost %d queued at %d was removed by event %d, after %d, before the next event %d", g.serial, i, g.removed, last, v.c.nextID)
		}
		last = g.removed
		if err := g.checkRuns(); err != nil {
			return err
		}
		key := g.head
		want, ok := next[key]
		if !ok {
			want = v.ghosts[key]
			keys = append(keys, key)
		}
		if g != want {
			return fmt.Errorf("radix: ghost %d queued at %d, but its first page's chain has %p there", g.serial, i, want)
		}
		next[key] = g.next
	}
	for _, key := range keys {
		if g := next[key]; g != nil {
			return fmt.Errorf("radix: ghost %d is chained under %#x but not queued", g.serial, key)
		}
	}
	if len(keys) != len(v.ghosts) {
		return fmt.Errorf("radix: %d ghost chains, %d first pages among the queued ghosts", len(v.ghosts), len(keys))
	}
	return nil
}
