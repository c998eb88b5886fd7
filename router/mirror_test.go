package router

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// TestMirrorRoutesAsIndex: a router that reads each target's block pool in place (SetMirror) decides as
// one that indexes the pools' KV events, request after request, while the pools fill, evict and share
// prefixes; both count the same blocks per target (the KV policy's tie-break), and the mirrored router
// ignores the GPU events it is still sent.
func TestMirrorRoutesAsIndex(t *testing.T) {
	for _, policy := range []Policy{KV, RoundRobin} {
		o := kvOptions(4)
		o.Policy, o.QueueThreshold, o.Seed = policy, 0, 3
		indexed, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		mirrored, _ := New(o)
		var targets []Target
		pools := map[Target]*kvcache.Pool{}
		for w := range 3 {
			tg := Target{Worker: w}
			targets = append(targets, tg)
			p, err := kvcache.New(kvcache.Options{Capacity: 40, PrefixCaching: true, Events: true})
			if err != nil {
				t.Fatal(err)
			}
			pools[tg] = p
			indexed.AddTarget(tg)
			mirrored.AddTarget(tg)
			mirrored.SetMirror(tg, p)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		tables := map[uint64][]kvcache.BlockID{}
		owner := map[uint64]Target{}
		var live []uint64 // requests holding blocks, oldest first
		var events []kvcache.Event
		hitsSeen := 0
		for id := range uint64(300) {
			// Prompts of 2 to 13 blocks from 5 families sharing up to 8 leading blocks.
			toks := make([]uint32, 4*(2+rng.IntN(12))+rng.IntN(4))
			family := uint32(rng.IntN(5))
			shared := rng.IntN(9)
			for k := range toks {
				toks[k] = family<<16 | uint32(k)
				if k >= 4*shared {
					toks[k] = uint32(rng.IntN(1 << 20))
				}
			}
			s := tokens.NewSequence(4)
			s.Append(toks...)
			req := Request{ID: id, Blocks: s.Blocks(), PromptTokens: len(toks)}
			for _, tg := range targets {
				if a, b := indexed.Indexed(tg), mirrored.Indexed(tg); a != b {
					t.Fatalf("%v, request %d: target %v indexes %d blocks, its mirror %d", policy, id, tg, a, b)
				}
			}
			if a, b := indexed.Overlap(req.Blocks), mirrored.Overlap(req.Blocks); !slices.Equal(a, b) {
				t.Fatalf("%v, request %d: overlaps %v indexed, %v mirrored", policy, id, a, b)
			}
			d, _ := indexed.Route(req)
			if m, _ := mirrored.Route(req); m != d {
				t.Fatalf("%v, request %d: decision %+v indexed, %+v mirrored", policy, id, d, m)
			}
			hitsSeen += d.Overlap
			// The target admits it (the decision's overlap is what its pool shares), and its events reach
			// both routers: the mirrored one must ignore them.
			p := pools[d.Target]
			hits, _ := p.Match(req.Blocks, nil)
			need := (len(toks) + 3) / 4
			for !p.CanAllocate(hits, need-len(hits)) { // finish the oldest requests until it fits
				oldest := live[0]
				live = live[1:]
				pools[owner[oldest]].Release(tables[oldest])
				indexed.Finished(oldest)
				mirrored.Finished(oldest)
				delete(tables, oldest)
				hits, _ = p.Match(req.Blocks, nil)
			}
			table := p.Acquire(nil, hits)
			table = p.Allocate(table, need-len(hits))
			p.Commit(table, req.Blocks, len(hits), len(req.Blocks))
			tables[id], owner[id] = table, d.Target
			live = append(live, id)
			events = p.TakeEvents(events[:0])
			for _, ev := range events {
				indexed.Apply(d.Target, ev)
				mirrored.Apply(d.Target, ev)
			}
			p.NewPass()
		}
		if hitsSeen == 0 {
			t.Fatalf("%v: no request hit a cached prefix: the test shows nothing", policy)
		}
		for _, tg := range targets {
			a, b := indexed.AppendIndexed(tg, nil), mirrored.AppendIndexed(tg, nil)
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				t.Fatalf("%v: target %v: %d hashes indexed, %d mirrored", policy, tg, len(a), len(b))
			}
		}
	}
}

