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
)

const sec = time.Second

// TestGrowth: the buckets double, merging pairs, as the run outgrows them, and the page draws those of
// [0, end).
func TestGrowth(t *testing.T) {
	s := newSeries(4, sec)
	pass := func(start, end time.Duration, tokens int) {
		s.Pass(&sim.ObservedPass{Pool: "agg", Worker: 0, Start: start, End: end,
			Ranks:   []engine.RankPass{{Pass: &sched.Pass{Outputs: []sched.Output{{ID: 1, Tokens: make([]uint32, tokens)}}}}},
			Metrics: []sched.Metrics{{Running: 1, TotalBlocks: 10}}})
	}
	pass(0, 500*time.Millisecond, 1)
	pass(3*sec, 3999*time.Millisecond, 2)
	if s.width != sec || !slices.Equal(s.throughput, counts{1, 0, 0, 2}) {
		t.Fatalf("width %v, tokens %v; want 1s [1 0 0 2]", s.width, s.throughput)
	}
	pass(4*sec, 4*sec, 4) // at 4 s = 4 buckets of 1 s: 2 s buckets
	if s.width != 2*sec || !slices.Equal(s.throughput, counts{1, 2, 4, 0}) {
		t.Fatalf("width %v, tokens %v; want 2s [1 2 4 0]", s.width, s.throughput)
	}
	pass(20*sec, 21*sec, 8) // 8 s buckets: the last pass's hold (4 s to 20 s) fits first
	if s.width != 8*sec || !slices.Equal(s.throughput, counts{7, 0, 8, 0}) {
		t.Fatalf("width %v, tokens %v; want 8s [7 0 8 0]", s.width, s.throughput)
	}
	// A 21 s run in 8 s buckets draws 3 of them, centred at 4, 12 and 20 s.
	d := s.draw(21 * sec)
	if !slices.Equal(d.x, []float64{4, 12, 20}) || !slices.Equal(d.throughput, []float64{7.0 / 8, 0, 1}) {
		t.Errorf("x %v, tokens/s %v; want [4 12 20] [0.875 0 1]", d.x, d.throughput)
	}
	// Something at or past the end counts in the last bucket drawn.
	if d := s.draw(16 * sec); !slices.Equal(d.throughput, []float64{7.0 / 8, 1}) {
		t.Errorf("cut at 16 s: tokens/s %v, want [0.875 1]", d.throughput)
	}
	if d := NewSeries(0).draw(0); len(d.x) != 1 || d.width != minWidth {
		t.Errorf("an empty run draws %d buckets of %v, want 1 of %v", len(d.x), d.width, minWidth)
	}
	if minWidth<<9 != sec {
		t.Errorf("minWidth·2⁹ = %v, want 1s", minWidth<<9)
	}
}

func TestLevel(t *testing.T) {
	l := newLevel(5)                                // 2 s buckets
	l.hold(2*sec, 1*sec, 5*sec, 4)                  // 1 s of bucket 0, all of 1, 1 s of 2
	l.hold(2*sec, 5*sec, 5500*time.Millisecond, 10) // half a second of bucket 2
	l.hold(2*sec, 9*sec, 9*sec, 7)                  // an empty interval: nothing
	l.hold(2*sec, 9*sec, 10*sec, 3)                 // the last bucket's second half
	if got, want := l.area, (counts{4e9, 8e9, 4e9 + 5e9, 0, 3e9}); !slices.Equal(got, want) {
		t.Errorf("area = %v, want %v", got, want)
	}
	if got, want := l.peak, (peaks{4, 4, 10, 0, 3}); !slices.Equal(got, want) {
		t.Errorf("peak = %v, want %v", got, want)
	}
	l.merge()
	if got, want := l.area, (counts{12e9, 9e9, 3e9, 0, 0}); !slices.Equal(got, want) {
		t.Errorf("merged area = %v, want %v", got, want)
	}
	if got, want := l.peak, (peaks{4, 10, 3, 0, 0}); !slices.Equal(got, want) {
		t.Errorf("merged peak = %v, want %v", got, want)
	}
	if got := quantiles([]float64{3, 1, 2}, 4); !slices.Equal(got, []float64{1, 2, 2, 3, 3}) {
		t.Errorf("quantiles = %v, want [1 2 2 3 3]", got)
	}
}

