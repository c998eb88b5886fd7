package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing/profile"
	"github.com/mocker-sim/mocker/timing/registry"
)

// bindFlags registers every setting of predict as a flag named like its YAML key, defaulting to c's value.
func bindFlags(fs *pflag.FlagSet, c *config.Config) {
	fs.SortFlags = false
	bindEngineFlags(fs, c)
	// The simulated API server; serve has a real one.
	fs.Float64Var(&c.FrontendLatencyMs, "frontend-latency-ms", c.FrontendLatencyMs, "milliseconds between a request's arrival and its routing (API server: parsing, tokenisation, hand-off); TTFT and E2E include them")
	fs.Float64Var(&c.FrontendUsPerRequest, "frontend-us-per-request", c.FrontendUsPerRequest, "microseconds a single-threaded API-server process (SGLang's TokenizerManager) spends on each request; requests and chunks queue behind it (0 with --frontend-us-per-chunk 0: no such process)")
	fs.Float64Var(&c.FrontendUsPerChunk, "frontend-us-per-chunk", c.FrontendUsPerChunk, "microseconds that process spends on each streamed chunk (one per request per pass); clients see tokens when it has sent them")
	// The simulated routers and planner; serve's routers see KV events as its engines publish them, and
	// it has no planner.
	fs.Float64Var(&c.RouterEventDelayMs, "router-event-delay-ms", c.RouterEventDelayMs, "delay the KV events the router's indexer sees, to study stale routing")
	fs.BoolVar(&c.RouterEventsAtPassEnd, "router-events-at-pass-end", c.RouterEventsAtPassEnd, "vLLM workers' KV events reach the router when the pass ends, not when it starts (SGLang's always do)")
	fs.StringVar(&c.PlannerConfig, "planner-config", c.PlannerConfig, "autoscale the pools with this planner configuration (YAML)")
	bindWorkloadFlags(fs, c)
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of every random choice")
	fs.StringArrayVar(&c.FailWorker, "fail-worker", c.FailWorker, "kill worker ID at simulated TIME, back empty after DURATION or gone for good without one: ID@TIME[:DURATION], times as Go durations (90s, 1m30s, 250ms) or seconds; repeatable. Workers are numbered as in --requests-jsonl: aggregated 0..N-1, or prefill workers then decode workers")
	fs.StringVar(&c.OnWorkerFailure, "on-worker-failure", c.OnWorkerFailure, "what becomes of a failed worker's requests, waiting or running: retry (routed again and prefilled again elsewhere) or fail")
	bindOutputFlags(fs, c)
}

