package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

// TestFinishedSeesEachCompletion: the hook sees every completed request's TTFT and E2E as the collector
// records them, and returning false stops the run with ErrStopped.
func TestFinishedSeesEachCompletion(t *testing.T) {
	o := Options{Workers: 2, Engine: engine.Options{
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 1000, MaxNumSeqs: 16, MaxBatchedTokens: 512, ChunkedPrefill: true, PrefixCaching: true},
		Timing: timing.Polynomial{}}}
	var ttfts, e2es []time.Duration
	o.Finished = func(ttft, e2e time.Duration, first bool) bool {
		if first {
			ttfts = append(ttfts, ttft)
		}
		e2es = append(e2es, e2e)
		return true
	}
	res := run(t, synthetic(t, 7), o)
	if len(e2es) != res.Summary.CompletedRequests || len(ttfts) != res.Summary.TTFT.Count {
		t.Fatalf("hook saw %d completions and %d TTFTs; the report has %d and %d", len(e2es), len(ttfts), res.Summary.CompletedRequests, res.Summary.TTFT.Count)
	}
	var maxTTFT, maxE2E time.Duration
	for i := range ttfts {
		maxTTFT = max(maxTTFT, ttfts[i])
	}
	for i := range e2es {
		maxE2E = max(maxE2E, e2es[i])
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if ms(maxTTFT) != res.Summary.TTFT.Max || ms(maxE2E) != res.Summary.E2E.Max {
		t.Errorf("hook's largest TTFT %v and E2E %v; the report's %v and %v", ms(maxTTFT), ms(maxE2E), res.Summary.TTFT.Max, res.Summary.E2E.Max)
	}

	seen := 0
	o.Finished = func(time.Duration, time.Duration, bool) bool { seen++; return seen < 5 }
	if _, err := Run(synthetic(t, 7), o); !errors.Is(err, ErrStopped) || seen != 5 {
		t.Errorf("stopping at the 5th completion: err %v after %d completions; want ErrStopped after 5", err, seen)
	}
}
