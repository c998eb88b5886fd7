package report

import (
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// seq returns 0, 10, 20, ... so a percentile's value names its index.
func seq(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(10 * i)
	}
	return xs
}

func TestPercentile(t *testing.T) {
	// Index = round((n−1)·p/100), half away from zero (reference §9).
	tests := []struct {
		n    int
		want [5]int // indexes for p50, p75, p90, p95, p99
	}{
		{1, [5]int{0, 0, 0, 0, 0}},
		{2, [5]int{1, 1, 1, 1, 1}}, // 0.5 rounds up
		{3, [5]int{1, 2, 2, 2, 2}}, // 1.5 rounds up
		{4, [5]int{2, 2, 3, 3, 3}}, // 1.5, 2.25, 2.7, 2.85, 2.97
		{5, [5]int{2, 3, 4, 4, 4}}, // 2, 3, 3.6, 3.8, 3.96
		{100, [5]int{50, 74, 89, 94, 98}},
	}
	for _, tt := range tests {
		xs := seq(tt.n)
		for i, p := range []int{50, 75, 90, 95, 99} {
			if got, want := percentile(xs, p), float64(10*tt.want[i]); got != want {
				t.Errorf("percentile(seq(%d), %d) = %v, want %v", tt.n, p, got, want)
			}
		}
	}
}

