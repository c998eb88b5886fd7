package live

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// streamedChoiceKey is choiceKey as the streaming hasher computes it, 4 and 8 bytes at a time: the
// definition the one-call hash must keep, or every choice's output length would move.
func streamedChoiceKey(ids []uint32, j int, p *sampling) uint64 {
	h := xxh3.New()
	var b [8]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:4], id)
		h.Write(b[:4])
	}
	binary.LittleEndian.PutUint64(b[:], uint64(j))
	h.Write(b[:])
	if p.seeded {
		binary.LittleEndian.PutUint64(b[:], uint64(p.seed))
		h.Write(b[:])
	}
	return h.Sum64()
}

func TestChoiceKey(t *testing.T) {
	// Pinned: the key of a 3-token prompt, choice 1, unseeded and seeded.
	var buf planBuf
	if got, want := buf.choiceKey([]uint32{128000, 15339, 1917}, 1, &sampling{}), uint64(0x534c3d3a798c27b5); got != want {
		t.Errorf("choiceKey unseeded = %#x, want %#x", got, want)
	}
	if got, want := buf.choiceKey([]uint32{128000, 15339, 1917}, 1, &sampling{seeded: true, seed: -7}), uint64(0x1b8a2954441eea59); got != want {
		t.Errorf("choiceKey seeded = %#x, want %#x", got, want)
	}
	// Lengths on both sides of the stack buffer (252 ids fill it with the choice and the seed), one
	// planBuf for all: a long prompt's bytes left in it never enter a shorter one's key.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 100, 251, 252, 253, 5000, 1000, 253, 3} {
		ids := make([]uint32, n)
		for i := range ids {
			ids[i] = rng.Uint32()
		}
		for _, p := range []*sampling{{}, {seeded: true, seed: rng.Int64()}} {
			j := rng.IntN(256)
			if got, want := buf.choiceKey(ids, j, p), streamedChoiceKey(ids, j, p); got != want {
				t.Errorf("%d ids, choice %d, seeded %v: choiceKey %#x, the streaming hasher %#x", n, j, p.seeded, got, want)
			}
		}
	}
}

// A request's choices over a long prompt share one buffer for their keys: only the first allocates.
func TestChoiceKeyReusesBuffer(t *testing.T) {
	ids := make([]uint32, 1000)
	p := &sampling{n: 4}
	var buf planBuf
	j := 0
	if n := testing.AllocsPerRun(20, func() { buf.choiceKey(ids, j%p.n, p); j++ }); n != 0 {
		t.Errorf("choiceKey of a 1000-token prompt allocates %v times a choice, want 0", n)
	}
	if cap(buf.key) != 4*len(ids)+16 {
		t.Errorf("buffer of %d bytes, want %d", cap(buf.key), 4*len(ids)+16)
	}
}
