// Package metrics exports a live mocker's workers as Prometheus metrics under the names, types, help
// strings, labels and histogram buckets of the engine they simulate, so dashboards, autoscalers (KEDA,
// WVA) and endpoint pickers (llm-d) built for vLLM, SGLang or TensorRT-LLM read a mocker fleet
// unchanged.
//
// Start with New and Rank. The references are vLLM's vllm/v1/metrics/loggers.py (PrometheusStatLogger)
// and vllm/v1/spec_decode/metrics.py, SGLang's python/sglang/srt/metrics/collector.py
// (SchedulerMetricsCollector, TokenizerMetricsCollector) and TensorRT-LLM's
// tensorrt_llm/metrics/collector.py (MetricsCollector, as trtllm-serve exports it).
//
// # Labels
//
// vLLM labels every series with model_name (the served model name) and engine (the engine-core index,
// which is the data-parallel rank; "0" without data parallelism). SGLang's scheduler series carry
// model_name, engine_type, tp_rank, pp_rank, moe_ep_rank and, with data parallelism, dp_rank; its
// per-request series model_name and engine_type. TensorRT-LLM's carry model_name and engine_type.
// Each engine serves one engine group per process, so a real fleet is told apart by the scraper's
// instance label. A mocker process may run several workers, so every series also carries worker (the
// worker's index in the process); Metrics.WorkerHandler serves one worker's series alone, for a
// listener of its own. Queries that sum or select by the engines' own labels work as they do on them.
//
// vLLM creates request_success_total for every finished_reason up front, and so do we; a reason outside
// that set gets its series on first use.
//
// # Not exported
//
// Series of features mocker does not simulate (LoRA, multi-modal caches aside from vLLM's zero
// counters, KV connectors and offloading, grammar, HiCache, perplexity) and vLLM's per-position
// speculative acceptance (mocker draws acceptance per step, not per position).
package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/mocker-sim/mocker/sched"
)

// The backends whose metrics New exports.
const (
	VLLM   = "vllm"
	SGLang = "sglang"
	TRTLLM = "trtllm"
)

// Label names; worker is ours.
const (
	labelModel      = "model_name"
	labelEngine     = "engine"
	labelWorker     = "worker"
	labelReason     = "finished_reason"
	labelEngineType = "engine_type"
)

// reasons are vLLM's finished_reason values (FINISH_REASON_STRINGS in vllm/v1/engine/__init__.py).
var reasons = []string{"stop", "length", "abort", "error", "repetition"}

// vLLM's prompt token sources (PromptTokenStats.ALL_SOURCES in vllm/v1/metrics/stats.py).
var promptSources = []string{"local_compute", "local_cache_hit", "external_kv_transfer"}

// Bucket boundaries, from the engines' collectors.
var (
	ttftBuckets = []float64{
		0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
	}
	itlBuckets = []float64{
		0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
	}
	requestLatencyBuckets = []float64{
		0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
	}
	iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	paramsNBuckets        = []float64{1, 2, 5, 10, 20}

	sglangTTFTBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	sglangE2EBuckets  = []float64{
		0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400,
	}
	sglangITLBuckets = []float64{
		0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
		0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
	}

	trtllmPrefillBuckets = []float64{
		0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
	}
)

// tokenBuckets is vLLM's build_1_2_5_buckets(maxModelLen): 1, 2, 5, 10, 20, 50, ... up to maxModelLen.
func tokenBuckets(maxModelLen int) []float64 {
	var b []float64
	for p := 1; ; p *= 10 {
		for _, m := range [...]int{1, 2, 5} {
			if m*p > maxModelLen {
				return b
			}
			b = append(b, float64(m*p))
		}
	}
}

// Options describe the engines whose metrics a Metrics exports.
type Options struct {
	// Backend is VLLM (""), SGLang or TRTLLM: whose names, labels and buckets.
	Backend string
	// Model is the served model name (model_name).
	Model string
	// MaxModelLen caps the buckets of vLLM's per-request token histograms, as its max_model_len does;
	// it must be at least 1.
	MaxModelLen int
	// BlockSize and NumBlocks are one rank's KV pool (SGLang: page size and pages), for the cache
	// configuration series endpoint pickers read.
	BlockSize, NumBlocks int
	// PrefixCaching, CacheDtype ("": auto) and GPUMemoryUtilization fill vLLM's cache_config_info.
	PrefixCaching        bool
	CacheDtype           string
	GPUMemoryUtilization float64
	// DPSize is the workers' data-parallel size: SGLang labels its ranks only when it is above 1.
	DPSize int
	// SpecTokens is the number of tokens a speculative step drafts (0: no speculative decoding, and no
	// speculative series, as in the engines).
	SpecTokens int
	// MaxLoRAs > 0 says LoRA adapters are served, max-loras per pass: vLLM then exports
	// lora_requests_info.
	MaxLoRAs int
	// CPUBlocks is one rank's CPU KV tier (vLLM: num_cpu_blocks); with one, its and the disk tier's
	// onboarded prefixes count as vLLM counts a KV connector's: external prefix cache hits.
	CPUBlocks int
}