// TestMirrorKeepsLowerTiers: a mirrored target's GPU events change nothing, its lower tier's events are
// still indexed, and Cleared drops the lower tier.
func TestMirrorKeepsLowerTiers(t *testing.T) {
	o := kvOptions(4)
	o.LowerHitWeight = 0.5
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	tg := Target{}
	r.AddTarget(tg)
	p, _ := kvcache.New(kvcache.Options{Capacity: 8, PrefixCaching: true, Events: true})
	s := tokens.NewSequence(4)
	s.Append(1, 2, 3, 4, 5, 6, 7, 8)
	blocks := s.Blocks()
	r.Apply(tg, kvcache.Event{Kind: kvcache.Stored, Blocks: blocks})
	r.SetMirror(tg, p) // drops what the events indexed: the empty pool holds nothing
	if n := r.Indexed(tg); n != 0 {
		t.Fatalf("mirror of an empty pool: %d blocks indexed", n)
	}
	r.Apply(tg, kvcache.Event{Kind: kvcache.Stored, Blocks: blocks})
	x := r.byID[tg]
	if n, ix := r.Overlap(blocks)[0], r.ix.count(x.slot); n != 0 || ix != 0 {
		t.Fatalf("a mirrored target's GPU Stored event was indexed: overlap %d, %d hashes indexed", n, ix)
	}
	r.Apply(tg, kvcache.Event{Kind: kvcache.Stored, Blocks: blocks, Medium: kvcache.CPU})
	if got := x.lowerOverlap(blocks); got != 2 {
		t.Fatalf("lower tier overlap %d, want 2", got)
	}
	r.Apply(tg, kvcache.Event{Kind: kvcache.Cleared})
	if got := x.lowerOverlap(blocks); got != 0 {
		t.Fatalf("after Cleared, lower tier overlap %d, want 0", got)
	}
}

// hearer is a Mirror that records the events it is handed.
type hearer struct {
	*kvcache.Pool
	heard []kvcache.Event
}

func (h *hearer) Heard(ev kvcache.Event) { h.heard = append(h.heard, ev) }

// TestHearerHearsEveryEvent: a mirror that is a Hearer is handed each of its target's events, GPU and
// lower tier, in order, and the GPU's are not indexed; a mirror that is not is handed nothing, and
// another target's events go to its own.
func TestHearerHearsEveryEvent(t *testing.T) {
	r, err := New(kvOptions(4))
	if err != nil {
		t.Fatal(err)
	}
	a, b := Target{Worker: 0}, Target{Worker: 1}
	r.AddTarget(a)
	r.AddTarget(b)
	p, _ := kvcache.New(kvcache.Options{Capacity: 8, PrefixCaching: true, Events: true})
	h := &hearer{Pool: p}
	r.SetMirror(a, h)
	s := tokens.NewSequence(4)
	s.Append(1, 2, 3, 4, 5, 6, 7, 8)
	evs := []kvcache.Event{
		{ID: 0, Kind: kvcache.Stored, Blocks: s.Blocks()},
		{ID: 1, Kind: kvcache.Removed, Hashes: []uint64{s.Blocks()[1].Hash}},
		{ID: 2, Kind: kvcache.Stored, Blocks: s.Blocks()[1:], Medium: kvcache.CPU},
	}
	for _, ev := range evs {
		r.Apply(a, ev)
		r.Apply(b, ev)
	}
	if len(h.heard) != len(evs) {
		t.Fatalf("heard %d events, want %d", len(h.heard), len(evs))
	}
	for i, ev := range h.heard {
		if ev.ID != evs[i].ID || ev.Kind != evs[i].Kind || ev.Medium != evs[i].Medium {
			t.Fatalf("event %d heard as %+v, want %+v", i, ev, evs[i])
		}
	}
	if n := r.ix.count(r.byID[a].slot); n != 0 {
		t.Fatalf("the hearer's target indexed %d GPU blocks", n)
	}
	if got := r.Overlap(s.Blocks()); got[0] != 0 || got[1] != 1 {
		t.Fatalf("overlaps %v, want [0 1] (the empty pool; the index without block 1)", got)
	}
}
