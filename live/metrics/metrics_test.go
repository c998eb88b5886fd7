package metrics

import (
	"math"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
)

// scrape fetches the handler's exposition and parses it as a Prometheus server would.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type = %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return fams
}

// series returns the metric of family name whose labels include want, failing unless exactly one does.
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no family %s", name)
	}
	var found *dto.Metric
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range want {
			if label(m, k) != v {
				ok = false
			}
		}
		if ok {
			if found != nil {
				t.Fatalf("%s: two series match %v", name, want)
			}
			found = m
		}
	}
	if found == nil {
		t.Fatalf("%s: no series matches %v", name, want)
	}
	return found
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func bounds(h *dto.Histogram) []float64 {
	var b []float64
	for _, bk := range h.GetBucket() {
		b = append(b, bk.GetUpperBound())
	}
	return b
}

// family is one row of an engine's metric table: name, type, help string, label names (sorted, worker
// included) and bucket boundaries (+Inf left implicit).
type family struct {
	name    string
	typ     dto.MetricType
	help    string
	labels  []string
	buckets []float64
}

const (
	gauge     = dto.MetricType_GAUGE
	counter   = dto.MetricType_COUNTER
	histogram = dto.MetricType_HISTOGRAM
)

// checkFamilies checks that fams holds exactly the table's families, each with its type, help, label
// names on every series and buckets.
func checkFamilies(t *testing.T, fams map[string]*dto.MetricFamily, table []family) {
	t.Helper()
	var names []string
	for _, tt := range table {
		names = append(names, tt.name)
		f := fams[tt.name]
		if f == nil {
			t.Errorf("family %s missing", tt.name)
			continue
		}
		if f.GetType() != tt.typ {
			t.Errorf("%s: type %v, want %v", tt.name, f.GetType(), tt.typ)
		}
		if f.GetHelp() != tt.help {
			t.Errorf("%s: help %q, want %q", tt.name, f.GetHelp(), tt.help)
		}
		for _, s := range f.GetMetric() {
			var got []string
			for _, lp := range s.GetLabel() {
				got = append(got, lp.GetName())
			}
			sort.Strings(got)
			if !slices.Equal(got, tt.labels) {
				t.Errorf("%s: labels %v, want %v", tt.name, got, tt.labels)
			}
		}
		if tt.typ == histogram {
			want := append(slices.Clone(tt.buckets), math.Inf(1)) // +Inf is implicit, as in prometheus_client
			if got := bounds(f.GetMetric()[0].GetHistogram()); !slices.Equal(got, want) {
				t.Errorf("%s: buckets %v, want %v", tt.name, got, want)
			}
		}
	}
	var got []string
	for name := range fams {
		got = append(got, name)
	}
	sort.Strings(got)
	sort.Strings(names)
	if !slices.Equal(got, names) {
		t.Errorf("families %v, want %v", got, names)
	}
}

