package sim

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// BenchmarkConversationTrace replays the Mooncake conversation trace (12,031 requests, 59 minutes) with
// vLLM's defaults and reports simulated seconds per wall second.
func BenchmarkConversationTrace(b *testing.B) {
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
			ro := router.DefaultOptions()
			ro.Policy, ro.QueueThreshold = bc.policy, 0
			benchTrace(b, Options{Workers: bc.workers, Router: ro, Engine: engine.Options{
				VLLM: vllm.Options{BlockSize: bc.blockSize, NumBlocks: bc.blocks, MaxNumSeqs: 256, MaxBatchedTokens: 8192,
					ChunkedPrefill: true, PrefixCaching: true, Events: bc.policy == router.KV},
				Timing: timing.Polynomial{}}, noMirror: bc.indexed})
		})
	}
}

// BenchmarkConversationTraceSGLang replays the same trace on 8 SGLang workers (page size 1: the router
// indexes one hash per token, from events seen at each pass's end) behind the KV router, and reports
// simulated seconds per wall second. Its pool is mocker's default 262,144 tokens a worker.
func BenchmarkConversationTraceSGLang(b *testing.B) {
	for _, bc := range []struct {
		name  string
		delay time.Duration // --router-event-delay-ms
	}{
		{"8-workers-kv", 0},
		{"8-workers-kv-delay-20ms", 20 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ro := router.DefaultOptions()
			ro.QueueThreshold = 0
			benchTrace(b, Options{Workers: 8, Router: ro, RouterEventDelay: bc.delay, Engine: engine.Options{
				Backend: engine.SGLang,
				SGLang: sglang.Options{PageSize: 1, NumPages: 262144, MaxRunning: 2048, MaxPrefillTokens: 16384,
					ChunkedPrefillSize: 8192, ClipMaxNewTokens: 4096, Conservativeness: 1, Overlap: true,
					PrefixCaching: true, Events: true},
				Timing: timing.Polynomial{}}})
		})
	}
}

// benchTrace replays the conversation trace with o at each iteration and reports simulated seconds per
// wall second.
func benchTrace(b *testing.B, o Options) {
	path := filepath.Join("..", "..", "shared", "data", "mooncake", "conversation_trace.jsonl")
	var simulated float64
	for b.Loop() {
		src, err := workload.OpenTrace(path, workload.TraceOptions{})
		if err != nil {
			b.Skipf("shared data not available: %v", err)
		}
		res, err := Run(src, o)
		if err != nil {
			b.Fatal(err)
		}
		simulated += res.End.Seconds()
	}
	b.ReportMetric(simulated/b.Elapsed().Seconds(), "sim-s/s")
}
