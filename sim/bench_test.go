package sim

import (
	"path/filepath"
	"testing"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// BenchmarkConversationTrace replays the Mooncake conversation trace (12,031 requests, 59 minutes) with
// vLLM's defaults and reports simulated seconds per wall second.
func BenchmarkConversationTrace(b *testing.B) {
	path := filepath.Join("..", "..", "shared", "data", "mooncake", "conversation_trace.jsonl")
	for _, bc := range []struct {
		name      string
		workers   int
		blockSize int
		blocks    int
		policy    router.Policy
		indexed   bool // the routers index every KV event instead of reading the pools in place
	}{
		{"1-worker", 1, 16, 16384, router.RoundRobin, false},
		{"1-worker-never-evicts", 1, 64, 4000000, router.RoundRobin, false},
		{"8-workers-round-robin", 8, 16, 16384, router.RoundRobin, false},
		{"8-workers-kv", 8, 16, 16384, router.KV, false},
		{"8-workers-kv-indexed", 8, 16, 16384, router.KV, true},
		{"8-workers-kv-bs64", 8, 64, 16384, router.KV, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var simulated float64
			for b.Loop() {
				src, err := workload.OpenTrace(path, workload.TraceOptions{})
				if err != nil {
					b.Skipf("shared data not available: %v", err)
				}
				ro := router.DefaultOptions()
				ro.Policy, ro.QueueThreshold = bc.policy, 0
				res, err := Run(src, Options{Workers: bc.workers, Router: ro, Engine: engine.Options{
					VLLM: vllm.Options{BlockSize: bc.blockSize, NumBlocks: bc.blocks, MaxNumSeqs: 256, MaxBatchedTokens: 8192,
						ChunkedPrefill: true, PrefixCaching: true, Events: bc.policy == router.KV},
					Timing: timing.Polynomial{}}, noMirror: bc.indexed})
				if err != nil {
					b.Fatal(err)
				}
				simulated += res.End.Seconds()
			}
			b.ReportMetric(simulated/b.Elapsed().Seconds(), "sim-s/s")
		})
	}
}
