package router

import (
	"math/bits"
	"slices"

	"github.com/mocker-sim/mocker/tokens"
)

// seqTree is the set of distinct full blocks held by one target's active requests (Dynamo's
// ActiveSequences), kept as a compressed radix tree of their sequence hashes with a reference count per
// node.
//
// Each active request holds a whole chain of blocks from the first, so the set is closed under prefixes,
// and a request that shares its first k blocks with the tree shares exactly those. Two facts keep every
// operation to a few steps per node instead of one per block (a 12k-token prompt is 750 blocks): an edge
// holds a run of blocks that the same requests pass through, so one count covers the run; and because a
// sequence hash names its whole prefix, the point where a request leaves an edge is found by binary
// search, not by comparing block by block.
type seqTree struct {
	root   seqNode
	blocks int // distinct blocks held: the sum of the edge lengths
}

// seqNode is the end of an edge. Its refs count the requests whose chain passes through the edge (ending
// here or below), so a node's refs are at least the sum of its children's and a request ends at a node
// exactly when they exceed it.
type seqNode struct {
	hashes []uint64 // the edge's sequence hashes, from just below the parent to this node, in buf
	buf    *edgeBuf
	refs   int
	parent *seqNode
	keys   []uint64   // first hash of each child's edge, sorted
	kids   []*seqNode // in keys order
}

// edgeBuf is an array that edges' hashes are kept in: a new edge's own, which the halves of its splits
// go on slicing (users counts the nodes that do). Once no node uses it, it goes back to the pool for the
// next request's edge: every routed prompt adds its blocks' hashes, 8 bytes a block, which at one-token
// blocks would otherwise be a new array as long as its prompt each time.
type edgeBuf struct {
	hashes []uint64 // its whole array; a power of two long
	users  int
}

// nodePool recycles nodes so that routing does not allocate one per request split, and edge arrays, by
// their power-of-two length, up to maxKeptHashes hashes in all.
type nodePool struct {
	free []*seqNode
	bufs [64][]*edgeBuf // by the log2 of their length
	kept int            // hashes the kept arrays hold
}

// maxKeptHashes bounds the edge arrays a router keeps for reuse (8 MiB).
const maxKeptHashes = 1 << 20

// buf returns an edge array of at least n hashes (n > 0), used by one node.
func (p *nodePool) buf(n int) *edgeBuf {
	c := bits.Len(uint(n - 1))
	if k := len(p.bufs[c]); k > 0 {
		b := p.bufs[c][k-1]
		p.bufs[c][k-1] = nil
		p.bufs[c] = p.bufs[c][:k-1]
		p.kept -= len(b.hashes)
		b.users = 1
		return b
	}
	return &edgeBuf{hashes: make([]uint64, 1<<c), users: 1}
}

// release ends one node's use of b, keeping b for reuse once no node uses it (while the pool has room).
func (p *nodePool) release(b *edgeBuf) {
	if b.users--; b.users > 0 {
		return
	}
	if n := len(b.hashes); p.kept+n <= maxKeptHashes {
		c := bits.Len(uint(n - 1))
		p.bufs[c] = append(p.bufs[c], b)
		p.kept += n
	}
}

func (p *nodePool) get() *seqNode {
	if n := len(p.free); n > 0 {
		x := p.free[n-1]
		p.free = p.free[:n-1]
		return x
	}
	return &seqNode{}
}

// put recycles x, and its edge array if no other node slices it (see split).
func (p *nodePool) put(x *seqNode) {
	if x.buf != nil {
		p.release(x.buf)
	}
	clear(x.kids)
	*x = seqNode{keys: x.keys[:0], kids: x.kids[:0]}
	p.free = append(p.free, x)
}

