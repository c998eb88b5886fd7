package sim

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// TestCompactChangesNothing runs TestProperties' random cases (all backends, DP, disaggregation,
// failures, traces and sessions) as they are and with Options.Compact: the summaries, the per-request
// records (streamed to Options.Records by the compact run) and the Finished callbacks' latencies are
// byte-identical.
func TestCompactChangesNothing(t *testing.T) {
	n := uint64(150)
	if testing.Short() {
		n = 40
	}
	for seed := uint64(1); seed <= n; seed++ {
		c := newPropCase(seed)
		o := c.o
		o.limit, o.maxPasses = c.limit(c.source(t))
		var keepCalls, compactCalls bytes.Buffer
		finished := func(b *bytes.Buffer) func(ttft, e2e time.Duration, first bool) bool {
			return func(ttft, e2e time.Duration, first bool) bool {
				fmt.Fprintln(b, ttft, e2e, first)
				return true
			}
		}
		o.Finished = finished(&keepCalls)
		keep, err := Run(c.source(t), o)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, c.describe())
		}
		var compactOut bytes.Buffer
		o.Compact, o.Records, o.Finished = true, &compactOut, finished(&compactCalls)
		compact, err := Run(c.source(t), o)
		if err != nil {
			t.Fatalf("seed %d, compact: %v\n%s", seed, err, c.describe())
		}
		var want bytes.Buffer
		if err := keep.Summary.WriteJSON(&want); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := compact.Summary.WriteJSON(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("seed %d: compact summary\n%s\nwant\n%s\n%s", seed, got.Bytes(), want.Bytes(), c.describe())
		}
		want.Reset()
		if err := keep.Collector.WriteRequestsJSONL(&want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(compactOut.Bytes(), want.Bytes()) {
			t.Fatalf("seed %d: compact records (%d bytes) differ from the kept ones (%d bytes)\n%s", seed, compactOut.Len(), want.Len(), c.describe())
		}
		if !bytes.Equal(compactCalls.Bytes(), keepCalls.Bytes()) {
			t.Fatalf("seed %d: Finished saw other latencies in the compact run\n%s", seed, c.describe())
		}
	}
}

// TestRecordsNeedCompact: records are streamed only by a run that forgets ended requests.
func TestRecordsNeedCompact(t *testing.T) {
	_, err := Run(synthetic(t, 1), Options{Workers: 1, Records: &bytes.Buffer{}})
	if want := "per-request records are streamed only by a compact run"; err == nil || err.Error() != want {
		t.Fatalf("Run: %v; want %q", err, want)
	}
}

// peakHeap runs n synthetic requests (Poisson at 100/s on one worker, which keeps up: a few in flight at
// a time) and returns the most live heap, after a GC, of the times 500 more requests had ended, over the
// heap before the run.
func peakHeap(t *testing.T, n int, compact bool) uint64 {
	src, err := workload.NewSynthetic(workload.SyntheticOptions{
		NumRequests: n, Input: workload.Length{Mean: 64, Stddev: 16}, Output: workload.Length{Mean: 4, Stddev: 2},
		RequestRate: 100, Arrival: "poisson", SharedPrefixRatio: 0.5, NumPrefixGroups: 4, Seed: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before, peak := m.HeapAlloc, m.HeapAlloc
	o := Options{Workers: 1, Compact: compact, Engine: engine.Options{
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 2048, MaxNumSeqs: 64, MaxBatchedTokens: 2048, ChunkedPrefill: true, PrefixCaching: true},
		Timing: timing.Polynomial{}},
		Progress: func(ended int) {
			if ended%500 == 0 {
				runtime.GC()
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		}}
	res, err := Run(src, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Summary.CompletedRequests; got != n {
		t.Fatalf("%d requests: %d completed", n, got)
	}
	return peak - before
}

// TestCompactMemoryFlatInRequests: the live heap of a compact run does not grow with its length once its
// bounded buffers have filled (the chunks of recent ITL gaps, the distributions' values in memory before
// they go to the temporary file): its peak over 120,000 requests exceeds that over 60,000 by under 4 bytes
// per extra request. Keeping the exact percentiles' samples in memory (4 float64s a request, and the
// distinct ITL gaps) took ~27.
func TestCompactMemoryFlatInRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("180,000 requests")
	}
	small, large := peakHeap(t, 60000, true), peakHeap(t, 120000, true)
	per := float64(large-min(large, small)) / 60000
	t.Logf("peak live heap: %d bytes over 60,000 requests, %d over 120,000: %.1f bytes per request", small, large, per)
	if per > 4 {
		t.Errorf("%.1f bytes per extra request; want at most 4", per)
	}
}
