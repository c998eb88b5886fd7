package report

import (
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

// samples is a distribution of ordered keys (durations in nanoseconds, or floatKey's float64s): each
// distinct key once, with how many times it occurs, sorted, plus the runs added since the last settle,
// in any order. A run of millions of ITL samples takes values that recur (a pass's length is every
// decoding request's gap), so the distinct values are far fewer than the samples, and settling now and
// then keeps memory to them. With a spill file (a compact collector's), settled values beyond the
// file's limit go to it as a sorted run, so that memory stays bounded however long the run: the
// statistics walk the runs and the values in memory merged, in order (walk).
type samples struct {
	keys   []uint64 // settled keys, ascending, distinct
	counts []uint64
	n      int // samples, spilled, settled and pending

	newKeys   []uint64 // pending runs
	newCounts []uint32
	newN      int // samples in the pending runs

	radix *radix     // sort scratch, shared by a collector's distributions; nil: made on first use
	memo  *recurMemo // addRecurring's; nil: made on first use
	spill *spillFile // nil: every sample stays in memory
	runs  []run      // spilled, each ascending
	// recurring says the values recur all through a run (ITL gaps: pass lengths), so that it keeps four times
	// the spill file's limit in memory: a run then holds a longer stretch of the run's samples once each,
	// and the runs repeat fewer values.
	recurring bool
}

// addFloat adds a sample of x, settling the new keys once they reach the spill's limit: what keeps a
// float distribution's memory bounded (ITL's gaps settle in bulk instead, settleGaps).
func (s *samples) addFloat(x float64) {
	s.add(floatKey(x), 1)
	if s.spill != nil && len(s.newKeys) >= s.spill.limit {
		s.settle()
	}
}

// add adds n samples of k; a key equal to the pending run just before it joins that run (ITL's
// settleGaps adds a pass's gap for every request the pass decoded, one after another), so that settle
// sorts fewer.
func (s *samples) add(k uint64, n uint32) {
	s.n += int(n)
	s.newN += int(n)
	if m := len(s.newKeys) - 1; m >= 0 && s.newKeys[m] == k && s.newCounts[m] <= math.MaxUint32-n {
		s.newCounts[m] += n
		return
	}
	s.newKeys = append(s.newKeys, k)
	s.newCounts = append(s.newCounts, n)
}

// recurMemo remembers, by a hash of a key, the pending run that has it, so that a key recurring among a
// settle's samples (a pass's length is the gap of every request it decoded, added request after request)
// adds to that run rather than making another one to sort. It holds the keys too, so that a lookup stays
// in its 24 KiB; settle empties it with the runs.
type recurMemo struct {
	key [1 << recurBits]uint64
	at  [1 << recurBits]int32 // the run's index + 1; 0: none
}

const recurBits = 11

// addRecurring is add, finding a pending run of k in the memo first.
func (s *samples) addRecurring(k uint64, n uint32) {
	if s.memo == nil {
		s.memo = new(recurMemo)
	}
	m := s.memo
	h := k * 0x9e3779b97f4a7c15 >> (64 - recurBits)
	if at := m.at[h] - 1; at >= 0 && m.key[h] == k && s.newCounts[at] <= math.MaxUint32-n {
		s.n += int(n)
		s.newN += int(n)
		s.newCounts[at] += n
		return
	}
	s.add(k, n)
	m.key[h], m.at[h] = k, int32(len(s.newKeys)) // the last run has k, whether add made it or joined it
}

// reserve makes room for n more pending runs.
func (s *samples) reserve(n int) {
	s.newKeys, s.newCounts = slices.Grow(s.newKeys, n), slices.Grow(s.newCounts, n)
}

// settle sorts the pending runs and merges them into the distinct values, in place: the distinct
// values are most of what a long run's ITL holds, so they are never copied into a second buffer. When
// they reach the spill file's limit they go to it, as one run.
func (s *samples) settle() {
	if len(s.newKeys) == 0 {
		return
	}
	if s.radix == nil {
		s.radix = new(radix)
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
	// Count the pending values not settled yet, each found by galloping from the last one found (a settle's
	// values may be far fewer than the settled ones, or as many), then merge from the back into the room
	// they take.
	added, i := 0, 0
	for j, k := range keys {
		if j > 0 && keys[j-1] == k {
			continue
		}
		i = gallop(s.keys, i, k)
		if i == len(s.keys) || s.keys[i] != k {
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
	if s.memo != nil {
		clear(s.memo.at[:])
	}
	if s.spill != nil && (len(s.keys) >= s.spill.limit && !s.recurring || len(s.keys) >= 4*s.spill.limit) {
		if r, ok := s.spill.write(s.keys, s.counts); ok {
			s.runs = append(s.runs, r)
			s.keys, s.counts = s.keys[:0], s.counts[:0]
		}
	}
}

// gallop returns the first index from i of ascending keys whose key is at least k (len(keys) if none):
// steps that double from i bracket it, and bisection finds it in the bracket, so a key near i costs a few
// comparisons and a far one twice a bisection's.
func gallop(keys []uint64, i int, k uint64) int {
	lo, step := i, 1 // keys[lo-1] < k, when lo > i
	for lo+step-1 < len(keys) && keys[lo+step-1] < k {
		lo += step
		step *= 2
	}
	hi := min(lo+step-1, len(keys)) // keys[hi] >= k, or hi is the end
	at, _ := slices.BinarySearch(keys[lo:hi], k)
	return lo + at
}

// walk settles s and visits its samples and extra's (ascending keys, one sample each) in ascending key
// order, each key with its count (a key may come more than once, from different runs): the order every
// statistic is computed in. It stops early only when reading a spilled run fails (s.spill.readErr).
func (s *samples) walk(extra []uint64, visit func(k, count uint64)) {
	s.settle()
	if s.spill != nil {
		s.runs = s.spill.fold(s.runs)
	}
	cs := make([]cursor, 0, len(s.runs)+2)
	for _, r := range s.runs {
		cs = append(cs, s.spill.cursor(r))
	}
	cs = append(cs, cursor{keys: s.keys, counts: s.counts}, cursor{keys: extra})
	merge(cs, visit)
}

// describe computes the Stats of the samples and extra's (see walk), each key's number being value(key).
func (s *samples) describe(extra []uint64, value func(uint64) float64) Stats {
	return summarize(s.n+len(extra), func(visit func(x float64, count uint64)) {
		s.walk(extra, func(k, c uint64) { visit(value(k), c) })
	})
}

// atRanks returns the values of the samples and extra's (see walk) at the ranks given, ascending, in the
// sorted samples: value(key) of the key at each.
func (s *samples) atRanks(extra []uint64, value func(uint64) float64, ranks []int) []float64 {
	out := make([]float64, len(ranks))
	j, below := 0, 0
	s.walk(extra, func(k, c uint64) {
		for j < len(ranks) && ranks[j] < below+int(c) {
			out[j] = value(k)
			j++
		}
		below += int(c)
	})
	return out
}

// durationMs is an ITL key's number: a duration in milliseconds.
func durationMs(k uint64) float64 { return ms(time.Duration(k)) }

// floatKey maps a float64 to a key whose unsigned order is the numbers' order (−0 just below +0; NaN,
// which no latency is, at the ends); keyFloat maps it back.
func floatKey(x float64) uint64 {
	b := math.Float64bits(x)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

func keyFloat(k uint64) float64 {
	if k>>63 != 0 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// summarize computes Stats over n samples that walk visits in ascending order, a value with how many
// times it occurs (a value may come in more than one visit, one after the other). walk is called twice:
// for the sum, then for the squared deviations from the mean. The sums run over the samples one by one in
// that order, whatever holds them, so every holder of the same samples gets the same Stats, bit for bit.
func summarize(n int, walk func(visit func(x float64, count uint64))) Stats {
	if n == 0 {
		return Stats{}
	}
	ps := [...]int{50, 75, 90, 95, 99}
	var ranks [len(ps)]int
	for i, p := range ps {
		ranks[i] = rank(n, p)
	}
	var vals [len(ps)]float64
	var sum, lo, hi float64
	j, below := 0, 0
	walk(func(x float64, c uint64) {
		if below == 0 {
			lo = x
		}
		hi = x
		acc := sum // a local: the loop runs in a register, not through the captured variable
		for range c {
			acc += x
		}
		sum = acc
		for j < len(ranks) && ranks[j] < below+int(c) {
			vals[j] = x
			j++
		}
		below += int(c)
	})
	mean := sum / float64(n)
	var sq float64
	walk(func(x float64, c uint64) {
		d := x - mean
		acc := sq
		for range c {
			// The conversion forbids fusing d*d into sq with an FMA (the spec allows that on
			// arm64), which would change the last bits and the golden files between machines.
			acc += float64(d * d)
		}
		sq = acc
	})
	return Stats{
		Count: n,
		Mean:  mean,
		Min:   lo,
		Max:   hi,
		Std:   math.Sqrt(sq / float64(n)),
		P50:   vals[0],
		P75:   vals[1],
		P90:   vals[2],
		P95:   vals[3],
		P99:   vals[4],
	}
}

// rank is the index of the p-th percentile of n sorted samples: round((n−1)·p/100), rounding half away
// from zero, the nearest-rank rule of Dynamo's replay collector (no interpolation between samples). In
// integers, for non-negative values, (k+50)/100 is math.Round(k/100): exact, with no float error at the
// .5 ties.
func rank(n, p int) int { return ((n-1)*p + 50) / 100 }

// ms converts a duration to float milliseconds, the unit of every reported time.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// radix is an LSD radix sort's scratch, kept from one sort to the next.
type radix struct {
	tmp     []uint64
	tmpVals []uint32
	count   []int
}

// radixBits is the width of a digit: 2,048 counts (16 KiB) stay in the L1 cache, where a settle's tens of
// thousands of keys would leave most of 65,536 counts untouched, and three digits cover pass lengths up to
// 8.6 s.
const radixBits = 11

// sort sorts keys ascending by digits of radixBits, over the bits where the keys differ only, moving vals
// (nil, or one per key) along with their keys. The result is in the inputs or in the scratch.
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
		x.count = make([]int, 1<<radixBits+1)
	}
	count := x.count
	or, and := uint64(0), ^uint64(0)
	for _, k := range keys {
		or, and = or|k, and&k
	}
	differ := or ^ and // the bits some keys have and others lack: the others order nothing
	const mask = 1<<radixBits - 1
	for shift := uint(bits.TrailingZeros64(differ)); shift < 64 && differ>>shift != 0; shift += radixBits {
		clear(count)
		for _, k := range keys {
			count[(k>>shift)&mask+1]++
		}
		if count[(keys[0]>>shift)&mask+1] == len(keys) {
			continue // every key has the same digit here: nothing to move
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for i, k := range keys {
			d := (k >> shift) & mask
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
