package report

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// interleave records tokens for many requests in flight at once, as a replay does: every request in a
// wave of 64 gets a token each pass, the pass lengths drawn from a few hundred values. Some requests
// fail, some are retried, some never end; it returns the ITL samples Summary must describe (the gaps of
// the requests that completed), in ms.
func interleave(c *Collector, rng *rand.Rand, requests, tokens int) []float64 {
	var want []float64
	now := time.Duration(0)
	const wave = 64
	for base := 0; base < requests; base += wave {
		ids := make([]int, 0, wave)
		for id := base; id < min(base+wave, requests); id++ {
			c.Arrived(id, now, 10, tokens)
			ids = append(ids, id)
		}
		gaps := make([][]float64, len(ids))
		var last time.Duration
		for k := range tokens {
			now += time.Duration(1+rng.IntN(300)) * 100 * time.Microsecond
			for i, id := range ids {
				if id%97 == 5 && k == tokens/2 {
					c.Retried(id, now) // its gaps so far are dropped
					gaps[i] = gaps[i][:0]
				}
				if k > 0 && !(id%97 == 5 && k == tokens/2) {
					gaps[i] = append(gaps[i], ms(now-last))
				}
				c.Tokens(id, now, 1)
			}
			last = now
		}
		for i, id := range ids {
			switch {
			case id%31 == 3:
				c.Failed(id, now, "worker down")
			case id%53 == 7 && base+wave < requests: // a few stay in flight until the end
			default:
				c.Finished(id, now)
				want = append(want, gaps[i]...)
			}
		}
	}
	return want
}

// TestSettledITLEqualsEverySample: with enough samples to settle many times (the chunks of recent
// gaps fill and the completed requests' gaps move to the distribution of distinct values), the ITL stats
// equal describe over every sample of the completed requests, and Summary mid-run changes nothing.
func TestSettledITLEqualsEverySample(t *testing.T) {
	c := NewCollector()
	rng := rand.New(rand.NewPCG(1, 2))
	want := interleave(c, rng, 4200, 600) // 2.5 M samples: 38 chunks' worth, settled twice on the way
	_ = c.Summary()                       // settles too, mid-run for the requests still in flight
	if got, w := c.Summary().ITL, describe(want); got != w {
		t.Fatalf("ITL %+v, want %+v", got, w)
	}
}

// TestITLMemoryFollowsDistinctGaps: 2.5 M ITL samples taking 300 distinct values keep at most the
// chunks that trigger a settle, those the requests in flight fill, and the distinct values, not a 16-byte
// entry per sample (150 chunks).
func TestITLMemoryFollowsDistinctGaps(t *testing.T) {
	c := NewCollector()
	interleave(c, rand.New(rand.NewPCG(3, 4)), 4200, 600)
	live := 0 // entries of requests in flight
	for _, chunk := range c.gaps {
		for _, g := range chunk {
			if r := c.record(int(g.owner)); r != nil && r.state&ended == 0 {
				live++
			}
		}
	}
	limit := minSettle + 1 + (live+gapChunk-1)/gapChunk
	if n, d := len(c.gaps), len(c.itl.keys); n > limit || d > 300 {
		t.Fatalf("%d chunks of recent gaps (%d entries of requests in flight) and %d distinct settled values; want at most %d and 300", n, live, d, limit)
	}
}

// TestITLChunksFewWithManyDistinctGaps: 3.2 M ITL samples taking over a million distinct values (a long
// run's pass lengths, with a different delivery time per request) settle once a quarter as many new
// samples have come, so the chunks of recent gaps (256 KiB each), in use or kept for reuse, number about
// one per 4 × gapChunk distinct values, not one per gapChunk.
func TestITLChunksFewWithManyDistinctGaps(t *testing.T) {
	c := NewCollector()
	rng := rand.New(rand.NewPCG(9, 10))
	pass := time.Duration(0)
	const wave, tokens = 64, 500
	for base := 0; base < 100*wave; base += wave {
		for id := base; id < base+wave; id++ {
			c.Arrived(id, pass, 10, tokens)
		}
		for range tokens {
			pass += 2 * time.Millisecond
			for id := base; id < base+wave; id++ {
				c.Tokens(id, pass+time.Duration(rng.Int64N(int64(time.Millisecond))), 1)
			}
		}
		for id := base; id < base+wave; id++ {
			c.Finished(id, pass+time.Millisecond)
		}
	}
	c.settleGaps()
	held, d := len(c.gaps)+len(c.free), len(c.itl.keys)
	if limit := 2 + (d+4*gapChunk-1)/(4*gapChunk); held > limit || d < 1_000_000 {
		t.Fatalf("%d chunks of recent gaps held for %d distinct settled values; want over a million values, at most %d chunks", held, d, limit)
	}
}

