package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/sim"
)

func TestDefaultIsValidAndBuilds(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SimOptions(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Source(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.BlockSize = -1 }, "block-size -1"},
		{func(c *Config) { c.SpecNumTokens = 9 }, "spec-num-tokens"},
		{func(c *Config) { c.SpecAcceptRates = []float64{1.5} }, "spec-accept-rates"},
		{func(c *Config) { c.SpecNumTokens, c.DecodeSpeedupRatio = 2, 2 }, "decode-speedup-ratio"},
		{func(c *Config) { c.MaxNumBatchedTokens = 0 }, "max-num-batched-tokens"},
		{func(c *Config) { c.MaxModelLen = -5 }, "max-model-len"},
		{func(c *Config) { c.Backend = "tgi" }, "backend"},
		{func(c *Config) { c.Backend, c.PageSize, c.BlockSize = "sglang", 4, 16 }, "page-size 4 and block-size 16"},
		{func(c *Config) { c.Backend, c.PageSize, c.SGLangChunkedPrefillSize = "sglang", 64, 1000 }, "sglang-chunked-prefill-size"},
		{func(c *Config) { c.SGLangSchedulePolicy = "dfs-weight" }, "sglang-schedule-policy"},
		{func(c *Config) { c.SGLangScheduleConservativeness = 2 }, "sglang-schedule-conservativeness"},
		{func(c *Config) { c.NumGPUBlocks = -1 }, "num-gpu-blocks -1"},
		{func(c *Config) { c.PreemptionMode = "random" }, "preemption-mode"},
		{func(c *Config) { c.VLLMAdmission = "half" }, "vllm-admission half: want prompt or chunk"},
		{func(c *Config) { c.Backend, c.VLLMAdmission = "trtllm", "chunk"; c.Given("vllm-admission", "") }, "vllm-admission chunk: applies to --backend vllm, and the deployment runs trtllm (trtllm admits by guaranteed_no_evict, sglang by its own budgets)"},
		{func(c *Config) { c.DPSize = 0 }, "dp-size"},
		{func(c *Config) { c.MaxLoRAs = 0 }, "max-loras 0: must be at least 1"},
		{func(c *Config) { c.MaxLoRAs, c.MaxCPULoRAs = 4, 2 }, "max-cpu-loras 2: must be at least max-loras (4)"},
		{func(c *Config) { c.MaxCPULoRAs = -1 }, "max-cpu-loras -1: must not be negative"},
		{func(c *Config) { c.MaxLoRAsPerBatch = 0 }, "max-loras-per-batch 0: must be at least 1"},
		{func(c *Config) { c.Backend, c.MaxLoRAs = "sglang", 2; c.Given("max-loras", "") }, "max-loras 2: applies to --backend vllm or trtllm, and the deployment runs sglang (sglang's is --max-loras-per-batch)"},
		{func(c *Config) { c.Backend, c.MaxCPULoRAs = "sglang", 2; c.Given("max-cpu-loras", "") }, "max-cpu-loras 2: applies to --backend vllm or trtllm, and the deployment runs sglang (sglang keeps --max-loras-per-batch adapters loaded)"},
		{func(c *Config) { c.Backend, c.MaxLoRAsPerBatch = "trtllm", 2; c.Given("max-loras-per-batch", "") }, "max-loras-per-batch 2: applies to --backend sglang, and the deployment runs trtllm (vllm's and trtllm's is --max-loras)"},
		{func(c *Config) { c.LoRALoadMs = math.Inf(1) }, "lora-load-ms +Inf: must be a finite number in [0, 1e9]"},
		{func(c *Config) { c.LoRAAdapters, c.Trace = 2, "t.jsonl" }, "lora-adapters 2: applies to the synthetic workload"},
		{func(c *Config) { c.EP = 0 }, "ep 0: must be at least 1"},
		{func(c *Config) { c.TP, c.EP = 8, 3 }, "ep 3: must divide tp 8"},
		{func(c *Config) { c.TP, c.EP = 2, 4 }, "ep 4: must divide tp 2"},
		{func(c *Config) { c.TP, c.DPSize, c.EP = 1, 4, 4 }, "ep 4: must divide tp 1 (the experts are sharded over ep of the tp GPUs; with --dp-attention, of the tp × dp-size GPUs)"},
		{func(c *Config) { c.TP, c.DPSize, c.DPAttention, c.EP = 1, 4, true, 8 }, "ep 8: must divide tp 1 × dp-size 4 (with --dp-attention the experts are sharded over ep of the 4 GPUs)"},
		// vLLM shards the experts over all the GPUs or none; SGLang and TensorRT-LLM into equal shards.
		{func(c *Config) { c.Model, c.TP, c.EP = "qwen3-30b-a3b", 4, 2 }, "ep 2: vLLM shards the experts over all the GPUs or none (--enable-expert-parallel): ep 1 or 4 (tp 4)"},
		{func(c *Config) { c.Model, c.TP, c.EP, c.Timing = "qwen3-30b-a3b", 4, 2, "fixed" }, "ep 2: vLLM shards the experts over all the GPUs or none"},
		{func(c *Config) { c.Model, c.TP, c.DPSize, c.DPAttention, c.EP = "qwen3-30b-a3b", 2, 4, true, 4 }, "ep 4: vLLM shards the experts over all the GPUs or none (--enable-expert-parallel): ep 1 or 8 (tp 2 × dp-size 4)"},
		{func(c *Config) {
			c.Model, c.Backend, c.TP, c.DPSize, c.DPAttention, c.EP = "qwen3-30b-a3b", "sglang", 1, 6, true, 3
		}, "ep 3: qwen3-30b-a3b's 128 routed experts do not split into 3 equal shards (sglang shards them evenly; vLLM takes any ep)"},
		{func(c *Config) {
			c.PrefillWorkers, c.DecodeWorkers, c.Model, c.Backend, c.TP, c.DPSize, c.DPAttention = 1, 1, "qwen3-30b-a3b", "sglang", 1, 6, true
			_ = c.Decode.Set("ep", "6")
		}, "decode-ep 6: qwen3-30b-a3b's 128 routed experts do not split into 6 equal shards"},
		// A TP the model's heads do not split over is no deployment, whatever the timing model.
		{func(c *Config) { c.TP = 3 }, "tp 3: llama-3.1-8b's 32 attention heads do not split over 3 GPUs (TP must divide 32: 1, 2, 4, 8, 16, 32)"},
		{func(c *Config) { c.TP, c.Timing = 3, "fixed" }, "tp 3: llama-3.1-8b's 32 attention heads do not split over 3 GPUs"},
		{func(c *Config) { c.Model, c.TP = "minimax-m2.5", 12 }, "tp 12: minimax-m2.5's 8 key/value heads do not split over 12 GPUs, nor replicate over them evenly"},
		{func(c *Config) { c.Model, c.TP, c.Timing = "qwen3.5-397b-a17b", 32, "fixed" }, "tp 32: qwen3.5-397b-a17b's 16/64 linear-attention key/value heads do not split over 32 GPUs (TP must divide 32 and 16: 1, 2, 4, 8, 16)"},
		{func(c *Config) { c.PrefillWorkers, c.DecodeWorkers = 1, 1; _ = c.Prefill.Set("tp", "3") }, "prefill-tp 3: llama-3.1-8b's 32 attention heads do not split over 3 GPUs"},
		{func(c *Config) { c.PrefillWorkers, c.DecodeWorkers, c.TP = 1, 1, 3; _ = c.Prefill.Set("tp", "2") }, "decode workers: tp 3: llama-3.1-8b's 32 attention heads"},
		// A shared --tp both pools fail on alike is named as given, once, not as one pool's.
		{func(c *Config) { c.PrefillWorkers, c.DecodeWorkers, c.TP = 1, 1, 3 }, "tp 3: llama-3.1-8b's 32 attention heads do not split over 3 GPUs"},
		{func(c *Config) {
			c.Model, c.PrefillWorkers, c.DecodeWorkers, c.DPSize, c.DPAttention = "qwen3-30b-a3b", 1, 1, 1, true
		}, "dp-attention true: needs dp-size 2 or more"},
		{func(c *Config) { c.Model, c.DPAttention = "qwen3-30b-a3b", true }, "dp-attention true: needs dp-size 2 or more (dp-size 1: a single rank shares its MoE layers with no other)"},
		{func(c *Config) { c.DPSize, c.DPAttention, c.Timing = 2, true, "fixed" }, "dp-attention true: needs the op-level timing model (--timing default), which prices the MoE layers over all the ranks' tokens; timing fixed would price each rank as a replica"},
		{func(c *Config) { c.Backend, c.DPSize, c.DPAttention = "trtllm", 2, true }, "dp-attention true: needs the op-level timing model (--timing default), which prices the MoE layers over all the ranks' tokens; timing profile"},
		{func(c *Config) { c.PrefillWorkers, c.DecodeWorkers = 1, 1; _ = c.Decode.Set("dp-attention", "true") }, "decode-dp-attention true: needs dp-size 2 or more (dp-size 1"},
		{func(c *Config) {
			c.PrefillWorkers, c.DecodeWorkers, c.DPSize, c.DPAttention = 1, 1, 2, true
			_ = c.Prefill.Set("dp-size", "1")
		}, "prefill workers: dp-attention true: needs dp-size 2 or more (dp-size 1: a single rank shares its MoE layers with no other)"},
		{func(c *Config) { c.BootstrapMaxConns = 0 }, "bootstrap-max-conns 0"},
		{func(c *Config) { c.KVEventsEndpoint, c.ZMQKVEventsPort = "tcp://*:5557", 5557 }, `kv-events-endpoint "tcp://*:5557": conflicts with --zmq-kv-events-port`},
		{func(c *Config) { c.KVEventsEndpoint = "udp://x:1" }, `kv-events-endpoint "udp://x:1": want tcp://HOST:PORT`},
		{func(c *Config) { c.KVEventsTopic = "kv@{host}@{model}" }, `kv-events-topic "kv@{host}@{model}": needs --zmq-kv-events-port or --kv-events-endpoint`},
		{func(c *Config) { c.ZMQReplayPort = 5558 }, "zmq-replay-port 5558: needs --zmq-kv-events-port or --kv-events-endpoint"},
		{func(c *Config) { c.KVEventsFormat = "msgpack" }, `kv-events-format "msgpack": want dynamo`},
		{func(c *Config) { c.DynamoNamespace = "" }, `dynamo-namespace "": must not be empty`},
		{func(c *Config) { c.DynamoComponent = "" }, `dynamo-component "": must not be empty`},
		{func(c *Config) { c.DynamoEndpoint = "" }, `dynamo-endpoint "": must not be empty`},
		{func(c *Config) { c.DynamoZMQEndpoint, c.DynamoZMQBroker = "tcp://127.0.0.1:0", "tcp://b:5555" }, `dynamo-zmq-broker "tcp://b:5555": conflicts with --dynamo-zmq-endpoint`},
		{func(c *Config) { c.DynamoZMQEndpoint = "ipc:///x" }, `dynamo-zmq-endpoint "ipc:///x": want tcp://HOST:PORT`},
		{func(c *Config) { c.DynamoZMQEndpoint = "tcp://h:70000" }, `dynamo-zmq-endpoint "tcp://h:70000": want tcp://HOST:PORT`},
		{func(c *Config) { c.DynamoZMQBroker = "tcp://:5555" }, `dynamo-zmq-broker "tcp://:5555": want tcp://HOST:PORT`},
		{func(c *Config) { c.WorkerPorts = 70000 }, "worker-ports 70000: must be in [0, 65535]"},
		{func(c *Config) { c.WorkerPorts, c.PrefillWorkers, c.DecodeWorkers = 8001, 1, 1 }, "worker-ports 8001: needs aggregated workers"},
		{func(c *Config) { c.WorkerPorts, c.Workers = 65535, 2 }, "worker-ports 65535: 2 workers need ports up to 65536"},
		{func(c *Config) { c.Timing = "roofline" }, "timing"},
		{func(c *Config) { c.DecodeMs = -1 }, "decode-ms"},
		{func(c *Config) { c.DecodeSpeedupRatio = 0 }, "decode-speedup-ratio"},
		// What sets a pass's time directly is bounded: past it a pass's time wrapped to a negative duration.
		{func(c *Config) { c.SpeedupRatio = 1e-12 }, "speedup-ratio 1e-12: must be at least 0.001 (passes at most 1000 times as long; inf: passes take no time)"},
		{func(c *Config) { c.DecodeSpeedupRatio = 1e-4 }, "decode-speedup-ratio 0.0001: must be at least 0.001 (decode passes at most 1000 times as long again)"},
		{func(c *Config) { c.PrefillMs = 1e300 }, "prefill-ms 1e+300: must be from 0 to 3.6e+06 (an hour a pass)"},
		{func(c *Config) { c.HostOverheadUs = 4e9 }, "host-overhead-us 4e+09: must be from 0 to 3.6e+09 (an hour a request)"},
		{func(c *Config) { c.Workers = 0 }, "workers"},
		{func(c *Config) { c.TraceBlockSize = 0 }, "trace-block-size"},
		{func(c *Config) { c.Concurrency = -1 }, "concurrency"},
		{func(c *Config) { c.FrontendLatencyMs = -1 }, "frontend-latency-ms -1"},
		{func(c *Config) { c.FrontendLatencyMs = math.Inf(1) }, "frontend-latency-ms"},
		{func(c *Config) { c.FrontendLatencyMs = math.NaN() }, "frontend-latency-ms"},
		{func(c *Config) { c.FrontendUsPerRequest = -1 }, "frontend-us-per-request -1"},
		{func(c *Config) { c.FrontendUsPerChunk = math.NaN() }, "frontend-us-per-chunk"},
		{func(c *Config) { c.Concurrency, c.ConcurrencyRampMs = 4, -1 }, "concurrency-ramp-ms -1"},
		{func(c *Config) { c.Concurrency, c.ConcurrencyRampMs = 4, math.Inf(1) }, "concurrency-ramp-ms +Inf"},
		{func(c *Config) { c.ConcurrencyRampMs = 100 }, "concurrency-ramp-ms 100: staggers the clients of --concurrency"},
		{func(c *Config) { c.Concurrency, c.ConcurrencyRampMs, c.Trace = 4, 100, "t.jsonl" }, "concurrency-ramp-ms 100: applies to the synthetic"},
		{func(c *Config) { c.Concurrency, c.ConcurrencyRampMs, c.TurnsPerSession = 4, 100, 2 }, "concurrency-ramp-ms 100: does not combine"},
		{func(c *Config) { c.Concurrency, c.ConcurrencyDesyncMs = 4, -1 }, "concurrency-desync-ms -1"},
		{func(c *Config) { c.ConcurrencyDesyncMs = 100 }, "concurrency-desync-ms 100: spreads the clients of --concurrency"},
		{func(c *Config) { c.Concurrency, c.ConcurrencyDesyncMs, c.Trace = 4, 100, "t.jsonl" }, "concurrency-desync-ms 100: applies to the synthetic"},
		{func(c *Config) { c.Concurrency, c.ConcurrencyDesyncMs, c.TurnsPerSession = 4, 100, 2 }, "concurrency-desync-ms 100: does not combine"},
		{func(c *Config) { c.NumCPUBlocks = -1 }, "num-cpu-blocks -1: must not be negative"},
		{func(c *Config) { c.NumDiskBlocks = 8 }, "num-disk-blocks 8: needs a CPU tier"},
		{func(c *Config) { c.NumCPUBlocks, c.EnablePrefixCaching = 8, false }, "num-cpu-blocks 8: needs --enable-prefix-caching"},
		{func(c *Config) { c.CPUBandwidthGBps = 0 }, "cpu-bandwidth-gbps 0"},
		{func(c *Config) { c.DiskBandwidthGBps = math.Inf(1) }, "disk-bandwidth-gbps +Inf"},
		{func(c *Config) { c.RouterCPUHitWeight = 1.5 }, "router-cpu-hit-weight 1.5: must be in [0, 1]"},
	} {
		c := Default()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want it to start with %q", err, tc.want)
		}
	}
}