// bindEngineFlags registers the engine, deployment, timing and cluster settings, which predict and serve
// share.
func bindEngineFlags(fs *pflag.FlagSet, c *config.Config) {
	var backends, blockSizes []string
	for _, b := range engine.Backends {
		backends = append(backends, b.Name+" ("+b.Help+")")
		blockSizes = append(blockSizes, fmt.Sprintf("%s %d", b.Name, b.BlockSize))
	}
	fs.StringVar(&c.Backend, "backend", c.Backend, "engine to simulate: "+strings.Join(backends, ", "))
	fs.IntVar(&c.BlockSize, "block-size", c.BlockSize, "tokens per KV block (0: the backend's default, "+strings.Join(blockSizes, ", ")+"; sglang: --page-size if set)")
	fs.Var(autoInt{&c.NumGPUBlocks}, "num-gpu-blocks", "KV blocks per worker (per data-parallel rank); auto (or 0): from --model, --system, --tp and --gpu-memory-utilization (262,144 tokens' worth without a model)")
	fs.Var(autoInt{&c.MaxNumSeqs}, "max-num-seqs", "running requests per pass at most, per data-parallel rank (SGLang: --max-running-requests, which under --enable-dp-attention is split over the ranks); auto (or 0): the engine's own default on the deployment — vLLM's API server 1,024 on a GPU of 70 GiB or more (H100, H200, B200), else 256; SGLang's from its KV pool (tokens / context length × 512, within 2,048–4,096), or 48 with --spec-num-tokens (SGLang's for EAGLE/NEXTN drafts; with --dp-attention 48 / dp-size a rank); trtllm 256")
	fs.IntVar(&c.MaxNumBatchedTokens, "max-num-batched-tokens", c.MaxNumBatchedTokens, "tokens per forward pass at most")
	fs.IntVar(&c.MaxModelLen, "max-model-len", c.MaxModelLen, "prompt + output tokens per request at most; a longer request is rejected, as vLLM rejects it: a live server (serve, frontend, worker) answers it with a 400, predict counts it, recommend refuses the workload (0: the model's max_position_embeddings, as vLLM's max_model_len and SGLang's context length default to; unbounded without a model)")
	boolPair(fs, &c.EnablePrefixCaching, "enable-prefix-caching", "share KV blocks of common prefixes between requests")
	boolPair(fs, &c.EnableChunkedPrefill, "enable-chunked-prefill", "split long prompts over several passes")
	fs.StringVar(&c.PreemptionMode, "preemption-mode", c.PreemptionMode, "victim when the KV pool is full: lifo (newest running) or fifo (oldest)")
	fs.StringVar(&c.VLLMAdmission, "vllm-admission", c.VLLMAdmission, "vllm: admit a waiting request when its whole prompt fits (prompt: the reference's gate) or when the chunk it is scheduled fits (chunk: vLLM v1's allocate_slots, which admits more and preempts more under KV pressure)")
	fs.IntVar(&c.DPSize, "dp-size", c.DPSize, "data-parallel ranks per worker, each with its own scheduler and KV pool on its own --tp GPUs (a worker has tp × dp-size GPUs)")
	fs.BoolVar(&c.DPAttention, "dp-attention", c.DPAttention, "MoE models, --dp-size 2 or more, --timing default: the --dp-size ranks are attention data parallelism (SGLang's --enable-dp-attention, vLLM's --data-parallel-size on a MoE model): each runs attention on its own batch, all run every MoE layer together on all their tokens in lock step, the experts (and --ep) sharded over all tp × dp-size GPUs; without it the ranks are replicas of the whole model")
	fs.IntVar(&c.MaxLoRAs, "max-loras", c.MaxLoRAs, "vllm, trtllm: LoRA adapters per pass at most; a waiting request of another adapter is passed over (vLLM v1's rule)")
	fs.IntVar(&c.MaxCPULoRAs, "max-cpu-loras", c.MaxCPULoRAs, "vllm, trtllm: LoRA adapters kept loaded, least recently used unloaded first (0: --max-loras)")
	fs.IntVar(&c.MaxLoRAsPerBatch, "max-loras-per-batch", c.MaxLoRAsPerBatch, "sglang: LoRA adapters per batch at most, the base model counting as one, and adapters kept loaded (least recently used unloaded first); a waiting request of another adapter is skipped and keeps its place (SGLang's rule)")
	fs.Float64Var(&c.LoRALoadMs, "lora-load-ms", c.LoRALoadMs, "time to load a LoRA adapter that is not loaded, added to the pass that first uses it")
	fs.IntVar(&c.PageSize, "page-size", c.PageSize, "sglang: tokens per KV page (0: --block-size, else 1)")
	fs.StringVar(&c.SGLangSchedulePolicy, "sglang-schedule-policy", c.SGLangSchedulePolicy, "sglang: waiting-queue policy fcfs or lpm (longest cached prefix first)")
	fs.IntVar(&c.SGLangMaxPrefillTokens, "sglang-max-prefill-tokens", c.SGLangMaxPrefillTokens, "sglang: prompt tokens per prefill batch")
	fs.IntVar(&c.SGLangChunkedPrefillSize, "sglang-chunked-prefill-size", c.SGLangChunkedPrefillSize, "sglang: chunk size of long prompts (<= 0: no chunking)")
	fs.IntVar(&c.SGLangClipMaxNewTokens, "sglang-clip-max-new-tokens", c.SGLangClipMaxNewTokens, "sglang: cap on a running request's remaining output when reserving room")
	fs.IntVar(&c.SGLangReservedDecodeTokens, "sglang-num-reserved-decode-tokens", c.SGLangReservedDecodeTokens, "sglang: decode worker (disaggregated): tokens of decode room kept per request it holds before it takes another prompt, as SGLang's decode preallocation (SGLANG_NUM_RESERVED_DECODE_TOKENS); 0: takes any prompt its pool holds")
	fs.Float64Var(&c.SGLangScheduleConservativeness, "sglang-schedule-conservativeness", c.SGLangScheduleConservativeness, "sglang: scales the initial new_token_ratio (0.7 × this)")
	fs.BoolVar(&c.SGLangEnableMixedChunk, "sglang-enable-mixed-chunk", c.SGLangEnableMixedChunk, "sglang: decode running requests in the same pass as a prefill (with --spec-num-tokens only if given, as SGLang turns it off for drafts)")
	fs.BoolVar(&c.SGLangOverlapSchedule, "sglang-overlap-schedule", c.SGLangOverlapSchedule, "sglang: SGLang's overlap scheduler (on, as in SGLang, whose --disable-overlap-schedule is =false here; off in the Dynamo reference): the next batch is formed when the current one starts, so a request arriving during a pass also waits for the pass after it; with --spec-num-tokens off unless given, as in SGLang without SGLANG_ENABLE_SPEC_V2")
	fs.IntVar(&c.SpecNumTokens, "spec-num-tokens", c.SpecNumTokens, "speculative decoding (MTP): draft tokens verified per decode step (0: off)")
	fs.Float64SliceVar(&c.SpecAcceptRates, "spec-accept-rates", c.SpecAcceptRates, "speculative decoding: conditional acceptance rate of each draft position")

	fs.StringVar(&c.Model, "model", c.Model, "model from the catalog ("+strings.Join(model.Names(), ", ")+") or a Hugging Face id of one")
	fs.StringVar(&c.ModelConfig, "model-config", c.ModelConfig, "a Hugging Face config.json (file or checkpoint directory) instead of --model: model_type llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gpt_oss, minimax_m2 or deepseek_v3")
	fs.StringVar(&c.System, "system", c.System, "GPU system ("+strings.Join(hardware.Names(), ", ")+")")
	fs.IntVar(&c.TP, "tp", c.TP, "tensor parallelism: GPUs per worker (per data-parallel rank)")
	fs.IntVar(&c.EP, "ep", c.EP, "expert parallelism (MoE models): the routed experts sharded over ep of the tp GPUs, each shard split tp/ep ways; attention stays tp (must divide --tp; vLLM: 1 or --tp); with --dp-attention the same over the tp × dp-size GPUs")
	fs.StringVar(&c.Quantization, "quantization", c.Quantization, "weight precision bf16, fp8, fp8_block, or mxfp4 (gpt-oss's checkpoint: experts in MXFP4, the rest in the model's dtype) (empty: the checkpoint's own format — gpt-oss mxfp4, DeepSeek and MiniMax fp8_block, Kimi int4_wo experts, a --model-config's quantization_config fp8 or mxfp4 — else the model's dtype)")
	fs.StringVar(&c.MoEQuantization, "moe-quantization", c.MoEQuantization, "routed experts' precision: bf16, fp8, fp8_block, mxfp4 (weight-only MXFP4, AIConfigurator's w4a16_mxfp4) or int4_wo (empty: --quantization, or without it the checkpoint's)")
	fs.StringVar(&c.KVCacheDtype, "kv-cache-dtype", c.KVCacheDtype, "KV cache precision auto (the model's), bf16 or fp8")
	fs.Float64Var(&c.GPUMemoryUtilization, "gpu-memory-utilization", c.GPUMemoryUtilization, "fraction of GPU memory for weights and KV cache when --num-gpu-blocks is auto")

	fs.StringVar(&c.Timing, "timing", c.Timing, registry.Help())
	fs.StringVar(&c.Profile, "profile", c.Profile, "timing profile: a built-in one ("+strings.Join(profile.BuiltinNames(), ", ")+"), a profiler results directory (Dynamo planner), or a step-time CSV; empty: the built-in profile of --model on --system")
	fs.StringVar(&c.PerfDB, "perf-db", c.PerfDB, "root of a performance database in AIConfigurator's layout, <system>/<op>/<backend>/<version>/ (--timing default; empty: $MOCKER_PERF_DB, an installed aiconfigurator Python package's systems/data, else the built-in tables)")
	fs.StringVar(&c.BackendVersion, "backend-version", c.BackendVersion, "version of the backend's tables in the performance database (empty: the newest with every table needed)")
	fs.Float64Var(&c.PrefillMs, "prefill-ms", c.PrefillMs, "fixed timing: milliseconds of a pass that computes prompt tokens")
	fs.Float64Var(&c.DecodeMs, "decode-ms", c.DecodeMs, "fixed timing: milliseconds of a pass that samples tokens (at least 1)")
	fs.Float64Var(&c.SpeedupRatio, "speedup-ratio", c.SpeedupRatio, "divide every modelled time by this")
	fs.Float64Var(&c.DecodeSpeedupRatio, "decode-speedup-ratio", c.DecodeSpeedupRatio, "divide decode time by this as well")
	fs.Float64Var(&c.HostOverheadUs, "host-overhead-us", c.HostOverheadUs, "engine host (CPU) time per request in each pass, microseconds, added to the timing model's")
	fs.Float64Var(&c.EncoderMsPerImageToken, "encoder-ms-per-image-token", c.EncoderMsPerImageToken, "vision encoder time per image token, ms, charged to the pass that prefills the image unless the encoder cache holds it (0.002: a CLIP ViT-L/14-336 forward, 0.67 GFLOP per token at ~35% of an H200's 989 BF16 TFLOPS; about 1.2 ms per 576-token image)")
	fs.IntVar(&c.EncoderCacheSize, "encoder-cache-size", c.EncoderCacheSize, "per-rank encoder cache in image tokens, LRU: an image it holds is not encoded again; 0: the pass token budget (vLLM's encoder_cache_size = --max-num-batched-tokens; SGLang: --sglang-max-prefill-tokens)")
	fs.IntVar(&c.ImageTokens, "image-tokens", c.ImageTokens, "tokens per image: synthetic images, and each image_url part of a served chat (576: a 336-pixel image in LLaVA-1.5's CLIP ViT-L/14, 24 × 24 patches)")

	fs.IntVar(&c.Workers, "workers", c.Workers, "identical aggregated workers (each prefills and decodes)")
	fs.IntVar(&c.PrefillWorkers, "prefill-workers", c.PrefillWorkers, "disaggregated serving: prefill workers (with --decode-workers; replaces --workers)")
	fs.IntVar(&c.DecodeWorkers, "decode-workers", c.DecodeWorkers, "disaggregated serving: decode workers")
	fs.StringVar(&c.Router, "router", c.Router, "routing over workers and data-parallel ranks: kv (KV-cache aware), round-robin, random or least-loaded")
	fs.Float64Var(&c.OverlapScoreWeight, "overlap-score-weight", c.OverlapScoreWeight, "kv router: weight of the prefill blocks a worker would compute in its cost")
	fs.Float64Var(&c.RouterTemperature, "router-temperature", c.RouterTemperature, "kv router: 0 picks the cheapest worker, > 0 samples a softmax of the costs")
	fs.Float64Var(&c.RouterQueueThreshold, "router-queue-threshold", c.RouterQueueThreshold, "queue requests while every worker has more than this × max-num-batched-tokens of prompt in flight (0: no queue)")
	fs.StringVar(&c.RouterQueuePolicy, "router-queue-policy", c.RouterQueuePolicy, "order of the router's queue: fcfs, lcfs or wspt (least prefill work first)")
	fs.Float64Var(&c.KVTransferBandwidth, "kv-transfer-bandwidth", c.KVTransferBandwidth, "disaggregated serving: each worker's KV link in GB/s, shared by its transfers (0: transfers take no time)")
	fs.Var(autoInt{&c.KVBytesPerToken}, "kv-bytes-per-token", "KV bytes per token a transfer moves (auto or 0: from --model)")
	fs.StringVar(&c.KVTransferTimingMode, "kv-transfer-timing-mode", c.KVTransferTimingMode, "what a handoff moves: destination_missing (blocks the decode worker lacks) or full_prompt")
	fs.IntVar(&c.NumCPUBlocks, "num-cpu-blocks", c.NumCPUBlocks, "KV blocks of the CPU tier below each rank's GPU pool: evicted blocks are offloaded there and prefix hits onboarded back (0: none)")
	fs.IntVar(&c.NumDiskBlocks, "num-disk-blocks", c.NumDiskBlocks, "KV blocks of the disk tier below the CPU tier, which its evictions go to (0: none)")
	fs.Float64Var(&c.CPUBandwidthGBps, "cpu-bandwidth-gbps", c.CPUBandwidthGBps, "GPU<->CPU link of each GPU in GB/s, shared by offloads and onboardings")
	fs.Float64Var(&c.DiskBandwidthGBps, "disk-bandwidth-gbps", c.DiskBandwidthGBps, "CPU<->disk link of each GPU in GB/s")
	fs.Float64Var(&c.RouterCPUHitWeight, "router-cpu-hit-weight", c.RouterCPUHitWeight, "kv router: what a block cached in a worker's lower tier counts for, against 1 for its GPU")
	bindRoleFlags(fs, c)
}