// BenchmarkSettle settles 1,000 pending runs into 10^6 distinct values, a tenth of them new.
func BenchmarkSettle(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s samples
	for range 1_000_000 {
		s.add(rng.Uint64N(1<<40), 1)
	}
	s.settle()
	for b.Loop() {
		for j := range 1000 {
			d := s.keys[rng.IntN(len(s.keys))]
			if j%10 == 0 {
				d = rng.Uint64N(1 << 40)
			}
			s.add(d, 1)
		}
		s.settle()
	}
}

// BenchmarkSettleReplay settles as the 8-worker conversation replay does, 135 times a run: 27,000 pending
// runs (pass lengths under 134 ms, many repeated) into 25,000 distinct values.
func BenchmarkSettleReplay(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := make([]uint64, 40_000)
	for i := range lengths {
		lengths[i] = 5_000_000 + rng.Uint64N(1<<27-5_000_000)
	}
	var s samples
	for _, d := range lengths[:25_000] {
		s.add(d, 1)
	}
	s.settle()
	base := slices.Clone(s.keys)
	for b.Loop() {
		s.keys, s.counts = append(s.keys[:0], base...), s.counts[:len(base)]
		for range 27_000 {
			s.add(lengths[rng.IntN(len(lengths))], 1+uint32(rng.IntN(2)))
		}
		s.settle()
	}
}

// TestAddRecurringJoinsRuns: gaps added request after request, each request's the same pass lengths,
// make one pending run per length, not one per sample (a settle sorts fewer); with colliding memo
// entries and settles between, random keys settle to the same values and counts as add's.
func TestAddRecurringJoinsRuns(t *testing.T) {
	var s samples
	passes := []uint64{7_000_123, 7_000_456, 6_999_001, 7_000_123, 8_123_456}
	for range 50 { // 50 requests decoded by the same passes
		for _, d := range passes {
			s.addRecurring(d, 1)
		}
	}
	if len(s.newKeys) != 4 || s.newN != 250 || s.n != 250 {
		t.Fatalf("%d pending runs of %d samples (%d in all), want 4 runs of 250", len(s.newKeys), s.newN, s.n)
	}
	s.settle()
	if want := []uint64{6_999_001, 7_000_123, 7_000_456, 8_123_456}; !slices.Equal(s.keys, want) || !slices.Equal(s.counts, []uint64{50, 100, 50, 50}) {
		t.Fatalf("settled %v × %v", s.keys, s.counts)
	}

	rng := rand.New(rand.NewPCG(5, 6))
	var plain, memo samples
	for round := range 20 {
		for range 5000 {
			k, n := rng.Uint64N(3000), 1+rng.Uint32N(3)
			if round%2 == 1 {
				k = rng.Uint64()
			}
			plain.add(k, n)
			memo.addRecurring(k, n)
		}
		if len(memo.newKeys) > len(plain.newKeys) {
			t.Fatalf("round %d: %d pending runs with the memo, %d without", round, len(memo.newKeys), len(plain.newKeys))
		}
		plain.settle()
		memo.settle() // empties the memo
		if !slices.Equal(memo.keys, plain.keys) || !slices.Equal(memo.counts, plain.counts) || memo.n != plain.n {
			t.Fatalf("round %d: %d values settled (%d samples) with the memo, %d (%d) without", round, len(memo.keys), memo.n, len(plain.keys), plain.n)
		}
	}
}