// TestFamiliesVLLM pins every family's name, type, help string, label names and bucket boundaries
// against vLLM's PrometheusStatLogger (vllm/v1/metrics/loggers.py) and SpecDecodingProm
// (vllm/v1/spec_decode/metrics.py): everything it exports whose input mocker has.
func TestFamiliesVLLM(t *testing.T) {
	m := New(Options{Model: "Qwen/Qwen3-0.6B", MaxModelLen: 4096, BlockSize: 16, NumBlocks: 1000, SpecTokens: 3})
	m.Rank(0, 0)
	fams := scrape(t, m)

	base := []string{"engine", "model_name", "worker"}
	with := func(l string) []string { return slices.Sorted(slices.Values(append(slices.Clone(base), l))) }
	tokens := []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
	ttft := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itl := []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	latency := []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	cacheInfo := []string{"block_size", "cache_dtype", "calculate_kv_scales", "cpu_offload_gb", "enable_prefix_caching", "engine",
		"gpu_memory_utilization", "is_attention_free", "kv_sharing_fast_prefill", "num_cpu_blocks", "num_gpu_blocks",
		"num_gpu_blocks_override", "prefix_caching_hash_algo", "sliding_window", "swap_space", "worker"}
	checkFamilies(t, fams, []family{
		{"vllm:num_requests_running", gauge, "Number of requests in model execution batches.", base, nil},
		{"vllm:num_requests_waiting", gauge, "Number of requests waiting to be processed.", base, nil},
		{"vllm:engine_sleep_state", gauge, "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; " +
			"weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.", with("sleep_state"), nil},
		{"vllm:kv_cache_usage_perc", gauge, "KV-cache usage. 1 means 100 percent usage.", base, nil},
		{"vllm:cache_config_info", gauge, "Information of the LLMEngine CacheConfig", cacheInfo, nil},
		{"vllm:prefix_cache_queries_total", counter, "Prefix cache queries, in terms of number of queried tokens.", base, nil},
		{"vllm:prefix_cache_hits_total", counter, "Prefix cache hits, in terms of number of cached tokens.", base, nil},
		{"vllm:external_prefix_cache_queries_total", counter, "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.", base, nil},
		{"vllm:external_prefix_cache_hits_total", counter, "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.", base, nil},
		{"vllm:mm_cache_queries_total", counter, "Multi-modal cache queries, in terms of number of queried items.", base, nil},
		{"vllm:mm_cache_hits_total", counter, "Multi-modal cache hits, in terms of number of cached items.", base, nil},
		{"vllm:num_preemptions_total", counter, "Cumulative number of preemption from the engine.", base, nil},
		{"vllm:prompt_tokens_total", counter, "Number of prefill tokens processed.", base, nil},
		{"vllm:prompt_tokens_by_source_total", counter, "Number of prompt tokens by source.", with("source"), nil},
		{"vllm:prompt_tokens_cached_total", counter, "Number of cached prompt tokens (local + external).", base, nil},
		{"vllm:prompt_tokens_recomputed_total", counter, "Number of cached tokens recomputed for forward pass.", base, nil},
		{"vllm:generation_tokens_total", counter, "Number of generation tokens processed.", base, nil},
		{"vllm:request_success_total", counter, "Count of successfully processed requests.", with("finished_reason"), nil},
		{"vllm:spec_decode_num_drafts_total", counter, "Number of spec decoding drafts.", base, nil},
		{"vllm:spec_decode_num_draft_tokens_total", counter, "Number of draft tokens.", base, nil},
		{"vllm:spec_decode_num_accepted_tokens_total", counter, "Number of accepted tokens.", base, nil},
		{"vllm:request_prompt_tokens", histogram, "Number of prefill tokens processed.", base, tokens},
		{"vllm:request_generation_tokens", histogram, "Number of generation tokens processed.", base, tokens},
		{"vllm:iteration_tokens_total", histogram, "Histogram of number of tokens per engine_step.", base,
			[]float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}},
		{"vllm:request_max_num_generation_tokens", histogram, "Histogram of maximum number of requested generation tokens.", base, tokens},
		{"vllm:request_params_n", histogram, "Histogram of the n request parameter.", base, []float64{1, 2, 5, 10, 20}},
		{"vllm:request_params_max_tokens", histogram, "Histogram of the max_tokens request parameter.", base, tokens},
		{"vllm:time_to_first_token_seconds", histogram, "Histogram of time to first token in seconds.", base, ttft},
		{"vllm:inter_token_latency_seconds", histogram, "Histogram of inter-token latency in seconds.", base, itl},
		{"vllm:request_time_per_output_token_seconds", histogram, "Histogram of time_per_output_token_seconds per request.", base, itl},
		{"vllm:time_per_output_token_seconds", histogram,
			"Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.", base, itl},
		{"vllm:e2e_request_latency_seconds", histogram, "Histogram of e2e request latency in seconds.", base, latency},
		{"vllm:request_queue_time_seconds", histogram, "Histogram of time spent in WAITING phase for request.", base, latency},
		{"vllm:request_inference_time_seconds", histogram, "Histogram of time spent in RUNNING phase for request.", base, latency},
		{"vllm:request_prefill_time_seconds", histogram, "Histogram of time spent in PREFILL phase for request.", base, latency},
		{"vllm:request_decode_time_seconds", histogram, "Histogram of time spent in DECODE phase for request.", base, latency},
		{"vllm:request_prefill_kv_computed_tokens", histogram, "Histogram of new KV tokens computed during prefill (excluding cached tokens).", base, tokens},
	})

	// Every finished_reason exists at zero from the start, as in vLLM, and so does every prompt source.
	if n := len(fams["vllm:request_success_total"].GetMetric()); n != len(reasons) {
		t.Errorf("request_success_total has %d series, want %d", n, len(reasons))
	}
	for _, reason := range reasons {
		s := series(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": reason})
		if v := s.GetCounter().GetValue(); v != 0 {
			t.Errorf("request_success_total{%s} = %v, want 0", reason, v)
		}
	}
	for _, src := range []string{"local_compute", "local_cache_hit", "external_kv_transfer"} {
		series(t, fams, "vllm:prompt_tokens_by_source_total", map[string]string{"source": src})
	}
	for state, want := range map[string]float64{"awake": 1, "weights_offloaded": 0, "discard_all": 0} {
		if v := series(t, fams, "vllm:engine_sleep_state", map[string]string{"sleep_state": state}).GetGauge().GetValue(); v != want {
			t.Errorf("engine_sleep_state{%s} = %v, want %v", state, v, want)
		}
	}
}

