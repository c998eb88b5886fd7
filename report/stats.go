package report

import (
	"math"
	"slices"
	"time"
)

// Stats describes one latency distribution. All values are in milliseconds; an empty
// distribution is all zeros.
type Stats struct {
	Count int // number of samples; not part of the JSON report

	Mean float64
	Min  float64
	Max  float64
	Std  float64 // population standard deviation

	P50 float64
	P75 float64
	P90 float64
	P95 float64
	P99 float64
}

// describe computes Stats over xs, sorting xs in place.
//
// Sums run over the sorted samples, so the result does not depend on the order the samples
// were recorded in.
func describe(xs []float64) Stats { return new(floatSorter).describe(xs) }

// samples is a distribution of durations: each distinct value once, with how many times it occurs,
// sorted, plus the runs added since the last settle, in any order. A run of millions of ITL samples
// takes values that recur (a pass's length is every decoding request's gap), so the distinct values
// are far fewer than the samples, and settling now and then keeps memory to them.
type samples struct {
	keys   []uint64 // settled durations (non-negative), ascending, distinct
	counts []uint64
	n      int // samples, settled and pending

	newKeys   []uint64 // pending runs
	newCounts []uint32
	newN      int // samples in the pending runs

	radix radix
}

func (s *samples) add(d time.Duration, n int32) {
	s.newKeys = append(s.newKeys, uint64(d))
	s.newCounts = append(s.newCounts, uint32(n))
	s.n += int(n)
	s.newN += int(n)
}

// reserve makes room for n more pending runs.
func (s *samples) reserve(n int) {
	s.newKeys, s.newCounts = slices.Grow(s.newKeys, n), slices.Grow(s.newCounts, n)
}

// settle sorts the pending runs and merges them into the distinct values, in place: the distinct
// values are most of what a long run's ITL holds, so they are never copied into a second buffer.
func (s *samples) settle() {
	if len(s.newKeys) == 0 {
		return
	}
	var keys []uint64
	var counts []uint32 // nil: every pending run is one sample, and the sort need not move counts
	if s.newN == len(s.newKeys) {
		keys, _ = s.radix.sort(s.newKeys, nil)
	} else {
		keys, counts = s.radix.sort(s.newKeys, s.newCounts)
	}
	count := func(j int) uint64 {
		if counts == nil {
			return 1
		}
		return uint64(counts[j])
	}
	// Count the pending values not settled yet, each found by bisection (the settled values are many more
	// than a settle's, and the merge reads them all once), then merge from the back into the room they take.
	added, i := 0, 0
	for j, k := range keys {
		if j > 0 && keys[j-1] == k {
			continue
		}
		at, found := slices.BinarySearch(s.keys[i:], k)
		i += at
		if !found {
			added++
		}
	}
	old := len(s.keys)
	s.keys, s.counts = slices.Grow(s.keys, added)[:old+added], slices.Grow(s.counts, added)[:old+added]
	i, w := old-1, old+added // w: the first written slot; the values at w and after are final
	for j := len(keys) - 1; j >= 0; j-- {
		k := keys[j]
		for i >= 0 && s.keys[i] > k {
			w--
			s.keys[w], s.counts[w] = s.keys[i], s.counts[i]
			i--
		}
		switch {
		case w < len(s.keys) && s.keys[w] == k: // a run of a value just written
			s.counts[w] += count(j)
		case i >= 0 && s.keys[i] == k: // a settled value
			w--
			s.keys[w], s.counts[w] = k, s.counts[i]+count(j)
			i--
		default:
			w--
			s.keys[w], s.counts[w] = k, count(j)
		}
	}
	s.newKeys, s.newCounts, s.newN = s.newKeys[:0], s.newCounts[:0], 0
}

// describe computes the Stats of the durations' millisecond values. They sort as integers, in the
// millisecond values' order, and the sums run over the samples in that order, a value repeated as often
// as it occurs, so this equals describe over every sample.
func (s *samples) describe() Stats { return describeRuns(s.millis(), s.counts, s.n) }

// millis settles s and returns its distinct values in milliseconds, ascending; s.counts are their counts.
func (s *samples) millis() []float64 {
	s.settle()
	xs := make([]float64, len(s.keys))
	for i, k := range s.keys {
		xs[i] = ms(time.Duration(k))
	}
	return xs
}

