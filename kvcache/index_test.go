package kvcache

import (
	"math/rand/v2"
	"testing"
)

// TestIndexAgainstMap checks the open-addressing index against a Go map under random churn. Hashes come
// from a small set and often share their low bits, so probe runs collide, wrap around the table, match
// tags falsely, and shift back on delete.
func TestIndexAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ix := newIndex(0)
	var blocks []block // the index reads a block's hash by id
	ref := map[uint64]BlockID{}
	key := func() uint64 {
		h := rng.Uint64N(3000) * 0x9e3779b97f4a7c15 >> 24
		if rng.IntN(3) == 0 {
			h = h&0xffff | uint64(rng.IntN(4))<<40 // same tag and home as another key
		}
		return h
	}
	for step := range 50000 {
		h := key()
		if rng.IntN(3) == 0 {
			if _, ok := ref[h]; ok {
				ix.delete(blocks, h)
				delete(ref, h)
			}
		} else {
			blocks = append(blocks, block{hash: h})
			id := BlockID(len(blocks) - 1)
			if _, ok := ref[h]; ok {
				ix.replace(blocks, h, id)
			} else {
				ix.insert(blocks, h, id)
			}
			ref[h] = id
		}
		if ix.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, ix.len(), len(ref))
		}
		probe := key()
		want, ok := ref[probe]
		if !ok {
			want = none
		}
		if got := ix.get(blocks, probe); got != want {
			t.Fatalf("step %d: get(%#x) = %d, want %d", step, probe, got, want)
		}
	}
	for h, want := range ref {
		if got := ix.get(blocks, h); got != want {
			t.Fatalf("get(%#x) = %d, want %d", h, got, want)
		}
	}
}

// TestIndexAtMostThreeEighthsFull fills an index sized for mocker's default pool (55,522 blocks) with twice
// its hashes: it starts at 2^18 slots and never holds more than 3/8 of them, doubling past that.
func TestIndexAtMostThreeEighthsFull(t *testing.T) {
	const capacity = 55522
	ix := newIndex(capacity)
	if len(ix.slots) != 1<<18 {
		t.Fatalf("index for %d blocks has %d slots, want %d", capacity, len(ix.slots), 1<<18)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	blocks := make([]block, 2*capacity)
	for i := range blocks {
		blocks[i].hash = rng.Uint64()
		ix.insert(blocks, blocks[i].hash, BlockID(i))
		if 8*ix.len() > 3*len(ix.slots) {
			t.Fatalf("%d hashes in %d slots", ix.len(), len(ix.slots))
		}
	}
	if len(ix.slots) != 1<<19 {
		t.Fatalf("%d hashes in %d slots, want %d", ix.len(), len(ix.slots), 1<<19)
	}
}
