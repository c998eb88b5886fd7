package report

import (
	"encoding/binary"
	"iter"
	"math"
	"math/bits"
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
// are far fewer than the samples, and settling now and then keeps memory to them. The settled values are
// held as a stream of varints, each value's difference from the one before and its count: sorted
// durations lie close, so a value takes a few bytes rather than 16, and a long run's distinct values
// (one or so per request) grow the heap by little.
type samples struct {
	settled  []byte // per distinct value, ascending: uvarint(value − previous value), uvarint(count)
	distinct int    // values in settled
	n        int    // samples, settled and pending

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

// settle sorts the pending runs and merges them into the settled values: once to size the new stream,
// once to write it, so that it takes its own size and no slack.
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
	size, distinct := 0, 0
	s.merge(keys, counts, func(d, c uint64) {
		size += uvarintLen(d) + uvarintLen(c)
		distinct++
	})
	out := make([]byte, 0, size)
	s.merge(keys, counts, func(d, c uint64) {
		out = binary.AppendUvarint(binary.AppendUvarint(out, d), c)
	})
	s.settled, s.distinct = out, distinct
	s.newKeys, s.newCounts, s.newN = s.newKeys[:0], s.newCounts[:0], 0
}

// merge calls emit with each value of the settled stream and of the sorted pending runs keys (counts[j]
// samples each; counts nil: one), in ascending order, once per distinct value with its total count, as
// its difference from the value before.
func (s *samples) merge(keys []uint64, counts []uint32, emit func(d, c uint64)) {
	r := valueReader{b: s.settled}
	more := r.next()
	prev := uint64(0)
	for j := 0; more || j < len(keys); {
		var k, c uint64
		if j < len(keys) && (!more || keys[j] <= r.k) {
			for k = keys[j]; j < len(keys) && keys[j] == k; j++ {
				c++
				if counts != nil {
					c += uint64(counts[j]) - 1
				}
			}
			if more && r.k == k {
				c += r.c
				more = r.next()
			}
		} else {
			k, c = r.k, r.c
			more = r.next()
		}
		emit(k-prev, c)
		prev = k
	}
}

// uvarintLen is the length of binary.AppendUvarint's encoding of v.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// valueReader reads a settled stream: next moves to its next value k, occurring c times.
type valueReader struct {
	b    []byte
	k, c uint64
}

func (r *valueReader) next() bool {
	if len(r.b) == 0 {
		return false
	}
	d, n := binary.Uvarint(r.b)
	c, m := binary.Uvarint(r.b[n:])
	r.b, r.k, r.c = r.b[n+m:], r.k+d, c
	return true
}

// runs settles s and yields its distinct values in milliseconds, ascending, with their counts.
func (s *samples) runs() iter.Seq2[float64, uint64] {
	s.settle()
	return func(yield func(float64, uint64) bool) {
		r := valueReader{b: s.settled}
		for r.next() {
			if !yield(ms(time.Duration(r.k)), r.c) {
				return
			}
		}
	}
}

// describe computes the Stats of the durations' millisecond values. They sort as integers, in the
// millisecond values' order, and the sums run over the samples in that order, a value repeated as often
// as it occurs, so this equals describe over every sample.
func (s *samples) describe() Stats { return describeRuns(s.runs(), s.n) }

// each yields the sorted values xs, once each, as runs.
func each(xs []float64) iter.Seq2[float64, uint64] {
	return func(yield func(float64, uint64) bool) {
		for _, x := range xs {
			if !yield(x, 1) {
				return
			}
		}
	}
}

// describeRuns computes Stats over n samples: the sorted values runs yields, each with how many times
// it occurs. It reads them twice.
func describeRuns(runs iter.Seq2[float64, uint64], n int) Stats {
	if n == 0 {
		return Stats{}
	}
	ps := [...]int{50, 75, 90, 95, 99}
	var at [len(ps)]float64
	var sum, first, last float64
	seen, next := 0, 0 // samples before the current run; the next percentile to find
	for x, c := range runs {
		if seen == 0 {
			first = x
		}
		for range c {
			sum += x
		}
		seen += int(c)
		for ; next < len(ps) && rank(n, ps[next]) < seen; next++ {
			at[next] = x
		}
		last = x
	}
	mean := sum / float64(n)
	var sq float64
	for x, c := range runs {
		d := x - mean
		for range c {
			// The conversion forbids fusing d*d into sq with an FMA (the spec allows that on
			// arm64), which would change the last bits and the golden files between machines.
			sq += float64(d * d)
		}
	}
	return Stats{
		Count: n,
		Mean:  mean,
		Min:   first,
		Max:   last,
		Std:   math.Sqrt(sq / float64(n)),
		P50:   at[0],
		P75:   at[1],
		P90:   at[2],
		P95:   at[3],
		P99:   at[4],
	}
}

// atRank is the p-th percentile of n samples: the sorted values runs yields, with their counts.
func atRank(runs iter.Seq2[float64, uint64], n, p int) float64 {
	r, seen := rank(n, p), 0
	for x, c := range runs {
		if seen += int(c); r < seen {
			return x
		}
	}
	panic("report: atRank: fewer samples than n")
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
	return describeRuns(each(xs), len(xs))
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
