package kvcache

import (
	"math/rand/v2"
	"testing"
)

// TestIndexAgainstMap checks the open-addressing index against a Go map under random churn, with hashes
// drawn from a small range so that probe runs collide, wrap around and shift back on delete.
func TestIndexAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ix := newIndex(0)
	ref := map[uint64]BlockID{}
	for step := range 50000 {
		h := rng.Uint64N(4000) * 0x9e3779b97f4a7c15 >> 20 // spread, but only 4000 distinct keys
		if rng.IntN(3) == 0 {
			h |= uint64(rng.IntN(4)) << 62 // far-apart keys that share low bits
		}
		switch rng.IntN(3) {
		case 0:
			if _, ok := ref[h]; ok {
				ix.delete(h)
				delete(ref, h)
			}
		default:
			id := BlockID(rng.IntN(1 << 20))
			got := ix.putIfAbsent(h, id)
			want, ok := ref[h]
			if !ok {
				ref[h], want = id, id
			}
			if got != want {
				t.Fatalf("step %d: putIfAbsent(%d) = %d, want %d", step, h, got, want)
			}
		}
		if ix.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, ix.len(), len(ref))
		}
		probe := rng.Uint64N(4000) * 0x9e3779b97f4a7c15 >> 20
		want, ok := ref[probe]
		if !ok {
			want = none
		}
		if got := ix.get(probe); got != want {
			t.Fatalf("step %d: get(%d) = %d, want %d", step, probe, got, want)
		}
	}
	for h, want := range ref {
		if got := ix.get(h); got != want {
			t.Fatalf("get(%d) = %d, want %d", h, got, want)
		}
	}
}
