package metrics

import (
	"math"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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

// TestFamilies pins every family's vLLM name, type, help string, label names and bucket boundaries
// (vllm/v1/metrics/loggers.py, PrometheusStatLogger).
func TestFamilies(t *testing.T) {
	m := New("Qwen/Qwen3-0.6B", 4096)
	m.Rank(0, 0)
	fams := scrape(t, m)

	tokenBounds := []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
	tests := []struct {
		name    string
		typ     dto.MetricType
		help    string
		buckets []float64
	}{
		{"vllm:num_requests_running", dto.MetricType_GAUGE, "Number of requests in model execution batches.", nil},
		{"vllm:num_requests_waiting", dto.MetricType_GAUGE, "Number of requests waiting to be processed.", nil},
		{"vllm:kv_cache_usage_perc", dto.MetricType_GAUGE, "KV-cache usage. 1 means 100 percent usage.", nil},
		{"vllm:prefix_cache_queries_total", dto.MetricType_COUNTER, "Prefix cache queries, in terms of number of queried tokens.", nil},
		{"vllm:prefix_cache_hits_total", dto.MetricType_COUNTER, "Prefix cache hits, in terms of number of cached tokens.", nil},
		{"vllm:num_preemptions_total", dto.MetricType_COUNTER, "Cumulative number of preemption from the engine.", nil},
		{"vllm:prompt_tokens_total", dto.MetricType_COUNTER, "Number of prefill tokens processed.", nil},
		{"vllm:generation_tokens_total", dto.MetricType_COUNTER, "Number of generation tokens processed.", nil},
		{"vllm:request_success_total", dto.MetricType_COUNTER, "Count of successfully processed requests.", nil},
		{"vllm:time_to_first_token_seconds", dto.MetricType_HISTOGRAM, "Histogram of time to first token in seconds.",
			[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}},
		{"vllm:inter_token_latency_seconds", dto.MetricType_HISTOGRAM, "Histogram of inter-token latency in seconds.",
			[]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}},
		{"vllm:time_per_output_token_seconds", dto.MetricType_HISTOGRAM,
			"Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
			[]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}},
		{"vllm:e2e_request_latency_seconds", dto.MetricType_HISTOGRAM, "Histogram of e2e request latency in seconds.",
			[]float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}},
		{"vllm:request_queue_time_seconds", dto.MetricType_HISTOGRAM, "Histogram of time spent in WAITING phase for request.",
			[]float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}},
		{"vllm:request_prompt_tokens", dto.MetricType_HISTOGRAM, "Number of prefill tokens processed.", tokenBounds},
		{"vllm:request_generation_tokens", dto.MetricType_HISTOGRAM, "Number of generation tokens processed.", tokenBounds},
	}
	var names []string
	for _, tt := range tests {
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
		wantLabels := []string{"engine", "model_name", "worker"}
		if tt.name == "vllm:request_success_total" {
			wantLabels = []string{"engine", "finished_reason", "model_name", "worker"}
		}
		for _, s := range f.GetMetric() {
			var got []string
			for _, lp := range s.GetLabel() {
				got = append(got, lp.GetName())
			}
			sort.Strings(got)
			if !slices.Equal(got, wantLabels) {
				t.Errorf("%s: labels %v, want %v", tt.name, got, wantLabels)
			}
			if label(s, "model_name") != "Qwen/Qwen3-0.6B" || label(s, "engine") != "0" || label(s, "worker") != "0" {
				t.Errorf("%s: label values %v", tt.name, s.GetLabel())
			}
		}
		if tt.buckets != nil {
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

	// Every finished_reason exists at zero from the start, as in vLLM.
	if n := len(fams["vllm:request_success_total"].GetMetric()); n != len(reasons) {
		t.Errorf("request_success_total has %d series, want %d", n, len(reasons))
	}
	for _, reason := range reasons {
		s := series(t, fams, "vllm:request_success_total", map[string]string{"finished_reason": reason})
		if v := s.GetCounter().GetValue(); v != 0 {
			t.Errorf("request_success_total{%s} = %v, want 0", reason, v)
		}
	}
}

// TestCounterNames checks the raw exposition: counters keep exactly one _total suffix.
func TestCounterNames(t *testing.T) {
	m := New("m", 16)
	m.Rank(0, 0).Prompt(3)
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
	m := New("m", 1024)
	r := m.Rank(0, 0)
	ms := time.Millisecond

	r.QueueTime(400 * ms)
	r.FirstToken(30 * ms)
	r.Prompt(100)
	r.Generated(1)
	for _, d := range []time.Duration{20 * ms, 20 * ms, 60 * ms} {
		r.InterToken(d)
		r.Generated(1)
	}
	r.Finished("length", 1500*ms, 100, 4)
	r.Finished("stop", 700*ms, 7, 1)
	r.Finished("mystery", 10*ms, 1, 0)

	fams := scrape(t, m)
	this := map[string]string{"worker": "0", "engine": "0"}
	counter := func(name string) float64 { return series(t, fams, name, this).GetCounter().GetValue() }
	if v := counter("vllm:prompt_tokens_total"); v != 100 {
		t.Errorf("prompt_tokens_total = %v, want 100", v)
	}
	if v := counter("vllm:generation_tokens_total"); v != 4 {
		t.Errorf("generation_tokens_total = %v, want 4", v)
	}
	for reason, want := range map[string]float64{"length": 1, "stop": 1, "abort": 0, "mystery": 1} {
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
		{"vllm:request_prompt_tokens", 3, 108, map[float64]uint64{1: 1, 5: 1, 10: 2, 100: 3}},
		{"vllm:request_generation_tokens", 3, 5, map[float64]uint64{1: 2, 2: 2, 5: 3}},
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
	m := New("m", 16)
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
	// Cached blocks nobody references are free to vLLM: usage counts active blocks only.
	if u := steps[4].in.CacheUsage(); u != 0.25 {
		t.Errorf("CacheUsage = %v, want 0.25", u)
	}
}

func TestWorkersAndRanksAreSeparateSeries(t *testing.T) {
	m := New("m", 16)
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
	r := New("m", 1024).Rank(0, 0)
	s := sched.Metrics{Running: 1, TotalBlocks: 10}
	allocs := testing.AllocsPerRun(100, func() {
		r.InterToken(time.Millisecond)
		r.Generated(1)
		r.FirstToken(time.Millisecond)
		r.Prompt(10)
		r.QueueTime(time.Millisecond)
		s.Preemptions++
		r.SetState(s)
		r.Finished("stop", time.Second, 10, 3)
	})
	if allocs != 0 {
		t.Errorf("recording allocates %v times per request, want 0", allocs)
	}
}

func BenchmarkInterToken(b *testing.B) {
	r := New("m", 1024).Rank(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		r.InterToken(15 * time.Millisecond)
	}
}