// TestFamiliesVLLMNoSpec: without speculative decoding vLLM creates no spec_decode series.
func TestFamiliesVLLMNoSpec(t *testing.T) {
	m := New(Options{Model: "m", MaxModelLen: 16})
	m.Rank(0, 0)
	for name := range scrape(t, m) {
		if strings.HasPrefix(name, "vllm:spec_decode") {
			t.Errorf("family %s without speculative decoding", name)
		}
	}
}

// TestCacheConfigInfo checks the values llm-d's picker reads (block_size, num_gpu_blocks) and those
// from mocker's settings, as vLLM writes them (Python's str of each CacheConfig field).
func TestCacheConfigInfo(t *testing.T) {
	m := New(Options{Model: "m", MaxModelLen: 16, BlockSize: 32, NumBlocks: 4096, PrefixCaching: true,
		CacheDtype: "fp8", GPUMemoryUtilization: 0.9, DPSize: 2})
	m.Rank(0, 1)
	m.Rank(1, 0)
	fams := scrape(t, m)
	if n := len(fams["vllm:cache_config_info"].GetMetric()); n != 2 {
		t.Fatalf("cache_config_info has %d series, want one per worker rank (2)", n)
	}
	s := series(t, fams, "vllm:cache_config_info", map[string]string{"worker": "0", "engine": "1"})
	want := map[string]string{"block_size": "32", "num_gpu_blocks": "4096", "enable_prefix_caching": "True",
		"cache_dtype": "fp8", "gpu_memory_utilization": "0.9", "num_gpu_blocks_override": "None", "prefix_caching_hash_algo": "sha256"}
	for k, v := range want {
		if got := label(s, k); got != v {
			t.Errorf("cache_config_info %s = %q, want %q", k, got, v)
		}
	}
	if v := s.GetGauge().GetValue(); v != 1 {
		t.Errorf("cache_config_info = %v, want 1", v)
	}
}