// Metrics is one process's metrics: a registry of its own (nothing global) and the series of every
// (worker, rank) asked for. It is safe for concurrent use.
type Metrics struct {
	o   Options
	reg *prometheus.Registry

	// Per rank.
	running, waiting, kvUsage                          *prometheus.GaugeVec
	cpuUsage                                           *prometheus.GaugeVec // vLLM with a CPU tier
	usedTokens, availTokens, evictTokens, hitRate      *prometheus.GaugeVec
	freeBlocks, usedBlocks                             *prometheus.GaugeVec
	sleepState, cacheInfo, loraInfo                    *prometheus.GaugeVec
	prefixQueries, prefixHits, preemptions             *prometheus.CounterVec
	extQueries, extHits, mmQueries, mmHits             *prometheus.CounterVec
	promptTokens, generationTokens, bySource           *prometheus.CounterVec
	cachedTokens, recomputed, requestSuccess           *prometheus.CounterVec
	numRequests, aborted                               *prometheus.CounterVec
	specDrafts, specDraftTokens, specAccepted          *prometheus.CounterVec
	ttft, itl, tpot, e2e, queue                        *prometheus.HistogramVec
	inference, prefill, decode, requestTPOT, prefillKV *prometheus.HistogramVec
	requestPrompt, requestGeneration, iteration        *prometheus.HistogramVec
	maxGeneration, paramsN, paramsMaxTokens            *prometheus.HistogramVec

	// Per worker: SGLang's and TensorRT-LLM's constants.
	pageSize, numPages, maxTotalTokens, contextLen *prometheus.GaugeVec

	mu      sync.Mutex
	ranks   map[[2]int]*Rank
	workers map[int]bool
}

// New returns the metrics of a process serving o.Model with o.Backend's names.
func New(o Options) *Metrics {
	if o.MaxModelLen < 1 {
		panic("metrics: MaxModelLen must be at least 1")
	}
	m := &Metrics{o: o, reg: prometheus.NewRegistry(), ranks: make(map[[2]int]*Rank), workers: make(map[int]bool)}
	switch o.Backend {
	case "", VLLM:
		m.o.Backend = VLLM
		m.newVLLM()
	case SGLang:
		m.newSGLang()
	case TRTLLM:
		m.newTRTLLM()
	default:
		panic("metrics: unknown backend " + strconv.Quote(o.Backend))
	}
	return m
}

// builder registers families with one label set.
type builder struct {
	reg    *prometheus.Registry
	labels []string
}

func (b builder) gauge(name, help string, extra ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append(b.labels[:len(b.labels):len(b.labels)], extra...))
	b.reg.MustRegister(v)
	return v
}

// counter registers a counter; prometheus_client appends _total to a counter's name and client_golang
// does not, so name carries it.
func (b builder) counter(name, help string, extra ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(b.labels[:len(b.labels):len(b.labels)], extra...))
	b.reg.MustRegister(v)
	return v
}

func (b builder) histogram(name, help string, buckets []float64) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, b.labels)
	b.reg.MustRegister(v)
	return v
}

// vllmCacheInfo are the CacheConfig fields vLLM's cache_config_info carries as labels, in order.
var vllmCacheInfo = []string{
	"block_size", "cache_dtype", "calculate_kv_scales", "cpu_offload_gb", "enable_prefix_caching",
	"gpu_memory_utilization", "is_attention_free", "kv_sharing_fast_prefill", "num_cpu_blocks",
	"num_gpu_blocks", "num_gpu_blocks_override", "prefix_caching_hash_algo", "sliding_window", "swap_space",
}

