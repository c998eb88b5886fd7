package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// TestLoRAsShareNoBlocks: the same prompt under two adapters and the base model shares no block, on one
// worker or behind the KV router (which hashes with each adapter's seed too, so it sends a request to the
// worker holding its adapter's blocks): every first request of an adapter computes all of it, every
// second one finds its whole blocks cached.
func TestLoRAsShareNoBlocks(t *testing.T) {
	var rows strings.Builder
	for i, lora := range []string{`"a"`, `"b"`, `null`, `"b"`, `"a"`, `null`} {
		fmt.Fprintf(&rows, `{"timestamp": %d, "input_length": 13, "output_length": 1, "hash_ids": [1, 2, 3, 4], "lora": %s}`+"\n", 1000*i, lora)
	}
	ro := router.DefaultOptions()
	ro.BlockSize, ro.MaxBatchedTokens = 4, 8
	for _, workers := range []int{1, 3} {
		eo := small()
		eo.VLLM.Events = true // the router's index is fed by KV events
		res := run(t, trace(t, rows.String()), Options{Workers: workers, Engine: eo, Router: ro})
		var b bytes.Buffer
		if err := res.Collector.WriteRequestsJSONL(&b); err != nil {
			t.Fatal(err)
		}
		var cached []int
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			var rec struct {
				Cached int `json:"cached_tokens"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			cached = append(cached, rec.Cached)
		}
		if got, want := fmt.Sprint(cached), "[0 0 0 12 12 12]"; got != want {
			t.Errorf("%d workers: cached tokens %s, want %s", workers, got, want)
		}
	}
}

// TestLoRARuns: multi-turn sessions over five adapters (zipf) on every backend, with and without data
// parallelism, behind the KV router: every request completes with the invariants checked after every
// pass, a rerun is byte-identical, conversations still hit their history (a session keeps its adapter),
// and on every backend the adapter loads show in the metrics and the report's lora_loads and lengthen
// TTFT.
func TestLoRARuns(t *testing.T) {
	src := func() workload.Source {
		s, err := workload.NewSynthetic(workload.SyntheticOptions{
			NumRequests: 60, Input: workload.Length{Mean: 300, Stddev: 100}, Output: workload.Length{Mean: 40, Stddev: 20},
			RequestRate: 50, Arrival: "poisson", TurnsPerSession: 3, InterTurnDelay: 50 * time.Millisecond,
			LoRAAdapters: 5, LoRADist: "zipf", Seed: 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ro := router.DefaultOptions()
	ro.BlockSize, ro.MaxBatchedTokens = 16, 512
	for _, backend := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		for _, dp := range []int{1, 2} {
			var ttft []float64 // mean TTFT by load time
			for _, loadMs := range []int{0, 20} {
				eo := engine.Options{Backend: backend, DPSize: dp, Timing: timing.Polynomial{},
					LoRALoad: time.Duration(loadMs) * time.Millisecond,
					VLLM: vllm.Options{BlockSize: 16, NumBlocks: 4000, MaxNumSeqs: 16, MaxBatchedTokens: 512, ChunkedPrefill: true,
						PrefixCaching: true, Events: true, MaxLoRAs: 2, MaxCPULoRAs: 3},
					SGLang: sglang.Options{PageSize: 16, NumPages: 4000, MaxRunning: 16, MaxPrefillTokens: 512, ChunkedPrefillSize: 512,
						ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true, Events: true, MaxLoRAsPerBatch: 3},
				}
				o := Options{Workers: 2, Engine: eo, Router: ro}
				res := run(t, src(), o)
				name := fmt.Sprintf("%v dp=%d load=%dms", backend, dp, loadMs)
				s := res.Summary
				if s.CompletedRequests != 180 || s.PrefixCacheReusedRatio < 0.2 {
					t.Errorf("%s: completed %d, reuse %.3f: want 180 and the history reused", name, s.CompletedRequests, s.PrefixCacheReusedRatio)
				}
				if !bytes.Equal(reportBytes(t, res), reportBytes(t, run(t, src(), o))) {
					t.Errorf("%s: a rerun differs", name)
				}
				var loads int64
				for _, w := range res.Pools[0].Metrics {
					for _, m := range w {
						loads += m.LoRALoads
					}
				}
				if loads < 5 || s.LoRALoads != loads || !s.LoRA {
					t.Errorf("%s: %d adapter loads, %d (%v) in the summary: want at least one per adapter, the same", name, loads, s.LoRALoads, s.LoRA)
				}
				if want := fmt.Sprintf(`"lora_loads": %d,`, loads); !bytes.Contains(reportBytes(t, res), []byte(want)) {
					t.Errorf("%s: the report has no %s", name, want)
				}
				ttft = append(ttft, s.TTFT.Mean)
			}
			if !(ttft[1] > ttft[0]) {
				t.Errorf("%v dp=%d: mean TTFT %.3f ms with free loads, %.3f ms with 20 ms loads", backend, dp, ttft[0], ttft[1])
			}
		}
	}
}
