package planner

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/timing"
)

// script is a sequence of ticks exercising both modes on a disaggregated deployment.
func script() []Observation {
	var out []Observation
	for i, n := range []int{600, 3000, 3000, 600, 0} {
		obs := window(n, 2000, 500)
		obs.PrefixHitRate = 0.25
		obs.Pools = map[Pool]PoolObservation{
			Prefill: {Ready: 2, Workers: [][]PassSample{prefillHot, prefillHot}},
			Decode:  {Ready: 1 + i%2, Workers: [][]PassSample{decodeCold, decodeCold}[:1+i%2]},
		}
		out = append(out, obs)
	}
	return out
}

func TestTickIsDeterministic(t *testing.T) {
	run := func() []Decision {
		cfg := DefaultConfig()
		cfg.Pools = disagg
		p, err := New(Options{Config: cfg, Perf: Perf{Model: timing.Polynomial{}, KVTokens: 1_000_000}})
		if err != nil {
			t.Fatal(err)
		}
		var out []Decision
		for i, obs := range script() {
			out = append(out, p.Tick(time.Duration(i)*3*time.Minute, obs))
		}
		return out
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs differ:\n%v\n%v", a, b)
	}
}

// recorder is a Predictor that remembers what it saw and predicts a fixed rate.
type recorder struct {
	seen []Traffic
	rate float64
}

func (r *recorder) Observe(t Traffic) { r.seen = append(r.seen, t) }
func (r *recorder) Predict() Traffic {
	t := r.seen[len(r.seen)-1]
	t.Rate = r.rate
	return t
}

func TestTickFeedsThePredictor(t *testing.T) {
	cfg := throughputOnly(disagg)
	cfg.ITLTarget = 20 * ms
	r := &recorder{rate: 50}
	p, err := New(Options{Config: cfg, Perf: Perf{Model: timing.Polynomial{}, KVTokens: 1_000_000}, Predictor: r})
	if err != nil {
		t.Fatal(err)
	}
	obs := window(600, 2000, 500)
	obs.PrefixHitRate = 0.5
	p.Tick(0, obs)
	p.Tick(0, window(0, 0, 0))             // nothing completed: the last shape is kept
	p.Tick(0, Observation{Requests: 5})    // no window length: no rate, not observed
	d := p.Tick(0, window(120, 1000, 100)) // a new shape
	want := []Traffic{
		{Rate: 10, ISL: 2000, OSL: 500, HitRate: 0.5},
		{Rate: 0, ISL: 2000, OSL: 500, HitRate: 0.5},
		{Rate: 2, ISL: 1000, OSL: 100, HitRate: 0},
	}
	if !reflect.DeepEqual(r.seen, want) {
		t.Errorf("predictor saw %+v, want %+v", r.seen, want)
	}
	// The floor follows the prediction (50 req/s), not the window (2 req/s): 1000-token prompts
	// batch 20 to a 488.6 ms pass, 40.9 req/s per worker, so 2 workers.
	if got := d.Pools[Prefill]; got.Floor != 2 || got.Reason != "floor 2: 50 req/s at 40.9 req/s per worker" {
		t.Errorf("prefill %+v, want the floor of 50 req/s", got)
	}
}

func TestHitRateLowersThePrefillFloor(t *testing.T) {
	// 50 req/s of 2000-token prompts: 20.47 req/s per prefill worker with no hits (3 workers), 40.94
	// with half the prompt cached (2 workers); see TestCapacity.
	for _, tc := range []struct {
		hit  float64
		want int
	}{{0, 3}, {0.5, 2}} {
		p, err := New(Options{Config: throughputOnly(disagg), Perf: Perf{Model: timing.Polynomial{}, KVTokens: 1_000_000}})
		if err != nil {
			t.Fatal(err)
		}
		obs := window(3000, 2000, 500)
		obs.PrefixHitRate = tc.hit
		if got := p.Tick(0, obs).Pools[Prefill]; got.Target != tc.want {
			t.Errorf("hit rate %g: %+v, want %d", tc.hit, got, tc.want)
		}
	}
}

func TestDecisionString(t *testing.T) {
	d := Decision{Pools: map[Pool]PoolDecision{
		Decode:  {Current: 2, Target: 1, Reason: "load -1"},
		Prefill: {Current: 1, Target: 2, Reason: "floor 2"},
	}}
	if got, want := d.String(), "prefill 1→2 (floor 2); decode 2→1 (load -1)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func Example() {
	cfg, err := ParseConfig("planner.yaml", []byte(`
ttft_target: 500ms
itl_target: 50ms
pools:
  agg: {min: 1, max: 8}
`))
	if err != nil {
		panic(err)
	}
	p, err := New(Options{Config: *cfg, Perf: Perf{Model: timing.Polynomial{}, KVTokens: 500_000}})
	if err != nil {
		panic(err)
	}
	usage := NewUsage(cfg)
	usage.Record(0, Agg, 1)

	// Three minutes in which 3600 requests (20 req/s) of 2000 prompt and 200 output tokens completed,
	// on one worker whose passes were not reported.
	d := p.Tick(3*time.Minute, Observation{
		Window: 3 * time.Minute, Requests: 3600, MeanISL: 2000, MeanOSL: 200,
		Pools: map[Pool]PoolObservation{Agg: {Ready: 1, Workers: [][]PassSample{nil}}},
	})
	fmt.Println(d)
	usage.Record(3*time.Minute, Agg, d.Pools[Agg].Target)
	// One worker for 3 minutes, then two: 0.05 + 2 × 0.95 GPU-hours by the end of the hour.
	fmt.Printf("%.2f GPU-hours\n", usage.GPUHours(time.Hour))
	// Output:
	// agg 1→2 (floor 2: 20 req/s at 12.9 req/s per worker; load -1: below target × 0.8 on the 1 worker (ttft idle vs 500ms, itl idle vs 50ms))
	// 1.95 GPU-hours
}