func (m *Metrics) newVLLM() {
	b := builder{m.reg, []string{labelModel, labelEngine, labelWorker}}
	tokens := tokenBuckets(m.o.MaxModelLen)
	// Names and help strings are vLLM's, verbatim.
	m.running = b.gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
	m.waiting = b.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
	m.sleepState = b.gauge("vllm:engine_sleep_state", "Engine sleep state; awake = 0 means engine is sleeping; "+
		"awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.", "sleep_state")
	m.kvUsage = b.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
	m.cpuUsage = b.gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.") // vLLM v0's
	m.prefixQueries = b.counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.prefixHits = b.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.extQueries = b.counter("vllm:external_prefix_cache_queries_total",
		"External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.")
	m.extHits = b.counter("vllm:external_prefix_cache_hits_total",
		"External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.")
	m.mmQueries = b.counter("vllm:mm_cache_queries_total", "Multi-modal cache queries, in terms of number of queried items.")
	m.mmHits = b.counter("vllm:mm_cache_hits_total", "Multi-modal cache hits, in terms of number of cached items.")
	m.preemptions = b.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
	m.promptTokens = b.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.bySource = b.counter("vllm:prompt_tokens_by_source_total", "Number of prompt tokens by source.", "source")
	m.cachedTokens = b.counter("vllm:prompt_tokens_cached_total", "Number of cached prompt tokens (local + external).")
	m.recomputed = b.counter("vllm:prompt_tokens_recomputed_total", "Number of cached tokens recomputed for forward pass.")
	m.generationTokens = b.counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.requestSuccess = b.counter("vllm:request_success_total", "Count of successfully processed requests.", labelReason)
	m.requestPrompt = b.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens)
	m.requestGeneration = b.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", tokens)
	m.iteration = b.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", iterationTokenBuckets)
	m.maxGeneration = b.histogram("vllm:request_max_num_generation_tokens",
		"Histogram of maximum number of requested generation tokens.", tokens)
	m.paramsN = b.histogram("vllm:request_params_n", "Histogram of the n request parameter.", paramsNBuckets)
	m.paramsMaxTokens = b.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens)
	m.ttft = b.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = b.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	m.requestTPOT = b.histogram("vllm:request_time_per_output_token_seconds",
		"Histogram of time_per_output_token_seconds per request.", itlBuckets)
	// Removed from vLLM in 0.13, but still read by many dashboards and autoscalers; until then vLLM
	// observed it with the inter-token latency, as we do.
	m.tpot = b.histogram("vllm:time_per_output_token_seconds",
		"Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.", itlBuckets)
	m.e2e = b.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets)
	m.queue = b.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets)
	m.inference = b.histogram("vllm:request_inference_time_seconds",
		"Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets)
	m.prefill = b.histogram("vllm:request_prefill_time_seconds",
		"Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets)
	m.decode = b.histogram("vllm:request_decode_time_seconds",
		"Histogram of time spent in DECODE phase for request.", requestLatencyBuckets)
	m.prefillKV = b.histogram("vllm:request_prefill_kv_computed_tokens",
		"Histogram of new KV tokens computed during prefill (excluding cached tokens).", tokens)
	if m.o.SpecTokens > 0 {
		m.specDrafts = b.counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.")
		m.specDraftTokens = b.counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.")
		m.specAccepted = b.counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.")
	}
	// vLLM's labels are CacheConfig's fields and engine; it emulates an Info with a gauge at 1.
	m.cacheInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:cache_config_info",
		Help: "Information of the LLMEngine CacheConfig"}, append(slices.Clone(vllmCacheInfo), labelEngine, labelWorker))
	m.reg.MustRegister(m.cacheInfo)
	if m.o.MaxLoRAs > 0 {
		// vLLM's labels and engine; the value is the time of the last update (set_to_current_time).
		m.loraInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:lora_requests_info", Help: "Running stats on lora requests."},
			[]string{"max_lora", "waiting_lora_adapters", "running_lora_adapters", labelEngine, labelWorker})
		m.reg.MustRegister(m.loraInfo)
	}
}

