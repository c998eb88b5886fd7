package radix

import (
	"github.com/mocker-sim/mocker/tokens"
)

// Node is a node of the radix tree: a run of cached pages extending its parent's path. Callers hold nodes
// only to lock and unlock them.
type Node struct {
	parent            *Node // nil for the root and for evicted nodes
	first, prev, next *Node // first child; siblings in the parent's child list

	// The edge: its pages' tokens hashes (the key, tokens.Block.TokensHash, in runs of equal hashes) and
	// their page ids (the value, in runs of consecutive ids), each in a plain form where runs would not
	// save (keys.go, ids.go). A split copies the shorter half out (the room past the edge counting with
	// the lower half), so that no node pins much more than its own edge once the other half is gone. A
	// page's sequence hash is not kept (at one-token pages it would double what a cached token costs,
	// and the copy of every new edge): it chains from the parent's tip through the edge's tokens hashes
	// (appendSeqHashes), and only events and lower tiers ask for it.
	keys keys
	ids  pageIDs
	tip  uint64 // the sequence hash of the edge's last page
	// runs say, while the cache keeps a View, which Stored event added each page (see storeRun).
	runs []storeRun

	serial   uint64 // creation order, unique per cache: names the node in the child index
	stamp    uint64 // logical time of the last Match or Insert that walked through it
	lockRef  int32  // locks on this node and on its descendants (SGLang's lock_ref)
	locks    int32  // Lock calls naming this node, minus Unlock calls
	children int32
	heapIdx  int32 // position in the evictable heap, or -1

	// removed is, for a ghost (an evicted node a View still shows, see view.go), the id of the Removed
	// event that announced its eviction; the ghosts after it with the same first page follow on next.
	removed uint64
	head    uint64 // a ghost's first page's sequence hash (it has no parent to chain from)
}

// maxKeptPages bounds the edge capacity a recycled node keeps.
const maxKeptPages = 64

// childKey names a child in the cache-wide child index: one map for the whole tree instead of one per
// node, so a node costs no map and a wide root (one child per distinct first page) is still O(1).
type childKey struct {
	parent uint64 // the parent's serial
	hash   uint64 // the tokens hash of the child's first page
}

// pages is the number of pages on the node's edge.
func (n *Node) pages() int { return n.ids.n }

// child returns the child of n whose edge starts with the page hashed h, or nil. A leaf asks no map: a
// request decoding below its own leaf looks for a child at every page it caches.
func (c *Cache) child(n *Node, h uint64) *Node {
	if n.children == 0 {
		return nil
	}
	return c.index[childKey{n.serial, h}]
}

// appendSeqHashes appends the sequence hashes of the pages of n's edge to dst, in order, and returns it:
// they chain from the tip of n's parent (a child of the root starts afresh, its first page's sequence
// hash being its tokens hash; a ghost from its head), as tokens.Sequence chains them.
func (c *Cache) appendSeqHashes(dst []uint64, n *Node) []uint64 {
	var h uint64
	skip := 1 // the first page, whose hash is known
	switch {
	case n.parent == nil: // a ghost
		h = n.head
	case n.parent != c.root:
		h, skip = n.parent.tip, 0
	default:
		h = n.keys.first()
	}
	if skip == 1 {
		dst = append(dst, h)
	}
	for i, th := range n.keys.hashes {
		for range n.keys.runLen(i) - skip {
			h = tokens.SeqHash(h, th)
			dst = append(dst, h)
		}
		skip = 0
	}
	return dst
}

// newNode returns a blank node, reusing an evicted one when there is one.
func (c *Cache) newNode() *Node {
	var n *Node
	if k := len(c.spare); k > 0 {
		n = c.spare[k-1]
		c.spare[k-1] = nil
		c.spare = c.spare[:k-1]
	} else {
		n = &Node{}
	}
	c.serial++
	n.serial = c.serial
	n.heapIdx = -1
	return n
}

// split cuts n's edge after k pages (0 < k < n.pages()) and returns the new node holding the first k,
// whose last page's sequence hash is tip (the caller's page there). n keeps the rest and its identity,
// so a caller holding n (locked) still holds the same deepest page, and n's children stay indexed under
// n. The new node inherits n's locks, so no count changes. The shorter half moves to arrays of its own,
// the room n's arrays have past its edge counting as n's (n keeps it): a conversation's next turn splits
// the last one's leaf near its end, where copying the first k pages out would copy nearly the whole edge,
// while p, keeping arrays with room for a running request's output, would pin it for its whole life.
func (c *Cache) split(n *Node, k int, tip uint64) *Node {
	p := c.newNode()
	n.ids.cut(k, &p.ids)
	n.keys.cut(k, &p.keys)
	p.tip = tip
	if c.view != nil {
		p.runs, n.runs = splitRuns(p.runs, n.runs, k)
	}
	p.stamp = n.stamp
	p.lockRef = n.lockRef

	// p takes n's place among its siblings and in the index.
	parent := n.parent
	p.parent, p.prev, p.next = parent, n.prev, n.next
	if n.prev != nil {
		n.prev.next = p
	} else {
		parent.first = p
	}
	if n.next != nil {
		n.next.prev = p
	}
	c.index[childKey{parent.serial, p.keys.first()}] = p

	// n becomes p's only child.
	n.parent, n.prev, n.next = p, nil, nil
	p.first, p.children = n, 1
	c.index[childKey{p.serial, n.keys.first()}] = n
	c.nodes++
	return p
}

// addChild hangs a new unlocked leaf holding pages (copied) under parent, with capacity for room more.
func (c *Cache) addChild(parent *Node, blocks []tokens.Block, ids []PageID, room int, stamp uint64) *Node {
	n := c.newNode()
	n.keys.append(blocks, room)
	n.ids.append(ids, room)
	n.tip = blocks[len(blocks)-1].Hash
	if c.view != nil {
		n.runs = append(n.runs[:0], storeRun{id: c.nextID}) // the Stored event that follows
	}
	n.stamp = stamp
	n.parent, n.prev, n.next = parent, nil, parent.first
	if parent.first != nil {
		parent.first.prev = n
	}
	parent.first = n
	if parent.children == 0 && parent.heapIdx >= 0 {
		c.heap.remove(parent) // no longer a leaf
	}
	parent.children++
	c.index[childKey{parent.serial, blocks[0].TokensHash}] = n
	c.nodes++
	c.cached += len(ids)
	c.evictable += len(ids)
	c.heap.push(n)
	return n
}

// removeLeaf unhooks an unlocked leaf (already out of the heap) from the tree and keeps it for reuse, or,
// while the cache keeps a View, as a ghost until the View has heard of its eviction, by head, its first
// page's sequence hash (unread without a View). Its pages are the caller's to free.
func (c *Cache) removeLeaf(n *Node, head uint64) {
	parent := n.parent
	delete(c.index, childKey{parent.serial, n.keys.first()})
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		parent.first = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	}
	parent.children--
	c.nodes--
	c.cached -= n.pages()
	c.evictable -= n.pages()
	if c.view != nil {
		c.view.bury(n, head)
		return
	}
	c.recycle(n)
}

// recycle keeps an unhooked node for reuse.
func (c *Cache) recycle(n *Node) {
	// Keep small slices for the next node; drop every pointer, and large arrays (a long request's whole
	// edge) that would otherwise stay pinned by a recycled node.
	n.keys.reset()
	n.ids.reset()
	*n = Node{keys: n.keys, ids: n.ids, runs: n.runs[:0], heapIdx: -1}
	c.spare = append(c.spare, n)
}
