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
