package sim

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/planner"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

func requestsJSONL(t *testing.T, res *Result) []string {
	var b strings.Builder
	if err := res.Collector.WriteRequestsJSONL(&b); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

// disaggOptions: one prefill and one decode worker, block size 4, fixed timing (10 ms prefill, 5 ms
// decode), 1e6 KV bytes per token over 1 GB/s links: 1 ms per token transferred.
func disaggOptions(prefill, decode int) Options {
	e := engine.Options{
		VLLM:   vllm.Options{BlockSize: 4, NumBlocks: 64, MaxNumSeqs: 8, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true},
		Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5},
	}
	dr := router.DefaultOptions()
	dr.OverlapScoreWeight, dr.TrackPrefillTokens = 0, false
	return Options{PrefillWorkers: prefill, DecodeWorkers: decode, PrefillEngine: e, DecodeEngine: e,
		Router: router.DefaultOptions(), DecodeRouter: dr,
		Transfer: disagg.Transfer{GBps: 1, BytesPerToken: 1e6, Mode: disagg.DestinationMissing}}
}

// TestDisaggTTFT: TTFT covers the prefill pass, the transfer of the KV, and the decode worker's first
// step: 10 ms + 8 ms (8 tokens × 1 MB at 1 GB/s) + 5 ms.
func TestDisaggTTFT(t *testing.T) {
	src := trace(t, `{"timestamp": 0, "input_length": 8, "output_length": 3}`+"\n")
	res := run(t, src, disaggOptions(1, 1))
	if s := res.Summary; s.CompletedRequests != 1 || s.TTFT.Mean != 23 || s.E2E.Mean != 33 || s.TotalOutputTokens != 3 {
		t.Fatalf("completed %d, TTFT %v, E2E %v, tokens %d; want 1, 23, 33, 3", s.CompletedRequests, s.TTFT.Mean, s.E2E.Mean, s.TotalOutputTokens)
	}
	var stages []string
	for _, p := range res.Summary.Pools {
		for _, st := range p.Stages {
			stages = append(stages, st.Name)
			if want := map[string]float64{"prefill": 10, "transfer": 8, "decode_wait": 5}[st.Name]; st.Stats.Mean != want {
				t.Errorf("%s stage %v ms, want %v", st.Name, st.Stats.Mean, want)
			}
		}
	}
	if len(stages) != 3 {
		t.Fatalf("stages %v", stages)
	}
}

// TestDisaggDestinationMissing: a prompt whose blocks the decode worker already holds moves only the
// blocks it lacks; full_prompt moves everything.
func TestDisaggDestinationMissing(t *testing.T) {
	jsonl := `{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}
{"timestamp": 100, "input_length": 10, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 200, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}
`
	for _, tc := range []struct {
		mode disagg.Mode
		want []float64 // transfer ms of each request
	}{
		{disagg.DestinationMissing, []float64{8, 2, 0}},
		{disagg.FullPrompt, []float64{8, 10, 8}},
	} {
		o := disaggOptions(1, 1)
		o.Transfer.Mode = tc.mode
		res := run(t, trace(t, jsonl), o)
		var got []float64
		for _, p := range res.Summary.Pools {
			for _, st := range p.Stages {
				if st.Name == "transfer" {
					got = append(got, st.Stats.Min, st.Stats.P50, st.Stats.Max)
				}
			}
		}
		want := []float64{min(tc.want[0], tc.want[1], tc.want[2]), tc.want[0], max(tc.want[0], tc.want[1], tc.want[2])}
		if tc.mode == disagg.DestinationMissing {
			want[1] = 2 // median of 8, 2, 0
		}
		if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("mode %v: transfer min/p50/max %v, want %v", tc.mode, got, want)
		}
	}
}

// TestDisaggTransfersContend: two prompts prefilled together on one prefill worker leave over its one
// link, so each transfer takes twice as long as alone.
func TestDisaggTransfersContend(t *testing.T) {
	src := trace(t, `{"timestamp": 0, "input_length": 8, "output_length": 1}
{"timestamp": 0, "input_length": 8, "output_length": 1}
`)
	res := run(t, src, disaggOptions(1, 2))
	for _, p := range res.Summary.Pools {
		for _, st := range p.Stages {
			if st.Name == "transfer" && (st.Stats.Min != 16 || st.Stats.Max != 16) {
				t.Fatalf("transfers %v..%v ms, want both 16 (8 ms alone, shared link)", st.Stats.Min, st.Stats.Max)
			}
		}
	}
}

