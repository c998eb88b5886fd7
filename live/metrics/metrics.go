// Package metrics exports a live mocker's workers as Prometheus metrics under vLLM v1's names, types,
// help strings, labels and histogram buckets, so dashboards, autoscalers (KEDA, WVA) and routers built
// for vLLM read a mocker fleet unchanged.
//
// Start with New and Rank. The reference is vLLM's vllm/v1/metrics/loggers.py (PrometheusStatLogger)
// and vllm/v1/metrics/stats.py.
//
// # Labels
//
// vLLM labels every series with model_name (the served model name) and engine (the engine-core index,
// which is the data-parallel rank; "0" without data parallelism). vLLM serves one engine group per
// process, so a real fleet is told apart by the scraper's instance label. A mocker process may run
// several workers, each with its own ranks, so we add a third label, worker (the worker's index in the
// process). Queries that sum or select by model_name and engine work as they do on vLLM.
//
// vLLM creates request_success_total for every finished_reason up front, and so do we; a reason outside
// that set gets its series on first use.
//
// # Not exported
//
// Series that need a request's phase times (request_time_per_output_token_seconds and the
// inference, prefill and decode time histograms), per-step ones (iteration_tokens_total) and
// configuration or LoRA info series: the recorder API carries no such input yet.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mocker-sim/mocker/sched"
)

// Label names. vLLM's are model_name and engine; worker is ours.
const (
	labelModel  = "model_name"
	labelEngine = "engine"
	labelWorker = "worker"
	labelReason = "finished_reason"
)

// reasons are vLLM's finished_reason values (FINISH_REASON_STRINGS in vllm/v1/engine/__init__.py).
var reasons = []string{"stop", "length", "abort", "error", "repetition"}

// Bucket boundaries, from vllm/v1/metrics/loggers.py (and buckets.py in later releases).
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

// Metrics is one process's metrics: a registry of its own (nothing global) and the series of every
// (worker, rank) asked for. It is safe for concurrent use.
type Metrics struct {
	model string
	reg   *prometheus.Registry

	running, waiting, kvUsage                      *prometheus.GaugeVec
	prefixQueries, prefixHits, preemptions         *prometheus.CounterVec
	promptTokens, generationTokens, requestSuccess *prometheus.CounterVec

	ttft, itl, tpot, e2e, queue      *prometheus.HistogramVec
	requestPrompt, requestGeneration *prometheus.HistogramVec

	mu    sync.Mutex
	ranks map[[2]int]*Rank
}

// New returns the metrics of a process serving modelName (vLLM's served_model_name). maxModelLen caps
// the buckets of the per-request token histograms, as vLLM's max_model_len does; it must be at least 1.
func New(modelName string, maxModelLen int) *Metrics {
	if maxModelLen < 1 {
		panic("metrics: maxModelLen must be at least 1")
	}
	labels := []string{labelModel, labelEngine, labelWorker}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(labels, extra...))
	}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	tokens := tokenBuckets(maxModelLen)

	// Names and help strings are vLLM's, verbatim. prometheus_client appends _total to a counter's
	// name; client_golang does not, so our counter names carry it.
	m := &Metrics{
		model: modelName,
		reg:   prometheus.NewRegistry(),
		running: gauge("vllm:num_requests_running",
			"Number of requests in model execution batches."),
		waiting: gauge("vllm:num_requests_waiting",
			"Number of requests waiting to be processed."),
		kvUsage: gauge("vllm:kv_cache_usage_perc",
			"KV-cache usage. 1 means 100 percent usage."),
		prefixQueries: counter("vllm:prefix_cache_queries_total",
			"Prefix cache queries, in terms of number of queried tokens."),
		prefixHits: counter("vllm:prefix_cache_hits_total",
			"Prefix cache hits, in terms of number of cached tokens."),
		preemptions: counter("vllm:num_preemptions_total",
			"Cumulative number of preemption from the engine."),
		promptTokens: counter("vllm:prompt_tokens_total",
			"Number of prefill tokens processed."),
		generationTokens: counter("vllm:generation_tokens_total",
			"Number of generation tokens processed."),
		requestSuccess: counter("vllm:request_success_total",
			"Count of successfully processed requests.", labelReason),
		ttft: histogram("vllm:time_to_first_token_seconds",
			"Histogram of time to first token in seconds.", ttftBuckets),
		itl: histogram("vllm:inter_token_latency_seconds",
			"Histogram of inter-token latency in seconds.", itlBuckets),
		// Deprecated in vLLM 0.11 and removed in 0.13, but still read by many dashboards and
		// autoscalers; until then vLLM observed it with the inter-token latency, as we do.
		tpot: histogram("vllm:time_per_output_token_seconds",
			"Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
			itlBuckets),
		e2e: histogram("vllm:e2e_request_latency_seconds",
			"Histogram of e2e request latency in seconds.", requestLatencyBuckets),
		queue: histogram("vllm:request_queue_time_seconds",
			"Histogram of time spent in WAITING phase for request.", requestLatencyBuckets),
		requestPrompt: histogram("vllm:request_prompt_tokens",
			"Number of prefill tokens processed.", tokens),
		requestGeneration: histogram("vllm:request_generation_tokens",
			"Number of generation tokens processed.", tokens),
		ranks: make(map[[2]int]*Rank),
	}
	m.reg.MustRegister(
		m.running, m.waiting, m.kvUsage,
		m.prefixQueries, m.prefixHits, m.preemptions,
		m.promptTokens, m.generationTokens, m.requestSuccess,
		m.ttft, m.itl, m.tpot, m.e2e, m.queue,
		m.requestPrompt, m.requestGeneration,
	)
	return m
}

