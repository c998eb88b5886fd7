package radix

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
)

// TestEvictWritesBackToHostTier: with a host tier of 2 pages (1 ms a page on its link), evicting the
// leaf "bc" announces the GPU's Removed event, then the host's Stored one (leaf page first, as evicted),
// and charges the link 2 ms from the cache's clock; evicting "a" next pushes "c", the host's least recent,
// out of it. Without events the tiers still take the pages.
func TestEvictWritesBackToHostTier(t *testing.T) {
	for _, events := range []bool{true, false} {
		c, err := New(Options{PageSize: 2, NumPages: 3, Events: events,
			Tiers: kvcache.TierOptions{CPUBlocks: 2, CPUBandwidth: 1, BlockBytes: 1e6}})
		if err != nil {
			t.Fatal(err)
		}
		abc := seq(2, "abc")
		ids, _ := c.Alloc(3, nil)
		c.Insert(abc, ids) // one leaf "abc"
		_, node := c.Match(abc[:1], nil)
		c.Lock(node) // splits "a" off, locked
		c.TakeEvents(nil)
		c.Tiers().SetNow(10 * time.Millisecond)
		if n := c.Evict(1); n != 2 {
			t.Fatalf("events %v: evicted %d pages, want 2", events, n)
		}
		c.Unlock(node)
		c.Evict(1)
		if err := c.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		want := "removed c,b; CPU stored c,b; removed a; CPU stored a; CPU removed c; "
		if !events {
			want = ""
		}
		if got := tierEvents(c); got != want {
			t.Fatalf("events %v: %q, want %q", events, got, want)
		}
		tiers := c.Tiers()
		if st := tiers.Stats(); st != (kvcache.TierStats{Offloaded: 3, CPUUsed: 2}) {
			t.Fatalf("events %v: stats %+v", events, st)
		}
		if n := tiers.Match(abc); n != 2 {
			t.Fatalf("events %v: host holds %d leading pages of abc, want 2 (a, b)", events, n)
		}
		// The link is busy with the 3 write-backs (10 → 13 ms): a load of a and b from 10 ms ends at 15.
		if ready := tiers.Onboard(abc[:2]); ready != 15*time.Millisecond {
			t.Fatalf("events %v: onboarded at %v, want 15ms", events, ready)
		}
	}
}

// tierEvents describes the events since the last call: "removed c,b; CPU stored c,b; ".
func tierEvents(c *Cache) string {
	var s string
	for _, ev := range c.TakeEvents(nil) {
		if ev.Medium != kvcache.GPU {
			s += ev.Medium.String() + " "
		}
		s += ev.Kind.String()
		sep := " "
		for _, b := range ev.Blocks {
			s += sep + labelHash(b.Hash) // a tier's blocks carry their hash only
			sep = ","
		}
		for _, h := range ev.Hashes {
			s += sep + labelHash(h)
			sep = ","
		}
		s += "; "
	}
	return s
}

// labelHash names a page of "abc" by its sequence hash.
func labelHash(h uint64) string {
	for i, b := range seq(2, "abc") {
		if b.Hash == h {
			return string(rune('a' + i))
		}
	}
	return "?"
}
