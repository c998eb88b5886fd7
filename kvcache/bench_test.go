package kvcache

import (
	"math/rand/v2"
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// BenchmarkPoolChurn admits requests as a vLLM scheduler does (match, acquire, allocate, commit, release
// the oldest of 16 in flight) into a pool the size of mocker's default one (55,522 blocks), each request
// 750 blocks long, continuing one of 64 conversations (its blocks so far, then new ones) so that most of
// a long run's blocks are evicted: the shape of the Mooncake conversation replay. One op is one request.
func BenchmarkPoolChurn(b *testing.B) {
	const (
		capacity = 55522
		length   = 750
		inFlight = 16
		convs    = 64
	)
	for _, events := range []bool{false, true} {
		name := "events=false"
		if events {
			name = "events=true"
		}
		b.Run(name, func(b *testing.B) {
			p, err := New(Options{Capacity: capacity, PrefixCaching: true, Events: events})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			hist := make([][]tokens.Block, convs)
			var tables [inFlight][]BlockID
			var hits []BlockID
			var evs []Event
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				slot := i % inFlight
				p.NewPass()
				p.Release(tables[slot])
				c := rng.IntN(convs)
				blocks := hist[c]
				if len(blocks) >= length {
					blocks = blocks[:0] // the conversation starts over
				}
				for len(blocks) < length {
					blocks = append(blocks, tokens.Block{Hash: rng.Uint64()})
					if len(blocks)%200 == 0 {
						break // a turn adds up to 200 blocks
					}
				}
				hist[c] = blocks
				hits, _ = p.Match(blocks, hits[:0])
				table := p.Acquire(tables[slot][:0], hits)
				table = p.Allocate(table, len(blocks)-len(hits))
				p.Commit(table, blocks, len(hits), len(blocks))
				tables[slot] = table
				evs = p.TakeEvents(evs[:0])
			}
		})
	}
}