// TestFamiliesSGLang pins SGLang's names, types, help strings, labels and buckets (SchedulerMetricsCollector
// and TokenizerMetricsCollector in python/sglang/srt/metrics/collector.py), and the pool's size where
// llm-d's picker reads it: sglang:cache_config_info's page_size and num_pages labels.
func TestFamiliesSGLang(t *testing.T) {
	m := New(Options{Backend: SGLang, Model: "m", MaxModelLen: 8192, BlockSize: 64, NumBlocks: 11147})
	m.Rank(0, 0)
	fams := scrape(t, m)
	sched := []string{"engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank", "worker"}
	tok := []string{"engine_type", "model_name", "worker"}
	checkFamilies(t, fams, []family{
		{"sglang:num_running_reqs", gauge, "The number of running requests.", sched, nil},
		{"sglang:num_queue_reqs", gauge, "The number of requests in the waiting queue.", sched, nil},
		{"sglang:cache_hit_rate", gauge, "The prefix cache hit rate.", sched, nil},
		{"sglang:token_usage", gauge, "The token usage.", sched, nil},
		{"sglang:num_used_tokens", gauge, "The number of used tokens.", sched, nil},
		{"sglang:kv_available_tokens", gauge, "Number of free token slots in the KV cache pool.", sched, nil},
		{"sglang:kv_evictable_tokens", gauge, "Number of evictable (radix-cached) token slots in the KV cache pool.", sched, nil},
		{"sglang:num_retracted_requests_total", counter, "Total number of retracted requests.", sched, nil},
		{"sglang:max_total_num_tokens", gauge, "Maximum total number of tokens in the KV cache pool.", sched, nil},
		{"sglang:page_size", gauge, "KV cache page size in tokens.", sched, nil},
		{"sglang:num_pages", gauge, "Number of KV cache pages.", sched, nil},
		{"sglang:context_len", gauge, "Maximum context length.", sched, nil},
		{"sglang:cache_config_info", gauge, "Information of the cache configuration.",
			[]string{"engine_type", "model_name", "moe_ep_rank", "num_pages", "page_size", "pp_rank", "tp_rank", "worker"}, nil},
		{"sglang:prompt_tokens_total", counter, "Number of prefill tokens processed.", tok, nil},
		{"sglang:generation_tokens_total", counter, "Number of generation tokens processed.", tok, nil},
		{"sglang:cached_tokens_total", counter, "Number of cached prompt tokens by source (device/host/storage).",
			[]string{"cache_source", "engine_type", "model_name", "worker"}, nil},
		{"sglang:num_requests_total", counter, "Number of requests processed.", tok, nil},
		{"sglang:num_aborted_requests_total", counter, "Number of requests aborted.", tok, nil},
		{"sglang:time_to_first_token_seconds", histogram, "Histogram of time to first token in seconds.", tok,
			[]float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}},
		{"sglang:inter_token_latency_seconds", histogram, "Histogram of inter-token latency in seconds.", tok,
			[]float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08,
				0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8}},
		{"sglang:e2e_request_latency_seconds", histogram, "Histogram of End-to-end request latency in seconds", tok,
			[]float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}},
	})
	ci := series(t, fams, "sglang:cache_config_info", nil)
	if label(ci, "page_size") != "64" || label(ci, "num_pages") != "11147" || label(ci, "engine_type") != "unified" {
		t.Errorf("sglang:cache_config_info labels %v, want page_size 64, num_pages 11147, engine_type unified", ci.GetLabel())
	}
	for name, want := range map[string]float64{"sglang:page_size": 64, "sglang:num_pages": 11147,
		"sglang:max_total_num_tokens": 64 * 11147, "sglang:context_len": 8192} {
		if v := series(t, fams, name, nil).GetGauge().GetValue(); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

// TestSGLangState: SGLang's gauges count tokens (pages × page size), and ranks are labelled dp_rank
// under data parallelism.
func TestSGLangState(t *testing.T) {
	m := New(Options{Backend: SGLang, Model: "m", MaxModelLen: 8192, BlockSize: 4, NumBlocks: 100, DPSize: 2})
	r := m.Rank(0, 1)
	r.SetState(sched.Metrics{Running: 2, Waiting: 5, ActiveBlocks: 10, InactiveBlocks: 30, TotalBlocks: 100,
		PrefixQueries: 200, PrefixHits: 50, Preemptions: 3})
	r.Finished(Request{Reason: "abort", PromptTokens: 9})
	r.Finished(Request{Reason: "stop", PromptTokens: 9, CachedTokens: 8, OutputTokens: 2})
	fams := scrape(t, m)
	this := map[string]string{"dp_rank": "1", "worker": "0"}
	for name, want := range map[string]float64{"sglang:num_running_reqs": 2, "sglang:num_queue_reqs": 5,
		"sglang:token_usage": 0.1, "sglang:num_used_tokens": 40, "sglang:kv_evictable_tokens": 120,
		"sglang:kv_available_tokens": 240, "sglang:cache_hit_rate": 0.25} {
		if v := series(t, fams, name, this).GetGauge().GetValue(); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for name, want := range map[string]float64{"sglang:num_retracted_requests_total": 3,
		"sglang:num_aborted_requests_total": 1, "sglang:num_requests_total": 1, "sglang:cached_tokens_total": 8} {
		if v := series(t, fams, name, map[string]string{"worker": "0"}).GetCounter().GetValue(); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

// TestFamiliesTRTLLM pins trtllm-serve's names (tensorrt_llm/metrics/collector.py), including the
// pool's gauges llm-d's picker reads: trtllm_kv_cache_tokens_per_block and trtllm_kv_cache_max_blocks.
func TestFamiliesTRTLLM(t *testing.T) {
	m := New(Options{Backend: TRTLLM, Model: "m", MaxModelLen: 8192, BlockSize: 32, NumBlocks: 5000, SpecTokens: 2})
	m.Rank(0, 0)
	fams := scrape(t, m)
	l := []string{"engine_type", "model_name", "worker"}
	latency := []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
	checkFamilies(t, fams, []family{
		{"trtllm_num_requests_running", gauge, "Number of active requests", l, nil},
		{"trtllm_num_requests_waiting", gauge, "Number of queued requests", l, nil},
		{"trtllm_kv_cache_utilization", gauge, "KV cache utilization", l, nil},
		{"trtllm_kv_cache_hit_rate", gauge, "KV cache hit rate", l, nil},
		{"trtllm_kv_cache_free_blocks", gauge, "Number of free KV cache blocks", l, nil},
		{"trtllm_kv_cache_used_blocks", gauge, "Number of used KV cache blocks", l, nil},
		{"trtllm_kv_cache_max_blocks", gauge, "Maximum number of KV cache blocks", l, nil},
		{"trtllm_kv_cache_tokens_per_block", gauge, "Number of tokens per KV cache block", l, nil},
		{"trtllm_num_requests_completed_total", counter, "Total number of completed requests across iterations", l, nil},
		{"trtllm_prompt_tokens_total", counter, "Cumulative number of prompt (input) tokens processed.", l, nil},
		{"trtllm_generation_tokens_total", counter, "Cumulative number of generation (output) tokens produced.", l, nil},
		{"trtllm_prompt_cached_tokens_total", counter, "Process-lifetime total prompt tokens served from KV cache. " +
			"Resets only when the serving process restarts, not when the KV cache is flushed or evicted.", l, nil},
		{"trtllm_spec_decode_num_draft_tokens_total", counter, "Total number of draft tokens in speculative decoding", l, nil},
		{"trtllm_spec_decode_num_accepted_tokens_total", counter, "Total number of accepted tokens in speculative decoding", l, nil},
		{"trtllm_e2e_request_latency_seconds", histogram, "Histogram of end to end request latency in seconds.", l, latency},
		{"trtllm_time_to_first_token_seconds", histogram, "Histogram of time to first token in seconds.", l,
			[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}},
		{"trtllm_time_per_output_token_seconds", histogram, "Histogram of time per output token in seconds.", l,
			[]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}},
		{"trtllm_request_queue_time_seconds", histogram, "Histogram of time spent in WAITING phase for request.", l, latency},
		{"trtllm_request_prefill_time_seconds", histogram,
			"Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).", l,
			[]float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 640, 2560}},
		{"trtllm_request_decode_time_seconds", histogram,
			"Histogram of decode (generation) phase duration in seconds (last_token_time - first_token_time).", l, latency},
		{"trtllm_request_inference_time_seconds", histogram,
			"Histogram of total inference duration in seconds (last_token_time - first_scheduled_time).", l, latency},
	})
	for name, want := range map[string]float64{"trtllm_kv_cache_tokens_per_block": 32, "trtllm_kv_cache_max_blocks": 5000} {
		if v := series(t, fams, name, nil).GetGauge().GetValue(); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if s := series(t, fams, "trtllm_kv_cache_utilization", nil); label(s, "engine_type") != "trtllm" {
		t.Errorf("engine_type = %q, want trtllm", label(s, "engine_type"))
	}
}

// TestWorkerHandler: each worker's handler serves that worker's series alone, every family the
// worker has (cache_config_info included), so a picker scraping one worker's port reads one pod.
func TestWorkerHandler(t *testing.T) {
	m := New(Options{Model: "m", MaxModelLen: 16, BlockSize: 16, NumBlocks: 10})
	m.Rank(0, 0).SetState(sched.Metrics{Running: 1})
	m.Rank(1, 0).SetState(sched.Metrics{Running: 2})
	all := scrape(t, m)
	for w, running := range []float64{1, 2} {
		rec := httptest.NewRecorder()
		m.WorkerHandler(w).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		if len(fams) != len(all) {
			t.Errorf("worker %d: %d families, want %d", w, len(fams), len(all))
		}
		for name, f := range fams {
			for _, s := range f.GetMetric() {
				if got := label(s, "worker"); got != strconv.Itoa(w) {
					t.Errorf("worker %d's handler serves %s of worker %s", w, name, got)
				}
			}
		}
		if v := series(t, fams, "vllm:num_requests_running", nil).GetGauge().GetValue(); v != running {
			t.Errorf("worker %d: num_requests_running = %v, want %v", w, v, running)
		}
		series(t, fams, "vllm:cache_config_info", nil)
	}
}

// TestCounterNames checks the raw exposition: counters keep exactly one _total suffix.
func TestCounterNames(t *testing.T) {
	m := New(Options{Model: "m", MaxModelLen: 16})
	m.Rank(0, 0).Prompt(3, 0)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, "\nvllm:prompt_tokens_total{") {
		t.Errorf("exposition lacks vllm:prompt_tokens_total:\n%s", body)
	}
	if strings.Contains(body, "_total_total") {
		t.Errorf("exposition doubles a _total suffix:\n%s", body)
	}
}

func TestScriptedRequest(t *testing.T) {
	m := New(Options{Model: "m", MaxModelLen: 1024})
	r := m.Rank(0, 0)
	ms := time.Millisecond

	r.QueueTime(400 * ms)
	r.FirstToken(30 * ms)
	r.Prompt(100, 64)
	r.Generated(1)
	r.Iteration(101)
	for _, d := range []time.Duration{20 * ms, 20 * ms, 60 * ms} {
		r.InterToken(d)
		r.Generated(1)
		r.Iteration(1)
	}
	r.Finished(Request{Reason: "length", E2E: 1500 * ms, Prefill: 900 * ms, Decode: 300 * ms, Inference: 1200 * ms,
		PromptTokens: 100, CachedTokens: 64, OutputTokens: 4, MaxTokens: 4, N: 1})
	r.Prompt(7, 7) // all cached: the last token is recomputed
	r.Finished(Request{Reason: "stop", E2E: 700 * ms, Prefill: 100 * ms, Inference: 100 * ms, PromptTokens: 7,
		CachedTokens: 7, OutputTokens: 1, MaxTokens: 50, N: 1})
	r.Finished(Request{Reason: "abort", E2E: 10 * ms, PromptTokens: 1})

	fams := scrape(t, m)
	this := map[string]string{"worker": "0", "engine": "0"}
	counter := func(name string) float64 { return series(t, fams, name, this).GetCounter().GetValue() }
	for name, want := range map[string]float64{"vllm:prompt_tokens_total": 107, "vllm:prompt_tokens_cached_total": 70,
		"vllm:prompt_tokens_recomputed_total": 1} {
		if v := counter(name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for src, want := range map[string]float64{"local_compute": 37, "local_cache_hit": 70, "external_kv_transfer": 0} {
		s := series(t, fams, "vllm:prompt_tokens_by_source_total", map[string]string{"source": src})
		if v := s.GetCounter().GetValue(); v != want {
			t.Errorf("prompt_tokens_by_source_total{%s} = %v, want %v", src, v, want)
		}
	}
	if v := counter("vllm:generation_tokens_total"); v != 4 {
		t.Errorf("generation_tokens_total = %v, want 4", v)
	}
	for reason, want := range map[string]float64{"length": 1, "stop": 1, "abort": 1, "error": 0} {
		s := series(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": reason})
		if v := s.GetCounter().GetValue(); v != want {
			t.Errorf("request_success_total{%s} = %v, want %v", reason, v, want)
		}
	}

	// cumulative counts the histogram reports at each upper bound in at.
	tests := []struct {
		name  string
		count uint64
		sum   float64
		at    map[float64]uint64
	}{
		{"vllm:request_queue_time_seconds", 1, 0.4, map[float64]uint64{0.3: 0, 0.5: 1}},
		{"vllm:time_to_first_token_seconds", 1, 0.03, map[float64]uint64{0.02: 0, 0.04: 1}},
		{"vllm:inter_token_latency_seconds", 3, 0.1, map[float64]uint64{0.01: 0, 0.025: 2, 0.05: 2, 0.075: 3}},
		{"vllm:time_per_output_token_seconds", 3, 0.1, map[float64]uint64{0.025: 2, 0.075: 3}},
		{"vllm:e2e_request_latency_seconds", 3, 2.21, map[float64]uint64{0.3: 1, 0.8: 2, 1.5: 3}},
		{"vllm:request_prefill_time_seconds", 3, 1.0, map[float64]uint64{0.3: 2, 0.8: 2, 1: 3}},
		{"vllm:request_decode_time_seconds", 3, 0.3, map[float64]uint64{0.3: 3}},
		{"vllm:request_inference_time_seconds", 3, 1.3, map[float64]uint64{0.3: 2, 1: 2, 1.5: 3}},
		// 300 ms over the 3 tokens after the first; one token or none: 0.
		{"vllm:request_time_per_output_token_seconds", 3, 0.1, map[float64]uint64{0.075: 2, 0.1: 3}},
		{"vllm:request_prompt_tokens", 3, 108, map[float64]uint64{1: 1, 5: 1, 10: 2, 100: 3}},
		{"vllm:request_prefill_kv_computed_tokens", 3, 37, map[float64]uint64{0: 0, 1: 2, 20: 2, 50: 3}},
		{"vllm:request_generation_tokens", 3, 5, map[float64]uint64{1: 2, 2: 2, 5: 3}},
		{"vllm:request_max_num_generation_tokens", 3, 5, map[float64]uint64{1: 2, 5: 3}},
		{"vllm:request_params_n", 3, 3, map[float64]uint64{1: 3}},
		// The aborted request set no max_tokens: not observed, as vLLM skips a missing one.
		{"vllm:request_params_max_tokens", 2, 54, map[float64]uint64{2: 0, 5: 1, 50: 2}},
		{"vllm:iteration_tokens_total", 4, 104, map[float64]uint64{1: 3, 64: 3, 128: 4}},
	}
	for _, tt := range tests {
		h := series(t, fams, tt.name, this).GetHistogram()
		if h.GetSampleCount() != tt.count {
			t.Errorf("%s: count %d, want %d", tt.name, h.GetSampleCount(), tt.count)
		}
		if d := h.GetSampleSum() - tt.sum; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: sum %v, want %v", tt.name, h.GetSampleSum(), tt.sum)
		}
		for _, b := range h.GetBucket() {
			if want, ok := tt.at[b.GetUpperBound()]; ok && b.GetCumulativeCount() != want {
				t.Errorf("%s: bucket le=%v holds %d, want %d", tt.name, b.GetUpperBound(), b.GetCumulativeCount(), want)
			}
		}
	}
}

func TestSetStateDeltas(t *testing.T) {
	m := New(Options{Model: "m", MaxModelLen: 16, SpecTokens: 3})
	r := m.Rank(0, 0)
	steps := []struct {
		in                     sched.Metrics
		preempt, queries, hits float64 // counters afterwards
	}{
		{sched.Metrics{Preemptions: 2, PrefixQueries: 100, PrefixHits: 40}, 2, 100, 40},
		{sched.Metrics{Preemptions: 2, PrefixQueries: 100, PrefixHits: 40}, 2, 100, 40}, // no movement
		{sched.Metrics{Preemptions: 5, PrefixQueries: 250, PrefixHits: 41}, 5, 250, 41},
		{sched.Metrics{Preemptions: 1, PrefixQueries: 10, PrefixHits: 0}, 6, 260, 41}, // totals restarted
		{sched.Metrics{Running: 3, Waiting: 7, ActiveBlocks: 25, InactiveBlocks: 50, TotalBlocks: 100,
			Preemptions: 1, PrefixQueries: 10}, 6, 260, 41},
	}
	this := map[string]string{"worker": "0", "engine": "0"}
	for i, st := range steps {
		r.SetState(st.in)
		fams := scrape(t, m)
		for name, want := range map[string]float64{
			"vllm:num_preemptions_total":      st.preempt,
			"vllm:prefix_cache_queries_total": st.queries,
			"vllm:prefix_cache_hits_total":    st.hits,
		} {
			if v := series(t, fams, name, this).GetCounter().GetValue(); v != want {
				t.Errorf("step %d: %s = %v, want %v", i, name, v, want)
			}
		}
		for name, want := range map[string]float64{
			"vllm:num_requests_running": float64(st.in.Running),
			"vllm:num_requests_waiting": float64(st.in.Waiting),
			"vllm:kv_cache_usage_perc":  st.in.CacheUsage(),
		} {
			if v := series(t, fams, name, this).GetGauge().GetValue(); v != want {
				t.Errorf("step %d: %s = %v, want %v", i, name, v, want)
			}
		}
	}
	// 4 speculative steps emitting 10 tokens: 4 drafts of 3 tokens, 10 - 4 bonus tokens accepted.
	r.SetState(sched.Metrics{SpecSteps: 4, SpecTokens: 10})
	fams := scrape(t, m)
	for name, want := range map[string]float64{"vllm:spec_decode_num_drafts_total": 4,
		"vllm:spec_decode_num_draft_tokens_total": 12, "vllm:spec_decode_num_accepted_tokens_total": 6} {
		if v := series(t, fams, name, this).GetCounter().GetValue(); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	// Cached blocks nobody references are free to vLLM: usage counts active blocks only.
	if u := steps[4].in.CacheUsage(); u != 0.25 {
		t.Errorf("CacheUsage = %v, want 0.25", u)
	}
}

func TestWorkersAndRanksAreSeparateSeries(t *testing.T) {
	m := New(Options{Model: "m", MaxModelLen: 16})
	if m.Rank(1, 1) != m.Rank(1, 1) {
		t.Fatal("Rank(1, 1) returned two recorders")
	}
	for w := range 2 {
		for rk := range 2 {
			r := m.Rank(w, rk)
			r.Generated(1 + 10*w + rk)
			r.SetState(sched.Metrics{Running: 1 + 10*w + rk})
		}
	}
	fams := scrape(t, m)
	for _, name := range []string{"vllm:generation_tokens_total", "vllm:num_requests_running", "vllm:e2e_request_latency_seconds"} {
		if n := len(fams[name].GetMetric()); n != 4 {
			t.Errorf("%s: %d series, want 4", name, n)
		}
	}
	for w := range 2 {
		for rk := range 2 {
			want := float64(1 + 10*w + rk)
			lv := map[string]string{"worker": string(rune('0' + w)), "engine": string(rune('0' + rk))}
			if v := series(t, fams, "vllm:generation_tokens_total", lv).GetCounter().GetValue(); v != want {
				t.Errorf("generation_tokens_total%v = %v, want %v", lv, v, want)
			}
			if v := series(t, fams, "vllm:num_requests_running", lv).GetGauge().GetValue(); v != want {
				t.Errorf("num_requests_running%v = %v, want %v", lv, v, want)
			}
		}
	}
}

func TestTokenBuckets(t *testing.T) {
	tests := []struct {
		max  int
		want []float64
	}{
		{1, []float64{1}},
		{4, []float64{1, 2}},
		{100, []float64{1, 2, 5, 10, 20, 50, 100}},
		{131072, []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}},
	}
	for _, tt := range tests {
		if got := tokenBuckets(tt.max); !slices.Equal(got, tt.want) {
			t.Errorf("tokenBuckets(%d) = %v, want %v", tt.max, got, tt.want)
		}
	}
}

func TestHotPathAllocs(t *testing.T) {
	r := New(Options{Model: "m", MaxModelLen: 1024}).Rank(0, 0)
	s := sched.Metrics{Running: 1, TotalBlocks: 10}
	allocs := testing.AllocsPerRun(100, func() {
		r.InterToken(time.Millisecond)
		r.Generated(1)
		r.FirstToken(time.Millisecond)
		r.Prompt(10, 4)
		r.Iteration(11)
		r.QueueTime(time.Millisecond)
		s.Preemptions++
		r.SetState(s)
		r.Finished(Request{Reason: "stop", E2E: time.Second, PromptTokens: 10, OutputTokens: 3, MaxTokens: 3, N: 1})
	})
	if allocs != 0 {
		t.Errorf("recording allocates %v times per request, want 0", allocs)
	}
}

func BenchmarkInterToken(b *testing.B) {
	r := New(Options{Model: "m", MaxModelLen: 1024}).Rank(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		r.InterToken(15 * time.Millisecond)
	}
}

// TestExternalPrefixCacheFromTiers: with a CPU tier, the tokens onboarded from the lower tiers are vLLM's
// external prefix cache hits, out of every prompt token looked up, and not local hits; without one the
// external counters stay 0.
func TestExternalPrefixCacheFromTiers(t *testing.T) {
	this := map[string]string{"worker": "0", "engine": "0"}
	for _, c := range []struct {
		cpu           int
		queries, hits float64
		numCPUBlocks  string
	}{{0, 0, 0, "None"}, {1000, 300, 16 * (4 + 1 + 2), "1000"}} {
		m := New(Options{Model: "m", MaxModelLen: 16, BlockSize: 16, CPUBlocks: c.cpu})
		r := m.Rank(0, 0)
		r.SetState(sched.Metrics{PrefixQueries: 100, PrefixHits: 80, Tiers: kvcache.TierStats{CPUHits: 4, DiskHits: 1}})
		r.SetState(sched.Metrics{PrefixQueries: 300, PrefixHits: 200, Tiers: kvcache.TierStats{CPUHits: 6, DiskHits: 1, CPUUsed: 250}})
		fams := scrape(t, m)
		if v := series(t, fams, "vllm:external_prefix_cache_queries_total", this).GetCounter().GetValue(); v != c.queries {
			t.Errorf("cpu %d: external queries %v, want %v", c.cpu, v, c.queries)
		}
		if v := series(t, fams, "vllm:external_prefix_cache_hits_total", this).GetCounter().GetValue(); v != c.hits {
			t.Errorf("cpu %d: external hits %v, want %v", c.cpu, v, c.hits)
		}
		if v := series(t, fams, "vllm:prefix_cache_hits_total", this).GetCounter().GetValue(); v != 200-16*7 {
			t.Errorf("cpu %d: local hits %v, want %v", c.cpu, v, 200-16*7)
		}
		if c.cpu == 0 {
			if fams["vllm:cpu_cache_usage_perc"] != nil {
				t.Errorf("cpu 0: vllm:cpu_cache_usage_perc exported")
			}
		} else if v := series(t, fams, "vllm:cpu_cache_usage_perc", this).GetGauge().GetValue(); v != 0.25 {
			t.Errorf("cpu %d: vllm:cpu_cache_usage_perc %v, want 0.25", c.cpu, v)
		}
		if got := label(series(t, fams, "vllm:cache_config_info", this), "num_cpu_blocks"); got != c.numCPUBlocks {
			t.Errorf("cpu %d: num_cpu_blocks %q, want %q", c.cpu, got, c.numCPUBlocks)
		}
	}
}