// describeRuns computes Stats over n samples: the sorted values xs, value i occurring counts[i] times
// (counts nil: once each).
func describeRuns(xs []float64, counts []uint64, n int) Stats {
	if n == 0 {
		return Stats{}
	}
	times := func(i int) int {
		if counts == nil {
			return 1
		}
		return int(counts[i])
	}
	var sum float64
	for i, x := range xs {
		for range times(i) {
			sum += x
		}
	}
	mean := sum / float64(n)
	var sq float64
	for i, x := range xs {
		d := x - mean
		for range times(i) {
			// The conversion forbids fusing d*d into sq with an FMA (the spec allows that on
			// arm64), which would change the last bits and the golden files between machines.
			sq += float64(d * d)
		}
	}
	at := func(p int) float64 { return atRank(xs, counts, n, p) }
	return Stats{
		Count: n,
		Mean:  mean,
		Min:   xs[0],
		Max:   xs[len(xs)-1],
		Std:   math.Sqrt(sq / float64(n)),
		P50:   at(50),
		P75:   at(75),
		P90:   at(90),
		P95:   at(95),
		P99:   at(99),
	}
}

// atRank is the p-th percentile of n samples: the sorted values xs, value i occurring counts[i] times
// (counts nil: once each).
func atRank(xs []float64, counts []uint64, n, p int) float64 {
	if counts == nil {
		return percentile(xs, p)
	}
	r := rank(n, p)
	for i, c := range counts {
		if r < int(c) {
			return xs[i]
		}
		r -= int(c)
	}
	return xs[len(xs)-1]
}

// percentile returns sorted[rank(len(sorted), p)].
func percentile(sorted []float64, p int) float64 { return sorted[rank(len(sorted), p)] }

// rank is the index of the p-th percentile of n sorted samples: round((n−1)·p/100), rounding half away
// from zero, the nearest-rank rule of Dynamo's replay collector (no interpolation between samples). In
// integers, for non-negative values, (k+50)/100 is math.Round(k/100): exact, with no float error at the
// .5 ties.
func rank(n, p int) int { return ((n-1)*p + 50) / 100 }

// ms converts a duration to float milliseconds, the unit of every reported time.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// sortFloats sorts xs ascending (see floatSorter).
func sortFloats(xs []float64) { new(floatSorter).sort(xs) }

// floatSorter sorts float64s, keeping its buffers from one sort to the next. Large slices of non-negative
// numbers (latencies: a run pools millions of ITL samples) use an LSD radix sort on the IEEE bit patterns,
// whose order is the numbers' order for non-negative values: linear time instead of n log n. Anything
// else takes slices.Sort.
type floatSorter struct {
	keys  []uint64
	radix radix
}

// describe is describe with f's buffers: a report describes its distributions one after another.
func (f *floatSorter) describe(xs []float64) Stats {
	f.sort(xs)
	return describeRuns(xs, nil, len(xs))
}

func (f *floatSorter) sort(xs []float64) {
	if len(xs) < 1<<12 {
		slices.Sort(xs)
		return
	}
	for _, x := range xs {
		if !(x >= 0) { // negative or NaN
			slices.Sort(xs)
			return
		}
	}
	n := len(xs)
	f.keys = slices.Grow(f.keys[:0], n)[:n]
	for i, x := range xs {
		f.keys[i] = math.Float64bits(x)
	}
	sorted, _ := f.radix.sort(f.keys, nil)
	for i, k := range sorted {
		xs[i] = math.Float64frombits(k)
	}
}

// radix is an LSD radix sort's scratch, kept from one sort to the next.
type radix struct {
	tmp     []uint64
	tmpVals []uint32
	count   []int
}

// sort sorts keys ascending with 16-bit digits, skipping the digits every key shares (the high ones of
// small numbers), moving vals (nil, or one per key) along with their keys. The result is in the inputs
// or in the scratch.
func (x *radix) sort(keys []uint64, vals []uint32) ([]uint64, []uint32) {
	n := len(keys)
	if n < 2 {
		return keys, vals
	}
	x.tmp = slices.Grow(x.tmp[:0], n)[:n]
	tmp, tmpVals := x.tmp, []uint32(nil)
	if vals != nil {
		x.tmpVals = slices.Grow(x.tmpVals[:0], n)[:n]
		tmpVals = x.tmpVals
	}
	if x.count == nil {
		x.count = make([]int, 1<<16+1)
	}
	count := x.count
	for shift := uint(0); shift < 64; shift += 16 {
		clear(count)
		for _, k := range keys {
			count[(k>>shift)&0xffff+1]++
		}
		if count[(keys[0]>>shift)&0xffff+1] == len(keys) {
			continue // every key has the same digit here: nothing to move
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for i, k := range keys {
			d := (k >> shift) & 0xffff
			tmp[count[d]] = k
			if vals != nil {
				tmpVals[count[d]] = vals[i]
			}
			count[d]++
		}
		keys, tmp = tmp, keys
		vals, tmpVals = tmpVals, vals
	}
	return keys, vals
}