// TestTierOptions: a CPU block is one GPU's share of block-size tokens' KV (llama-3.1-8b: 32 layers × 8 KV
// heads × 128 × 2 (K, V) × 2 bytes = 128 KiB a token, half at TP 2), or --kv-bytes-per-token's share.
func TestTierOptions(t *testing.T) {
	for _, tc := range []struct {
		tp, kvBytes int
		want        int64
	}{{1, 0, 16 << 17}, {2, 0, 16 << 16}, {2, 1000, 16 * 500}} {
		c := Default()
		c.NumGPUBlocks, c.NumCPUBlocks, c.NumDiskBlocks, c.TP, c.KVBytesPerToken = 64, 100, 200, tc.tp, tc.kvBytes
		eo, err := c.EngineOptions()
		if err != nil {
			t.Fatal(err)
		}
		want := kvcache.TierOptions{CPUBlocks: 100, DiskBlocks: 200, CPUBandwidth: 50, DiskBandwidth: 5, BlockBytes: tc.want}
		if got := eo.VLLM.Tiers; got != want {
			t.Errorf("tp %d, kv-bytes-per-token %d: tiers %+v, want %+v", tc.tp, tc.kvBytes, got, want)
		}
	}
}

// TestLoRAsPerBatch: SGLang's adapters per batch reach its scheduler, 8 unless given.
func TestLoRAsPerBatch(t *testing.T) {
	for _, tc := range []struct {
		given, want int
	}{{0, 8}, {3, 3}} {
		c := Default()
		c.Backend, c.NumGPUBlocks = "sglang", 64
		if tc.given > 0 {
			c.MaxLoRAsPerBatch = tc.given
			c.Given("max-loras-per-batch", "")
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		eo, err := c.EngineOptions()
		if err != nil {
			t.Fatal(err)
		}
		if eo.SGLang.MaxLoRAsPerBatch != tc.want {
			t.Errorf("max-loras-per-batch %d: scheduler's %d, want %d", tc.given, eo.SGLang.MaxLoRAsPerBatch, tc.want)
		}
	}
}

// TestSGLangTierOptions: with --backend sglang the tiers go below the radix cache (HiCache), a page of
// --block-size tokens being a block: llama-3.1-8b's 128 KiB a token, × 16.
func TestSGLangTierOptions(t *testing.T) {
	c := Default()
	c.Backend, c.BlockSize, c.NumGPUBlocks, c.NumCPUBlocks = "sglang", 16, 64, 100
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	eo, err := c.EngineOptions()
	if err != nil {
		t.Fatal(err)
	}
	want := kvcache.TierOptions{CPUBlocks: 100, CPUBandwidth: 50, DiskBandwidth: 5, BlockBytes: 16 << 17}
	if got := eo.SGLang.Tiers; got != want || eo.Tiers() != want {
		t.Errorf("sglang tiers %+v (engine's %+v), want %+v", got, eo.Tiers(), want)
	}
}

func TestLoadKeepsUnsetKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("# comment\nblock-size: 64\nenable-prefix-caching: false\nrequest-rate: .inf\n"), 0o644)
	c := Default()
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.BlockSize, want.EnablePrefixCaching, want.RequestRate = 64, false, c.RequestRate
	want.given = map[string]string{"block-size": "config " + path + " line 2", "enable-prefix-caching": "config " + path + " line 3",
		"request-rate": "config " + path + " line 4"}
	if !reflect.DeepEqual(normal(c), normal(want)) || c.RequestRate <= 1e308 {
		t.Fatalf("loaded %+v", c)
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(empty, nil, 0o644)
	if err := c.Load(empty); err != nil {
		t.Fatalf("empty file: %v", err)
	}
	two := filepath.Join(t.TempDir(), "two.yaml")
	os.WriteFile(two, []byte("seed: 1\n---\nseed: 2\n"), 0o644)
	if err := c.Load(two); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Fatalf("two documents: %v", err)
	}
}

