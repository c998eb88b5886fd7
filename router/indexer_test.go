package router

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// engine is a tiny scheduler around a real kvcache.Pool: it admits requests (sharing their cached
// prefix), commits their blocks in chunks as a chunked prefill would, and releases them, so the pool
// evicts and emits every kind of event it can.
type engine struct {
	pool    *kvcache.Pool
	running []*running
}

type running struct {
	blocks    []tokens.Block
	table     []kvcache.BlockID
	committed int
}

func newEngine(t *testing.T, capacity int) *engine {
	p, err := kvcache.New(kvcache.Options{Capacity: capacity, PrefixCaching: true, Events: true})
	if err != nil {
		t.Fatal(err)
	}
	return &engine{pool: p}
}

// step does one random thing: admit a request for seq, advance one's prefill, or release one.
func (e *engine) step(rng *rand.Rand, seq *tokens.Sequence) {
	switch k := rng.IntN(3); {
	case k == 0 && len(e.running) > 0:
		i := rng.IntN(len(e.running))
		e.pool.Release(e.running[i].table)
		e.running = slices.Delete(e.running, i, i+1)
	case k == 1 && len(e.running) > 0:
		q := e.running[rng.IntN(len(e.running))]
		if to := q.committed + rng.IntN(3); to > q.committed && to <= len(q.blocks) {
			e.pool.Commit(q.table, q.blocks, q.committed, to)
			q.committed = to
		}
	default:
		blocks := seq.Blocks()
		total := (seq.Len() + seq.BlockSize() - 1) / seq.BlockSize()
		hits, _ := e.pool.Match(blocks, nil)
		if !e.pool.CanAllocate(hits, total-len(hits)) {
			return
		}
		q := &running{blocks: blocks, committed: len(hits)}
		q.table = e.pool.Acquire(nil, hits)
		q.table = e.pool.Allocate(q.table, total-len(hits))
		if to := q.committed + rng.IntN(len(blocks)-q.committed+1); to > q.committed {
			e.pool.Commit(q.table, q.blocks, q.committed, to)
			q.committed = to
		}
		e.running = append(e.running, q)
	}
}

// resident is the set of hashes the pool holds.
func (e *engine) resident() map[uint64]bool {
	set := map[uint64]bool{}
	for _, h := range e.pool.AppendCached(nil) {
		set[h] = true
	}
	return set
}

// TestIndexerMatchesPools drives several pools with shared-prefix requests, feeds every event they emit to
// the router, and after each step compares the router's view of each target with the pool itself: the
// set of blocks held, their number, and the cached prefix of probe sequences (which the pool's Match
// finds by the same rule: up to the first missing block).
func TestIndexerMatchesPools(t *testing.T) {
	const bs, nTargets = 2, 4
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			// The universe: sequences from a few families of shared prefixes, with short varied tails.
			var seqs []*tokens.Sequence
			universe := map[uint64]bool{}
			for range 60 {
				f := uint32(rng.IntN(4))
				s := tokens.NewSequence(bs)
				for k := range rng.IntN(13) {
					s.Append(f*1000 + uint32(k))
				}
				for range 1 + rng.IntN(8) {
					s.Append(500 + uint32(rng.IntN(3)))
				}
				for _, b := range s.Blocks() {
					universe[b.Hash] = true
				}
				seqs = append(seqs, s)
			}
			hashes := make([]uint64, 0, len(universe))
			for h := range universe {
				hashes = append(hashes, h)
			}
			slices.Sort(hashes)

			r := newRouter(t, kvOptions(bs))
			targets := make([]Target, nTargets)
			engines := make([]*engine, nTargets)
			for i := range targets {
				targets[i] = Target{Worker: i / 2, Rank: i % 2}
				engines[i] = newEngine(t, 6+rng.IntN(14))
				r.AddTarget(targets[i])
			}
			var evs []kvcache.Event
			stored, removed := 0, 0
			for step := range 800 {
				i := rng.IntN(nTargets)
				if rng.IntN(100) == 0 {
					// The worker restarts: the router forgets it and learns it again from scratch.
					r.RemoveTarget(targets[i])
					engines[i] = newEngine(t, 6+rng.IntN(14))
					r.AddTarget(targets[i])
				}
				engines[i].step(rng, seqs[rng.IntN(len(seqs))])
				for j, e := range engines {
					evs = e.pool.TakeEvents(evs[:0])
					for _, ev := range evs {
						r.Apply(targets[j], ev)
						stored += len(ev.Blocks)
						removed += len(ev.Hashes)
					}
				}

				for j, e := range engines {
					n := 0
					resident := e.resident()
					for _, h := range hashes {
						in := resident[h]
						if in {
							n++
						}
						if got := r.ix.has(r.byID[targets[j]].slot, h); got != in {
							t.Fatalf("step %d: target %v holds %#x: router %v, pool %v", step, targets[j], h, got, in)
						}
					}
					if got := r.Indexed(targets[j]); got != n {
						t.Fatalf("step %d: Indexed(%v) = %d, pool holds %d", step, targets[j], got, n)
					}
				}
				for range 4 {
					probe := seqs[rng.IntN(len(seqs))].Blocks()
					ov := r.Overlap(probe)
					order := r.Targets()
					for k, tg := range order {
						j := slices.Index(targets, tg)
						hits, _ := engines[j].pool.Match(probe, nil)
						if ov[k] != len(hits) {
							t.Fatalf("step %d: Overlap on %v = %d, pool matches %d", step, tg, ov[k], len(hits))
						}
						if one := r.ix.overlapOf(r.byID[tg].slot, probe); one != len(hits) {
							t.Fatalf("step %d: overlapOf(%v) = %d, pool matches %d", step, tg, one, len(hits))
						}
					}
				}
			}
			if stored < 100 || removed < 50 {
				t.Fatalf("only %d blocks stored and %d removed: the pools hardly worked", stored, removed)
			}
			t.Logf("%d blocks stored, %d removed", stored, removed)
		})
	}
}

