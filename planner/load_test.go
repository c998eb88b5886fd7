package planner

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/timing"
)

// engine builds one engine's window: pass i computes ps[i] new prefill tokens over ds[i] decode KV
// tokens with queued prefill tokens waiting, and takes wall(p, d) seconds.
func engine(wall func(p, d float64) float64, ps, ds []int, queued int) []PassSample {
	out := make([]PassSample, len(ps))
	for i := range ps {
		out[i] = PassSample{
			FPM: sched.ForwardPass{
				SumPrefillTokens:       ps[i],
				SumDecodeKVTokens:      ds[i],
				SumQueuedPrefillTokens: queued,
			},
			Wall: time.Duration(math.Round(wall(float64(ps[i]), float64(ds[i])) * 1e9)),
		}
	}
	return out
}

// The synthetic engines. Targets are TTFT 500 ms, ITL 50 ms, sensitivity 0.8 (scale down below 400 ms
// and 40 ms); requests have ISL 2000 and no prefix hits.
var (
	zeros = []int{0, 0, 0, 0, 0, 0}

	// A prefill engine takes 10 ms + 50 µs per new token. A request arriving behind Q queued tokens is
	// estimated at 10 ms + 50 µs × (Q + 2000) = 110 ms + 50 µs × Q.
	prefillWall = func(p, _ float64) float64 { return 0.010 + 5e-5*p }
	prefillPs   = []int{1000, 2000, 3000, 4000, 5000, 6000}
	prefillHot  = engine(prefillWall, prefillPs, zeros, 10000) // 610 ms > 500: above
	prefillCold = engine(prefillWall, prefillPs, zeros, 0)     // 110 ms < 400: below
	prefillWarm = engine(prefillWall, prefillPs, zeros, 6000)  // 410 ms: neither

	// A decode engine takes 5 ms + 1 µs per KV token; ITL at the window's mean load D is 5 ms + D µs.
	decodeWall = func(_, d float64) float64 { return 0.005 + 1e-6*d }
	decodeHot  = engine(decodeWall, zeros, []int{40000, 50000, 60000, 70000, 80000, 90000}, 0) // D 65000: 70 ms
	decodeCold = engine(decodeWall, zeros, []int{5000, 10000, 15000, 20000, 25000, 30000}, 0)  // D 17500: 22.5 ms
	decodeWarm = engine(decodeWall, zeros, []int{30000, 35000, 40000, 45000, 50000, 55000}, 0) // D 42500: 47.5 ms

	// An aggregated engine takes 5 ms + 50 µs per prefill token + 1 µs per KV token. Over the window
	// the mean prefill is 5000/6 tokens and the mean decode load 95000/6 tokens, so
	//   TTFT = 5 + 0.05 × (Q + 2000) + 15.83 = 120.83 ms + 50 µs × Q
	//   ITL  = 5 + 41.67 + 15.83 = 62.5 ms.
	aggWall = func(p, d float64) float64 { return 0.005 + 5e-5*p + 1e-6*d }
	aggPs   = []int{0, 1000, 0, 2000, 500, 1500}
	aggDs   = []int{10000, 10000, 20000, 20000, 30000, 5000}
	aggHot  = engine(aggWall, aggPs, aggDs, 10000) // TTFT 620.8 ms
	aggCold = engine(aggWall, aggPs, aggDs, 0)     // TTFT 120.8 ms
)

func loadOnly(pools Pools) Config {
	c := DefaultConfig()
	c.ThroughputScaling = false
	c.Pools = pools
	return c
}

var disagg = Pools{Prefill: &PoolConfig{Min: 1, Max: 4}, Decode: &PoolConfig{Min: 1, Max: 4}}

