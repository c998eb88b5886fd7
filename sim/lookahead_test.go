package sim

import (
	"bytes"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// TestLookaheadChangesNothing: workers that run ahead of the event heap between arrivals produce the
// report, byte for byte, of strict time order, across backends, routers, visibility, queueing and a
// frontend latency (whose route events bound the lookahead as arrivals do).
func TestLookaheadChangesNothing(t *testing.T) {
	vllmEngine := engine.Options{
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 150, MaxNumSeqs: 16, MaxBatchedTokens: 512, ChunkedPrefill: true, PrefixCaching: true, Events: true},
		Timing: timing.Polynomial{}}
	sglangEngine := engine.Options{Backend: engine.SGLang,
		SGLang: sglang.Options{PageSize: 16, NumPages: 150, MaxPrefillTokens: 1024, ChunkedPrefillSize: 512, ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true, Events: true},
		Timing: timing.Polynomial{}}
	trtEngine := vllmEngine
	trtEngine.Backend, trtEngine.DPSize = engine.TRTLLM, 2
	kv := router.DefaultOptions()
	kv.QueueThreshold = 0
	queueing := router.DefaultOptions()
	queueing.QueueThreshold = 0.5
	rr := router.DefaultOptions()
	rr.Policy = router.RoundRobin

	single := func(seed uint64) workload.Source {
		src, err := workload.NewSynthetic(workload.SyntheticOptions{
			NumRequests: 150, Input: workload.Length{Mean: 400, Stddev: 150}, Output: workload.Length{Mean: 60, Stddev: 30},
			RequestRate: 40, Arrival: "poisson", SharedPrefixRatio: 0.5, NumPrefixGroups: 4, Seed: seed,
		})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	for _, tc := range []struct {
		name string
		o    Options
		src  func(uint64) workload.Source
	}{
		{"vllm-kv", Options{Workers: 4, Engine: vllmEngine, Router: kv}, single},
		{"vllm-kv-queueing", Options{Workers: 4, Engine: vllmEngine, Router: queueing}, single},
		{"vllm-kv-pass-end-delayed", Options{Workers: 3, Engine: vllmEngine, Router: kv, RouterEventsAtPassEnd: true, RouterEventDelay: 30 * time.Millisecond}, single},
		{"sglang-kv", Options{Workers: 3, Engine: sglangEngine, Router: kv}, single},
		{"trtllm-dp2-round-robin", Options{Workers: 2, Engine: trtEngine, Router: rr}, single},
		{"vllm-multi-turn", Options{Workers: 3, Engine: vllmEngine, Router: kv}, func(seed uint64) workload.Source { return synthetic(t, seed) }},
		{"vllm-kv-frontend", Options{Workers: 4, Engine: vllmEngine, Router: kv, FrontendLatency: 14 * time.Millisecond}, single},
		{"vllm-kv-queueing-frontend", Options{Workers: 4, Engine: vllmEngine, Router: queueing, FrontendLatency: 7300 * time.Microsecond}, single},
		{"sglang-multi-turn-frontend", Options{Workers: 3, Engine: sglangEngine, Router: kv, FrontendLatency: 14 * time.Millisecond}, func(seed uint64) workload.Source { return synthetic(t, seed) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.noLookahead = true
			strict := run(t, tc.src(3), o) // with invariant checks after every pass
			// Lookahead with invariant checks, then without: then plain decode passes coast too.
			for _, check := range []bool{true, false} {
				o := tc.o
				o.CheckInvariants = check
				ahead, err := Run(tc.src(3), o)
				if err != nil {
					t.Fatal(err)
				}
				if a, b := reportBytes(t, ahead), reportBytes(t, strict); !bytes.Equal(a, b) {
					t.Fatalf("checks %v: reports differ:\n%s\n---\n%s", check, a[:min(len(a), 2000)], b[:min(len(b), 2000)])
				}
				if ahead.End != strict.End || ahead.Passes != strict.Passes {
					t.Fatalf("checks %v: end %v / %v, passes %d / %d", check, ahead.End, strict.End, ahead.Passes, strict.Passes)
				}
				t.Logf("checks %v: %d of %d passes delivered ahead, %d coasted; %d preemptions", check, ahead.ahead, ahead.Passes, ahead.coasted, ahead.Summary.Preemptions)
			}
			if strict.ahead != 0 {
				t.Fatalf("%d passes delivered ahead with lookahead off", strict.ahead)
			}
		})
	}
}
