package radix

import (
	"fmt"
	"slices"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// PageID names one page of the pool.
type PageID int32

// Options configure a Cache.
type Options struct {
	PageSize int  // tokens per page; at least 1
	NumPages int  // pages in the pool; at least 1
	Events   bool // record KV events
	// Tiers below the pool (SGLang's HiCache host tier, and a disk below it): evicted pages are written
	// back to them. Each page is a block, named by its sequence hash.
	Tiers kvcache.TierOptions
}

type pageState uint8

const (
	pageFree    pageState = iota
	pagePrivate           // handed out by Alloc, not in the tree
	pageCached            // on an edge of the tree
)

// Cache is a radix prefix cache over a page pool. It is not safe for concurrent use.
type Cache struct {
	pageSize int
	numPages int
	events   bool
	bare     bool // GPU Stored and Removed events carry their Count only (View.Sole)

	state    []pageState // per page handed out at least once; grows up to numPages
	freeList []PageID    // freed pages, reused before never-used ones

	root  *Node
	index map[childKey]*Node
	spare []*Node // evicted nodes, reused
	heap  leafHeap

	serial    uint64 // serial of the newest node
	clock     uint64 // logical time: one tick per Match or Insert
	nodes     int    // nodes other than the root
	cached    int    // pages in the tree
	evictable int    // pages in the tree on unlocked nodes

	evs     []kvcache.Event
	nextID  uint64
	removed []uint64        // hashes freed by the current Evict
	tiers   *kvcache.Tiers  // nil: none
	tierEvs []kvcache.Event // Evict's scratch
	scratch []PageID        // a node's page ids, spelled out

	view *View // nil: none (see View)
}

// New returns an empty cache.
func New(o Options) (*Cache, error) {
	if o.PageSize < 1 {
		return nil, fmt.Errorf("radix: page size %d tokens, want at least 1", o.PageSize)
	}
	if o.NumPages < 1 {
		return nil, fmt.Errorf("radix: %d pages, want at least 1", o.NumPages)
	}
	t, err := kvcache.NewTiers(o.Tiers, o.Events)
	if err != nil {
		return nil, err
	}
	return &Cache{
		tiers:    t,
		pageSize: o.PageSize,
		numPages: o.NumPages,
		events:   o.Events,
		root:     &Node{heapIdx: -1},
		index:    make(map[childKey]*Node),
	}, nil
}

// Tiers are the lower tiers the cache writes its evicted pages to; nil when it has none.
func (c *Cache) Tiers() *kvcache.Tiers { return c.tiers }

// Events reports whether the cache records KV events.
func (c *Cache) Events() bool { return c.events }

// PageSize is the number of tokens per page.
func (c *Cache) PageSize() int { return c.pageSize }

// Capacity is the number of pages in the pool.
func (c *Cache) Capacity() int { return c.numPages }

// FreePages is the number of pages neither cached nor held privately.
func (c *Cache) FreePages() int { return len(c.freeList) + c.numPages - len(c.state) }

// CachedPages is the number of pages in the tree.
func (c *Cache) CachedPages() int { return c.cached }

// EvictablePages is the number of cached pages no request has locked (SGLang's evictable_size, in pages).
func (c *Cache) EvictablePages() int { return c.evictable }

// ProtectedPages is the number of cached pages some request has locked (SGLang's protected_size, in
// pages).
func (c *Cache) ProtectedPages() int { return c.cached - c.evictable }

// Nodes is the number of nodes in the tree, not counting the root.
func (c *Cache) Nodes() int { return c.nodes }

// Match finds the longest cached prefix of pages (a sequence's full pages, prefix first). It appends the
// prefix's page ids to dst, in order, and returns dst and the deepest node of the prefix (the root when
// nothing matches). A prefix that ends inside an edge splits that node, so the returned node ends exactly
// at the last matched page. The nodes on the path become the most recently used.
func (c *Cache) Match(pages []tokens.Block, dst []PageID) (ids []PageID, node *Node) {
	_, node = c.match(pages, &dst)
	return dst, node
}

// MatchLen is Match for a caller that needs only the prefix's length: it returns how many pages the
// cached prefix has, and its deepest node, without copying their ids (at page size 1, a token's each).
func (c *Cache) MatchLen(pages []tokens.Block) (matched int, node *Node) {
	return c.match(pages, nil)
}

// match is the walk of Match and MatchLen: it appends the prefix's page ids to *dst unless dst is nil.
func (c *Cache) match(pages []tokens.Block, dst *[]PageID) (matched int, node *Node) {
	c.clock++
	n := c.root
	for len(pages) > 0 {
		next := c.child(n, pages[0].TokensHash)
		if next == nil {
			break
		}
		k := next.keys.commonPrefix(pages)
		if k < next.pages() {
			next = c.split(next, k, pages[k-1].Hash)
		}
		c.touch(next)
		if dst != nil {
			*dst = next.ids.appendTo(*dst, k)
		}
		matched += k
		pages = pages[k:]
		n = next
	}
	return matched, n
}

// touch stamps n with the current call.
func (c *Cache) touch(n *Node) {
	n.stamp = c.clock
	if n.heapIdx >= 0 {
		c.heap.fix(n)
	}
}

// Insert caches a request's computed full pages: pages are their identities (prefix first) and ids the
// request's page ids for them. It returns how many leading pages were already cached: those stay as they
// are, and any of ids[:present] that is not the tree's own page is the caller's duplicate, still private,
// for it to Free. The pages from present on (all private, from Alloc) move into the tree, unlocked, as
// one new leaf, and are announced by one Stored event. Like Match, Insert splits an edge where the
// sequence leaves it or ends inside it, and stamps the path.
func (c *Cache) Insert(pages []tokens.Block, ids []PageID) (present int) {
	if len(pages) != len(ids) {
		panic(fmt.Sprintf("radix: insert of %d pages with %d ids", len(pages), len(ids)))
	}
	c.clock++
	n := c.root
	i := 0
	for i < len(pages) {
		next := c.child(n, pages[i].TokensHash)
		if next == nil {
			break
		}
		k := next.keys.commonPrefix(pages[i:])
		if k < next.pages() {
			next = c.split(next, k, pages[i+k-1].Hash)
		}
		c.touch(next)
		c.scratch = next.ids.appendTo(c.scratch[:0], k)
		for j, id := range ids[i : i+k] {
			if id != c.scratch[j] && c.state[id] != pagePrivate {
				panic(fmt.Sprintf("radix: insert: page %d duplicates cached page %d but is not private", id, c.scratch[j]))
			}
		}
		i += k
		n = next
	}
	if i == len(pages) {
		return i
	}
	for _, id := range ids[i:] {
		if c.state[id] != pagePrivate {
			panic(fmt.Sprintf("radix: insert of page %d in state %d, want private", id, c.state[id]))
		}
		c.state[id] = pageCached
	}
	c.addChild(n, pages[i:], ids[i:], 0, c.clock)
	if c.events {
		ev := c.storedEvent(pages[i:])
		if i > 0 {
			ev.Parent, ev.HasParent = pages[i-1].Hash, true
		}
		c.emit(ev)
	}
	return i
}

// Extend caches more of a request's computed pages below node, the deepest node the request holds locked
// (nil: none, the root), which must end exactly where pages begin. It is Insert started at node instead
// of the root, so a request that caches its pages as it decodes pays for the new pages only, not for its
// whole sequence every step. Pages already cached below node are not added again: for each of them whose
// id in ids is the caller's own private duplicate, Extend frees it and writes the tree's page into ids,
// so that afterwards every page of ids belongs to the tree. It returns how many pages were already cached
// and the new deepest node of the path (ending after the last page), which the caller locks in place of
// node. A leaf only the caller holds grows in place rather than gaining a one-page child per step. room
// is how many more pages the caller expects to add below the new deepest node (a running request's
// output): a leaf it makes or grows keeps capacity for them, so that growing it again does not copy its
// whole edge. It changes no page's place, only what the tree allocates.
func (c *Cache) Extend(node *Node, pages []tokens.Block, ids []PageID, room int) (present int, deepest *Node) {
	if len(pages) != len(ids) {
		panic(fmt.Sprintf("radix: extend by %d pages with %d ids", len(pages), len(ids)))
	}
	if node == nil {
		node = c.root
	}
	c.checkLive(node, "extend")
	c.clock++
	n := node
	for present < len(pages) {
		next := c.child(n, pages[present].TokensHash)
		if next == nil {
			break
		}
		k := next.keys.commonPrefix(pages[present:])
		if k < next.pages() {
			next = c.split(next, k, pages[present+k-1].Hash)
		}
		c.touch(next)
		c.scratch = next.ids.appendTo(c.scratch[:0], k)
		for j, id := range c.scratch {
			if own := ids[present+j]; own != id {
				c.Free([]PageID{own})
				ids[present+j] = id
			}
		}
		present += k
		n = next
	}
	if present == len(pages) {
		return present, n
	}
	for _, id := range ids[present:] {
		if c.state[id] != pagePrivate {
			panic(fmt.Sprintf("radix: extend with page %d in state %d, want private", id, c.state[id]))
		}
		c.state[id] = pageCached
	}
	if n == node && n != c.root && n.children == 0 && n.locks == 1 && n.lockRef == 1 {
		if c.view != nil {
			c.view.stored(n, c.nextID) // the Stored event below
		}
		n.keys.append(pages[present:], room)
		n.ids.append(ids[present:], room)
		n.tip = pages[len(pages)-1].Hash
		c.cached += len(pages) - present // locked: not evictable
		c.touch(n)
		deepest = n
	} else {
		deepest = c.addChild(n, pages[present:], ids[present:], room, c.clock)
	}
	if c.events {
		ev := c.storedEvent(pages[present:])
		switch {
		case present > 0:
			ev.Parent, ev.HasParent = pages[present-1].Hash, true
		case node != c.root:
			ev.Parent, ev.HasParent = node.tip, true
		}
		c.emit(ev)
	}
	return present, deepest
}

// Lock protects node and its path to the root from eviction until the matching Unlock. Locks nest.
// Locking the root does nothing.
func (c *Cache) Lock(node *Node) {
	c.checkLive(node, "lock")
	for n := node; n != c.root; n = n.parent {
		if n.lockRef == 0 {
			c.evictable -= n.pages()
			if n.heapIdx >= 0 {
				c.heap.remove(n)
			}
		}
		n.lockRef++
	}
	node.locks++
}

// Trim gives back the room Extend left on node's edge when more is spare than the edge holds (the
// request that was to fill it ended early), copying the edge to an array of its own size. Like room, it
// changes only what the tree allocates.
func (c *Cache) Trim(node *Node) {
	if node.ids.spare() > len(node.ids.firsts) || node.keys.spare() > len(node.keys.hashes) {
		node.keys, node.ids = node.keys.clone(), node.ids.clone()
	}
}

// Unlock undoes one Lock of node. Nodes whose last lock goes become evictable again (leaves at once,
// inner nodes when their subtree has gone).
func (c *Cache) Unlock(node *Node) {
	c.checkLive(node, "unlock")
	if node != c.root && node.locks <= 0 {
		panic("radix: unlock of a node that is not locked")
	}
	node.locks--
	for n := node; n != c.root; n = n.parent {
		n.lockRef--
		if n.lockRef == 0 {
			c.evictable += n.pages()
			if n.children == 0 {
				c.heap.push(n)
			}
		}
	}
}

func (c *Cache) checkLive(n *Node, op string) {
	if n != c.root && n.parent == nil {
		panic("radix: " + op + " of an evicted node")
	}
}

// Alloc takes n pages from the free list, appends them to dst and returns dst and true; the pages are
// private to the caller until it Inserts or Frees them. With fewer than n free pages it takes nothing
// and returns false: the caller evicts first.
func (c *Cache) Alloc(n int, dst []PageID) ([]PageID, bool) {
	if n > c.FreePages() {
		return dst, false
	}
	dst = slices.Grow(dst, n) // one allocation for a prompt's pages, not one per doubling
	// Freed pages first, the last freed first; then never-used ones, in order.
	k := len(c.freeList)
	m := min(n, k)
	for _, id := range slices.Backward(c.freeList[k-m:]) {
		c.state[id] = pagePrivate
		dst = append(dst, id)
	}
	c.freeList = c.freeList[:k-m]
	first := PageID(len(c.state))
	for i := range PageID(n - m) {
		c.state = append(c.state, pagePrivate)
		dst = append(dst, first+i)
	}
	return dst, true
}

// Free returns private pages (from Alloc, never inserted, or reported duplicate by Insert) to the free
// list. Freeing a cached or free page panics.
func (c *Cache) Free(ids []PageID) {
	for _, id := range ids {
		if c.state[id] != pagePrivate {
			panic(fmt.Sprintf("radix: free of page %d in state %d, want private", id, c.state[id]))
		}
		c.state[id] = pageFree
		c.freeList = append(c.freeList, id)
	}
}

// AppendCached appends to dst the sequence hash of every page in the tree, depth first, and returns it: the
// set a consumer of the cache's KV events holds (a test's oracle; O(pages)).
func (c *Cache) AppendCached(dst []uint64) []uint64 {
	stack := []*Node{c.root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n != c.root {
			dst = c.appendSeqHashes(dst, n)
		}
		for ch := n.first; ch != nil; ch = ch.next {
			stack = append(stack, ch)
		}
	}
	return dst
}