func TestConcurrencyRamp(t *testing.T) {
	c := Default()
	c.Timing, c.PrefillMs, c.DecodeMs = "fixed", 10, 2
	c.Concurrency, c.NumRequests = 2, 4
	c.InputTokens, c.InputTokensStddev, c.OutputTokens, c.OutputTokensStddev = 16, 0, 3, 0
	c.SharedPrefixRatio, c.RequestRate = 0, math.Inf(1)
	run := func(rampMs float64) []float64 {
		t.Helper()
		c.ConcurrencyRampMs = rampMs
		if rampMs == 0 {
			c.ConcurrencyDesyncMs = 0 // lock step
		}
		res, o := simulate(t, &c)
		if want := map[bool]int{true: 0, false: 2}[rampMs > 0]; o.Concurrency != want {
			t.Errorf("ramp %v ms: sim concurrency %d, want %d", rampMs, o.Concurrency, want)
		}
		var b strings.Builder
		if err := res.Collector.WriteRequestsJSONL(&b); err != nil {
			t.Fatal(err)
		}
		var ttft []float64
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			var r struct {
				Arrival float64 `json:"arrival_ms"`
				TTFT    float64 `json:"ttft_ms"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			ttft = append(ttft, r.Arrival, r.TTFT)
		}
		return ttft
	}
	// All at 0: both prompts share one 12 ms pass (10 prefill + 2 sampling), finish together after
	// two 2 ms decode passes at 16 ms, and the next two do the same.
	if got, want := run(0), []float64{0, 12, 0, 12, 16, 12, 16, 12}; !reflect.DeepEqual(got, want) {
		t.Errorf("no ramp: (arrival, TTFT) = %v, want %v", got, want)
	}
	// Ramp 100 ms: client 1 starts at 50 ms, after client 0's first request ended (16 ms): every
	// prompt is prefilled alone; client 0's second request arrives at 16, client 1's at 66.
	if got, want := run(100), []float64{0, 12, 16, 12, 50, 12, 66, 12}; !reflect.DeepEqual(got, want) {
		t.Errorf("ramp 100 ms: (arrival, TTFT) = %v, want %v", got, want)
	}
}

// TestDesyncDefault: --concurrency alone replays clients that drift apart (auto, one request's lifetime),
// and --concurrency-desync-ms 0, given, keeps them in lock step. TestDesyncAuto's workload: two clients,
// 16-token prompts, 3 outputs, 10 ms prefill and 2 ms decode passes, a 16 ms lifetime. In lock step both
// clients send at 0, 16 and 32 ms and always share a prefill. Drifting, client 1 waits 16·1/2 = 8 ms once
// after its first request, and from then on every prompt has a pass of its own: client 0's second
// (sent at 16) is prefilled alone from 16 to 28; client 1's (sent at 24) waits for that pass and is
// prefilled from 28 to 40 beside client 0's first decode, which ends client 0's request with the decode
// pass from 40 to 42; its third prompt (42) then shares the 42–54 pass with client 1's last decode.
func TestDesyncDefault(t *testing.T) {
	replay := func(c Config) (sends []float64) {
		t.Helper()
		c.Timing, c.PrefillMs, c.DecodeMs = "fixed", 10, 2
		c.Concurrency, c.NumRequests = 2, 6
		c.InputTokens, c.InputTokensStddev, c.OutputTokens, c.OutputTokensStddev = 16, 0, 3, 0
		c.SharedPrefixRatio, c.RequestRate = 0, math.Inf(1)
		res, _ := simulate(t, &c)
		var b strings.Builder
		if err := res.Collector.WriteRequestsJSONL(&b); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			var r struct {
				Arrival float64 `json:"arrival_ms"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			sends = append(sends, r.Arrival)
		}
		slices.Sort(sends)
		return sends
	}
	def := Default()
	if !def.DesyncAuto() {
		t.Fatalf("default desync %v, want auto", def.ConcurrencyDesyncMs)
	}
	if got, want := replay(def), []float64{0, 0, 16, 24, 42, 54}; !reflect.DeepEqual(got, want) {
		t.Errorf("default: sends at %v ms, want %v", got, want)
	}
	off := Default()
	off.ConcurrencyDesyncMs = 0
	if got, want := replay(off), []float64{0, 0, 16, 16, 32, 32}; !reflect.DeepEqual(got, want) {
		t.Errorf("desync 0: sends at %v ms, want %v", got, want)
	}
	// Where the default has no clients to spread, it is 0 and no error: no --concurrency, a ramp.
	for _, set := range []func(*Config){
		func(c *Config) { c.Concurrency = 0 },
		func(c *Config) { c.Concurrency, c.ConcurrencyRampMs = 2, 100 },
		func(c *Config) { c.Concurrency, c.TurnsPerSession = 2, 2 },
		func(c *Config) { c.Concurrency, c.Backend = 2, "sglang" }, // its clients stay grouped
	} {
		c := Default()
		set(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: Validate() = %v", c, err)
		}
		if ms, err := c.ResolveDesync(sim.MeanE2EMs); ms != 0 || err != nil || c.ConcurrencyDesyncMs != 0 {
			t.Errorf("%s, concurrency %d, ramp %v, turns %d: ResolveDesync = %v, %v (desync %v), want 0",
				c.Backend, c.Concurrency, c.ConcurrencyRampMs, c.TurnsPerSession, ms, err, c.ConcurrencyDesyncMs)
		}
	}
}

// TestDesyncGroupedBackend: auto spreads nothing on aggregated SGLang workers (their benchmarks' clients
// stay grouped) and still spreads a disaggregated SGLang deployment's clients.
func TestDesyncGroupedBackend(t *testing.T) {
	for _, tc := range []struct {
		prefill, decode int
		spreads         bool
	}{{0, 0, false}, {1, 1, true}} {
		c := Default()
		c.Backend, c.Timing, c.PrefillMs, c.DecodeMs = "sglang", "fixed", 10, 2
		c.Concurrency, c.NumRequests, c.PrefillWorkers, c.DecodeWorkers = 2, 6, tc.prefill, tc.decode
		c.InputTokens, c.InputTokensStddev, c.OutputTokens, c.OutputTokensStddev = 16, 0, 3, 0
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		ms, err := c.ResolveDesync(sim.MeanE2EMs)
		if err != nil || (ms > 0) != tc.spreads || c.ConcurrencyDesyncMs != ms {
			t.Errorf("prefill %d decode %d: ResolveDesync = %v, %v (desync %v), want spreading %v",
				tc.prefill, tc.decode, ms, err, c.ConcurrencyDesyncMs, tc.spreads)
		}
	}
}

