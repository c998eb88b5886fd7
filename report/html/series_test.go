package html

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/report/chart"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timeline"
)

const sec = time.Second

func TestGrid(t *testing.T) {
	g := newGrid(10*sec, 4) // 2.5 s buckets
	if g.width != 2500*time.Millisecond {
		t.Fatalf("width %v, want 2.5s", g.width)
	}
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{{0, 0}, {2499 * time.Millisecond, 0}, {2500 * time.Millisecond, 1}, {10 * sec, 3}, {time.Hour, 3}, {-sec, 0}} {
		if got := g.bucket(tc.at); got != tc.want {
			t.Errorf("bucket(%v) = %d, want %d", tc.at, got, tc.want)
		}
	}
	if got, want := g.centers(), []float64{1.25, 3.75, 6.25, 8.75}; !slices.Equal(got, want) {
		t.Errorf("centers = %v, want %v", got, want)
	}
	if g := newGrid(10, 4); g.width != 3 { // rounded up, so 4 buckets cover the run
		t.Errorf("newGrid(10ns, 4) width %v, want 3ns", g.width)
	}
	if g := newGrid(0, 4); g.width != 1 {
		t.Errorf("newGrid(0, 4) width %v, want 1ns", g.width)
	}
}

func TestLevel(t *testing.T) {
	l := newLevel(newGrid(10*sec, 5))        // 2 s buckets
	l.hold(1*sec, 5*sec, 4)                  // 1 s of bucket 0, all of 1, 1 s of 2
	l.hold(5*sec, 5500*time.Millisecond, 10) // half a second of bucket 2
	l.hold(9*sec, 9*sec, 7)                  // an empty interval: nothing
	l.hold(9*sec, 11*sec, 3)                 // across the end: the 1 s inside it
	l.hold(11*sec, 12*sec, 5)                // past the end: nothing
	if got, want := l.mean(), []float64{2, 4, 4.5, 0, 1.5}; !slices.Equal(got, want) {
		t.Errorf("mean = %v, want %v", got, want)
	}
	if got, want := l.peak, []float64{4, 4, 10, 0, 3}; !slices.Equal(got, want) {
		t.Errorf("peak = %v, want %v", got, want)
	}
}

func TestRateRatioSamples(t *testing.T) {
	g := newGrid(4*sec, 2) // 2 s buckets
	r := newRate(g)
	r.add(0, 3)
	r.add(1999*time.Millisecond, 5)
	r.add(3*sec, 1)
	if got, want := r.perSecond(), []float64{4, 0.5}; !slices.Equal(got, want) {
		t.Errorf("rate = %v, want %v", got, want)
	}
	q := newRatio(g)
	q.add(sec, 1, 4)
	q.add(sec, 2, 4)
	if got := q.values(); got[0] != 3.0/8 || !math.IsNaN(got[1]) {
		t.Errorf("ratio = %v, want [0.375 NaN]", got)
	}
	s := newSamples(g)
	s.add(3*sec, 10)
	s.add(3*sec, 30)
	if got := s.sum.values(); !math.IsNaN(got[0]) || got[1] != 20 {
		t.Errorf("samples mean = %v, want [NaN 20]", got)
	}
	if got := s.max(); !math.IsNaN(got[0]) || got[1] != 30 {
		t.Errorf("samples max = %v, want [NaN 30]", got)
	}
	if got, want := quantiles([]float64{3, 1, 2}, 4), []float64{1, 2, 2, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("quantiles = %v, want %v", got, want)
	}
}

