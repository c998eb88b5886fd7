package report

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// tinySpill is a spill file with bounds small enough for a test to spill many runs and fold them.
func tinySpill(t *testing.T) *spillFile {
	sp := &spillFile{limit: 5, fanIn: 3, readBuf: 16, dir: t.TempDir()}
	t.Cleanup(func() { sp.close() })
	return sp
}

// same is float equality that takes NaN as equal to itself (a mean of +Inf and −Inf).
func same(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

func sameStats(a, b Stats) bool {
	return a.Count == b.Count && same(a.Mean, b.Mean) && same(a.Min, b.Min) && same(a.Max, b.Max) && same(a.Std, b.Std) &&
		same(a.P50, b.P50) && same(a.P75, b.P75) && same(a.P90, b.P90) && same(a.P95, b.P95) && same(a.P99, b.P99)
}

// TestSpilledSamplesMatchSort: float samples added one by one to a distribution that spills every 5
// distinct values and folds its runs 3 at a time, with some held apart (extra), give the Stats of sorting them
// all (describe), bit for bit, and the sorted sample at every rank: random values, ties, extremes,
// negative numbers and zeros of both signs, one sample, all equal.
func TestSpilledSamplesMatchSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	gens := map[string]func(i int) float64{
		"random":    func(int) float64 { return rng.Float64() * 1000 },
		"ties":      func(int) float64 { return float64(rng.IntN(4)) / 3 },
		"all equal": func(int) float64 { return 2.5 },
		"extremes": func(int) float64 {
			return []float64{0, math.SmallestNonzeroFloat64, math.MaxFloat64, 1e-300, 1e300, 1, math.Nextafter(1, 2)}[rng.IntN(7)]
		},
		"signed": func(int) float64 {
			return []float64{-math.MaxFloat64, -3, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0, 2, math.Inf(1)}[rng.IntN(7)]
		},
		"ascending":  func(i int) float64 { return float64(i) },
		"descending": func(i int) float64 { return float64(-i) },
	}
	for name, gen := range gens {
		for _, n := range []int{0, 1, 2, 6, 50, 1000} {
			s := samples{spill: tinySpill(t)}
			var xs []float64
			var extra []uint64
			for i := range n {
				x := gen(i)
				xs = append(xs, x)
				if i%7 == 3 {
					extra = append(extra, floatKey(x)) // a request held, not retired
					continue
				}
				s.add(floatKey(x), 1)
				if i%4 == 0 {
					s.settle()
				}
			}
			slices.Sort(extra)
			if n >= 50 && len(s.runs) == 0 && !strings.HasPrefix(name, "ties") && name != "all equal" {
				t.Fatalf("%s, n=%d: nothing spilled", name, n)
			}
			sorted := slices.Clone(xs)
			slices.Sort(sorted)
			want := describe(slices.Clone(xs))
			for range 2 { // reading the runs again gives the same
				if got := s.describe(extra, keyFloat); !sameStats(got, want) {
					t.Fatalf("%s, n=%d: %+v, want %+v", name, n, got, want)
				}
			}
			ranks := make([]int, n)
			for i := range ranks {
				ranks[i] = i
			}
			for i, x := range s.atRanks(extra, keyFloat, ranks) {
				if !same(x, sorted[i]) {
					t.Fatalf("%s, n=%d: rank %d = %v, want %v", name, n, i, x, sorted[i])
				}
			}
			if len(s.runs) > 1 {
				t.Fatalf("%s, n=%d: %d runs after a walk; want them folded into one", name, n, len(s.runs))
			}
			if err := s.spill.readErr; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSpilledRunsMatchDescribe: durations with counts (ITL runs), spilled and folded, give the Stats of
// every sample's millisecond value, as samples held in memory do.
func TestSpilledRunsMatchDescribe(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 100, 20000} {
		spilled, held := samples{spill: tinySpill(t)}, samples{}
		var xs []float64
		for i := range n {
			d, c := time.Duration(rng.Int64N(int64(50*time.Millisecond))), 1+rng.IntN(3)
			if i%3 == 0 {
				d = time.Duration(rng.IntN(20)) * time.Millisecond // recurring
			}
			for _, s := range []*samples{&spilled, &held} {
				s.add(uint64(d), uint32(c))
				if i%10 == 9 {
					s.settle()
				}
			}
			for range c {
				xs = append(xs, ms(d))
			}
		}
		want := describe(xs)
		if got := spilled.describe(nil, durationMs); got != want {
			t.Fatalf("n=%d: spilled %+v, want %+v", n, got, want)
		}
		if got := held.describe(nil, durationMs); got != want {
			t.Fatalf("n=%d: in memory %+v, want %+v", n, got, want)
		}
	}
}

// TestForgetSpillingKeepsTheReport: a forgetting collector whose samples spill every 5 distinct values
// gives the report, percentiles and quantiles of one that keeps every record, mid-run and at the end.
func TestForgetSpillingKeepsTheReport(t *testing.T) {
	for seed := range uint64(3) {
		keep, forget := NewCollector(), NewCollector()
		forget.Forget(nil)
		sp := forget.spill
		sp.limit, sp.fanIn, sp.readBuf, sp.dir = 5, 3, 16, t.TempDir()
		compare := func() {
			t.Helper()
			if a, b := keep.Summary(), forget.Summary(); !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d: Summary\n%+v\nwant\n%+v", seed, b, a)
			}
			for _, m := range []Metric{TTFT, ITL, E2E} {
				for _, p := range []int{0, 1, 50, 99, 100} {
					a, aok := keep.Percentile(m, p)
					b, bok := forget.Percentile(m, p)
					if a != b || aok != bok {
						t.Fatalf("seed %d: Percentile(%s, %d) = %v, %v; want %v, %v", seed, m, p, b, bok, a, aok)
					}
				}
			}
			at, ai, ae := keep.Quantiles(50)
			bt, bi, be := forget.Quantiles(50)
			if !reflect.DeepEqual([][]float64{at, ai, ae}, [][]float64{bt, bi, be}) {
				t.Fatalf("seed %d: Quantiles differ", seed)
			}
		}
		drive(rand.New(rand.NewPCG(seed, 23)), 2000, compare, keep, forget)
		compare()
		if sp.f == nil || forget.done.cols[e2eLatency].runs == nil || forget.itl.runs == nil {
			t.Fatalf("seed %d: the samples did not spill", seed)
		}
		if err := errorsOf(forget); err != nil {
			t.Fatal(err)
		}
		if err := forget.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func errorsOf(c *Collector) error {
	if err := c.SpillErr(); err != nil {
		return err
	}
	return c.Err()
}

// TestSpillFallsBackToMemory: when the temporary file cannot be created, the samples stay in memory, the
// report is the same, and SpillErr says why; a run whose file cannot be read back reports it
// (Err) rather than a silent, wrong report.
func TestSpillFallsBackToMemory(t *testing.T) {
	keep, forget := NewCollector(), NewCollector()
	forget.Forget(nil)
	forget.spill.limit, forget.spill.dir = 5, filepath.Join(t.TempDir(), "missing")
	drive(rand.New(rand.NewPCG(4, 5)), 500, func() {}, keep, forget)
	if a, b := keep.Summary(), forget.Summary(); !reflect.DeepEqual(a, b) {
		t.Fatalf("Summary\n%+v\nwant\n%+v", b, a)
	}
	err := forget.SpillErr()
	if err == nil || !strings.Contains(err.Error(), "cannot create a temporary file") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("SpillErr = %v; want cannot create a temporary file in the missing directory", err)
	}
	if forget.Err() != nil || len(forget.itl.runs) > 0 {
		t.Errorf("Err = %v, %d runs; want no error and none", forget.Err(), len(forget.itl.runs))
	}

	lost := NewCollector()
	lost.Forget(nil)
	lost.spill.limit, lost.spill.dir = 5, t.TempDir()
	drive(rand.New(rand.NewPCG(4, 5)), 500, func() {}, lost)
	if err := lost.spill.f.Close(); err != nil { // behind the collector's back
		t.Fatal(err)
	}
	lost.Summary()
	if err := lost.Err(); err == nil || !strings.Contains(err.Error(), "reading back the latency samples") {
		t.Errorf("Err after the file was lost = %v; want an error reading the samples back", err)
	}
}

// TestSpillLeavesNoFile: the temporary file is unlinked as soon as it is created, so that no way of ending
// the process leaves it behind.
func TestSpillLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	c := NewCollector()
	var records bytes.Buffer
	c.Forget(&records)
	c.spill.limit, c.spill.dir = 5, dir
	drive(rand.New(rand.NewPCG(6, 7)), 300, func() {}, c)
	c.Summary()
	if c.spill.f == nil {
		t.Fatal("nothing spilled")
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) > 0 {
		t.Errorf("files left in the temporary directory while the run holds its samples: %v", files)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMergeVisitsInOrder: merging 0 to 70 cursors of sorted keys (some empty, many sharing keys) visits
// every key of every cursor once, in ascending order, with its count.
func TestMergeVisitsInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for k := range 71 {
		cs := make([]cursor, k)
		var want []uint64
		for i := range cs {
			keys := make([]uint64, rng.IntN(40))
			counts := make([]uint64, len(keys))
			for j := range keys {
				keys[j], counts[j] = rng.Uint64N(200), 1+rng.Uint64N(5)
			}
			slices.Sort(keys)
			for j, key := range keys {
				for range counts[j] {
					want = append(want, key)
				}
			}
			cs[i] = cursor{keys: keys, counts: counts}
		}
		slices.Sort(want)
		var got []uint64
		merge(cs, func(key, count uint64) {
			for range count {
				got = append(got, key)
			}
		})
		if !slices.Equal(got, want) {
			t.Fatalf("%d cursors: merged %d keys %v..., want %d %v...", k, len(got), got[:min(8, len(got))], len(want), want[:min(8, len(want))])
		}
	}
}

// BenchmarkMerge merges 48 runs of 40,000 keys out of 300,000 values, as the 8-worker conversation
// replay's ITL summary folds its spilled runs.
func BenchmarkMerge(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	runs := make([][]uint64, 48)
	for i := range runs {
		for range 40_000 {
			runs[i] = append(runs[i], 5_000_000+rng.Uint64N(300_000)*50)
		}
		slices.Sort(runs[i])
		runs[i] = slices.Compact(runs[i])
	}
	cs := make([]cursor, len(runs))
	var sum uint64
	for b.Loop() {
		for i, r := range runs {
			cs[i] = cursor{keys: r}
		}
		merge(cs, func(k, c uint64) { sum += c })
	}
}