// TestFrontendLatency: the YAML key reaches the simulation as a duration, rounded to the nanosecond.
func TestFrontendLatency(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("frontend-latency-ms: 14.25\n"), 0o644)
	c := Default()
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	o, err := c.SimOptions()
	if err != nil {
		t.Fatal(err)
	}
	if o.FrontendLatency != 14250*time.Microsecond {
		t.Fatalf("frontend latency %v, want 14.25ms", o.FrontendLatency)
	}
}

// TestReplyHeader: gpt-oss's replies open with three tokens its stream shows no text for
// (model.Model.ReplyHeader), so the simulation reports a client's TTFT from the fourth; Llama's
// replies have no header.
func TestReplyHeader(t *testing.T) {
	for model, want := range map[string]int{"gpt-oss-120b": 3, "llama-3.1-8b": 0} {
		c := Default()
		c.Model = model
		o, err := c.SimOptions()
		if err != nil {
			t.Fatal(err)
		}
		if o.ReplyHeader != want {
			t.Errorf("%s: reply header %d, want %d", model, o.ReplyHeader, want)
		}
	}
	// Disaggregated pools size their KV caches at their own TP: the header needs the model only, not
	// the shared settings' deployment (DeepSeek-R1 does not fit one H200).
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("model: deepseek-r1\nsystem: h200_sxm\nprefill-workers: 1\ndecode-workers: 1\nprefill: {tp: 8}\ndecode: {tp: 8}\n"), 0o644)
	c := Default()
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	if o, err := c.SimOptions(); err != nil || o.ReplyHeader != 0 {
		t.Errorf("disaggregated deepseek-r1: reply header %d, err %v; want 0, nil", o.ReplyHeader, err)
	}
}

// TestDatasetPool: requests that repeat a pool's prompts hit the prefix cache once the pool is spent.
// One entry of 32 tokens, four requests one after another (--concurrency 1), vLLM's 16-token blocks:
// the first computes all 32; each later one finds the first block cached and computes the second,
// since a prompt's last token is always computed — 3 × 16 of 128 prompt tokens reused.
func TestDatasetPool(t *testing.T) {
	c := Default()
	c.Timing, c.PrefillMs, c.DecodeMs = "fixed", 10, 2
	c.Concurrency, c.NumRequests, c.ConcurrencyDesyncMs = 1, 4, 0
	c.InputTokens, c.InputTokensStddev, c.OutputTokens, c.OutputTokensStddev = 32, 0, 2, 0
	c.SharedPrefixRatio, c.RequestRate = 0, math.Inf(1)
	reused := func(entries int) float64 {
		t.Helper()
		c.NumDatasetEntries = entries
		res, _ := simulate(t, &c)
		return res.Collector.Summary().PrefixCacheReusedRatio
	}
	if got := reused(0); got != 0 {
		t.Errorf("every prompt new: reused ratio %v, want 0", got)
	}
	if got := reused(1); got != 48.0/128 {
		t.Errorf("one entry: reused ratio %v, want 48/128", got)
	}
	// Two entries: requests 3 and 4 repeat requests 1 and 2.
	if got := reused(2); got != 32.0/128 {
		t.Errorf("two entries: reused ratio %v, want 32/128", got)
	}

	c.NumDatasetEntries, c.Trace = 100, "t.jsonl"
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "num-dataset-entries 100: applies to the synthetic workload") {
		t.Errorf("pool with a trace: Validate() = %v", err)
	}
	c.Trace, c.DatasetSampling = "", "lifo"
	if _, err := c.Source(); err == nil || !strings.Contains(err.Error(), `dataset-sampling-strategy: unknown strategy "lifo"`) {
		t.Errorf("unknown sampling: Source() = %v", err)
	}
}

// TestDesyncAuto: --concurrency-desync-ms auto becomes one request's lifetime. The lock-step replay of
// TestConcurrencyRamp's workload (two clients, 16-token prompts, 3 outputs, 10 ms prefill and 2 ms decode
// passes): both prompts share one 12 ms pass and finish after two decode passes at 16 ms, and the next
// two do the same from 16 to 32 ms, so every request lives 16 ms.
func TestDesyncAuto(t *testing.T) {
	c := Default()
	c.Timing, c.PrefillMs, c.DecodeMs = "fixed", 10, 2
	c.Concurrency, c.NumRequests = 2, 6
	c.InputTokens, c.InputTokensStddev, c.OutputTokens, c.OutputTokensStddev = 16, 0, 3, 0
	c.SharedPrefixRatio, c.RequestRate = 0, math.Inf(1)
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("concurrency-desync-ms: auto\n"), 0o644)
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	if !c.DesyncAuto() {
		t.Fatalf("desync %v after loading auto", c.ConcurrencyDesyncMs)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Source(); err == nil || !strings.Contains(err.Error(), "not resolved") {
		t.Errorf("Source() before ResolveDesync = %v", err)
	}
	ms, err := c.ResolveDesync(sim.MeanE2EMs)
	if err != nil || ms != 16 || c.ConcurrencyDesyncMs != 16 {
		t.Fatalf("ResolveDesync = %v, %v (desync %v), want 16 ms", ms, err, c.ConcurrencyDesyncMs)
	}
	if o, err := c.SimOptions(); err != nil || o.Concurrency != 0 {
		t.Errorf("resolved: sim concurrency %d (%v), want the workload's clients to keep it", o.Concurrency, err)
	}
	if ms, err := c.ResolveDesync(sim.MeanE2EMs); ms != 0 || err != nil {
		t.Errorf("second ResolveDesync = %v, %v: want nothing to do", ms, err)
	}
	c.ConcurrencyDesyncMs, c.Concurrency = math.NaN(), 0
	if err := c.Validate(); err == nil || err.Error() != "config "+path+" line 1: concurrency-desync-ms auto: spreads the clients of --concurrency, which is 0" {
		t.Errorf("auto without clients: Validate() = %v", err)
	}
}

// TestLoadRefusesWhatItCannotHold: integer settings take only integers (yaml would truncate 2.9 to 2),
// every invalid value names the file, line and key, and a file that is not a settings file is refused
// after a bounded read.
func TestLoadRefusesWhatItCannotHold(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{"seed: 1\nworkers: 2.9\n", `line 2: workers: want an integer, got "2.9"`},
		{"workers: 2.0\n", `line 1: workers: want an integer, got "2.0"`},
		{"seed: 1.5\n", `line 1: seed: want a non-negative integer, got "1.5"`},
		{"seed: -1\n", `line 1: seed: want a non-negative integer, got "-1"`},
		{"block-size: 1e3\n", `line 1: block-size: want an integer, got "1e3"`},
		{"num-requests: 10\nworkers: 0\n", "line 2: workers 0: must be at least 1"},
		{"\n\ndp-size: 0\n", "line 3: dp-size 0: must be at least 1"},
		{"workers: 2000\n", "line 1: workers 2000: at most 1024"},
		{"workers: 64\ndp-size: 32\n", "line 1: workers 64: × dp-size 32 is 2048 engine ranks; at most 1024"},
		{"prefill-workers: 2000\ndecode-workers: 1\n", "line 1: prefill-workers 2000: at most 1024"},
		{"prefill-workers: 1\ndecode-workers: 1\nworkers: 1\n", "line 3: workers 1: contradicts --prefill-workers/--decode-workers"},
		{"kv-hash-seed: notanumber\n", `line 1: kv-hash-seed "notanumber": want an integer in [0, 4294967295]`},
		{"kv-hash-seed: 4294967296\n", `line 1: kv-hash-seed "4294967296": want an integer in [0, 4294967295]`},
		{"trace-block-size: 100000000\n", "line 1: trace-block-size 100000000: at most 16777216"},
		{"max-request-body-mb: 9e12\n", "line 1: max-request-body-mb 9e+12: at most 1024"},
		{"backend: sglang\npage-size: 4\nblock-size: 16\n", "line 2: page-size 4 and block-size 16"},
		// live's own options, in live's words, at their line.
		{"seed: 1\nmax-waiting: -1\n", "line 2: max-waiting -1: must be >= 0 (0: unbounded)"},
		{"max-connections: 2000000\n", "line 1: max-connections 2000000: must be in [0, 1048576] (0: 4096)"},
		{"failure-rate: 1.5\n", "line 1: failure-rate 1.5: must be in [0, 1]"},
		{"bootstrap-port: 70000\n", "line 1: bootstrap-port 70000: must be in [0, 65535] (0: any free port)"},
		{"failure-types: [rate_limit, timeout]\n", `line 1: failure-types "timeout": want one of rate_limit, invalid_api_key, context_length, server_error, invalid_request, model_not_found`},
	} {
		path := filepath.Join(dir, "c.yaml")
		os.WriteFile(path, []byte(tc.body), 0o644)
		err := loadAndValidate(path)
		if want := "config " + path + " " + tc.want; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", tc.body, err, want)
		}
	}

	// A value set after the file by a flag is no longer the file's.
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("workers: 3\n"), 0o644)
	c := Default()
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	c.Workers = 0
	c.Given("workers", "")
	if err := c.Validate(); err == nil || err.Error() != "workers 0: must be at least 1" {
		t.Errorf("flag over file: %v", err)
	}

	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, []byte("# "+strings.Repeat("x", 1<<20)+"\n"), 0o644)
	if err := c.Load(big); err == nil || err.Error() != "config "+big+": larger than 1024 KiB (not a settings file?)" {
		t.Errorf("big file: %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if err := c.Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than 1024 KiB") {
			t.Errorf("/dev/zero: %v", err)
		}
	}
}

