package sim

import (
	"path/filepath"
	"testing"

	"github.com/mocker-sim/mocker/engine"
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
	}{{"bs16-16k-blocks", 1, 16, 16384}, {"bs64-never-evicts", 1, 64, 4000000}, {"8-workers", 8, 16, 16384}} {
		b.Run(bc.name, func(b *testing.B) {
			var simulated float64
			for b.Loop() {
				src, err := workload.OpenTrace(path, workload.TraceOptions{})
				if err != nil {
					b.Skipf("shared data not available: %v", err)
				}
				res, err := Run(src, Options{Workers: bc.workers, Engine: engine.Options{
					VLLM: vllm.Options{BlockSize: bc.blockSize, NumBlocks: bc.blocks, MaxNumSeqs: 256, MaxBatchedTokens: 8192,
						ChunkedPrefill: true, PrefixCaching: true},
					Timing: timing.Polynomial{}}})
				if err != nil {
					b.Fatal(err)
				}
				simulated += res.End.Seconds()
			}
			b.ReportMetric(simulated/b.Elapsed().Seconds(), "sim-s/s")
		})
	}
}
