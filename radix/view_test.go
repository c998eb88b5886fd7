package radix

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// TestViewAgainstLaggingIndex drives requests that match, prefill in chunks and decode page by page with
// Extend under heavy eviction (a pool of 24 pages, prompts from a few shared-prefix families), while the
// cache's events reach a consumer late: after each step a random number of the events not yet delivered
// (often none, for many steps, so that pages are evicted and stored again before the consumer hears of
// it) go to an indexer fed by them alone and to the View. After every step the View holds exactly the
// indexer's pages (Cached, AppendCached), and its Prefix of every family's prompts, of the live requests'
// sequences and of random prompts is the indexer's: leading pages it holds, up to the first it lacks.
func TestViewAgainstLaggingIndex(t *testing.T) {
	var restoredUnheard, ghostHits int
	for _, ps := range []int{1, 2} {
		for seed := uint64(1); seed <= 40; seed++ {
			t.Run(fmt.Sprintf("page%d/seed%d", ps, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				c, err := New(Options{PageSize: ps, NumPages: 24, Events: true})
				if err != nil {
					t.Fatal(err)
				}
				v := c.View()
				if c.View() != v {
					t.Fatal("View: a second call made another view")
				}
				var pending []kvcache.Event // emitted, not yet delivered
				indexed := map[uint64]bool{}
				evictedUnheard := map[uint64]bool{} // removed by a pending event
				var probes [][]tokens.Block
				for f := range 6 {
					s := tokens.NewSequence(ps)
					s.Append(prefixFamily(rand.New(rand.NewPCG(uint64(f), 1)))...)
					probes = append(probes, s.Blocks())
				}
				w := &churn{c: c, ps: ps, rng: rng, priorities: 3, chunked: true, trim: true}
				for step := range 400 {
					w.step()
					if err := c.CheckInvariants(); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					for _, ev := range c.TakeEvents(nil) {
						for _, b := range ev.Blocks {
							if evictedUnheard[b.Hash] {
								restoredUnheard++
							}
						}
						for _, h := range ev.Hashes {
							evictedUnheard[h] = true
						}
						pending = append(pending, ev)
					}
					// Deliver some: none at all three steps in four.
					n := 0
					if rng.IntN(4) == 0 {
						n = rng.IntN(len(pending) + 1)
					}
					for _, ev := range pending[:n] {
						v.Heard(ev)
						for _, b := range ev.Blocks {
							indexed[b.Hash] = true
						}
						for _, h := range ev.Hashes {
							delete(indexed, h)
							delete(evictedUnheard, h)
						}
					}
					pending = slices.Delete(pending, 0, n)

					// The queries below only read: no ghost dropped, no node recycled.
					queued, chains, spare := len(v.queue)-v.head, len(v.ghosts), len(c.spare)
					if v.Cached() != len(indexed) {
						t.Fatalf("step %d: view holds %d pages, indexer %d", step, v.Cached(), len(indexed))
					}
					got := v.AppendCached(nil)
					want := make([]uint64, 0, len(indexed))
					for h := range indexed {
						want = append(want, h)
					}
					slices.Sort(got)
					slices.Sort(want)
					if !slices.Equal(got, want) {
						t.Fatalf("step %d: view holds %x, indexer %x", step, got, want)
					}
					qs := w.probes(slices.Clone(probes))
					for _, q := range qs {
						want := 0
						for want < len(q) && indexed[q[want].Hash] {
							want++
						}
						got := v.Prefix(q)
						if got != want {
							t.Fatalf("step %d: view's prefix of %d pages is %d, indexer's %d", step, len(q), got, want)
						}
						if tree := c.treePrefix(q); got > tree {
							ghostHits++
						}
					}
					if len(v.queue)-v.head != queued || len(v.ghosts) != chains || len(c.spare) != spare {
						t.Fatalf("step %d: the view's queries changed %d ghosts queued, %d chains, %d spare nodes to %d, %d, %d", step, queued, chains, spare, len(v.queue)-v.head, len(v.ghosts), len(c.spare))
					}
				}
				// Once every event is heard, the owner's next eviction drops every ghost.
				for _, ev := range append(pending, c.TakeEvents(nil)...) {
					v.Heard(ev)
				}
				v.prune()
				if len(v.queue) != 0 || len(v.ghosts) != 0 {
					t.Fatalf("every event heard and the next eviction: %d ghosts queued, %d chained", len(v.queue), len(v.ghosts))
				}
				if err := c.CheckInvariants(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	// The cases the view exists for happened: pages stored again before their eviction was heard, and
	// prefixes the view found only among its ghosts.
	if restoredUnheard == 0 || ghostHits == 0 {
		t.Fatalf("pages stored again before their eviction was heard: %d; prefixes longer than the tree's: %d", restoredUnheard, ghostHits)
	}
}

// treePrefix is how many leading pages the tree holds now, whatever was heard.
func (c *Cache) treePrefix(pages []tokens.Block) int {
	n, i := c.root, 0
	for i < len(pages) {
		next := c.child(n, pages[i].TokensHash)
		if next == nil {
			break
		}
		k := next.keys.commonPrefix(pages[i:])
		i += k
		if k < next.pages() {
			break
		}
		n = next
	}
	return i
}

// TestViewStartsWithTheCache: a view cannot rebuild what happened before it started.
func TestViewStartsWithTheCache(t *testing.T) {
	c := newCache(t, 1, 8)
	insertNew(t, c, seq(1, "ab"))
	defer func() {
		if recover() == nil {
			t.Fatal("View after an event did not panic")
		}
	}()
	c.View()
}

// TestViewHearsInOrder: an event missed, repeated or out of order, and a Cleared event, which the view
// cannot honour, panic naming the event heard and the one expected; events in order are heard.
func TestViewHearsInOrder(t *testing.T) {
	c := newCache(t, 1, 8)
	v := c.View()
	insertNew(t, c, seq(1, "ab"))
	insertNew(t, c, seq(1, "cd"))
	evs := c.TakeEvents(nil)
	if len(evs) != 2 || evs[0].ID != 0 || evs[1].ID != 1 {
		t.Fatalf("events %+v, want two, ids 0 and 1", evs)
	}
	mustPanic := func(ev kvcache.Event, want string) {
		t.Helper()
		defer func() {
			if got := recover(); got != want {
				t.Fatalf("Heard(%v event %d): panic %v, want %q", ev.Kind, ev.ID, got, want)
			}
		}()
		v.Heard(ev)
	}
	mustPanic(evs[1], "radix: a view heard stored event 1, expected the cache's event 0 (not a cleared one)")
	v.Heard(evs[0])
	mustPanic(evs[0], "radix: a view heard stored event 0, expected the cache's event 1 (not a cleared one)")
	mustPanic(kvcache.Event{Kind: kvcache.Cleared, ID: 1}, "radix: a view heard cleared event 1, expected the cache's event 1 (not a cleared one)")
	v.Heard(evs[1])
	if got := v.Prefix(seq(1, "cd")); got != 2 || v.Cached() != 4 {
		t.Fatalf("all heard: Prefix(cd) %d, Cached %d; want 2, 4", got, v.Cached())
	}
}

// TestViewClose: a closed view's ghosts are recycled, whatever was heard, and the cache evicts without
// keeping more; it records its events still, and cannot start another view.
func TestViewClose(t *testing.T) {
	c := newCache(t, 1, 4)
	v := c.View()
	insertNew(t, c, seq(1, "ab"))
	insertNew(t, c, seq(1, "cd"))
	if got := c.Evict(2); got != 2 {
		t.Fatalf("Evict(2) = %d", got)
	}
	check(t, c)
	if len(v.queue) != 1 || len(v.ghosts) != 1 {
		t.Fatalf("after one leaf's eviction, nothing heard: %d ghosts queued, %d chained; want 1, 1", len(v.queue), len(v.ghosts))
	}
	spare := len(c.spare)
	v.Close()
	if c.view != nil || len(c.spare) != spare+1 || v.ghosts != nil || len(v.queue) != 0 {
		t.Fatalf("closed: view %p, %d spare nodes (want %d), ghosts %v, %d queued", c.view, len(c.spare), spare+1, v.ghosts, len(v.queue))
	}
	check(t, c)
	if got := c.Evict(2); got != 2 || len(c.spare) != spare+2 {
		t.Fatalf("Evict(2) after Close = %d, %d spare nodes; want 2, %d (the leaf recycled at once)", got, len(c.spare), spare+2)
	}
	check(t, c)
	if evs := c.TakeEvents(nil); len(evs) != 4 || evs[3].Kind != kvcache.Removed {
		t.Fatalf("events %+v: want two stored, two removed", evs)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("View after Close did not panic")
		}
	}()
	c.View()
}

// BenchmarkViewLaggingEvictions: a full cache of one-page leaves stores a new leaf and evicts the oldest
// each iteration, while its view hears the events 8,192 behind, so about 4,096 ghosts wait at any time and
// each eviction drops the one heard of. A ghost should cost O(1), not a move of every ghost behind it.
func BenchmarkViewLaggingEvictions(b *testing.B) {
	const pages, lag = 1024, 8192
	c, err := New(Options{PageSize: 1, NumPages: pages, Events: true})
	if err != nil {
		b.Fatal(err)
	}
	v := c.View()
	var pending []kvcache.Event
	for i := 0; b.Loop(); i++ {
		if c.FreePages() == 0 {
			c.Evict(1)
		}
		ids, _ := c.Alloc(1, nil)
		s := tokens.NewSequence(1)
		s.Append(uint32(i), uint32(i>>16))
		c.Insert(s.Blocks()[:1], ids)
		pending = c.TakeEvents(pending)
		if len(pending) > lag {
			v.Heard(pending[0])
			pending = pending[1:]
		}
	}
}