// bindRoleFlags registers --prefill-KEY and --decode-KEY for each setting a disaggregated pool can set
// for itself (config.Role), after the shared flag, whose usage they repeat.
func bindRoleFlags(fs *pflag.FlagSet, c *config.Config) {
	for _, role := range config.Roles {
		r := c.Role(role)
		for _, key := range config.RoleKeys() {
			usage := fmt.Sprintf("disaggregated serving: the %s workers' --%s (default: --%s)", role, key, key)
			if f := fs.Lookup(key); f != nil {
				usage = fmt.Sprintf("%s workers: %s (default: --%s)", role, f.Usage, key)
			}
			f := fs.VarPF(roleFlag{r, key}, role+"-"+key, "", usage)
			if r.IsBool(key) {
				f.NoOptDefVal = "true"
			}
		}
	}
}

// roleFlag is one per-role setting as a flag.
type roleFlag struct {
	r   *config.Role
	key string
}

func (f roleFlag) String() string     { return f.r.Get(f.key) }
func (f roleFlag) Set(s string) error { return f.r.Set(f.key, s) }
func (f roleFlag) Type() string       { return f.r.TypeName(f.key) }

// bindWorkloadFlags registers the settings of the workload predict replays.
func bindWorkloadFlags(fs *pflag.FlagSet, c *config.Config) {
	fs.StringVar(&c.Trace, "trace", c.Trace, "replay this trace (Mooncake JSONL with AIPerf's and Dynamo's fields, or Azure CSV) instead of the synthetic workload")
	fs.StringVar(&c.TraceFormat, "trace-format", c.TraceFormat, "trace format: auto (by extension and first line), mooncake (also AIPerf's and Dynamo's rows), bailian (seconds, turns chained by parent_chat_id), azure or applied-compute (Dynamo's applied_compute_agentic)")
	fs.IntVar(&c.TraceBlockSize, "trace-block-size", c.TraceBlockSize, "tokens per hash id in the trace (Mooncake: 512)")
	fs.StringVar(&c.Tokenizer, "tokenizer", c.Tokenizer, "trace rows given as text_input or messages: a Hugging Face tokenizer.json (file or model directory) for their prompt tokens (empty: the built-in tokenizer, as serve)")
	fs.IntVar(&c.DefaultMaxTokens, "default-max-tokens", c.DefaultMaxTokens, "trace rows without output_length: the max_tokens they get, as serve gives a request without one")
	fs.StringVar(&c.OutputLengthDist, "output-length-dist", c.OutputLengthDist, "trace rows without output_length: where they meet their end-of-sequence, drawn per row from --seed (as serve): fixed (always --default-max-tokens), uniform (on [1, it]), lognormal:MEAN:SIGMA")
	fs.Float64Var(&c.ArrivalSpeedupRatio, "arrival-speedup-ratio", c.ArrivalSpeedupRatio, "divide arrival times and inter-turn delays by this")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "keep this many requests (sessions) in flight, ignoring arrival times (0: follow them)")
	fs.Float64Var(&c.ConcurrencyRampMs, "concurrency-ramp-ms", c.ConcurrencyRampMs, "synthetic, with --concurrency N: start client k at k × this / N ms instead of all at 0; each client then sends its requests back to back")
	fs.Var(autoFloat{&c.ConcurrencyDesyncMs}, "concurrency-desync-ms", "synthetic, with --concurrency N: client k waits k × this / N ms once, after its first request, so clients that start together spread out as a benchmark's do; auto (the default): one request's lifetime (the mean E2E of a lock-step replay of 2·N requests), which gives the desynchronised steady state, and nothing with a trace, multi-turn sessions or --concurrency-ramp-ms; 0: lock step")
	fs.IntVar(&c.NumRequests, "num-requests", c.NumRequests, "synthetic: requests (sessions, when multi-turn)")
	fs.Float64Var(&c.InputTokens, "input-tokens", c.InputTokens, "synthetic: mean prompt tokens (new tokens per turn)")
	fs.StringVar(&c.SyntheticLengths, "synthetic-lengths", c.SyntheticLengths, "synthetic: fixed (every prompt --input-tokens and every output --output-tokens long, no shared prefix, as genai-perf, AIPerf and vllm bench serve send by default; a stddev or --shared-prefix-ratio given still applies), spread (--input-tokens-stddev, --output-tokens-stddev and --shared-prefix-ratio at their values, given or default) or auto (the default: fixed with --concurrency, spread without)")
	fs.Float64Var(&c.InputTokensStddev, "input-tokens-stddev", c.InputTokensStddev, "synthetic: standard deviation of prompt tokens (with --synthetic-lengths fixed, 0 unless given)")
	fs.Float64Var(&c.OutputTokens, "output-tokens", c.OutputTokens, "synthetic: mean output tokens")
	fs.Float64Var(&c.OutputTokensStddev, "output-tokens-stddev", c.OutputTokensStddev, "synthetic: standard deviation of output tokens (with --synthetic-lengths fixed, 0 unless given)")
	fs.Float64Var(&c.RequestRate, "request-rate", c.RequestRate, "synthetic: requests (sessions) per second; inf: all at once")
	fs.StringVar(&c.Arrival, "arrival", c.Arrival, "synthetic: arrival process poisson, constant, gamma or burst (every request at time 0)")
	fs.Float64Var(&c.Burstiness, "burstiness", c.Burstiness, "synthetic: gamma shape (1: poisson; lower: burstier)")
	fs.Float64Var(&c.SharedPrefixRatio, "shared-prefix-ratio", c.SharedPrefixRatio, "synthetic: fraction of the mean prompt shared within a prefix group (with --synthetic-lengths fixed, 0 unless given)")
	fs.IntVar(&c.NumPrefixGroups, "num-prefix-groups", c.NumPrefixGroups, "synthetic: number of shared-prefix groups")
	fs.IntVar(&c.NumDatasetEntries, "num-dataset-entries", c.NumDatasetEntries, "synthetic: requests repeat a pool of this many prompts, as genai-perf and AIPerf do (their --num-dataset-entries, 100 unless set), so prefix caching sees them again; 0: every prompt is new")
	fs.StringVar(&c.DatasetSampling, "dataset-sampling-strategy", c.DatasetSampling, "synthetic, with --num-dataset-entries: order requests take the pool's prompts in: shuffle (each pass over the pool a new permutation; AIPerf), sequential (genai-perf) or random (with replacement)")
	fs.IntVar(&c.ImagesPerRequest, "images-per-request", c.ImagesPerRequest, "synthetic: images per prompt, placed after its shared prefix; their tokens are added to its length and occupy KV like text (a trace gives a row's images instead)")
	fs.IntVar(&c.ImagePool, "image-pool", c.ImagePool, "synthetic, with --images-per-request: images are drawn from this many distinct ones, so they repeat (encoder cache and prefix-cache reuse); 0: every image is new")
	fs.IntVar(&c.TurnsPerSession, "turns-per-session", c.TurnsPerSession, "synthetic: turns per session; each turn's prompt carries the conversation so far")
	fs.Float64Var(&c.InterTurnDelayMs, "inter-turn-delay-ms", c.InterTurnDelayMs, "synthetic: mean wait after a turn completes before the next")
	fs.StringVar(&c.InterTurnDelayDist, "inter-turn-delay-dist", c.InterTurnDelayDist, "synthetic: inter-turn delay distribution constant or exponential")
	fs.IntVar(&c.LoRAAdapters, "lora-adapters", c.LoRAAdapters, "synthetic: each session is served by one of this many LoRA adapters, lora-0, lora-1, ... (0: the base model; a trace's rows name theirs in field lora)")
	fs.StringVar(&c.LoRADist, "lora-dist", c.LoRADist, "synthetic, with --lora-adapters: how sessions pick their adapter: uniform (empty: the default) or zipf (adapter k with weight 1/(k+1))")
}