func TestLoadStep(t *testing.T) {
	aggPools := Pools{Agg: &PoolConfig{Min: 1, Max: 4}}
	for _, tc := range []struct {
		name    string
		pools   Pools
		itl     time.Duration // default 50 ms
		pool    Pool
		ready   int
		workers [][]PassSample
		want    int
		reason  string
	}{
		{"prefill all above", disagg, 0, Prefill, 2, [][]PassSample{prefillHot, prefillHot}, 3,
			"load +1: TTFT above target on all 2 workers (ttft 610ms vs 500ms)"},
		{"prefill all below", disagg, 0, Prefill, 2, [][]PassSample{prefillCold, prefillCold}, 1,
			"load -1: below target × 0.8 on all 2 workers (ttft 110ms vs 500ms)"},
		{"prefill mixed", disagg, 0, Prefill, 2, [][]PassSample{prefillHot, prefillCold}, 2,
			"load hold: ttft 110ms..610ms vs 500ms"},
		{"prefill between", disagg, 0, Prefill, 2, [][]PassSample{prefillWarm, prefillWarm}, 2, "load hold"},
		{"prefill at max", disagg, 0, Prefill, 4, [][]PassSample{prefillHot, prefillHot, prefillHot, prefillHot}, 4, "load +1"},
		{"prefill at min", disagg, 0, Prefill, 1, [][]PassSample{prefillCold}, 1, "load -1"},
		{"prefill idle and below", disagg, 0, Prefill, 2, [][]PassSample{nil, prefillCold}, 1,
			"load -1: below target × 0.8 on all 2 workers (ttft 110ms, 1 idle vs 500ms)"},
		{"prefill idle and above", disagg, 0, Prefill, 2, [][]PassSample{nil, prefillHot}, 2, "load hold"},
		{"prefill sparse", disagg, 0, Prefill, 2, [][]PassSample{prefillHot, prefillHot[:3]}, 2,
			"load: worker 1 had 3 passes, too few to fit (want 5)"},
		{"prefill unobserved", disagg, 0, Prefill, 2, nil, 2, "load: no ready workers to observe"},

		{"decode all above", disagg, 0, Decode, 2, [][]PassSample{decodeHot, decodeHot}, 3,
			"load +1: ITL above target on all 2 workers (itl 70ms vs 50ms)"},
		{"decode all below", disagg, 0, Decode, 2, [][]PassSample{decodeCold, decodeCold}, 1, "load -1"},
		{"decode between", disagg, 0, Decode, 2, [][]PassSample{decodeWarm, decodeWarm}, 2, "load hold: itl 47.5ms vs 50ms"},
		{"decode mixed", disagg, 0, Decode, 2, [][]PassSample{decodeHot, decodeCold}, 2, "load hold"},

		{"agg TTFT above", aggPools, 100 * ms, Agg, 2, [][]PassSample{aggHot, aggHot}, 3,
			"load +1: TTFT above target on all 2 workers (ttft 620.8ms vs 500ms, itl 62.5ms vs 100ms)"},
		{"agg ITL above", aggPools, 50 * ms, Agg, 2, [][]PassSample{aggCold, aggCold}, 3, "load +1: ITL above target"},
		{"agg both below", aggPools, 100 * ms, Agg, 2, [][]PassSample{aggCold, aggCold}, 1, "load -1"},
		// TTFT is low but ITL 62.5 ms is within 70 ms and not below 56 ms: one phase is not idle enough.
		{"agg ITL between", aggPools, 70 * ms, Agg, 2, [][]PassSample{aggCold, aggCold}, 2, "load hold"},
	} {
		cfg := loadOnly(tc.pools)
		if tc.itl > 0 {
			cfg.ITLTarget = tc.itl
		}
		p, err := New(Options{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		obs := window(600, 2000, 500)
		obs.Pools = map[Pool]PoolObservation{tc.pool: {Ready: tc.ready, Workers: tc.workers}}
		got := p.Tick(0, obs).Pools[tc.pool]
		if got.Target != tc.want || got.Load != tc.want || got.Current != tc.ready || !strings.HasPrefix(got.Reason, tc.reason) {
			t.Errorf("%s: %+v, want target %d, reason %q", tc.name, got, tc.want, tc.reason)
		}
	}
}

func TestLoadStepWaitsForPendingActions(t *testing.T) {
	cfg := loadOnly(disagg)
	cfg.StartupTime = time.Minute
	p, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	tick := func(now time.Duration, po PoolObservation) PoolDecision {
		obs := window(600, 2000, 500)
		obs.Pools = map[Pool]PoolObservation{Prefill: po}
		return p.Tick(now, obs).Pools[Prefill]
	}
	hot := func(n int) [][]PassSample {
		w := make([][]PassSample, n)
		for i := range w {
			w[i] = prefillHot
		}
		return w
	}
	for _, step := range []struct {
		now    time.Duration
		po     PoolObservation
		want   int
		reason string
	}{
		{0, PoolObservation{Ready: 2, Workers: hot(2)}, 3, "load +1"},
		// The caller reports the new worker as starting: hold, even though both engines are hot.
		{30 * time.Second, PoolObservation{Ready: 2, Starting: 1, Workers: hot(2)}, 3, "load hold: 1 starting"},
		// A caller that does not report starting workers: the planner's own timer holds until 0 + 60 s.
		{45 * time.Second, PoolObservation{Ready: 3, Workers: hot(3)}, 3, "load hold: scale-up pending until 1m0s"},
		{60 * time.Second, PoolObservation{Ready: 3, Workers: hot(3)}, 4, "load +1"},
		{120 * time.Second, PoolObservation{Ready: 3, Draining: 1, Workers: [][]PassSample{prefillCold, prefillCold, prefillCold}}, 3, "load hold: 1 draining"},
		{180 * time.Second, PoolObservation{Ready: 3, Workers: [][]PassSample{prefillCold, prefillCold, prefillCold}}, 2, "load -1"},
		// A scale-down starts no timer: the next window may go down again.
		{240 * time.Second, PoolObservation{Ready: 2, Workers: [][]PassSample{prefillCold, prefillCold}}, 1, "load -1"},
	} {
		if got := tick(step.now, step.po); got.Target != step.want || !strings.HasPrefix(got.Reason, step.reason) {
			t.Errorf("at %v: %+v, want %d, %q", step.now, got, step.want, step.reason)
		}
	}
}

func TestLoadStepNeverBelowFloor(t *testing.T) {
	// Both modes on. Fixed workers (prefill 250 ms, decode 25 ms, 4096 KV tokens) at ISL 1024, OSL 128
	// sustain 1 / (1/16 + 1/0.9375) = 0.8856 req/s (TestCapacity); 120 requests a minute = 2 req/s need
	// ceil(2.258) = 3 workers.
	cfg := DefaultConfig()
	cfg.ITLTarget = 100 * ms
	cfg.Pools = Pools{Agg: &PoolConfig{Min: 1, Max: 8}}
	p, err := New(Options{Config: cfg, Perf: Perf{Model: timing.Fixed{PrefillMs: 250, DecodeMs: 25}, KVTokens: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	cold := func(n int) [][]PassSample {
		w := make([][]PassSample, n)
		for i := range w {
			w[i] = aggCold
		}
		return w
	}
	for _, step := range []struct{ ready, floor, load, want int }{
		{5, 3, 4, 4}, // every engine below: 5 − 1 = 4, above the floor
		{3, 3, 3, 3}, // every engine below, but 3 − 1 would cross the floor
		{2, 3, 3, 3}, // under the floor: up to it at once, not by one
	} {
		obs := window(120, 1024, 128)
		obs.Pools = map[Pool]PoolObservation{Agg: {Ready: step.ready, Workers: cold(step.ready)}}
		got := p.Tick(time.Hour, obs).Pools[Agg] // late enough that no earlier scale-up is pending
		if got.Floor != step.floor || got.Load != step.load || got.Target != step.want {
			t.Errorf("ready %d: %+v, want floor %d, load %d, target %d", step.ready, got, step.floor, step.load, step.want)
		}
		if !strings.HasPrefix(got.Reason, "floor 3: 2 req/s at 0.886 req/s per worker; load -1") {
			t.Errorf("ready %d: reason %q", step.ready, got.Reason)
		}
	}
}

func TestFit(t *testing.T) {
	// Two variables that vary independently: least squares recovers the engine's costs exactly.
	f := fitPasses(aggCold, true, true)
	if !f.bKnown || !f.cKnown || !near(f.b, 5e-5) || !near(f.c, 1e-6) {
		t.Errorf("2-D fit: b = %g, c = %g, want 5e-05, 1e-06 (%+v)", f.b, f.c, f)
	}
	if s := f.at(3000, 20000); !near(s.lo, 0.005+5e-5*3000+1e-6*20000) || s.lo != s.hi {
		t.Errorf("2-D fit at (3000, 20000) = %+v, want 175 ms", s)
	}

	// More work that seems faster is noise: the slope is clamped to 0 and the estimate is the mean.
	faster := engine(func(p, _ float64) float64 { return 0.100 - 1e-6*p }, prefillPs, zeros, 0)
	f = fitPasses(faster, true, false)
	if !f.bKnown || f.b != 0 || !near(f.at(1e6, 0).lo, 0.0965) {
		t.Errorf("negative slope: %+v, at(1e6) = %+v, want slope 0 and 96.5 ms", f, f.at(1e6, 0))
	}

	// Every pass the same size: the slope is unknown but not negative, so the estimate is exact at the
	// size seen, a lower bound above it and an upper bound below it.
	same := engine(prefillWall, []int{2000, 2000, 2000, 2000, 2000}, zeros[:5], 0)
	f = fitPasses(same, true, false)
	for _, tc := range []struct {
		p      float64
		lo, hi float64
	}{
		{2000, 0.110, 0.110},
		{2000.3, 0.110, 0.110},
		{8000, 0.110, math.Inf(1)},
		{500, 0, 0.110},
	} {
		if s := f.at(tc.p, 0); !near(s.lo, tc.lo) || !near(s.hi, tc.hi) {
			t.Errorf("constant prefill: at(%g) = %+v, want [%g, %g]", tc.p, s, tc.lo, tc.hi)
		}
	}
}

func TestLoadStepWithConstantPasses(t *testing.T) {
	// Fixed-length prompts one at a time give passes that never vary. An idle queue still lets the
	// planner scale down (the estimate at the size seen is exact), a queue gives only a lower bound
	// that is under the target, so it holds.
	same := func(queued int) []PassSample {
		return engine(prefillWall, []int{2000, 2000, 2000, 2000, 2000}, zeros[:5], queued)
	}
	for _, tc := range []struct {
		queued int
		want   int
		reason string
	}{
		{0, 1, "load -1: below target × 0.8 on all 2 workers (ttft 110ms vs 500ms)"},
		{8000, 2, "load hold: ttft >110ms vs 500ms"},
	} {
		p, err := New(Options{Config: loadOnly(disagg)})
		if err != nil {
			t.Fatal(err)
		}
		obs := window(600, 2000, 500)
		obs.Pools = map[Pool]PoolObservation{Prefill: {Ready: 2, Workers: [][]PassSample{same(tc.queued), same(tc.queued)}}}
		if got := p.Tick(0, obs).Pools[Prefill]; got.Target != tc.want || got.Reason != tc.reason {
			t.Errorf("queued %d: %+v, want %d, %q", tc.queued, got, tc.want, tc.reason)
		}
	}
}
