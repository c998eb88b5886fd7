package planner

import (
	"math"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/timing"
)

const ms = time.Millisecond

func near(got, want float64) bool {
	if math.IsInf(want, 0) {
		return got == want
	}
	return math.Abs(got-want) <= 1e-6*math.Abs(want)
}

// Hand-computed capacities. Polynomial prefill is 4.209989e-07·T² + 1.518344e-02·T + 16.50142 ms for T
// new tokens in the batch; its decode is −25.74·x² + 54.01·x + 5.74 ms at KV occupancy x.
func TestCapacity(t *testing.T) {
	poly := Perf{Model: timing.Polynomial{}, KVTokens: 1_000_000}
	fixed := Perf{Model: timing.Fixed{PrefillMs: 250, DecodeMs: 25}, KVTokens: 4096}
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		// ISL 2000, no hits, TTFT 500 ms. 10 prompts = 20000 tokens: 168.39956 + 303.6688 + 16.50142 =
		// 488.56978 ms ≤ 500; 11 prompts = 22000 tokens: 554.30057 ms > 500. So 10 / 0.48856978 s.
		{"poly prefill", PrefillCapacity(poly, 2000, 0, 500*ms), 10 / 0.48856978},
		// Half the prompt cached: 1000 new tokens each, so 20 prompts make the same 20000-token batch.
		{"poly prefill, hit 0.5", PrefillCapacity(poly, 2000, 0.5, 500*ms), 20 / 0.48856978},
		// TTFT 40 ms: one 2000-token prompt takes 1.68400 + 30.36688 + 16.50142 = 48.552296 ms > 40, so
		// the worker cannot meet it at any rate: 1 / 0.048552296 s.
		{"poly prefill, target unreachable", PrefillCapacity(poly, 2000, 0, 40*ms), 1 / 0.048552296},
		// Fully cached prompts cost no prefill at all.
		{"poly prefill, all cached", PrefillCapacity(poly, 2000, 1, 500*ms), math.Inf(1)},
		// Fixed prefill is 250 ms whatever the batch, so the KV bounds it: 4096 / 1024 = 4 prompts per
		// batch, 4 / 0.25 s = 16 req/s.
		{"fixed prefill, KV-bound", PrefillCapacity(fixed, 1024, 0, 500*ms), 16},
		// Two data-parallel ranks, each with its own KV, do twice the work.
		{"fixed prefill, 2 ranks", PrefillCapacity(Perf{Model: fixed.Model, KVTokens: 4096, Ranks: 2}, 1024, 0, 500*ms), 32},

		// ISL 2000, OSL 500: context 2000 + 250 = 2250 tokens. ITL 20 ms: B = 137 gives x = 0.30825 and
		// −2.44577 + 16.64858 + 5.74 = 19.942818 ms; B = 138 gives 20.028505 ms > 20. So 137 tokens per
		// 19.942818 ms, 500 tokens per request.
		{"poly decode", DecodeCapacity(poly, 2000, 500, 20*ms), 137 / 0.019942818 / 500},
		// Fixed decode 25 ms, context 1024 + 64 = 1088: 4096 / 1088 = 3 requests fit, 3 / 0.025 s =
		// 120 tokens/s, 128 per request: 0.9375 req/s.
		{"fixed decode, KV-bound", DecodeCapacity(fixed, 1024, 128, 50*ms), 0.9375},
		// ITL 20 ms < 25 ms: unreachable, one request at a time: 1 / 0.025 / 128.
		{"fixed decode, target unreachable", DecodeCapacity(fixed, 1024, 128, 20*ms), 0.3125},

		// Aggregated: 1 / (1/16 + 1/0.9375) = 0.88560886 req/s.
		{"agg", AggCapacity(16, 0.9375), 1 / (1.0/16 + 1/0.9375)},
		{"agg, free prefill", AggCapacity(math.Inf(1), 0.9375), 0.9375},
	} {
		if !near(tc.got, tc.want) {
			t.Errorf("%s: capacity = %.9g, want %.9g", tc.name, tc.got, tc.want)
		}
	}
}