// bindOutputFlags registers predict's report files.
func bindOutputFlags(fs *pflag.FlagSet, c *config.Config) {
	fs.StringVar(&c.ReportJSON, "report-json", c.ReportJSON, "write the summary report as JSON to this file")
	fs.StringVar(&c.RequestsJSONL, "requests-jsonl", c.RequestsJSONL, "write one JSON record per request to this file")
	fs.StringVar(&c.ScalingJSONL, "scaling-jsonl", c.ScalingJSONL, "with --planner-config: write the worker counts over time and the planner's decisions to this file")
	fs.StringVar(&c.Perfetto, "perfetto", c.Perfetto, "write a timeline of the run to this file, for ui.perfetto.dev or chrome://tracing: every pass of every worker and DP rank, KV usage and queues, routes, and each request's phases (queued, prefill, transfer, decode)")
	fs.StringVar(&c.PerfettoWindow, "perfetto-window", c.PerfettoWindow, "with --perfetto: keep only the passes and routes in simulated time FROM:TO (Go durations or seconds, e.g. 60s:70s), and the requests that overlap it, whole; a big run's trace stays small enough to open")
	fs.StringVar(&c.HTML, "html", c.HTML, "write a self-contained HTML report to this file: the summary, latency CDFs, and throughput, queues, KV usage, preemptions, prefix hits and KV transfers over time")
	fs.BoolVar(&c.CheckInvariants, "check-invariants", c.CheckInvariants, "verify KV block accounting after every pass (slow)")
}