// matchEdge returns how many leading blocks of blocks follow edge, knowing the first does. Hashes chain,
// so the blocks match a prefix of the edge and the first mismatch can be found by bisection.
func matchEdge(edge []uint64, blocks []tokens.Block) int {
	m := min(len(edge), len(blocks))
	if edge[m-1] == blocks[m-1].Hash {
		return m
	}
	lo, hi := 1, m-1 // edge[:lo] matches, edge[hi] does not
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if edge[mid] == blocks[mid].Hash {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// match returns how many leading blocks of a request the tree already holds.
func (t *seqTree) match(blocks []tokens.Block) int {
	n, i := &t.root, 0
	for i < len(blocks) {
		at, ok := slices.BinarySearch(n.keys, blocks[i].Hash)
		if !ok {
			return i
		}
		c := n.kids[at]
		k := matchEdge(c.hashes, blocks[i:])
		i += k
		if k < len(c.hashes) {
			return i
		}
		n = c
	}
	return i
}

// add adds a request holding blocks and returns the node where its chain ends, which remove takes back.
func (t *seqTree) add(blocks []tokens.Block, pool *nodePool) *seqNode {
	n := &t.root
	for i := 0; i < len(blocks); {
		at, ok := slices.BinarySearch(n.keys, blocks[i].Hash)
		if !ok {
			leaf := pool.get()
			leaf.buf = pool.buf(len(blocks) - i)
			leaf.hashes = leaf.buf.hashes[:len(blocks)-i]
			for j := range leaf.hashes {
				leaf.hashes[j] = blocks[i+j].Hash
			}
			leaf.refs, leaf.parent = 1, n
			n.keys = slices.Insert(n.keys, at, blocks[i].Hash)
			n.kids = slices.Insert(n.kids, at, leaf)
			t.blocks += len(leaf.hashes)
			return leaf
		}
		c := n.kids[at]
		k := matchEdge(c.hashes, blocks[i:])
		if k < len(c.hashes) {
			c = t.split(n, at, k, pool)
		}
		c.refs++
		i += k
		n = c
	}
	return n
}

// split cuts the edge of n's child at index at after k hashes, inserting a node there, and returns it.
// Both halves keep slicing the same array; nothing writes to an edge's hashes while a node uses them,
// so sharing is safe, and it lets a later merge of the two halves rejoin them without copying.
func (t *seqTree) split(n *seqNode, at, k int, pool *nodePool) *seqNode {
	c := n.kids[at]
	mid := pool.get()
	mid.hashes, mid.refs, mid.parent = c.hashes[:k], c.refs, n
	mid.buf = c.buf
	c.buf.users++
	c.hashes, c.parent = c.hashes[k:], mid
	mid.keys = append(mid.keys, c.hashes[0])
	mid.kids = append(mid.kids, c)
	n.kids[at] = mid // same first hash: keys stay sorted
	return mid
}

// remove takes back a request that add placed at end, dropping the blocks no other request holds.
func (t *seqTree) remove(end *seqNode, pool *nodePool) {
	var lowest *seqNode // the lowest node on the path that survives
	for x := end; x != &t.root; {
		p := x.parent
		x.refs--
		if x.refs == 0 {
			at, _ := slices.BinarySearch(p.keys, x.hashes[0])
			p.keys = slices.Delete(p.keys, at, at+1)
			p.kids = slices.Delete(p.kids, at, at+1)
			t.blocks -= len(x.hashes)
			pool.put(x)
		} else if lowest == nil {
			lowest = x
		}
		x = p
	}
	// Only the lowest survivor can have lost the difference between its refs and its children's: above it
	// every node lost one reference together with its child on the path.
	if lowest != nil {
		t.merge(lowest, pool)
	}
}

// merge folds x into its only child when no request ends at x, so the tree does not fill up with the
// splits of requests long gone.
func (t *seqTree) merge(x *seqNode, pool *nodePool) {
	if len(x.kids) != 1 || x.kids[0].refs != x.refs {
		return
	}
	c, p := x.kids[0], x.parent
	c.hashes, c.buf = join(x.hashes, c.hashes, c.buf, pool)
	c.parent = p
	at, _ := slices.BinarySearch(p.keys, x.hashes[0])
	p.kids[at] = c // same first hash
	pool.put(x)
}

// join returns a followed by b, and the array it is in: re-slicing when b directly follows a in the same
// array (two halves of a split) and copying into a new one otherwise, whose use replaces bb's, b's array.
func join(a, b []uint64, bb *edgeBuf, pool *nodePool) ([]uint64, *edgeBuf) {
	if n := len(a); n+len(b) <= cap(a) && &a[:n+1][n] == &b[0] {
		return a[:n+len(b)], bb
	}
	nb := pool.buf(len(a) + len(b))
	ab := append(append(nb.hashes[:0], a...), b...)
	pool.release(bb)
	return ab, nb
}