// simulate validates c, resolves its desync, and runs it with the engines' accounting checked after
// every pass.
func simulate(t *testing.T, c *Config) (*sim.Result, sim.Options) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResolveDesync(sim.MeanE2EMs); err != nil {
		t.Fatal(err)
	}
	src, err := c.Source()
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.SimOptions()
	if err != nil {
		t.Fatal(err)
	}
	o.CheckInvariants = true
	res, err := sim.Run(src, o)
	if err != nil {
		t.Fatal(err)
	}
	return res, o
}

// TestDPAttention: --dp-attention needs routed experts to share; with it --ep may span every GPU of the
// worker, and each GPU holds 1/(tp × dp-size) of the routed experts instead of 1/tp: Qwen3-30B-A3B's
// 48 layers × 128 experts × 3 × 2048 × 768 bf16 weights are 57,982,058,496 B, 28,991,029,248 B a GPU
// at TP 2 and 7,247,757,312 B over 8 GPUs, so a GPU holds 21,743,271,936 B less and its rank's KV
// pool grows; the KV bytes per token stay TP 2's (attention is each rank's).
func TestDPAttention(t *testing.T) {
	for _, tc := range []struct{ model, want string }{
		{"llama-3.1-8b", "dp-attention: the 2 ranks share the routed experts, and model llama-3.1-8b has none (without --dp-attention they are replicas)"},
		{"", "dp-attention: the 2 ranks share the routed experts, and no --model has none (without --dp-attention they are replicas)"},
	} {
		c := Default()
		c.Model, c.DPSize, c.DPAttention = tc.model, 2, true
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Deployment(); err == nil || err.Error() != tc.want {
			t.Errorf("%q: Deployment() = %v, want %q", tc.model, err, tc.want)
		}
	}
	c := Default()
	c.Model, c.System, c.TP, c.DPSize = "qwen3-30b-a3b", "h200_sxm", 2, 4
	replicas, err := c.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	c.DPAttention, c.EP = true, 8
	if err := c.Validate(); err != nil {
		t.Fatalf("ep 8 over tp 2 × dp-size 4: %v", err)
	}
	shared, err := c.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	if d := replicas.WeightBytes - shared.WeightBytes; d != 21743271936 {
		t.Errorf("weights per GPU %d with --dp-attention, %d without: %d B fewer, want 21743271936", shared.WeightBytes, replicas.WeightBytes, d)
	}
	if shared.KVBytes != replicas.KVBytes || shared.KVBlocks <= replicas.KVBlocks {
		t.Errorf("KV: %d B a token and %d blocks with --dp-attention, %d and %d without", shared.KVBytes, shared.KVBlocks, replicas.KVBytes, replicas.KVBlocks)
	}
	// Per pool: the decode workers' own --decode-dp-attention.
	c = Default()
	c.PrefillWorkers, c.DecodeWorkers = 1, 1
	if err := c.Decode.Set("dp-attention", "true"); err != nil {
		t.Fatal(err)
	}
	if !c.ForRole("decode").DPAttention || c.ForRole("prefill").DPAttention {
		t.Errorf("--decode-dp-attention: decode %v, prefill %v", c.ForRole("decode").DPAttention, c.ForRole("prefill").DPAttention)
	}
	// SGLang with drafts: the server's 48 running requests are split over the 8 attention-DP ranks,
	// 6 a rank; as replicas each rank is its own server, 48.
	c = Default()
	c.Backend, c.Model, c.System, c.DPSize, c.SpecNumTokens = "sglang", "qwen3-30b-a3b", "h200_sxm", 8, 2
	for _, tc := range []struct {
		dpAttention bool
		want        int
	}{{false, 48}, {true, 6}} {
		c.DPAttention = tc.dpAttention
		if got, err := c.MaxRunning(); err != nil || got != tc.want {
			t.Errorf("sglang, drafts, dp-size 8, dp-attention %v: max-num-seqs auto %d (%v), want %d", tc.dpAttention, got, err, tc.want)
		}
	}
}

// TestExpertParallelNeedsExperts: --ep above 1 is refused for a dense model and without a model; the
// weights and KV cache per GPU are those of TP alone (the experts split TP ways either way).
func TestExpertParallelNeedsExperts(t *testing.T) {
	for _, tc := range []struct{ model, want string }{
		{"llama-3.1-8b", "ep 2: shards routed experts, and model llama-3.1-8b has none"},
		{"", "ep 2: shards routed experts, and no --model has none"},
	} {
		c := Default()
		c.Model, c.TP, c.EP = tc.model, 2, 2
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Deployment(); err == nil || err.Error() != tc.want {
			t.Errorf("%q: Deployment() = %v, want %q", tc.model, err, tc.want)
		}
	}
	c := Default()
	c.Model, c.System, c.TP = "qwen3-30b-a3b", "h200_sxm", 8
	tp, err := c.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	c.EP = 8
	ep, err := c.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	if ep.WeightBytes != tp.WeightBytes || ep.KVBytes != tp.KVBytes || ep.KVBlocks != tp.KVBlocks {
		t.Errorf("EP 8: weights %d, KV %d B/token, %d blocks; want TP 8's %d, %d, %d", ep.WeightBytes, ep.KVBytes, ep.KVBlocks, tp.WeightBytes, tp.KVBytes, tp.KVBlocks)
	}
}

// TestOwnedSettingsNamed: a setting the owning package refuses is refused in that package's words,
// with the file and line that gave it, or the pool's own key; SGLang's fifo alias is accepted, as its
// message says.
func TestOwnedSettingsNamed(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"backend: tgi\n", "c.yaml line 1: backend tgi: want vllm, trtllm or sglang"},
		{"seed: 1\npreemption-mode: random\n", "c.yaml line 2: preemption-mode random: want lifo or fifo"},
		{"vllm-admission: half\n", "c.yaml line 1: vllm-admission half: want prompt or chunk"},
		{"sglang-schedule-policy: dfs-weight\n", "c.yaml line 1: sglang-schedule-policy dfs-weight: want fcfs (or its alias fifo) or lpm"},
		{"sglang-max-prefill-tokens: 0\n", "c.yaml line 1: sglang-max-prefill-tokens 0: must be at least 1"},
		{"sglang-clip-max-new-tokens: 0\n", "c.yaml line 1: sglang-clip-max-new-tokens 0: must be at least 1"},
		{"sglang-num-reserved-decode-tokens: -1\n", "c.yaml line 1: sglang-num-reserved-decode-tokens -1: must not be negative"},
		{"sglang-schedule-conservativeness: 2\n", "c.yaml line 1: sglang-schedule-conservativeness 2: must be in [0, 1]"},
		{"spec-accept-rates: [0.5, 2]\n", "c.yaml line 1: spec-accept-rates [0.5 2]: each rate must be in [0, 1]"},
		{"timing: roofline\n", "c.yaml line 1: timing roofline: want default, profile, polynomial or fixed"},
		{"router: nearest\n", `c.yaml line 1: router "nearest": want kv, round-robin, random or least-loaded`},
		{"router-queue-policy: lifo\n", `c.yaml line 1: router-queue-policy "lifo": want fcfs, lcfs or wspt`},
		{"kv-transfer-timing-mode: half\n", `c.yaml line 1: kv-transfer-timing-mode "half": want destination_missing or full_prompt`},
		{"on-worker-failure: maybe\n", `c.yaml line 1: on-worker-failure "maybe": want retry or fail`},
		{"fail-worker: [\"0@30s\", \"x\"]\n", `c.yaml line 1: fail-worker "x": no @ (want ID@TIME[:DURATION], e.g. 1@30s:10s)`},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  preemption-mode: random\n", "c.yaml line 4: prefill-preemption-mode random: want lifo or fifo"},
		{"prefill-workers: 1\ndecode-workers: 1\ndecode:\n  sglang-schedule-policy: x\n", "c.yaml line 4: decode-sglang-schedule-policy x: want fcfs (or its alias fifo) or lpm"},
		{"backend: trtllm\nprefill-workers: 1\ndecode-workers: 1\n", "c.yaml line 1: backend trtllm: vLLM's scheduler with TensorRT-LLM's guaranteed_no_evict admission has no disaggregated mode here (as in the reference)"},
	} {
		err := loadAndValidate(writeConfig(t, tc.body))
		if err == nil || !strings.HasSuffix(err.Error(), "/"+tc.want) {
			t.Errorf("%q: got %v, want %q", tc.body, err, tc.want)
		}
	}
	c := Default()
	c.Backend, c.SGLangSchedulePolicy = "sglang", "fifo"
	if err := c.Validate(); err != nil {
		t.Errorf("sglang-schedule-policy fifo: %v", err)
	}
	// An empty value is no default in disguise.
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Backend = "" }, "backend : want vllm, trtllm or sglang"},
		{func(c *Config) { c.PreemptionMode = "" }, "preemption-mode : want lifo or fifo"},
		{func(c *Config) { c.VLLMAdmission = "" }, "vllm-admission : want prompt or chunk"},
		{func(c *Config) { c.SGLangSchedulePolicy = "" }, "sglang-schedule-policy : want fcfs (or its alias fifo) or lpm"},
		{func(c *Config) { c.Timing = "" }, "timing : want default, profile, polynomial or fixed"},
	} {
		c := Default()
		tc.edit(&c)
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
}