// boolPair registers --name and --no-name for one setting, as vLLM's CLI does.
func boolPair(fs *pflag.FlagSet, p *bool, name, usage string) {
	fs.BoolVar(p, name, *p, usage)
	f := fs.VarPF(negated{p}, "no-"+name, "", "turn off --"+name)
	f.NoOptDefVal = "true"
}

// negated is a bool flag that stores the opposite of its value.
type negated struct{ p *bool }

func (n negated) String() string {
	if n.p == nil {
		return "false"
	}
	return strconv.FormatBool(!*n.p)
}

func (n negated) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false: %w", err)
	}
	*n.p = !b
	return nil
}

func (negated) Type() string { return "bool" }

// autoInt is an integer flag that also takes "auto", stored as 0 (config.IntOrAuto).
type autoInt struct{ p *int }

func (a autoInt) String() string {
	if a.p == nil || *a.p == 0 {
		return config.Auto
	}
	return strconv.Itoa(*a.p)
}

func (a autoInt) Set(s string) (err error) {
	*a.p, err = config.IntOrAuto(s)
	return err
}

func (autoInt) Type() string { return "int|auto" }

// autoIntList is a list flag of integers that also take "auto", each stored as 0 (config.IntOrAuto), as
// in auto,256,512. Like pflag's slices, its first use replaces the default and later ones append.
type autoIntList struct {
	p   *[]int
	set bool
}