func (m *Metrics) newSGLang() {
	ranks := []string{labelModel, labelEngineType, "tp_rank", "pp_rank", "moe_ep_rank"}
	if m.o.DPSize > 1 {
		ranks = append(ranks, "dp_rank")
	}
	ranks = append(ranks, labelWorker)
	s := builder{m.reg, ranks}
	t := builder{m.reg, []string{labelModel, labelEngineType, labelWorker}}
	m.running = s.gauge("sglang:num_running_reqs", "The number of running requests.")
	m.waiting = s.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
	m.hitRate = s.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
	m.kvUsage = s.gauge("sglang:token_usage", "The token usage.")
	m.usedTokens = s.gauge("sglang:num_used_tokens", "The number of used tokens.")
	m.availTokens = s.gauge("sglang:kv_available_tokens", "Number of free token slots in the KV cache pool.")
	m.evictTokens = s.gauge("sglang:kv_evictable_tokens", "Number of evictable (radix-cached) token slots in the KV cache pool.")
	m.preemptions = s.counter("sglang:num_retracted_requests_total", "Total number of retracted requests.")
	m.maxTotalTokens = s.gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.")
	m.pageSize = s.gauge("sglang:page_size", "KV cache page size in tokens.")
	m.numPages = s.gauge("sglang:num_pages", "Number of KV cache pages.")
	m.contextLen = s.gauge("sglang:context_len", "Maximum context length.")
	// Before v0.5.11 SGLang carried its pool as labels of cache_config_info, which llm-d's picker reads.
	m.cacheInfo = s.gauge("sglang:cache_config_info", "Information of the cache configuration.", "page_size", "num_pages")
	m.promptTokens = t.counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
	m.generationTokens = t.counter("sglang:generation_tokens_total", "Number of generation tokens processed.")
	m.cachedTokens = t.counter("sglang:cached_tokens_total", "Number of cached prompt tokens by source (device/host/storage).", "cache_source")
	m.numRequests = t.counter("sglang:num_requests_total", "Number of requests processed.")
	m.aborted = t.counter("sglang:num_aborted_requests_total", "Number of requests aborted.")
	m.ttft = t.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", sglangTTFTBuckets)
	m.itl = t.histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", sglangITLBuckets)
	m.e2e = t.histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", sglangE2EBuckets)
}