// TestIndexerTable exercises the tables themselves against a map: random stores and removes over a small
// key space (with collisions in the probe runs, the hash 0, and growth), then clearing a slot.
func TestIndexerTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	ix := newIndexer()
	slots := []int{ix.addSlot(), ix.addSlot(), ix.addSlot()}
	type key struct {
		s int
		h uint64
	}
	want := map[key]bool{}
	// Keys spread over the table's slots, plus 0 and a few multiples of the table size.
	keyOf := func() uint64 {
		switch rng.IntN(10) {
		case 0:
			return 0
		case 1:
			return uint64(rng.IntN(4)) << 40
		}
		return uint64(rng.IntN(3000))
	}
	check := func(when string) {
		t.Helper()
		counts := make([]int, len(slots))
		for k, in := range want {
			if in {
				counts[k.s]++
			}
			if ix.has(k.s, k.h) != in {
				t.Fatalf("%s: has(%d, %#x) = %v, want %v", when, k.s, k.h, !in, in)
			}
		}
		for s := range slots {
			if ix.count(s) != counts[s] {
				t.Fatalf("%s: slot %d counts %d, want %d", when, s, ix.count(s), counts[s])
			}
		}
		for s := range slots {
			set, occupied := &ix.sets[s], 0
			for _, k := range set.keys {
				if k != 0 {
					occupied++
					if !set.has(k) {
						t.Fatalf("%s: slot %d: key %#x held but not found from its home", when, s, k)
					}
				}
			}
			if occupied != set.n {
				t.Fatalf("%s: slot %d: %d occupied entries, n = %d", when, s, occupied, set.n)
			}
		}
	}
	for i := range 20000 {
		k := key{slots[rng.IntN(len(slots))], keyOf()}
		if rng.IntN(3) == 0 {
			ix.remove(k.s, k.h)
			want[k] = false
		} else {
			ix.store(k.s, k.h)
			want[k] = true
		}
		if i%1000 == 0 {
			check(fmt.Sprint("op ", i))
		}
	}
	check("end")
	ix.clearSlot(1)
	for k := range want {
		if k.s == 1 {
			want[k] = false
		}
	}
	check("after clearing slot 1")
}

// Test shorthands over one slot's set.

func (ix *indexer) has(s int, h uint64) bool { return ix.sets[s].has(h) }
func (ix *indexer) store(s int, h uint64)    { ix.sets[s].add(h) }
func (ix *indexer) remove(s int, h uint64)   { ix.sets[s].remove(h) }

// size is the number of (slot, hash) pairs held.
func (ix *indexer) size() int {
	n := 0
	for s := range ix.sets {
		n += ix.count(s)
	}
	return n
}

// TestSetAtMostThreeEighthsFull adds the hashes of mocker's default pool (55,522 blocks) to a target's
// set: it never holds more than 3/8 of its slots, ending at 2^18.
func TestSetAtMostThreeEighthsFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var set hashSet
	for range 55522 {
		set.add(rng.Uint64() | 1)
		if 8*set.len() > 3*len(set.keys) {
			t.Fatalf("%d hashes in %d slots", set.len(), len(set.keys))
		}
	}
	if len(set.keys) != 1<<18 {
		t.Fatalf("%d hashes in %d slots, want %d", set.len(), len(set.keys), 1<<18)
	}
}