// TestBlockSizeDefaults: --block-size 0 is the backend's registered default; SGLang's --page-size wins.
func TestBlockSizeDefaults(t *testing.T) {
	for _, tc := range []struct {
		backend         string
		block, page, bs int
	}{{"vllm", 0, 0, 16}, {"trtllm", 0, 0, 32}, {"sglang", 0, 0, 1}, {"sglang", 0, 8, 8}, {"sglang", 4, 0, 4}, {"vllm", 64, 8, 64}} {
		c := Default()
		c.Backend, c.BlockSize, c.PageSize = tc.backend, tc.block, tc.page
		if got := c.BlockSizeOrDefault(); got != tc.bs {
			t.Errorf("%s block-size %d page-size %d: %d, want %d", tc.backend, tc.block, tc.page, got, tc.bs)
		}
	}
}

// TestAdapters: --lora-modules takes vLLM's NAME=PATH or a bare NAME, each adapter once, none named as the
// base model, and Validate refuses a bad one.
func TestAdapters(t *testing.T) {
	c := Default()
	c.ModelName = "base"
	c.LoRAModules = []string{"sql-lora=/adapters/sql", "chat"}
	want := []live.LoRAModule{{Name: "sql-lora", Path: "/adapters/sql"}, {Name: "chat"}}
	if got, err := c.Adapters(); err != nil || !slices.Equal(got, want) {
		t.Fatalf("Adapters() = %q, %v", got, err)
	}
	for _, tc := range []struct {
		mods []string
		want string
	}{
		{[]string{"=/p"}, `lora-modules "=/p": want NAME or NAME=PATH`},
		{[]string{"a", "a=/p"}, `lora-modules "a=/p": adapter a given twice`},
		{[]string{"base"}, `lora-modules "base": base is the base model's name (model-name)`},
		{[]string{strings.Repeat("x", 257)}, "a name is at most 256 bytes"},
	} {
		c.LoRAModules = tc.mods
		if _, err := c.Adapters(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s", tc.mods, err, tc.want)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: Validate() = %v, want %s", tc.mods, err, tc.want)
		}
	}
}

// TestSyntheticOnlyWithTrace: a setting that shapes only the synthetic workload, given with a trace, is
// refused by name (it would do nothing), from a flag or from a config file's line; its default is not.
func TestSyntheticOnlyWithTrace(t *testing.T) {
	c := Default()
	c.Trace = "t.jsonl"
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults with a trace: %v", err)
	}
	fields := c.fieldsByKey()
	for _, s := range syntheticOnly {
		if _, ok := fields[s.key]; !ok {
			t.Fatalf("%s: not a setting", s.key)
		}
		g := Default()
		g.Trace = "t.jsonl"
		g.Given(s.key, "")
		if err := g.Validate(); err == nil || !strings.HasPrefix(err.Error(), s.key+" ") || !strings.Contains(err.Error(), "applies to the synthetic workload, not to a trace") {
			t.Errorf("%s given with a trace: Validate() = %v", s.key, err)
		}
		g.Trace = ""
		if err := g.Validate(); err != nil {
			t.Errorf("%s given without a trace: Validate() = %v", s.key, err)
		}
	}
	c.Given("input-tokens-stddev", "")
	if err := c.Validate(); err == nil || err.Error() != "input-tokens-stddev 256: applies to the synthetic workload, not to a trace (a row gives its prompt)" {
		t.Errorf("Validate() = %v", err)
	}

	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("trace: t.jsonl\nseed: 3\nrequest-rate: 20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := Default()
	if err := f.Load(path); err != nil {
		t.Fatal(err)
	}
	want := "config " + path + " line 3: request-rate 20: applies to the synthetic workload, not to a trace (a row gives its arrival time; --arrival-speedup-ratio scales them)"
	if err := f.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}