func TestLargestWithin(t *testing.T) {
	// cost(n) = n ms: the largest n within 37 ms is 37, unless the limit is lower.
	linear := func(n int) time.Duration { return time.Duration(n) * ms }
	for _, tc := range []struct{ limit, want int }{{1000, 37}, {37, 37}, {20, 20}, {1, 1}, {64, 37}} {
		if got, _ := largestWithin(tc.limit, 37*ms, linear); got != tc.want {
			t.Errorf("largestWithin(%d, 37ms) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	if got, c := largestWithin(100, 500*time.Microsecond, linear); got != 1 || c != ms {
		t.Errorf("largestWithin(unreachable) = %d, %v, want 1, 1ms", got, c)
	}
}

func throughputOnly(pools Pools) Config {
	c := DefaultConfig()
	c.LoadScaling = false
	c.Pools = pools
	return c
}

// window is an observation of n requests completed over a minute with the given lengths.
func window(n int, isl, osl float64) Observation {
	return Observation{Window: time.Minute, Requests: n, MeanISL: isl, MeanOSL: osl}
}

func TestThroughputFloor(t *testing.T) {
	// Disaggregated, Polynomial workers with 1M KV tokens, TTFT 500 ms, ITL 20 ms, ISL 2000, OSL 500.
	// From TestCapacity: a prefill worker sustains 20.4679 req/s, a decode worker 13.7393 req/s.
	cfg := throughputOnly(Pools{Prefill: &PoolConfig{Min: 1, Max: 2}, Decode: &PoolConfig{Min: 1, Max: 8}})
	cfg.ITLTarget = 20 * ms
	p, err := New(Options{Config: cfg, Perf: Perf{Model: timing.Polynomial{}, KVTokens: 1_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		requests        int // in a minute
		prefill, decode int
	}{
		{600, 1, 1},  // 10 req/s: 10/20.47 = 0.49 → 1; 10/13.74 = 0.73 → 1
		{3000, 2, 4}, // 50 req/s: 50/20.47 = 2.44 → 3, clamped to max 2; 50/13.74 = 3.64 → 4
		{600, 1, 1},  // back down to 10 req/s
		{0, 1, 1},    // no traffic: min
	} {
		d := p.Tick(0, window(step.requests, 2000, 500))
		if got := d.Pools[Prefill]; got.Target != step.prefill || got.Floor != step.prefill {
			t.Errorf("%d req/min: prefill %+v, want target %d", step.requests, got, step.prefill)
		}
		if got := d.Pools[Decode]; got.Target != step.decode || got.Floor != step.decode {
			t.Errorf("%d req/min: decode %+v, want target %d", step.requests, got, step.decode)
		}
	}

	// Aggregated: 1/(1/20.4679 + 1/13.7393) = 8.2209 req/s per worker; 10 req/s needs 2 workers.
	cfg = throughputOnly(Pools{Agg: &PoolConfig{Min: 1, Max: 8}})
	cfg.ITLTarget = 20 * ms
	p, err = New(Options{Config: cfg, Perf: Perf{Model: timing.Polynomial{}, KVTokens: 1_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Tick(0, window(600, 2000, 500))
	if got := d.Pools[Agg]; got.Target != 2 {
		t.Errorf("agg at 10 req/s: %+v, want 2 workers", got)
	}
	// A window that completed nothing keeps the last lengths, so the rate alone moves the floor:
	// 0 req/s → min.
	if got := p.Tick(0, window(0, 0, 0)).Pools[Agg]; got.Target != 1 || got.Reason != "floor 1: no traffic" {
		t.Errorf("agg at 0 req/s: %+v", got)
	}
}

func TestThroughputNeedsAModel(t *testing.T) {
	if _, err := New(Options{Config: throughputOnly(Pools{Agg: &PoolConfig{Min: 1, Max: 8}})}); err == nil {
		t.Error("New without a timing model succeeded")
	}
	// The prefill pool's own Perf overrides the shared one, which the decode pool lacks.
	_, err := New(Options{
		Config:   throughputOnly(Pools{Prefill: &PoolConfig{Min: 1, Max: 1}, Decode: &PoolConfig{Min: 1, Max: 1}}),
		PoolPerf: map[Pool]Perf{Prefill: {Model: timing.Polynomial{}, KVTokens: 1}},
	})
	if err == nil || err.Error() != "planner: decode workers: no timing model (throughput scaling prices workers)" {
		t.Errorf("New error = %v", err)
	}
}
