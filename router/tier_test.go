package router

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
)

// TestLowerTierHitsWeighed: A holds the first block of a 4-block prompt on its GPU, B all four in its CPU
// tier. Costs (block size 4, 17 tokens, overlap weight 1): A prefills 13 tokens, 3.25 blocks; B's lower
// hits count 16 × w tokens as cached. At w = 0 B prefills 17 (4.25 blocks) and A wins; at w = 0.5, 9 tokens
// (2.25 blocks) and B wins; B's CPU removals take its credit back; a GPU-only index never sees them.
func TestLowerTierHitsWeighed(t *testing.T) {
	req := prompt(1, 4, run(0, 17)...)
	for _, c := range []struct {
		w     float64
		costs []float64 // decode blocks: 5 (4 full + 1 partial) on both
		pick  Target
	}{
		{0, []float64{3.25 + 5, 4.25 + 5}, tA},
		{0.5, []float64{3.25 + 5, 2.25 + 5}, tB},
	} {
		o := kvOptions(4)
		o.LowerHitWeight = c.w
		r := newRouter(t, o, tA, tB)
		r.Apply(tA, kvcache.Event{Kind: kvcache.Stored, Blocks: req.Blocks[:1]})
		r.Apply(tB, kvcache.Event{Kind: kvcache.Stored, Medium: kvcache.CPU, Blocks: req.Blocks})
		if got := r.Overlap(req.Blocks); !slices.Equal(got, []int{1, 0}) {
			t.Fatalf("w %v: GPU overlaps %v, want [1 0]", c.w, got)
		}
		q := r.newRequest(req)
		if got := r.logits(q); !slices.Equal(got, c.costs) {
			t.Fatalf("w %v: costs %v, want %v", c.w, got, c.costs)
		}
		if got := r.targets[r.chooseKV(q)].id; got != c.pick {
			t.Fatalf("w %v: picked %v, want %v", c.w, got, c.pick)
		}
		// Half of B's tier goes (to the disk: still a lower-tier hit), then the rest leaves the hierarchy.
		r.Apply(tB, kvcache.Event{Kind: kvcache.Removed, Medium: kvcache.CPU, Hashes: []uint64{req.Blocks[2].Hash, req.Blocks[3].Hash}})
		r.Apply(tB, kvcache.Event{Kind: kvcache.Stored, Medium: kvcache.Disk, Blocks: req.Blocks[2:]})
		if got := r.byID[tB].lowerOverlap(req.Blocks); got != 4 {
			t.Fatalf("w %v: B's lower overlap %d after the move to disk, want 4", c.w, got)
		}
		r.Apply(tB, kvcache.Event{Kind: kvcache.Removed, Medium: kvcache.Disk, Hashes: []uint64{req.Blocks[2].Hash}})
		if got := r.byID[tB].lowerOverlap(req.Blocks); got != 2 {
			t.Fatalf("w %v: B's lower overlap %d, want 2", c.w, got)
		}
		if got := r.Indexed(tB); got != 0 {
			t.Fatalf("w %v: B indexes %d GPU blocks, want 0", c.w, got)
		}
		r.Apply(tB, kvcache.Event{Kind: kvcache.Cleared})
		if got := r.byID[tB].lowerOverlap(req.Blocks); got != 0 {
			t.Fatalf("w %v: B's lower overlap %d after clear, want 0", c.w, got)
		}
	}
}