// TestDisaggDestinationWaitsForRoom: a decode worker without room holds the handoff (the prefill worker
// keeps the KV) and takes it, in order, once a request finishes.
func TestDisaggDestinationWaitsForRoom(t *testing.T) {
	o := disaggOptions(1, 1)
	o.DecodeEngine.VLLM.NumBlocks = 5 // room for one 16-token request at a time
	src := trace(t, `{"timestamp": 0, "input_length": 12, "output_length": 4}
{"timestamp": 0, "input_length": 12, "output_length": 4}
{"timestamp": 0, "input_length": 12, "output_length": 4}
`)
	res := run(t, src, o)
	if s := res.Summary; s.CompletedRequests != 3 || s.TTFT.Max <= s.TTFT.Min {
		t.Fatalf("completed %d, TTFT %v..%v: want all three, later ones waiting", s.CompletedRequests, s.TTFT.Min, s.TTFT.Max)
	}
}

// TestKVRouterFollowsEvents: requests sharing a prefix, one after another, all go to the worker that
// cached it while the router sees the KV events; with the events held back for an hour the router is
// blind and spreads them (ties between equal costs are broken at random).
func TestKVRouterFollowsEvents(t *testing.T) {
	var b strings.Builder
	for i := range 8 {
		b.WriteString(`{"timestamp": ` + strconv.Itoa(i*100) + `, "input_length": 16, "output_length": 1, "hash_ids": [1, 2, 3, 4]}` + "\n")
	}
	for _, delay := range []time.Duration{0, time.Hour} {
		o := Options{Workers: 2, Engine: small(), RouterEventDelay: delay}
		o.Engine.VLLM.Events = true
		o.Router = router.DefaultOptions()
		o.Router.Policy = router.KV
		res := run(t, trace(t, b.String()), o)
		workers := map[string]int{}
		for _, line := range requestsJSONL(t, res) {
			workers[line[strings.Index(line, `"worker":`):strings.Index(line, `,"arrival`)]]++
		}
		if (delay == 0) != (len(workers) == 1) {
			t.Errorf("event delay %v: requests per worker %v", delay, workers)
		}
		if delay == 0 && res.Summary.PrefixCacheReusedRatio != 7*12/128.0 {
			t.Errorf("reuse %v, want 7 of 8 requests hitting 12 of 16 tokens", res.Summary.PrefixCacheReusedRatio)
		}
	}
}

// burstThenQuiet is a trace of 20 requests/s for 30 s then 1 request/s for 60 s (2,000-token prompts, 100
// output tokens), and a planner that scales one aggregated pool between 1 and 4 workers for it.
func burstThenQuiet() (*strings.Builder, planner.Config) {
	var b strings.Builder
	for i := range 600 {
		b.WriteString(`{"timestamp": ` + itoa(i*50) + `, "input_length": 2000, "output_length": 100}` + "\n")
	}
	for i := range 60 {
		b.WriteString(`{"timestamp": ` + itoa(30000+i*1000) + `, "input_length": 2000, "output_length": 100}` + "\n")
	}
	cfg := planner.DefaultConfig()
	cfg.AdjustmentInterval = 10 * time.Second
	cfg.StartupTime = 5 * time.Second
	cfg.TTFTTarget = 300 * time.Millisecond
	cfg.ITLTarget = 40 * time.Millisecond
	cfg.Pools.Agg = &planner.PoolConfig{Min: 1, Max: 4}
	return &b, cfg
}

// TestPlannerScalesWithLoad: a burst of load makes the planner add a worker, ready after its startup
// time; the quiet after it drains it again; GPU-hours are the integral of the worker count.
func TestPlannerScalesWithLoad(t *testing.T) {
	b, cfg := burstThenQuiet()
	o := Options{Workers: 1, Planner: &cfg, Engine: engine.Options{
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 8000, MaxNumSeqs: 64, MaxBatchedTokens: 8192, ChunkedPrefill: true, PrefixCaching: true},
		Timing: timing.Polynomial{}}}
	res := run(t, trace(t, b.String()), o)
	peak, last := 0, 0
	var integral float64 // worker-hours
	for i, p := range res.Scaling {
		peak = max(peak, p.Workers)
		end := res.End
		if i+1 < len(res.Scaling) {
			end = res.Scaling[i+1].At
		}
		integral += float64(p.Workers) * (end - p.At).Hours()
		last = p.Workers
	}
	if peak < 2 || last >= peak {
		t.Fatalf("worker counts %+v: want a scale-up and a scale-down", res.Scaling)
	}
	if d := res.Summary.GPUHours - integral; d > 1e-9 || d < -1e-9 {
		t.Fatalf("GPU-hours %v, integral of the worker count %v", res.Summary.GPUHours, integral)
	}
	for i, p := range res.Scaling[1:] {
		// Workers are ordered (and hold GPUs from then on) at a tick; they leave at a tick, or once drained.
		if p.Workers > res.Scaling[i].Workers && p.At%cfg.AdjustmentInterval != 0 {
			t.Errorf("a worker was ordered at %v, not at a tick", p.At)
		}
	}
	if res.Summary.CompletedRequests != 660 {
		t.Fatalf("completed %d of 660", res.Summary.CompletedRequests)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