// Registry returns the registry the metrics live in, to add collectors or gather directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format, for /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Rank returns the recorder of one data-parallel rank of one worker, creating its series on first use
// (at zero, as vLLM does at startup) and the same *Rank afterwards.
func (m *Metrics) Rank(worker, rank int) *Rank {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [2]int{worker, rank}
	if r := m.ranks[key]; r != nil {
		return r
	}
	lv := []string{m.model, strconv.Itoa(rank), strconv.Itoa(worker)}
	r := &Rank{
		m:                 m,
		labels:            lv,
		running:           m.running.WithLabelValues(lv...),
		waiting:           m.waiting.WithLabelValues(lv...),
		kvUsage:           m.kvUsage.WithLabelValues(lv...),
		prefixQueries:     m.prefixQueries.WithLabelValues(lv...),
		prefixHits:        m.prefixHits.WithLabelValues(lv...),
		preemptions:       m.preemptions.WithLabelValues(lv...),
		promptTokens:      m.promptTokens.WithLabelValues(lv...),
		generationTokens:  m.generationTokens.WithLabelValues(lv...),
		ttft:              m.ttft.WithLabelValues(lv...),
		itl:               m.itl.WithLabelValues(lv...),
		tpot:              m.tpot.WithLabelValues(lv...),
		e2e:               m.e2e.WithLabelValues(lv...),
		queue:             m.queue.WithLabelValues(lv...),
		requestPrompt:     m.requestPrompt.WithLabelValues(lv...),
		requestGeneration: m.requestGeneration.WithLabelValues(lv...),
		success:           make(map[string]prometheus.Counter, len(reasons)),
	}
	for _, reason := range reasons {
		r.success[reason] = m.requestSuccess.WithLabelValues(m.model, lv[1], lv[2], reason)
	}
	m.ranks[key] = r
	return r
}

// Rank records one data-parallel rank of one worker. Its label values are resolved once, so recording
// costs no allocation; the live server calls it per token. It is safe for concurrent use.
type Rank struct {
	m      *Metrics
	labels []string // model_name, engine, worker

	running, waiting, kvUsage              prometheus.Gauge
	prefixQueries, prefixHits, preemptions prometheus.Counter
	promptTokens, generationTokens         prometheus.Counter
	ttft, itl, tpot, e2e, queue            prometheus.Observer
	requestPrompt, requestGeneration       prometheus.Observer

	mu      sync.Mutex    // guards last and success
	last    sched.Metrics // the totals SetState last saw
	success map[string]prometheus.Counter
}

// SetState publishes the rank's scheduler state after a pass: the gauges as they are, and the counters
// advanced by how far sched.Metrics' running totals moved since the last call. Totals that went back
// (a restarted engine) count from zero again.
func (r *Rank) SetState(s sched.Metrics) {
	r.running.Set(float64(s.Running))
	r.waiting.Set(float64(s.Waiting))
	r.kvUsage.Set(s.CacheUsage())
	r.mu.Lock()
	advance(r.preemptions, r.last.Preemptions, s.Preemptions)
	advance(r.prefixQueries, r.last.PrefixQueries, s.PrefixQueries)
	advance(r.prefixHits, r.last.PrefixHits, s.PrefixHits)
	r.last = s
	r.mu.Unlock()
}

func advance(c prometheus.Counter, last, total int64) {
	switch {
	case total > last:
		c.Add(float64(total - last))
	case total < last:
		c.Add(float64(total))
	}
}

// Prompt counts a request's prompt tokens once its prefill is done. vLLM counts the whole prompt,
// cached tokens included, in the step that produces the first token.
func (r *Rank) Prompt(tokens int) { r.promptTokens.Add(float64(tokens)) }

// Generated counts output tokens as they are produced.
func (r *Rank) Generated(tokens int) { r.generationTokens.Add(float64(tokens)) }

// QueueTime observes the time a request waited before it was first scheduled.
func (r *Rank) QueueTime(d time.Duration) { r.queue.Observe(d.Seconds()) }

// FirstToken observes a request's time to first token, from its arrival.
func (r *Rank) FirstToken(ttft time.Duration) { r.ttft.Observe(ttft.Seconds()) }

// InterToken observes the latency between two consecutive output tokens of a request.
func (r *Rank) InterToken(d time.Duration) {
	s := d.Seconds()
	r.itl.Observe(s)
	r.tpot.Observe(s)
}

// Finished accounts for a request that left the engine: its finished_reason (vLLM's are stop, length,
// abort, error and repetition), its end-to-end latency from arrival, and its prompt and output lengths.
func (r *Rank) Finished(reason string, e2e time.Duration, promptTokens, outputTokens int) {
	r.mu.Lock()
	c := r.success[reason]
	if c == nil {
		c = r.m.requestSuccess.WithLabelValues(r.labels[0], r.labels[1], r.labels[2], reason)
		r.success[reason] = c
	}
	r.mu.Unlock()
	c.Inc()
	r.e2e.Observe(e2e.Seconds())
	r.requestPrompt.Observe(float64(promptTokens))
	r.requestGeneration.Observe(float64(outputTokens))
}