// TestLoadReadsWhatTheFlagsRead: a YAML value the flag takes is taken (inf, which YAML reads as a
// string), a list says what it holds, and a synthetic workload's setting refused when the workload is
// made is named by its file and line, as Validate names the others.
func TestLoadReadsWhatTheFlagsRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	load := func(body string) (*Config, error) {
		os.WriteFile(path, []byte(body), 0o644)
		c := Default()
		return &c, c.Load(path)
	}
	for _, body := range []string{"request-rate: inf\n", "request-rate: .inf\n", "request-rate: +Inf\n"} {
		c, err := load(body)
		if err != nil || !math.IsInf(c.RequestRate, 1) {
			t.Errorf("%q: request-rate %v, error %v", body, c.RequestRate, err)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{"request-rate: nan\n", `line 1: request-rate: want a number, got "nan"`},
		{"request-rate: fast\n", `line 1: request-rate: want a number, got "fast"`},
		{"fail-worker: 0@1s\n", `line 1: fail-worker: want a list of strings, got "0@1s"`},
		{"spec-accept-rates: [high]\n", `line 1: spec-accept-rates: want a list of numbers`},
	} {
		if _, err := load(tc.body); err == nil || err.Error() != "config "+path+" "+tc.want {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{"seed: 1\nrequest-rate: -3\n", "config " + path + " line 2: synthetic: request-rate: must be > 0 (or +Inf) for poisson arrivals, got -3"},
		{"num-requests: 0\n", "config " + path + " line 1: synthetic: num-requests: must be >= 1, got 0"},
		{"seed: 1\n", ""},
	} {
		c, err := load(tc.body)
		if err == nil {
			err = c.Validate()
		}
		if err == nil {
			_, err = c.Source()
		}
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
	// A flag given over the file names no file.
	c, _ := load("request-rate: 3\n")
	c.RequestRate = -1
	c.Given("request-rate", "")
	if _, err := c.Source(); err == nil || err.Error() != "synthetic: request-rate: must be > 0 (or +Inf) for poisson arrivals, got -1" {
		t.Errorf("flag over file: %v", err)
	}
}

// TestDeploymentErrorsNamed: an unknown model or system is named once, and by the file and line that
// gave it.
func TestDeploymentErrorsNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	for _, tc := range []struct{ body, want string }{
		{"seed: 1\nmodel: llama3\n", "config " + path + ` line 2: model: unknown model "llama3" (catalog: `},
		{"seed: 1\nsystem: a100\n", "config " + path + ` line 2: system: hardware: unknown system "a100"`},
		{"model-config: " + path + ".json\n", "config " + path + " line 1: --model-config " + path + ".json: no such file or directory"},
	} {
		os.WriteFile(path, []byte(tc.body), 0o644)
		c := Default()
		if err := c.Load(path); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Deployment(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q...", tc.body, err, tc.want)
		}
	}
	c := Default()
	c.Model = "llama3"
	c.Given("model", "")
	if _, err := c.Deployment(); err == nil || !strings.HasPrefix(err.Error(), `model: unknown model "llama3" (catalog: `) {
		t.Errorf("flag: %v", err)
	}
}

// loadAndValidate loads the settings file at path over the defaults and validates them: the first error.
func loadAndValidate(path string) error {
	c := Default()
	if err := c.Load(path); err != nil {
		return err
	}
	return c.Validate()
}

// TestTimingFlagsNeedTheirModel: a flag only one timing model reads is refused where no pool is priced
// by that model, with the file and line that gave it; where a pool is, or the backend's default is that
// model (TensorRT-LLM's profile), it is taken. Validate opens no file: /db need not exist.
func TestTimingFlagsNeedTheirModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	for _, tc := range []struct{ body, want string }{
		{"seed: 1\nprefill-ms: 5\n", "config " + path + " line 2: prefill-ms 5: applies to --timing fixed, and the passes are priced by --timing default"},
		{"decode-ms: 2\ntiming: polynomial\n", "config " + path + " line 1: decode-ms 2: applies to --timing fixed, and the passes are priced by --timing polynomial"},
		{"profile: h200-qwen3-32b-bf16\n", "config " + path + " line 1: profile h200-qwen3-32b-bf16: applies to --timing profile, and the passes are priced by --timing default"},
		{"timing: fixed\nprefill-ms: 5\ndecode-ms: 2\n", ""},
		{"backend: trtllm\nprofile: h200-llama-3.1-8b-bf16\n", ""},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill-ms: 3\nprefill:\n  timing: fixed\n", ""},
		// Each pool is priced by its own timing: the shared one prices only a pool that sets none.
		{"timing: profile\nprofile: h200-llama-3.1-8b-bf16\nprefill-ms: 3\ndecode-ms: 1\nprefill-workers: 1\ndecode-workers: 1\nprefill:\n  timing: fixed\n", ""},
		{"timing: fixed\nprefill-ms: 3\ndecode-ms: 1\nprefill-workers: 1\ndecode-workers: 1\ndecode:\n  timing: polynomial\n", ""},
		{"timing: fixed\nprefill-ms: 5\nprefill-workers: 1\ndecode-workers: 1\nprefill:\n  timing: polynomial\ndecode:\n  timing: polynomial\n",
			"config " + path + " line 2: prefill-ms 5: applies to --timing fixed, and the passes are priced by --timing polynomial"},
		{"timing: polynomial\nprefill-ms: 5\nprefill-workers: 1\ndecode-workers: 1\ndecode:\n  timing: default\n",
			"config " + path + " line 2: prefill-ms 5: applies to --timing fixed, and the passes are priced by --timing polynomial (prefill) and default (decode)"},
		// A pool's own profile applies only where that pool is priced by profile.
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  profile: h200-llama-3.1-8b-bf16\n",
			"config " + path + " line 4: prefill-profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the prefill passes are priced by --timing default"},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  timing: profile\n  profile: h200-llama-3.1-8b-bf16\n", ""},
		// The op-level model alone reads a database and its version, and prices the experts' shards.
		{"timing: fixed\nperf-db: /db\n", "config " + path + " line 2: perf-db /db: applies to --timing default, and the passes are priced by --timing fixed"},
		{"backend: trtllm\nperf-db: /db\n", "config " + path + " line 2: perf-db /db: applies to --timing default, and the passes are priced by --timing profile"},
		{"timing: polynomial\nbackend-version: 0.24.0\n", "config " + path + " line 2: backend-version 0.24.0: applies to --timing default, and the passes are priced by --timing polynomial"},
		{"model: qwen3-30b-a3b\ntp: 2\nep: 2\ntiming: fixed\n", "config " + path + " line 3: ep 2: applies to --timing default, and the passes are priced by --timing fixed"},
		{"model: qwen3-30b-a3b\ntp: 2\nep: 2\nperf-db: /db\nbackend-version: 0.24.0\n", ""},
		// --ep 1 is no expert parallelism, every model's: taken under any timing, shared or a pool's.
		{"model: qwen3-30b-a3b\ntp: 2\nep: 1\ntiming: fixed\n", ""},
		{"model: qwen3-30b-a3b\ntp: 2\nprefill-workers: 1\ndecode-workers: 1\nprefill:\n  timing: polynomial\n  ep: 1\n", ""},
		{"timing: fixed\nperf-db: /db\nprefill-workers: 1\ndecode-workers: 1\ndecode:\n  timing: default\n", ""},
		{"timing: fixed\nprefill-workers: 1\ndecode-workers: 1\ndecode:\n  backend-version: 0.24.0\n",
			"config " + path + " line 5: decode-backend-version 0.24.0: applies to --timing default, and the decode passes are priced by --timing fixed"},
		{"model: qwen3-30b-a3b\ntp: 2\nprefill-workers: 1\ndecode-workers: 1\nprefill:\n  timing: polynomial\n  ep: 2\n",
			"config " + path + " line 7: prefill-ep 2: applies to --timing default, and the prefill passes are priced by --timing polynomial"},
	} {
		os.WriteFile(path, []byte(tc.body), 0o644)
		err := loadAndValidate(path)
		if tc.want == "" && err != nil || tc.want != "" && fmt.Sprint(err) != tc.want {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestBackendFlagsNeedTheirBackend: a setting only some backends read is refused on a deployment of
// another backend, with the file and line that gave it; on a backend that reads it, it is taken; and
// OnBackend (recommend's shapes) counts it as given only on the backends that read it.
func TestBackendFlagsNeedTheirBackend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	for _, tc := range []struct{ body, want string }{
		{"seed: 1\nsglang-schedule-policy: lpm\n", "config " + path + " line 2: sglang-schedule-policy lpm: applies to --backend sglang, and the deployment runs vllm"},
		{"backend: trtllm\npage-size: 4\n", "config " + path + " line 2: page-size 4: applies to --backend sglang, and the deployment runs trtllm"},
		{"backend: sglang\nmax-loras: 2\n", "config " + path + " line 2: max-loras 2: applies to --backend vllm or trtllm, and the deployment runs sglang (sglang's is --max-loras-per-batch)"},
		{"backend: sglang\nvllm-admission: chunk\n", "config " + path + " line 2: vllm-admission chunk: applies to --backend vllm, and the deployment runs sglang (trtllm admits by guaranteed_no_evict, sglang by its own budgets)"},
		{"backend: sglang\nsglang-schedule-policy: lpm\npage-size: 4\n", ""},
		{"backend: trtllm\nmax-loras: 2\n", ""},
		// A pool's own setting is checked as the shared one is.
		{"backend: sglang\nprefill-workers: 1\ndecode-workers: 1\ndecode:\n  vllm-admission: chunk\n",
			"config " + path + " line 5: decode-vllm-admission chunk: applies to --backend vllm, and the deployment runs sglang (trtllm admits by guaranteed_no_evict, sglang by its own budgets)"},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  sglang-schedule-policy: lpm\n",
			"config " + path + " line 4: prefill-sglang-schedule-policy lpm: applies to --backend sglang, and the deployment runs vllm"},
		{"backend: sglang\nprefill-workers: 1\ndecode-workers: 1\nprefill:\n  sglang-schedule-policy: lpm\n", ""},
	} {
		os.WriteFile(path, []byte(tc.body), 0o644)
		err := loadAndValidate(path)
		if tc.want == "" && err != nil || tc.want != "" && fmt.Sprint(err) != tc.want {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
	c := Default()
	c.SGLangSchedulePolicy = "lpm"
	c.Given("sglang-schedule-policy", "")
	if err := c.UnreadByBackends("vllm", "sglang"); err != nil {
		t.Errorf("read by one of the backends: %v", err)
	}
	if err := c.UnreadByBackends("vllm", "trtllm"); fmt.Sprint(err) != "sglang-schedule-policy lpm: applies to --backend sglang, and the deployment runs vllm and trtllm" {
		t.Errorf("read by none: %v", err)
	}
	v, g := c.OnBackend("vllm"), c.OnBackend("sglang")
	if err := v.Validate(); err != nil || v.Backend != "vllm" {
		t.Errorf("on vllm: %v (backend %s)", err, v.Backend)
	}
	if g.Backend != "sglang" || !g.isGiven("sglang-schedule-policy") || !c.isGiven("sglang-schedule-policy") {
		t.Error("on sglang the setting stays given, and OnBackend leaves c's own record alone")
	}
	c = Default()
	c.PrefillWorkers, c.DecodeWorkers = 1, 1
	c.Given("prefill-workers", "")
	c.Given("decode-workers", "")
	if err := c.Prefill.Set("vllm-admission", "chunk"); err != nil {
		t.Fatal(err)
	}
	c.Given("prefill-vllm-admission", "")
	if err := c.UnreadByBackends("sglang"); fmt.Sprint(err) != "prefill-vllm-admission chunk: applies to --backend vllm, and the deployment runs sglang (trtllm admits by guaranteed_no_evict, sglang by its own budgets)" {
		t.Errorf("a pool's setting read by none: %v", err)
	}
	if g := c.OnBackend("sglang"); g.Validate() != nil || g.isGiven("prefill-vllm-admission") {
		t.Errorf("a pool's setting on a backend that does not read it: %v", g.Validate())
	}
}

// TestTimingInfoPerPool: where the pools' timing differs the report names each pool's, and a pool whose
// model has no source or version (fixed) leaves no empty name behind.
func TestTimingInfoPerPool(t *testing.T) {
	c := Default()
	c.PrefillWorkers, c.DecodeWorkers, c.Timing = 1, 1, "profile"
	fixed := "fixed"
	c.Prefill.Timing = &fixed
	c.PrefillMs, c.DecodeMs = 3, 1
	got, err := c.TimingInfo()
	if err != nil {
		t.Fatal(err)
	}
	want := report.Timing{Model: "prefill fixed, decode profile", Source: "decode h200-llama-3.1-8b-bf16"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestModelAndModelConfigContradict: --model and --model-config name the model two ways; given both,
// --model was silently ignored.
func TestModelAndModelConfigContradict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("model-config: config.json\nmodel: qwen3-32b\n"), 0o644)
	c := Default()
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	if err, want := c.Validate(), "config "+path+" line 2: model qwen3-32b: contradicts --model-config (the model is one or the other)"; fmt.Sprint(err) != want {
		t.Errorf("error %v, want %q", err, want)
	}
	c = Default()
	c.ModelConfig = "config.json" // the default --model is not given
	if err := c.Validate(); err != nil && strings.Contains(err.Error(), "contradicts") {
		t.Errorf("model-config alone: %v", err)
	}
}

// TestBurstTakesNoRate: --arrival burst sends every request at time 0, so a --request-rate given with it
// would be ignored; it is refused instead.
func TestBurstTakesNoRate(t *testing.T) {
	c := Default()
	c.Arrival, c.RequestRate = "burst", 3
	c.Given("arrival", "")
	c.Given("request-rate", "")
	if err, want := c.Validate(), "request-rate 3: does not apply to --arrival burst, which sends every request at time 0"; fmt.Sprint(err) != want {
		t.Errorf("error %v, want %q", err, want)
	}
	c = Default()
	c.Arrival = "burst"
	c.Given("arrival", "")
	if err := c.Validate(); err != nil {
		t.Errorf("burst alone: %v", err)
	}
}

// TestConcurrencyTakesNoArrivals: --concurrency's clients send as their last request ends, so an
// arrival process given with it would be ignored; it is refused instead, naming the key. Its defaults,
// not given, and a rate of inf, which says the same as --concurrency, are no error.
func TestConcurrencyTakesNoArrivals(t *testing.T) {
	for key, set := range map[string]func(*Config){
		"request-rate 3":   func(c *Config) { c.RequestRate = 3 },
		"arrival gamma":    func(c *Config) { c.Arrival = "gamma" },
		"burstiness 0.5":   func(c *Config) { c.Arrival, c.Burstiness = "gamma", 0.5 },
		"arrival default":  nil,
		"request-rate inf": func(c *Config) { c.RequestRate = math.Inf(1) },
	} {
		c := Default()
		c.Concurrency = 4
		c.Given("concurrency", "")
		want := "<nil>"
		if set != nil {
			set(&c)
			name, _, _ := strings.Cut(key, " ")
			c.Given(name, "")
		}
		if set != nil && key != "request-rate inf" {
			want = key + ": does not apply with --concurrency 4, whose clients each send a request as their last one ends, whatever the arrival times"
		}
		if err := c.Validate(); fmt.Sprint(err) != want {
			t.Errorf("%s: error %v, want %s", key, err, want)
		}
	}
}

// TestPlannerPoolsMatchTheDeployment: a planner file whose pools are another deployment's (disaggregated
// pools on aggregated workers, or the reverse) is an error naming the file and what to give, before the
// run, where it failed inside the planner with "no timing model".
func TestPlannerPoolsMatchTheDeployment(t *testing.T) {
	agg, disagg := filepath.Join("..", "docs", "examples", "planner.yaml"), filepath.Join("..", "docs", "examples", "planner-disagg.yaml")
	for _, tc := range []struct {
		file    string
		prefill int
		want    string
	}{
		{agg, 0, ""},
		{disagg, 1, ""},
		{disagg, 0, "planner-config " + disagg + ": its pools are prefill and decode: give --prefill-workers and --decode-workers, or scale aggregated workers with pools: agg"},
		{agg, 1, "planner-config " + agg + ": its pool is agg: scale --prefill-workers and --decode-workers with pools: prefill and decode"},
	} {
		c := Default()
		c.PlannerConfig = tc.file
		if tc.prefill > 0 {
			c.Workers, c.PrefillWorkers, c.DecodeWorkers = 0, 1, 1
		}
		_, err := c.SimOptions()
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%s, prefill workers %d: %v, want %q", tc.file, tc.prefill, err, tc.want)
		}
	}
}

// TestTPSplitsTheSharedExperts: with --ep, which takes the routed experts off the attention TP, the
// shared experts' MLP (1 × 1000 here) still splits as a dense MLP: over the attention TP on vLLM, but
// where expert parallelism spans data-parallel ranks (which replicates it); over every GPU on SGLang.
func TestTPSplitsTheSharedExperts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "model", "testdata", "deepseek-v3", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "shared-1000") // the model's name
	raw = bytes.Replace(raw, []byte(`"moe_intermediate_size": 2048`), []byte(`"moe_intermediate_size": 1000`), 1)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	const over16 = "tp %d: shared-1000's shared-expert MLP size 1000 does not split over 16 GPUs"
	for _, tc := range []struct {
		backend    string
		tp, dp, ep int
		want       string // "" when valid
	}{
		{"vllm", 16, 1, 16, fmt.Sprintf(over16, 16)}, // the routed experts whole on each GPU
		{"vllm", 8, 1, 8, ""},
		{"vllm", 8, 2, 16, ""}, // replicated over the attention TP
		{"sglang", 16, 1, 2, fmt.Sprintf(over16, 16)},
		{"sglang", 8, 1, 2, ""},
		{"sglang", 8, 2, 2, fmt.Sprintf(over16, 8) + " (the shared experts' TP: tp 8 × dp-size 2)"},
	} {
		c := Default()
		c.Backend, c.ModelConfig, c.TP, c.EP, c.Timing = tc.backend, dir, tc.tp, tc.ep, "default"
		c.DPSize, c.DPAttention = tc.dp, tc.dp > 1
		err := c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && fmt.Sprint(err) != tc.want {
			t.Errorf("%s tp %d dp %d ep %d: %v, want %q", tc.backend, tc.tp, tc.dp, tc.ep, err, tc.want)
		}
	}
}