// TestSeries feeds two passes of a two-rank worker and a restart and checks every series.
func TestSeries(t *testing.T) {
	s := newSeries(3, sec)
	out := func(id uint64, n int, done bool) sched.Output {
		return sched.Output{ID: id, Tokens: make([]uint32, n), Done: done}
	}
	s.Pass(&sim.ObservedPass{Pool: "agg", Worker: 0, Start: 0, End: sec,
		Ranks: []engine.RankPass{
			{Rank: 0, Pass: &sched.Pass{Outputs: []sched.Output{out(1, 1, false), out(2, 1, false)}, Preempted: []uint64{3}}},
			{Rank: 1, Pass: &sched.Pass{Outputs: []sched.Output{out(4, 2, true)}}},
		},
		Metrics: []sched.Metrics{
			{Running: 2, Waiting: 1, ActiveBlocks: 30, TotalBlocks: 80, PrefixQueries: 100, PrefixHits: 50},
			{Running: 1, Waiting: 0, ActiveBlocks: 10, TotalBlocks: 80, PrefixQueries: 0, PrefixHits: 0},
		}})
	s.Transferred(9, sec, 1500*time.Millisecond)
	s.Pass(&sim.ObservedPass{Pool: "agg", Worker: 0, Start: 3 * sec, End: 4 * sec,
		Ranks: []engine.RankPass{{Rank: 1, Pass: &sched.Pass{Outputs: []sched.Output{out(5, 1, true)}}}},
		Metrics: []sched.Metrics{
			{Running: 0, Waiting: 0, ActiveBlocks: 0, TotalBlocks: 80, PrefixQueries: 100, PrefixHits: 50},
			{Running: 1, Waiting: 0, ActiveBlocks: 20, TotalBlocks: 80, PrefixQueries: 200, PrefixHits: 50},
		}})
	// The worker failed and came back with a new engine, whose counters start from 0 again.
	s.Pass(&sim.ObservedPass{Pool: "agg", Worker: 0, Start: 5 * sec, End: 5 * sec,
		Metrics: []sched.Metrics{{TotalBlocks: 80, PrefixQueries: 10, PrefixHits: 10}, {TotalBlocks: 80}}})

	// 2 s buckets. The engine reports the state after each pass, held to the next pass; during a pass,
	// the requests finishing at its end run too. Pass 1 [0, 1 s): 1 waiting, 3+1 running, KV 40/160;
	// until pass 2, 1 waiting, 3 running. Pass 2 [3 s, 4 s): 1+1 running, KV 20/160, held to the restart
	// at 5 s; after the last pass, nothing.
	d := s.draw(6 * sec)
	for _, tc := range []struct {
		name      string
		got, want []float64
	}{
		{"output tokens/s", d.throughput, []float64{2, 0, 0.5}}, // 4 tokens at 1 s, 1 at 4 s
		{"waiting mean", d.workers[0].waiting.mean, []float64{1, 0.5, 0}},
		{"running mean", d.workers[0].running.mean, []float64{3.5, 2.5, 0.5}}, // (4·1 + 3·1)/2, (3·1 + 2·1)/2, 1·1/2
		{"running max", d.workers[0].running.peak, []float64{4, 3, 1}},
		{"kv mean", d.workers[0].kvUsed.mean, []float64{0.25, 0.1875, 0.0625}}, // (0.25·1 + 0.125·1)/2, 0.125·1/2
		{"kv max", d.workers[0].kvUsed.peak, []float64{0.25, 0.25, 0.125}},
		{"preemptions/s", d.preempt["agg"], []float64{0.5, 0, 0}},
		// Prefix hits: 50 of 100 in the first pass, 50 of the 200 rank 1 looked up by the second, 10 of
		// 10 after the restart.
		{"prefix hit rate", d.prefix["agg"], []float64{0.5, 0.25, 1}},
		{"transfer ms", d.transfers.all, []float64{500}},
		{"transfer mean", d.transfers.mean[:1], []float64{500}},
		{"transfer max", d.transfers.max[:1], []float64{500}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if !math.IsNaN(d.transfers.mean[1]) || !math.IsNaN(d.transfers.max[2]) {
		t.Errorf("transfers in buckets without any: mean %v, max %v, want NaN", d.transfers.mean, d.transfers.max)
	}
	if d.workers[0].name != "worker 0" || !slices.Equal(d.pools, []string{"agg"}) {
		t.Errorf("names %q, pools %q", d.workers[0].name, d.pools)
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