// TestBucketize feeds a recorder two passes of a two-rank worker and checks every series.
func TestBucketize(t *testing.T) {
	rec := &timeline.Recorder{}
	out := func(id uint64, n int, done bool) sched.Output {
		return sched.Output{ID: id, Tokens: make([]uint32, n), Done: done}
	}
	rec.Pass(&sim.ObservedPass{Pool: "agg", Worker: 0, Start: 0, End: sec,
		Ranks: []engine.RankPass{
			{Rank: 0, Pass: &sched.Pass{Outputs: []sched.Output{out(1, 1, false), out(2, 1, false)}, Preempted: []uint64{3}}},
			{Rank: 1, Pass: &sched.Pass{Outputs: []sched.Output{out(4, 2, true)}}},
		},
		Metrics: []sched.Metrics{
			{Running: 2, Waiting: 1, ActiveBlocks: 30, TotalBlocks: 80, PrefixQueries: 100, PrefixHits: 50},
			{Running: 1, Waiting: 0, ActiveBlocks: 10, TotalBlocks: 80, PrefixQueries: 0, PrefixHits: 0},
		}})
	rec.Pass(&sim.ObservedPass{Pool: "agg", Worker: 0, Start: 3 * sec, End: 4 * sec,
		Ranks: []engine.RankPass{{Rank: 1, Pass: &sched.Pass{Outputs: []sched.Output{out(5, 1, true)}}}},
		Metrics: []sched.Metrics{
			{Running: 0, Waiting: 0, ActiveBlocks: 0, TotalBlocks: 80, PrefixQueries: 100, PrefixHits: 50},
			{Running: 1, Waiting: 0, ActiveBlocks: 20, TotalBlocks: 80, PrefixQueries: 200, PrefixHits: 50},
		}})
	// The worker failed and came back with a new engine, whose counters start from 0 again.
	rec.Pass(&sim.ObservedPass{Pool: "agg", Worker: 0, Start: 5 * sec, End: 5 * sec,
		Metrics: []sched.Metrics{{TotalBlocks: 80, PrefixQueries: 10, PrefixHits: 10}, {TotalBlocks: 80}}})
	rec.Transferred(9, sec, 1500*time.Millisecond)

	// 2 s buckets. The engine reports the state after each pass, held to the next pass; during a pass,
	// the requests finishing at its end run too. Pass 1 [0, 1 s): 1 waiting, 3+1 running, KV 40/160;
	// until pass 2, 1 waiting, 3 running. Pass 2 [3 s, 4 s): 1+1 running, KV 20/160, held to the restart
	// at 5 s; after the last pass, nothing.
	s := bucketize(rec, 6*sec, 3)
	for _, tc := range []struct {
		name      string
		got, want []float64
	}{
		{"output tokens/s", s.throughput.perSecond(), []float64{2, 0, 0.5}}, // 4 tokens at 1 s, 1 at 4 s
		{"waiting mean", s.workers[0].waiting.mean(), []float64{1, 0.5, 0}},
		{"running mean", s.workers[0].running.mean(), []float64{3.5, 2.5, 0.5}}, // (4·1 + 3·1)/2, (3·1 + 2·1)/2, 1·1/2
		{"running max", s.workers[0].running.peak, []float64{4, 3, 1}},
		{"kv mean", s.workers[0].kvUsed.mean(), []float64{0.25, 0.1875, 0.0625}}, // (0.25·1 + 0.125·1)/2, 0.125·1/2
		{"preemptions/s", s.preempt["agg"].perSecond(), []float64{0.5, 0, 0}},
		{"transfer ms", s.transfers.all, []float64{500}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Prefix hits: 50 of 100 in the first pass, 50 of the 200 rank 1 looked up by the second, 10 of 10
	// after the restart.
	if got := s.prefix["agg"].values(); !slices.Equal(got, []float64{0.5, 0.25, 1}) {
		t.Errorf("prefix hit rate = %v, want [0.5 0.25 1]", got)
	}
	if s.workers[0].name != "worker 0" || !slices.Equal(s.pools, []string{"agg"}) {
		t.Errorf("names %q, pools %q", s.workers[0].name, s.pools)
	}
}

func TestSparse(t *testing.T) {
	if k := sparse([]float64{1, 2}); k != chart.Line {
		t.Errorf("a full series is drawn as %v, want a line", k)
	}
	if k := sparse([]float64{1, math.NaN()}); k != chart.Points {
		t.Errorf("a series with an empty bucket is drawn as %v, want points", k)
	}
}

func TestCDFScale(t *testing.T) {
	for _, tc := range []struct {
		q   []float64
		log bool
	}{
		{[]float64{5, 6, 200, 15000}, true},
		{[]float64{5, 6, 200, 499}, false}, // under two decades
		{[]float64{0, 0, 20, 40}, false},   // a zero has no place on a log axis
		{nil, false},
	} {
		if c := cdf("x", tc.q); c.XLog != tc.log {
			t.Errorf("cdf(%v) log x = %v, want %v", tc.q, c.XLog, tc.log)
		}
	}
}
