package radix

import (
	"container/heap"
	"slices"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// Evict frees cached pages until at least numPages have gone or nothing evictable is left, and returns
// how many it freed: more than asked when the last node had more pages than still needed, since a node
// goes whole. It removes the least recently used unlocked leaf, again and again; a parent left as an
// unlocked leaf becomes a candidate in turn. The hashes of the freed pages go out in one Removed event,
// and to the lower tiers, if any (their events follow).
func (c *Cache) Evict(numPages int) (freed int) {
	c.removed = c.removed[:0]
	for freed < numPages && len(c.heap) > 0 {
		n := c.heap.pop()
		parent := n.parent
		for i := len(n.ids.firsts) - 1; i >= 0; i-- { // leaf page first, like the whole eviction order
			first := n.ids.firsts[i]
			for id := first + PageID(n.ids.runLen(i)) - 1; id >= first; id-- {
				c.state[id] = pageFree
				c.freeList = append(c.freeList, id)
			}
		}
		// Its pages' sequence hashes, for the Removed event and the lower tiers; a View keeps the node as a
		// ghost by the first one's, its head.
		var head uint64
		switch {
		case c.events && !c.bare || c.tiers != nil:
			at := len(c.removed)
			c.removed = c.appendSeqHashes(c.removed, n)
			head = c.removed[at]
			slices.Reverse(c.removed[at:])
		case c.view != nil:
			head = n.keys.first()
			if parent != c.root {
				head = tokens.SeqHash(parent.tip, head)
			}
		}
		freed += n.pages()
		c.removeLeaf(n, head)
		if parent != c.root && parent.children == 0 && parent.lockRef == 0 {
			c.heap.push(parent)
		}
	}
	switch {
	case freed == 0 || !c.events:
	case c.bare:
		c.emit(kvcache.Event{Kind: kvcache.Removed, Count: freed})
	default:
		c.emit(kvcache.Event{Kind: kvcache.Removed, Hashes: slices.Clone(c.removed)})
	}
	if len(c.removed) > 0 && c.tiers != nil {
		// Write-back to the host tier (HiCache's evict_host path): after the GPU's Removed event.
		c.tierEvs = c.tiers.Offload(c.removed, c.tierEvs[:0])
		for _, ev := range c.tierEvs {
			c.emit(ev)
		}
		clear(c.tierEvs)
	}
	return freed
}

// leafHeap holds exactly the evictable nodes (unlocked leaves other than the root), least recently used
// on top; ties go to the older node. Each node knows its position, so a lock, a touch or a new child
// updates it in O(log n) and eviction never scans the tree.
type leafHeap []*Node

func (h leafHeap) Len() int { return len(h) }

func (h leafHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	return a.stamp < b.stamp || a.stamp == b.stamp && a.serial < b.serial
}

func (h leafHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = int32(i)
	h[j].heapIdx = int32(j)
}

func (h *leafHeap) Push(x any) {
	n := x.(*Node)
	n.heapIdx = int32(len(*h))
	*h = append(*h, n)
}

func (h *leafHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	n.heapIdx = -1
	return n
}

func (h *leafHeap) push(n *Node)   { heap.Push(h, n) }
func (h *leafHeap) pop() *Node     { return heap.Pop(h).(*Node) }
func (h *leafHeap) fix(n *Node)    { heap.Fix(h, int(n.heapIdx)) }
func (h *leafHeap) remove(n *Node) { heap.Remove(h, int(n.heapIdx)) }
