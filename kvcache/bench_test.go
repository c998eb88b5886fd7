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

// BenchmarkPoolsRouted is BenchmarkPoolChurn's conversations over eight pools (512 conversations) behind a
// router that reads every pool's Prefix for each request and sends it to the longest (ties: to the
// conversation's own pool), as the KV router does with mirrored pools: the shape of the Mooncake
// conversation replay on eight workers. One op is one request.
func BenchmarkPoolsRouted(b *testing.B) {
	const (
		capacity = 55522
		length   = 750
		inFlight = 16
		pools    = 8
		convs    = 64 * pools
	)
	var ps [pools]*Pool
	for i := range ps {
		p, err := New(Options{Capacity: capacity, PrefixCaching: true, Events: true})
		if err != nil {
			b.Fatal(err)
		}
		ps[i] = p
	}
	rng := rand.New(rand.NewPCG(1, 2))
	hist := make([][]tokens.Block, convs)
	var tables [pools][inFlight][]BlockID
	var hits []BlockID
	var evs []Event
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c := rng.IntN(convs)
		blocks := hist[c]
		if len(blocks) >= length {
			blocks = blocks[:0]
		}
		for len(blocks) < length {
			blocks = append(blocks, tokens.Block{Hash: rng.Uint64()})
			if len(blocks)%200 == 0 {
				break
			}
		}
		hist[c] = blocks
		best, most := c%pools, -1
		for j, p := range ps {
			if n := p.Prefix(blocks); n > most || n == most && j == c%pools {
				best, most = j, n
			}
		}
		p := ps[best]
		slot := i % inFlight
		p.NewPass()
		p.Release(tables[best][slot])
		hits, _ = p.Match(blocks, hits[:0])
		table := p.Acquire(tables[best][slot][:0], hits)
		table = p.Allocate(table, len(blocks)-len(hits))
		p.Commit(table, blocks, len(hits), len(blocks))
		tables[best][slot] = table
		evs = p.TakeEvents(evs[:0])
	}
}