// String is the list as Set takes it (auto,256), and "" when empty, so that help shows no default.
func (a *autoIntList) String() string { return strings.Join(a.GetSlice(), ",") }

func (a *autoIntList) Set(s string) error {
	list, err := parseAutoInts(strings.Split(s, ","))
	if err != nil {
		return err
	}
	if !a.set {
		*a.p, a.set = nil, true
	}
	*a.p = append(*a.p, list...)
	return nil
}

// GetSlice, Replace and Append make it a pflag.SliceValue, which a --config file's loading replaces
// rather than appends to when it sets the flags given again.
func (a *autoIntList) GetSlice() []string {
	out := make([]string, len(*a.p))
	for i, n := range *a.p {
		out[i] = autoInt{&n}.String()
	}
	return out
}

func (a *autoIntList) Replace(vals []string) error {
	list, err := parseAutoInts(vals)
	if err == nil {
		*a.p, a.set = list, true
	}
	return err
}

func (a *autoIntList) Append(v string) error { return a.Set(v) }

func parseAutoInts(vals []string) ([]int, error) {
	var list []int
	for _, v := range vals {
		n, err := config.IntOrAuto(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q: want integers or auto, as in auto,256,512", v)
		}
		list = append(list, n)
	}
	return list, nil
}

func (*autoIntList) Type() string { return "ints|auto" }