func TestPercentileMatchesMathRound(t *testing.T) {
	for n := 1; n <= 1000; n++ {
		xs := seq(n)
		for _, p := range []int{0, 1, 25, 50, 75, 90, 95, 99, 100} {
			want := xs[int(math.Round(float64(n-1)*float64(p)/100))]
			if got := percentile(xs, p); got != want {
				t.Fatalf("percentile(seq(%d), %d) = %v, want %v", n, p, got, want)
			}
		}
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		in   []float64
		want Stats
	}{
		{nil, Stats{}},
		{[]float64{7}, Stats{Count: 1, Mean: 7, Min: 7, Max: 7, P50: 7, P75: 7, P90: 7, P95: 7, P99: 7}},
		// Population std: √(Σ(x−mean)²/n), not /(n−1).
		{[]float64{2, 1}, Stats{Count: 2, Mean: 1.5, Min: 1, Max: 2, Std: 0.5, P50: 2, P75: 2, P90: 2, P95: 2, P99: 2}},
		{[]float64{9, 2, 4, 4, 5, 4, 7, 5}, Stats{Count: 8, Mean: 5, Min: 2, Max: 9, Std: 2, P50: 5, P75: 5, P90: 7, P95: 9, P99: 9}},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.in)
		if got := describe(in); got != tt.want {
			t.Errorf("describe(%v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// TestSamplesMatchDescribe: durations held as runs, sorted as integers, give the Stats of every sample's
// millisecond value, whatever their range (digits shared by every key are skipped) and run lengths.
func TestSamplesMatchDescribe(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, 100, 70000} {
		for _, gen := range []func() time.Duration{
			func() time.Duration { return time.Duration(rng.Int64N(int64(50 * time.Millisecond))) },
			func() time.Duration { return time.Duration(rng.Int64N(1 << 62)) },
			func() time.Duration { return time.Duration(rng.IntN(3)) * time.Second }, // ties, low digits equal
		} {
			for _, runs := range []int{1, 3} { // single samples only, or runs of 1 to 3
				var s samples
				var xs []float64
				for range n {
					d, c := gen(), 1+rng.IntN(runs)
					s.add(uint64(d), uint32(c))
					for range c {
						xs = append(xs, ms(d))
					}
				}
				if got, want := s.describe(nil, durationMs), describe(xs); got != want {
					t.Fatalf("n=%d, runs up to %d: %+v, want %+v", n, runs, got, want)
				}
			}
		}
	}
}

// TestAddJoinsEqualRuns: a key equal to the pending run just before it joins that run, unless its count
// would overflow; every sample is counted, and settles.
func TestAddJoinsEqualRuns(t *testing.T) {
	var s samples
	for _, r := range []struct {
		k uint64
		n uint32
	}{{5, 2}, {5, 3}, {7, 1}, {5, 1}, {9, math.MaxUint32 - 1}, {9, 1}, {9, 1}} {
		s.add(r.k, r.n)
	}
	if want := []uint64{5, 7, 5, 9, 9}; !slices.Equal(s.newKeys, want) {
		t.Errorf("pending keys %v, want %v", s.newKeys, want)
	}
	if want := []uint32{5, 1, 1, math.MaxUint32, 1}; !slices.Equal(s.newCounts, want) {
		t.Errorf("pending counts %v, want %v", s.newCounts, want)
	}
	if want := 8 + math.MaxUint32; s.n != want || s.newN != want {
		t.Errorf("%d samples, %d pending; want %d", s.n, s.newN, want)
	}
	s.settle()
	if !slices.Equal(s.keys, []uint64{5, 7, 9}) || !slices.Equal(s.counts, []uint64{6, 1, math.MaxUint32 + 1}) {
		t.Errorf("settled keys %v counts %v, want [5 7 9] [6 1 %d]", s.keys, s.counts, uint64(math.MaxUint32+1))
	}
}

// TestSettleMergesInPlace: settling 200 times into about 75,000 distinct values keeps each value once
// with its count, and holds the distinct values in about their own size (with append's slack), not in a
// second merge buffer sized by the values plus the pending runs, twice over.
func TestSettleMergesInPlace(t *testing.T) {
	type run struct {
		d uint64
		n uint32
	}
	rng := rand.New(rand.NewPCG(7, 8))
	batches := make([][]run, 200)
	var seen []uint64
	for b := range batches {
		for range 500 {
			r := run{rng.Uint64N(1 << 40), 1 + rng.Uint32N(3)}
			if rng.IntN(4) == 0 && len(seen) > 0 {
				r.d = seen[rng.IntN(len(seen))] // a value settled before
			}
			batches[b] = append(batches[b], r)
		}
		batches[b] = append(batches[b], run{batches[b][0].d, 1}) // a value pending twice
		for _, r := range batches[b] {
			seen = append(seen, r.d)
		}
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := new(samples)
	for _, b := range batches {
		for _, r := range b {
			s.add(r.d, r.n)
		}
		s.settle()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)

	want := map[uint64]uint64{}
	for _, b := range batches {
		for _, r := range b {
			want[r.d] += uint64(r.n)
		}
	}
	if keys := slices.Sorted(maps.Keys(want)); !slices.Equal(s.keys, keys) {
		t.Fatalf("%d distinct values settled, want %d (or not in order)", len(s.keys), len(keys))
	}
	for i, k := range s.keys {
		if s.counts[i] != want[k] {
			t.Fatalf("value %d: count %d, want %d", k, s.counts[i], want[k])
		}
	}
	// 16 bytes a distinct value, 1.25 times for append's growth, the pending runs' buffers and the
	// radix sort's digit counts (16 KiB).
	if held, limit := after.HeapAlloc-before.HeapAlloc, uint64(len(s.keys))*16*5/4+256<<10; held > limit {
		t.Errorf("%d distinct values hold %d bytes, want at most %d", len(s.keys), held, limit)
	}
	runtime.KeepAlive(s)
}

// describe is the reference the distributions are checked against: xs sorted (in place), then the sums
// over them one by one.
func describe(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var sq float64
	for _, x := range xs {
		d := x - mean
		sq += float64(d * d)
	}
	return Stats{Count: len(xs), Mean: mean, Min: xs[0], Max: xs[len(xs)-1], Std: math.Sqrt(sq / float64(len(xs))),
		P50: percentile(xs, 50), P75: percentile(xs, 75), P90: percentile(xs, 90), P95: percentile(xs, 95), P99: percentile(xs, 99)}
}

// percentile returns sorted[rank(len(sorted), p)].
func percentile(sorted []float64, p int) float64 { return sorted[rank(len(sorted), p)] }

// TestGallop: gallop finds what a bisection of the keys from i finds, for keys before, between, at and
// after the values, from every start.
func TestGallop(t *testing.T) {
	keys := []uint64{2, 3, 5, 5, 8, 13, 21, 34, 55, 89, 144}
	for i := 0; i <= len(keys); i++ {
		for k := uint64(0); k <= 150; k++ {
			want, _ := slices.BinarySearch(keys[i:], k)
			if got := gallop(keys, i, k); got != i+want {
				t.Fatalf("gallop(keys, %d, %d) = %d, want %d", i, k, got, i+want)
			}
		}
	}
	if got := gallop(nil, 0, 7); got != 0 {
		t.Fatalf("gallop(nil, 0, 7) = %d, want 0", got)
	}
}
