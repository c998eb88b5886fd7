package radix

import (
	"fmt"
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// BenchmarkChurn is a request's whole life in the cache, over a working set twice the pool: Match and
// lock its prefix, evict to make room, allocate the rest, Insert, free the duplicates, unlock. Sequences
// come from 8 families sharing their first half, so about half of each hits and the other half evicts
// older suffixes.
func BenchmarkChurn(b *testing.B) {
	for _, ps := range []int{1, 16} {
		b.Run(fmt.Sprintf("page%d", ps), func(b *testing.B) {
			const pagesPerSeq, numSeqs = 64, 256
			c, err := New(Options{PageSize: ps, NumPages: 4096})
			if err != nil {
				b.Fatal(err)
			}
			seqs := make([][]tokens.Block, numSeqs)
			for i := range seqs {
				s := tokens.NewSequence(ps)
				for k := range ps * pagesPerSeq {
					tok := uint32(i%8*100000 + k)
					if k >= ps*pagesPerSeq/2 {
						tok += uint32(i) << 20
					}
					s.Append(tok)
				}
				seqs[i] = s.Blocks()
			}
			var ids []PageID
			var hits, evicted, n int
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s := seqs[i%numSeqs]
				var node *Node
				ids, node = c.Match(s, ids[:0])
				c.Lock(node)
				hit := len(ids)
				need := len(s) - hit
				if short := need - c.FreePages(); short > 0 {
					evicted += c.Evict(short)
				}
				ids, _ = c.Alloc(need, ids)
				present := c.Insert(s, ids)
				c.Free(ids[hit:present])
				c.Unlock(node)
				hits += hit
				n++
			}
			b.ReportMetric(float64(hits)/float64(n), "hit-pages/op")
			b.ReportMetric(float64(evicted)/float64(n), "evicted-pages/op")
		})
	}
}

// BenchmarkScatteredAppend grows one plain edge by chunks of scattered page ids, each holding a run of
// two (a long prompt's pages from a fragmented free list, chunk by chunk): whether the edge turns to runs
// is decided at each chunk from its runs, which are counted as they come rather than over the whole edge.
func BenchmarkScatteredAppend(b *testing.B) {
	const chunks, chunk = 2048, 8
	ids := make([]PageID, 0, chunks*chunk)
	for i := range chunks {
		for j := range chunk - 2 {
			ids = append(ids, PageID(i*4*chunk+3*j))
		}
		ids = append(ids, PageID(i*4*chunk+3*chunk), PageID(i*4*chunk+3*chunk+1))
	}
	var p pageIDs
	for b.Loop() {
		p.reset()
		for k := 0; k < len(ids); k += chunk {
			p.append(ids[k:k+chunk], 0)
		}
	}
	if p.inRuns || p.n != len(ids) {
		b.Fatalf("%d pages, run form %v: want %d, plain", p.n, p.inRuns, len(ids))
	}
}
