package radix

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// TestSoleViewCountsEvents drives two caches alike under heavy eviction, with a host tier below, one of
// them with a Sole view: its GPU Stored and Removed events are the other's, ids, kinds and parents alike,
// with their pages counted (Count, Size) instead of listed; its tier events are the other's whole. Both
// views, handed their events late in the same steps, hold as many pages and find the same prefixes.
func TestSoleViewCountsEvents(t *testing.T) {
	for _, ps := range []int{1, 2} {
		for seed := uint64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("page%d/seed%d", ps, seed), func(t *testing.T) {
				var caches [2]*Cache
				var views [2]*View
				for i := range caches {
					c, err := New(Options{PageSize: ps, NumPages: 24, Events: true,
						Tiers: kvcache.TierOptions{CPUBlocks: 16, CPUBandwidth: 1, BlockBytes: 1}})
					if err != nil {
						t.Fatal(err)
					}
					caches[i], views[i] = c, c.View()
				}
				views[1].Sole()
				var pending [2][]kvcache.Event
				var counted, removed, tiered int
				steps := [2]func() [][]tokens.Block{drive(caches[0], ps, seed), drive(caches[1], ps, seed)}
				deliver := rand.New(rand.NewPCG(seed, 11))
				for step := range 300 {
					var probes [2][][]tokens.Block
					for i, c := range caches {
						probes[i] = steps[i]()
						pending[i] = c.TakeEvents(pending[i])
					}
					if len(pending[0]) != len(pending[1]) {
						t.Fatalf("step %d: %d events pending, %d from the sole view's cache", step, len(pending[0]), len(pending[1]))
					}
					for j, full := range pending[0] {
						bare := pending[1][j]
						want := full
						if full.Medium == kvcache.GPU && (full.Kind == kvcache.Stored || full.Kind == kvcache.Removed) {
							want.Blocks, want.Hashes, want.Count = nil, nil, full.Size()
							counted++
							if full.Kind == kvcache.Removed {
								removed++
							}
						} else if full.Medium != kvcache.GPU {
							tiered++
						}
						if bare.String() != want.String() || bare.Size() != full.Size() {
							t.Fatalf("step %d: event %v, want %v", step, bare, want)
						}
					}
					n := 0
					if deliver.IntN(3) == 0 {
						n = deliver.IntN(len(pending[0]) + 1)
					}
					for i, v := range views {
						for _, ev := range pending[i][:n] {
							v.Heard(ev)
						}
						pending[i] = slices.Delete(pending[i], 0, n)
					}
					if views[0].Cached() != views[1].Cached() {
						t.Fatalf("step %d: sole view holds %d pages, the other %d", step, views[1].Cached(), views[0].Cached())
					}
					for k, q := range probes[0] {
						if got, want := views[1].Prefix(probes[1][k]), views[0].Prefix(q); got != want {
							t.Fatalf("step %d: sole view's prefix of %d pages is %d, the other's %d", step, len(q), got, want)
						}
					}
				}
				if counted == 0 || removed == 0 || tiered == 0 {
					t.Fatalf("%d events counted, %d of them Removed, %d of the host tier: the drive stored, evicted or wrote back nothing", counted, removed, tiered)
				}
			})
		}
	}
}

// drive returns a step of a random workload on c (a churn), the same for every cache given the same
// seed; each step returns the live requests' sequences and a random prompt, to probe views with.
func drive(c *Cache, ps int, seed uint64) func() [][]tokens.Block {
	w := &churn{c: c, ps: ps, rng: rand.New(rand.NewPCG(seed, 7)), priorities: 3}
	return func() [][]tokens.Block {
		w.step()
		return w.probes(nil)
	}
}