// TestTPSplitsTheExperts: the routed experts split evenly over their own TP, tp × dp-size (with
// --dp-attention) / ep, whatever the timing model: 1000 does not split 16 ways. Where --ep or the ranks
// make that TP, the error says so; where --ep shrinks it, it names --ep.
func TestTPSplitsTheExperts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "model", "testdata", "qwen3-235b-a22b", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "moe-1000") // the model's name
	raw = bytes.Replace(raw, []byte(`"moe_intermediate_size": 1536`), []byte(`"moe_intermediate_size": 1000`), 1)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	const over16 = "expert MLP size 1000 does not split over 16 GPUs"
	for _, tc := range []struct {
		tp, dp, ep int
		timing     string
		want       string // "" when valid
	}{
		{8, 1, 1, "fixed", ""}, // 125 rows each
		{16, 1, 1, "fixed", "tp 16: moe-1000's " + over16},
		{16, 1, 2, "default", ""},
		{32, 1, 2, "default", "ep 2: moe-1000's " + over16 + " (the experts' TP: tp 32 × dp-size 1 / ep 2)"},
		{8, 2, 1, "default", "tp 8: moe-1000's " + over16 + " (the experts' TP: tp 8 × dp-size 2 / ep 1)"},
	} {
		c := Default()
		// SGLang: its --ep may be any that divides the GPUs (vLLM's is 1 or all of them).
		c.Backend, c.ModelConfig, c.TP, c.EP, c.Timing = "sglang", dir, tc.tp, tc.ep, tc.timing
		c.DPSize, c.DPAttention = tc.dp, tc.dp > 1
		err := c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && fmt.Sprint(err) != tc.want {
			t.Errorf("tp %d dp %d ep %d: %v, want %q", tc.tp, tc.dp, tc.ep, err, tc.want)
		}
	}
}
