package router

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// TestSeqTreeAgainstCounts checks the compressed tree against the naive model it replaces, a reference
// count per block hash: random requests from shared-prefix families come and go, and after each change
// the number of distinct blocks, the held prefix of probes and the tree's shape must agree.
func TestSeqTreeAgainstCounts(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			var seqs [][]tokens.Block
			for range 40 {
				s := tokens.NewSequence(1)
				for k := range rng.IntN(30) {
					s.Append(uint32(rng.IntN(3)*1000 + k))
				}
				for range rng.IntN(6) {
					s.Append(500 + uint32(rng.IntN(2)))
				}
				seqs = append(seqs, s.Blocks())
			}
			var tree seqTree
			var pool nodePool
			refs := map[uint64]int{}
			type active struct {
				blocks []tokens.Block
				end    *seqNode
			}
			var live []active
			for step := range 600 {
				if len(live) > 0 && rng.IntN(5) < 2 {
					i := rng.IntN(len(live))
					tree.remove(live[i].end, &pool)
					for _, b := range live[i].blocks {
						if refs[b.Hash]--; refs[b.Hash] == 0 {
							delete(refs, b.Hash)
						}
					}
					live = slices.Delete(live, i, i+1)
				} else {
					b := seqs[rng.IntN(len(seqs))]
					b = b[:rng.IntN(len(b)+1)]
					live = append(live, active{b, tree.add(b, &pool)})
					for _, x := range b {
						refs[x.Hash]++
					}
				}
				if tree.blocks != len(refs) {
					t.Fatalf("step %d: tree holds %d blocks, want %d", step, tree.blocks, len(refs))
				}
				for range 5 {
					probe := seqs[rng.IntN(len(seqs))]
					want := 0
					for want < len(probe) && refs[probe[want].Hash] > 0 {
						want++
					}
					if got := tree.match(probe); got != want {
						t.Fatalf("step %d: match = %d, want %d", step, got, want)
					}
				}
				nodes := checkTree(t, &tree.root, refs)
				if nodes > 2*len(live) {
					t.Fatalf("step %d: %d nodes for %d requests", step, nodes, len(live))
				}
			}
		})
	}
}

// checkTree verifies a subtree's shape and counts and returns its number of nodes below n: each edge's
// hashes are held by exactly refs requests, children are sorted by first hash and point back, refs
// cover the children's, and no node could be merged into its only child.
func checkTree(t *testing.T, n *seqNode, refs map[uint64]int) int {
	t.Helper()
	if !slices.IsSorted(n.keys) || len(n.keys) != len(n.kids) {
		t.Fatalf("node keys %v for %d children", n.keys, len(n.kids))
	}
	nodes, sum := 0, 0
	for i, c := range n.kids {
		if c.parent != n || len(c.hashes) == 0 || c.hashes[0] != n.keys[i] {
			t.Fatalf("child %d of a node: parent link %v, first hash vs key %#x", i, c.parent == n, n.keys[i])
		}
		for _, h := range c.hashes {
			if refs[h] != c.refs {
				t.Fatalf("hash %#x on an edge with %d refs, held by %d requests", h, c.refs, refs[h])
			}
		}
		sum += c.refs
		nodes += 1 + checkTree(t, c, refs)
	}
	if n.parent != nil {
		if sum > n.refs {
			t.Fatalf("node with %d refs has children with %d", n.refs, sum)
		}
		if len(n.kids) == 1 && n.kids[0].refs == n.refs {
			t.Fatalf("unmerged node: %d refs, one child with as many", n.refs)
		}
	}
	return nodes
}

// TestEdgeArraysReused: a finished request's edge array serves the next request's edge; a split's halves
// share one array, which goes back to the pool only when neither uses it; the pool keeps at most
// maxKeptHashes hashes.
func TestEdgeArraysReused(t *testing.T) {
	prompt := func(first uint32, n int) []tokens.Block {
		s := tokens.NewSequence(1)
		for i := range n {
			s.Append(first + uint32(i))
		}
		return s.Blocks()
	}
	var tree seqTree
	var pool nodePool
	end := tree.add(prompt(0, 100), &pool)
	arr := end.buf.hashes
	tree.remove(end, &pool)
	if pool.kept != 128 || len(pool.bufs[7]) != 1 {
		t.Fatalf("after the only request left: %d hashes kept, %d arrays of 128; want 128 and 1", pool.kept, len(pool.bufs[7]))
	}
	b := prompt(1000, 90)
	long := tree.add(b, &pool)
	if &long.hashes[0] != &arr[0] || pool.kept != 0 {
		t.Fatalf("the next request's edge has a new array (%v), %d hashes kept; want the first's and 0", &long.hashes[0] != &arr[0], pool.kept)
	}
	short := tree.add(b[:50], &pool) // splits the edge after 50
	if short.buf != long.buf || long.buf.users != 2 || &short.hashes[0] != &arr[0] || &long.hashes[0] != &arr[50] {
		t.Fatalf("the split's halves: same array %v, %d users; want the same, 2", short.buf == long.buf, long.buf.users)
	}
	tree.remove(long, &pool) // the upper half stays: 50 hashes, still in the array
	if pool.kept != 0 || short.buf.users != 1 || tree.blocks != 50 {
		t.Fatalf("one half left: %d hashes kept, %d users, %d blocks; want 0, 1, 50", pool.kept, short.buf.users, tree.blocks)
	}
	tree.remove(short, &pool)
	if pool.kept != 128 || tree.blocks != 0 {
		t.Fatalf("both halves gone: %d hashes kept, %d blocks; want 128 and 0", pool.kept, tree.blocks)
	}
	// Past maxKeptHashes, arrays are dropped.
	var ends []*seqNode
	for i := range maxKeptHashes/1024 + 2 {
		ends = append(ends, tree.add(prompt(uint32(1_000_000*(i+1)), 1024), &pool))
	}
	for _, e := range ends {
		tree.remove(e, &pool)
	}
	if n := len(pool.bufs[10]); pool.kept > maxKeptHashes || pool.kept != 128+n*1024 || n != maxKeptHashes/1024-1 {
		t.Fatalf("%d hashes kept in %d arrays of 1,024 (and one of 128); want at most %d, in %d", pool.kept, n, maxKeptHashes, maxKeptHashes/1024-1)
	}
}