func (m *Metrics) newTRTLLM() {
	b := builder{m.reg, []string{labelModel, labelEngineType, labelWorker}}
	m.running = b.gauge("trtllm_num_requests_running", "Number of active requests")
	m.waiting = b.gauge("trtllm_num_requests_waiting", "Number of queued requests")
	m.kvUsage = b.gauge("trtllm_kv_cache_utilization", "KV cache utilization")
	m.hitRate = b.gauge("trtllm_kv_cache_hit_rate", "KV cache hit rate")
	m.freeBlocks = b.gauge("trtllm_kv_cache_free_blocks", "Number of free KV cache blocks")
	m.usedBlocks = b.gauge("trtllm_kv_cache_used_blocks", "Number of used KV cache blocks")
	m.numPages = b.gauge("trtllm_kv_cache_max_blocks", "Maximum number of KV cache blocks")
	m.pageSize = b.gauge("trtllm_kv_cache_tokens_per_block", "Number of tokens per KV cache block")
	m.numRequests = b.counter("trtllm_num_requests_completed_total", "Total number of completed requests across iterations")
	m.promptTokens = b.counter("trtllm_prompt_tokens_total", "Cumulative number of prompt (input) tokens processed.")
	m.generationTokens = b.counter("trtllm_generation_tokens_total", "Cumulative number of generation (output) tokens produced.")
	m.cachedTokens = b.counter("trtllm_prompt_cached_tokens_total", "Process-lifetime total prompt tokens served from KV cache. "+
		"Resets only when the serving process restarts, not when the KV cache is flushed or evicted.")
	m.requestSuccess = b.counter("trtllm_request_success_total", "Count of successfully processed requests.", labelReason)
	m.e2e = b.histogram("trtllm_e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", requestLatencyBuckets)
	m.ttft = b.histogram("trtllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.requestTPOT = b.histogram("trtllm_time_per_output_token_seconds", "Histogram of time per output token in seconds.", itlBuckets)
	m.queue = b.histogram("trtllm_request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets)
	m.prefill = b.histogram("trtllm_request_prefill_time_seconds",
		"Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).", trtllmPrefillBuckets)
	m.decode = b.histogram("trtllm_request_decode_time_seconds",
		"Histogram of decode (generation) phase duration in seconds (last_token_time - first_token_time).", requestLatencyBuckets)
	m.inference = b.histogram("trtllm_request_inference_time_seconds",
		"Histogram of total inference duration in seconds (last_token_time - first_scheduled_time).", requestLatencyBuckets)
	if m.o.SpecTokens > 0 {
		m.specDraftTokens = b.counter("trtllm_spec_decode_num_draft_tokens_total", "Total number of draft tokens in speculative decoding")
		m.specAccepted = b.counter("trtllm_spec_decode_num_accepted_tokens_total", "Total number of accepted tokens in speculative decoding")
	}
}

// Registry returns the registry the metrics live in, to add collectors or gather directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format, for /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// WorkerHandler serves worker w's series alone, for the worker's own listener: an endpoint picker that
// treats each worker as a pod reads that pod's numbers there.
func (m *Metrics) WorkerHandler(w int) http.Handler {
	want := strconv.Itoa(w)
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := m.reg.Gather()
		out := fams[:0]
		for _, f := range fams {
			ms := f.Metric[:0]
			for _, s := range f.Metric {
				for _, lp := range s.GetLabel() {
					if lp.GetName() == labelWorker && lp.GetValue() == want {
						ms = append(ms, s)
						break
					}
				}
			}
			if f.Metric = ms; len(ms) > 0 {
				out = append(out, f)
			}
		}
		return out, err
	})
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// worker sets up the series a worker has once, whatever its ranks; m.mu is held.
func (m *Metrics) worker(w int) {
	if m.workers[w] {
		return
	}
	m.workers[w] = true
	ws := strconv.Itoa(w)
	switch m.o.Backend {
	case TRTLLM:
		lv := []string{m.o.Model, TRTLLM, ws}
		m.pageSize.WithLabelValues(lv...).Set(float64(m.o.BlockSize))
		m.numPages.WithLabelValues(lv...).Set(float64(m.o.NumBlocks))
	}
}

// Rank returns the recorder of one data-parallel rank of one worker, creating its series on first use
// (at zero, as the engines do at startup) and the same *Rank afterwards.
func (m *Metrics) Rank(worker, rank int) *Rank {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]int{worker, rank}
	if r := m.ranks[key]; r != nil {
		return r
	}
	m.worker(worker)
	ws, rs := strconv.Itoa(worker), strconv.Itoa(rank)
	r := &Rank{m: m, blockSize: m.o.BlockSize, success: make(map[string]prometheus.Counter, len(reasons))}
	var lv, per []string // the rank's series, the per-request ones (SGLang's and TensorRT-LLM's are per worker)
	switch m.o.Backend {
	case VLLM:
		lv = []string{m.o.Model, rs, ws}
		per = lv
		r.reasonLabels = lv
		for _, s := range [...]string{"awake", "weights_offloaded", "discard_all"} {
			g := m.sleepState.WithLabelValues(m.o.Model, rs, ws, s)
			if s == "awake" {
				g.Set(1)
			}
		}
		for _, c := range []*prometheus.CounterVec{m.extQueries, m.extHits, m.mmQueries, m.mmHits} {
			c.WithLabelValues(lv...)
		}
		if m.o.CPUBlocks > 0 {
			r.extQueries, r.extHits = m.extQueries.WithLabelValues(lv...), m.extHits.WithLabelValues(lv...)
			r.cpuUsage = m.cpuUsage.WithLabelValues(lv...)
		}
		r.bySource = make(map[string]prometheus.Counter, len(promptSources))
		for _, s := range promptSources {
			r.bySource[s] = m.bySource.WithLabelValues(m.o.Model, rs, ws, s)
		}
		r.recomputed = m.recomputed.WithLabelValues(lv...)
		info := map[string]string{
			"block_size": strconv.Itoa(m.o.BlockSize), "cache_dtype": "auto", "calculate_kv_scales": "False",
			"cpu_offload_gb": "0", "enable_prefix_caching": pyBool(m.o.PrefixCaching),
			"gpu_memory_utilization": strconv.FormatFloat(m.o.GPUMemoryUtilization, 'g', -1, 64),
			"is_attention_free":      "False", "kv_sharing_fast_prefill": "False", "num_cpu_blocks": cpuBlocks(m.o.CPUBlocks),
			"num_gpu_blocks": strconv.Itoa(m.o.NumBlocks), "num_gpu_blocks_override": "None",
			"prefix_caching_hash_algo": "sha256", "sliding_window": "None", "swap_space": "4",
			labelEngine: rs, labelWorker: ws,
		}
		if m.o.CacheDtype != "" {
			info["cache_dtype"] = m.o.CacheDtype
		}
		m.cacheInfo.With(info).Set(1)
		if m.loraInfo != nil {
			r.loraLabels = []string{strconv.Itoa(m.o.MaxLoRAs), "", "", rs, ws}
			m.loraInfo.WithLabelValues(r.loraLabels...).SetToCurrentTime()
		}
	case SGLang:
		lv = []string{m.o.Model, "unified", "0", "0", "0"}
		if m.o.DPSize > 1 {
			lv = append(lv, rs)
		}
		lv = append(lv, ws)
		per = []string{m.o.Model, "unified", ws}
		r.usedTokens = m.usedTokens.WithLabelValues(lv...)
		r.availTokens = m.availTokens.WithLabelValues(lv...)
		r.evictTokens = m.evictTokens.WithLabelValues(lv...)
		r.hitRate = m.hitRate.WithLabelValues(lv...)
		pool := m.o.BlockSize * m.o.NumBlocks
		m.maxTotalTokens.WithLabelValues(lv...).Set(float64(pool))
		m.pageSize.WithLabelValues(lv...).Set(float64(m.o.BlockSize))
		m.numPages.WithLabelValues(lv...).Set(float64(m.o.NumBlocks))
		m.contextLen.WithLabelValues(lv...).Set(float64(m.o.MaxModelLen))
		m.cacheInfo.WithLabelValues(append(slices.Clone(lv), strconv.Itoa(m.o.BlockSize), strconv.Itoa(m.o.NumBlocks))...).Set(1)
		r.numRequests = m.numRequests.WithLabelValues(per...)
		r.aborted = m.aborted.WithLabelValues(per...)
		r.cachedBySource = m.cachedTokens.WithLabelValues(m.o.Model, "unified", ws, "device")
	case TRTLLM:
		lv = []string{m.o.Model, TRTLLM, ws}
		per = lv
		r.reasonLabels = lv
		r.hitRate = m.hitRate.WithLabelValues(lv...)
		r.freeBlocks = m.freeBlocks.WithLabelValues(lv...)
		r.usedBlocks = m.usedBlocks.WithLabelValues(lv...)
		r.numRequests = m.numRequests.WithLabelValues(lv...)
	}
	r.running = m.running.WithLabelValues(lv...)
	r.waiting = m.waiting.WithLabelValues(lv...)
	r.kvUsage = m.kvUsage.WithLabelValues(lv...)
	r.promptTokens = m.promptTokens.WithLabelValues(per...)
	r.generationTokens = m.generationTokens.WithLabelValues(per...)
	r.preemptions = child(m.preemptions, lv)
	r.prefixQueries, r.prefixHits = child(m.prefixQueries, lv), child(m.prefixHits, lv)
	if m.o.Backend != SGLang {
		r.cachedTokens = child(m.cachedTokens, per)
	}
	r.specDrafts, r.specDraftTokens, r.specAccepted = child(m.specDrafts, per), child(m.specDraftTokens, per), child(m.specAccepted, per)
	r.ttft, r.itl, r.tpot = observer(m.ttft, per), observer(m.itl, per), observer(m.tpot, per)
	r.e2e, r.queue = observer(m.e2e, per), observer(m.queue, per)
	r.inference, r.prefill, r.decode = observer(m.inference, per), observer(m.prefill, per), observer(m.decode, per)
	r.requestTPOT, r.prefillKV = observer(m.requestTPOT, per), observer(m.prefillKV, per)
	r.requestPrompt, r.requestGeneration = observer(m.requestPrompt, per), observer(m.requestGeneration, per)
	r.iteration, r.maxGeneration = observer(m.iteration, per), observer(m.maxGeneration, per)
	r.paramsN, r.paramsMaxTokens = observer(m.paramsN, per), observer(m.paramsMaxTokens, per)
	if m.o.Backend == VLLM {
		for _, reason := range reasons {
			r.success[reason] = m.requestSuccess.WithLabelValues(append(slices.Clone(lv), reason)...)
		}
	}
	m.ranks[key] = r
	return r
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// child is v's series for lv, or nil where the backend has no such family.
func child(v *prometheus.CounterVec, lv []string) prometheus.Counter {
	if v == nil {
		return nil
	}
	return v.WithLabelValues(lv...)
}

func observer(v *prometheus.HistogramVec, lv []string) prometheus.Observer {
	if v == nil {
		return nil
	}
	return v.WithLabelValues(lv...)
}

// Rank records one data-parallel rank of one worker. Its label values are resolved once, so recording
// costs no allocation; the live server calls it per token. Series the backend does not export are nil
// and record nothing. It is safe for concurrent use.
type Rank struct {
	m            *Metrics
	blockSize    int
	reasonLabels []string // request_success_total's labels before finished_reason

	running, waiting, kvUsage                        prometheus.Gauge
	cpuUsage                                         prometheus.Gauge // vLLM with a CPU tier
	usedTokens, availTokens, evictTokens, hitRate    prometheus.Gauge
	freeBlocks, usedBlocks                           prometheus.Gauge
	prefixQueries, prefixHits, preemptions           prometheus.Counter
	extQueries, extHits                              prometheus.Counter // vLLM with a lower KV tier
	promptTokens, generationTokens, cachedTokens     prometheus.Counter
	cachedBySource, recomputed, numRequests, aborted prometheus.Counter
	specDrafts, specDraftTokens, specAccepted        prometheus.Counter
	bySource                                         map[string]prometheus.Counter
	ttft, itl, tpot, e2e, queue                      prometheus.Observer
	inference, prefill, decode, requestTPOT          prometheus.Observer
	prefillKV, requestPrompt, requestGeneration      prometheus.Observer
	iteration, maxGeneration, paramsN                prometheus.Observer
	paramsMaxTokens                                  prometheus.Observer

	mu      sync.Mutex    // guards last, success and loraLabels
	last    sched.Metrics // the totals SetState last saw
	success map[string]prometheus.Counter
	// lora_requests_info's labels now. vLLM leaves each past combination of adapters behind at the time
	// it last held; only the current one is kept here, so that the series stay as few as the ranks.
	loraLabels []string
}

func set(g prometheus.Gauge, v float64) {
	if g != nil {
		g.Set(v)
	}
}

func add(c prometheus.Counter, v float64) {
	if c != nil {
		c.Add(v)
	}
}

func observe(o prometheus.Observer, v float64) {
	if o != nil {
		o.Observe(v)
	}
}

// SetState publishes the rank's scheduler state after a pass: the gauges as they are, and the counters
// advanced by how far sched.Metrics' running totals moved since the last call. Totals that went back
// (a restarted engine) count from zero again.
func (r *Rank) SetState(s sched.Metrics) {
	set(r.running, float64(s.Running))
	set(r.waiting, float64(s.Waiting))
	set(r.kvUsage, s.CacheUsage())
	if r.cpuUsage != nil {
		set(r.cpuUsage, float64(s.Tiers.CPUUsed)/float64(r.m.o.CPUBlocks))
	}
	bs := float64(r.blockSize)
	set(r.usedTokens, float64(s.ActiveBlocks)*bs)
	set(r.evictTokens, float64(s.InactiveBlocks)*bs)
	set(r.availTokens, float64(s.TotalBlocks-s.ActiveBlocks-s.InactiveBlocks)*bs)
	set(r.usedBlocks, float64(s.ActiveBlocks))
	set(r.freeBlocks, float64(s.TotalBlocks-s.ActiveBlocks))
	if s.PrefixQueries > 0 {
		set(r.hitRate, float64(s.PrefixHits)/float64(s.PrefixQueries))
	}
	r.mu.Lock()
	advance(r.preemptions, r.last.Preemptions, s.Preemptions)
	advance(r.prefixQueries, r.last.PrefixQueries, s.PrefixQueries)
	// vLLM counts the tokens a KV connector loads as external hits, not local ones; with lower tiers, every
	// prompt token looked up is a connector query too.
	lastExt, ext := r.external(r.last), r.external(s)
	advance(r.prefixHits, r.last.PrefixHits-lastExt, s.PrefixHits-ext)
	if r.extQueries != nil {
		advance(r.extQueries, r.last.PrefixQueries, s.PrefixQueries)
		advance(r.extHits, lastExt, ext)
	}
	// A speculative step drafts SpecTokens tokens and emits the accepted ones plus one of its own.
	advance(r.specDrafts, r.last.SpecSteps, s.SpecSteps)
	if k := int64(r.m.o.SpecTokens); k > 0 {
		advance(r.specDraftTokens, k*r.last.SpecSteps, k*s.SpecSteps)
		advance(r.specAccepted, r.last.SpecTokens-r.last.SpecSteps, s.SpecTokens-s.SpecSteps)
	}
	r.last = s
	if l := r.loraLabels; l != nil {
		if l[1] != s.WaitingLoRAs || l[2] != s.RunningLoRAs {
			r.m.loraInfo.DeleteLabelValues(l...)
			l[1], l[2] = s.WaitingLoRAs, s.RunningLoRAs
		}
		r.m.loraInfo.WithLabelValues(l...).SetToCurrentTime()
	}
	r.mu.Unlock()
}

// external is the prompt tokens onboarded from the lower KV tiers.
func (r *Rank) external(s sched.Metrics) int64 {
	return (s.Tiers.CPUHits + s.Tiers.DiskHits) * int64(r.blockSize)
}

func advance(c prometheus.Counter, last, total int64) {
	switch {
	case c == nil:
	case total > last:
		c.Add(float64(total - last))
	case total < last:
		c.Add(float64(total))
	}
}

// Prompt counts a request's prompt tokens once its prefill is done, cached of them found in the prefix
// cache. vLLM counts the whole prompt, cached tokens included, in the step that produces the first
// token, and splits it by source; the engine recomputes the last prompt token when it found them all.
func (r *Rank) Prompt(tokens, cached int) {
	add(r.promptTokens, float64(tokens))
	if r.bySource != nil {
		recomputed := 0
		if cached >= tokens && tokens > 0 {
			recomputed, cached = 1, tokens-1
		}
		r.bySource["local_compute"].Add(float64(tokens - cached))
		r.bySource["local_cache_hit"].Add(float64(cached))
		r.recomputed.Add(float64(recomputed))
	}
	add(r.cachedTokens, float64(cached))
}

// Generated counts output tokens as they are produced.
func (r *Rank) Generated(tokens int) { add(r.generationTokens, float64(tokens)) }

// Iteration observes the tokens one engine step processed on the rank: the prompts of requests that
// got their first token in it, and the tokens generated in it (vLLM's iteration_tokens_total).
func (r *Rank) Iteration(tokens int) { observe(r.iteration, float64(tokens)) }

// QueueTime observes the time a request waited before it was first scheduled.
func (r *Rank) QueueTime(d time.Duration) { observe(r.queue, d.Seconds()) }

// FirstToken observes a request's time to first token, from its arrival.
func (r *Rank) FirstToken(ttft time.Duration) { observe(r.ttft, ttft.Seconds()) }

// InterToken observes the latency between two consecutive output tokens of a request.
func (r *Rank) InterToken(d time.Duration) {
	s := d.Seconds()
	observe(r.itl, s)
	observe(r.tpot, s)
}

// Request is what a request's end tells the metrics.
type Request struct {
	// Reason is vLLM's finished_reason: stop, length, abort (cancelled, the client gone), error.
	Reason string
	// E2E runs from arrival to the end; Prefill from first scheduled to the first token, Decode from
	// the first token to the last, Inference from first scheduled to the last token.
	E2E, Prefill, Decode, Inference time.Duration
	// PromptTokens, CachedTokens (found in the prefix cache) and OutputTokens (generated).
	PromptTokens, CachedTokens, OutputTokens int
	// MaxTokens and N are the request's parameters.
	MaxTokens, N int
}

// Finished accounts for a request that left the engine.
func (r *Rank) Finished(q Request) {
	if q.Reason == "abort" {
		add(r.aborted, 1)
	} else {
		add(r.numRequests, 1)
	}
	if r.reasonLabels != nil {
		r.mu.Lock()
		c := r.success[q.Reason]
		if c == nil {
			lv := make([]string, 0, len(r.reasonLabels)+1)
			c = r.m.requestSuccess.WithLabelValues(append(append(lv, r.reasonLabels...), q.Reason)...)
			r.success[q.Reason] = c
		}
		r.mu.Unlock()
		c.Inc()
	}
	observe(r.e2e, q.E2E.Seconds())
	observe(r.prefill, q.Prefill.Seconds())
	observe(r.decode, q.Decode.Seconds())
	observe(r.inference, q.Inference.Seconds())
	tpot := 0.0
	if q.OutputTokens > 1 {
		tpot = q.Decode.Seconds() / float64(q.OutputTokens-1)
	}
	observe(r.requestTPOT, tpot)
	observe(r.prefillKV, float64(q.PromptTokens-max(q.CachedTokens, 0)))
	observe(r.requestPrompt, float64(q.PromptTokens))
	observe(r.requestGeneration, float64(q.OutputTokens))
	observe(r.maxGeneration, float64(q.OutputTokens))
	observe(r.paramsN, float64(max(q.N, 1)))
	if q.MaxTokens > 0 {
		observe(r.paramsMaxTokens, float64(q.MaxTokens))
	}
	if q.Reason != "abort" && q.CachedTokens > 0 {
		add(r.cachedBySource, float64(q.CachedTokens))
	}
}

// cpuBlocks is num_cpu_blocks in vLLM's cache_config_info: None without a CPU tier.
func cpuBlocks(n int) string {
	if n == 0 {
		return "None"
	}
	return strconv.Itoa(n)
}