// autoFloat is a milliseconds flag that also takes "auto", stored as NaN (config.MsOrAuto).
type autoFloat struct{ p *float64 }

func (a autoFloat) String() string {
	if a.p == nil {
		return "0"
	}
	if math.IsNaN(*a.p) {
		return config.Auto
	}
	return strconv.FormatFloat(*a.p, 'g', -1, 64)
}

func (a autoFloat) Set(s string) (err error) {
	*a.p, err = config.MsOrAuto(s)
	return err
}

func (autoFloat) Type() string { return "ms|auto" }

// loadConfigFile applies a YAML file under the flags: file values replace defaults, and flags given on
// the command line still win.
func loadConfigFile(fs *pflag.FlagSet, c *config.Config, path string) error {
	type setting struct {
		name, value string
		list        []string // a list flag's values: its String() form does not parse back
	}
	var given []setting
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == "config" {
			return
		}
		g := setting{name: f.Name, value: f.Value.String()}
		if l, ok := f.Value.(pflag.SliceValue); ok {
			g.list = l.GetSlice()
		}
		given = append(given, g)
	})
	if err := c.Load(path); err != nil {
		return err
	}
	for _, g := range given {
		var err error
		if g.list != nil {
			err = fs.Lookup(g.name).Value.(pflag.SliceValue).Replace(g.list)
		} else {
			err = fs.Set(g.name, g.value)
		}
		if err != nil {
			return fmt.Errorf("--%s: %w", g.name, err)
		}
	}
	markGiven(fs, c)
	// The model is named one way: by the command line's --model or --model-config over the file's other.
	for _, k := range [][2]string{{"model", "model-config"}, {"model-config", "model"}} {
		if fs.Changed(k[0]) && !fs.Changed(k[1]) {
			c.Drop(k[1])
		}
	}
	return nil
}

// loadSettings applies the --config file, if any, beneath the flags given on the command line, and
// records which settings were given.
func loadSettings(fs *pflag.FlagSet, c *config.Config, path string) error {
	if path != "" {
		return loadConfigFile(fs, c, path)
	}
	markGiven(fs, c)
	return nil
}

// markGiven records the settings given on the command line (config.Config.Given), so that an error
// about one names no file and flags that contradict each other are refused.
func markGiven(fs *pflag.FlagSet, c *config.Config) {
	fs.Visit(func(f *pflag.Flag) {
		if f.Name != "config" {
			c.Given(strings.TrimPrefix(f.Name, "no-"), "")
		}
	})
}
