package router

import (
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// benchPrompts returns n prompts of 12,000 tokens at block size 16 (750 blocks): 16 families share their
// first 500 blocks, the last 250 are the prompt's own. The router sees only sequence hashes, so the blocks
// are chained with tokens.SeqHash over synthetic token hashes instead of hashing 12,000 token ids each.
func benchPrompts(n int) []Request {
	const shared, own = 500, 250
	reqs := make([]Request, n)
	all := make([]tokens.Block, n*(shared+own))
	for i := range reqs {
		blocks := all[i*(shared+own) : (i+1)*(shared+own) : (i+1)*(shared+own)]
		for k := range blocks {
			th := splitmix(uint64(i%16)<<32 | uint64(k))
			if k >= shared {
				th = splitmix(1<<63 | uint64(i)<<32 | uint64(k))
			}
			h := th
			if k > 0 {
				h = tokens.SeqHash(blocks[k-1].Hash, th)
			}
			blocks[k] = tokens.Block{Hash: h, TokensHash: th}
		}
		reqs[i] = Request{Blocks: blocks, PromptTokens: 16 * len(blocks)}
	}
	return reqs
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// BenchmarkRouteApply measures one request's way through the KV router on 8 targets: Route, the Stored
// event of the blocks its target lacked, and, 64 requests later, PrefillDone and Finished, with Removed
// events keeping each target's cache under a capacity (evicting its oldest stored runs). Prompts cycle,
// so a target may still hold a prompt's own blocks when it comes back.
func BenchmarkRouteApply(b *testing.B) {
	for _, bc := range []struct {
		name              string
		prompts, capacity int
	}{
		{"hot", 256, 20_000},    // every prompt stays cached: 750-block hits
		{"churn", 4096, 40_000}, // a third of the working set fits
		{"1M", 8192, 140_000},   // about a million indexed blocks
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchRouteApply(b, benchPrompts(bc.prompts), bc.capacity)
		})
	}
}

func benchRouteApply(b *testing.B, prompts []Request, capacity int) {
	o := kvOptions(16)
	o.QueueThreshold = 0 // measure routing, not waiting
	r, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	var targets []Target
	for w := range 4 {
		for rank := range 2 {
			targets = append(targets, Target{Worker: w, Rank: rank})
			r.AddTarget(targets[len(targets)-1])
		}
	}
	// Each target's stored runs, oldest first, to evict from.
	type fifo struct {
		runs [][]tokens.Block
		head int
	}
	stored := map[Target]*fifo{}
	for _, t := range targets {
		stored[t] = &fifo{}
	}
	const inflight = 64
	var hashes []uint64
	var overlap, fresh, evicted, n int
	step := func(i int) {
		p := prompts[i%len(prompts)]
		p.ID = uint64(i)
		d, queued := r.Route(p)
		if queued {
			b.Fatalf("request %d queued", i)
		}
		overlap += d.Overlap
		fresh += len(p.Blocks) - d.Overlap
		n++
		ev := kvcache.Event{Kind: kvcache.Stored, Blocks: p.Blocks[d.Overlap:]}
		if d.Overlap > 0 {
			ev.Parent, ev.HasParent = p.Blocks[d.Overlap-1].Hash, true
		}
		r.Apply(d.Target, ev)
		f := stored[d.Target]
		f.runs = append(f.runs, ev.Blocks)
		for r.Indexed(d.Target) > capacity && f.head < len(f.runs) {
			hashes = hashes[:0]
			for _, blk := range f.runs[f.head] {
				hashes = append(hashes, blk.Hash)
			}
			evicted += len(hashes)
			r.Apply(d.Target, kvcache.Event{Kind: kvcache.Removed, Hashes: hashes})
			f.runs[f.head] = nil
			f.head++
		}
		if f.head > 1024 {
			f.runs = append(f.runs[:0], f.runs[f.head:]...)
			f.head = 0
		}
		if i >= inflight {
			r.PrefillDone(uint64(i - inflight))
			r.Finished(uint64(i - inflight))
		}
	}
	// Warm up until the caches are full, so the measurement sees a steady state.
	i := 0
	for ; i < 2*len(prompts)+8*capacity/250; i++ {
		step(i)
	}
	overlap, fresh, evicted, n = 0, 0, 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		step(i)
		i++
	}
	b.StopTimer()
	b.ReportMetric(float64(overlap)/float64(n), "hit-blocks/op")
	b.ReportMetric(float64(fresh)/float64(n), "stored-blocks/op")
	b.ReportMetric(float64(evicted)/float64(n), "removed-blocks/op")
	b.ReportMetric(float64(r.ix.size()), "indexed-hashes")
}

// BenchmarkOverlap is the indexer walk alone over a 750-block prompt cached on every target.
func BenchmarkOverlap(b *testing.B) {
	r, _ := New(kvOptions(16))
	p := benchPrompts(1)[0]
	for w := range 8 {
		r.AddTarget(Target{Worker: w})
		store(r, Target{Worker: w}, p)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ov := r.Overlap(p.Blocks); ov[7] != 750 {
			b.Fatal(ov)
		}
	}
}
