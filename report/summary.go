package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Summary is the report of a run: the numbers vllm bench serve prints, over completed
// requests. Collector.Summary fills every field except Preemptions and
// SpecMeanAcceptedLength, which only the engine sees; the caller sets them before writing.
type Summary struct {
	CompletedRequests  int // finished and not rejected
	RejectedRequests   int
	IncompleteRequests int // arrived but neither finished nor rejected; in the JSON only when > 0
	// NoTTFTRequests are the completed requests that showed no token, so have no TTFT, TTST, TPOT or
	// ITL: an empty reply, or one no longer than the reply's header (SetHeader); in the JSON only when > 0.
	// When every request is one, those distributions are empty: all zeros.
	NoTTFTRequests int

	// Fault injection (in the JSON only when WorkerFailures > 0): workers failed (filled by the caller),
	// requests that ended failed, and requests retried at least once (whatever their end).
	WorkerFailures  int
	FailedRequests  int
	RetriedRequests int

	// Duration is the latest finish time among completed requests, counted from time 0.
	Duration time.Duration

	// Throughputs are per second of Duration, over completed requests; 0 if Duration is 0.
	RequestThroughput     float64
	InputTokenThroughput  float64
	OutputTokenThroughput float64

	TotalInputTokens  int // prompt tokens of completed requests
	TotalOutputTokens int // output tokens of completed requests

	// PrefixCacheReusedRatio is Σ cached tokens at first admission / Σ input tokens, over
	// completed requests; 0 if they have no input tokens.
	PrefixCacheReusedRatio float64

	Preemptions int // filled by the caller

	// Tiers are the lower KV tiers' figures (filled by the caller; in the JSON only when Tiers.On).
	Tiers TierSummary

	// SpecMeanAcceptedLength is the mean number of tokens a speculative decode step emitted (filled by
	// the caller; in the JSON only when speculative decoding ran).
	SpecMeanAcceptedLength float64

	// The vision encoder's work on requests with images (filled by the caller; in the JSON only when some
	// image was encoded or found): images encoded, their tokens, and images found in an encoder cache.
	ImagesEncoded      int64
	ImageTokensEncoded int64
	EncoderCacheHits   int64

	// LoRA says some request named a LoRA adapter (filled by the caller; lora_loads is in the JSON only
	// then); LoRALoads counts the adapters loaded, each charged --lora-load-ms.
	LoRA      bool
	LoRALoads int64

	// Pools are the caller's per-pool figures; in the JSON only when there is more than one pool
	// (disaggregated serving), as keys prefixed with the pool's name.
	Pools []PoolSummary
	// GPUHours is ∫ GPUs in use dt when an autoscaler ran (in the JSON only then).
	GPUHours float64

	// Timing is what priced the passes (filled by the caller; in the JSON only when Model is set).
	Timing Timing

	TTFT Stats // time to first token: first token − arrival
	TTST Stats // time to second token: second delivery − first delivery
	TPOT Stats // time per output token, excluding the first: (last − first)/(n−1)
	ITL  Stats // inter-token latency: gaps between deliveries, pooled over requests
	E2E  Stats // end-to-end latency: finish − arrival
}

// TierSummary is what the lower KV tiers (CPU, disk) did over a run. The hit ratios share one base: the
// prompt tokens looked up at every admission (a preempted request's again), as vLLM's prefix-cache
// queries count them; GPU hits exclude the blocks onboarded from below.
type TierSummary struct {
	On                                     bool
	GPUHitRatio, CPUHitRatio, DiskHitRatio float64
	OnboardedBlocks, OffloadedBlocks       int64
	OnboardTime                            time.Duration // Σ of the onboardings' waits
}

// Timing names the timing model of a run: Model is --timing ("default": the op-level model, "profile",
// "polynomial", "fixed"); Source the data it read (the op-level model's database, "embedded" or a
// directory and how it was found; the profile's name or path; "" otherwise); Version the engine
// version whose tables priced the run, with its backend ("vllm 0.24.0"; "" when none).
type Timing struct {
	Model, Source, Version string
}

// String is the timing for a line of text: "default (embedded, vllm 0.24.0)".
func (t Timing) String() string {
	s := t.Model
	var in []string
	for _, v := range []string{t.Source, t.Version} {
		if v != "" {
			in = append(in, v)
		}
	}
	if len(in) > 0 {
		s += " (" + strings.Join(in, ", ") + ")"
	}
	return s
}

// Summary reduces the records so far to a Summary. It does not change the collector, so it
// may be called mid-run and again later. It runs in O(n log n) over requests and deliveries.
func (c *Collector) Summary() Summary {
	var s Summary
	t := c.done.tally
	for i := range c.reqs {
		if r := &c.reqs[i]; r.state&arrived != 0 { // else a hole in the ids
			t.add(r)
		}
	}
	s.CompletedRequests, s.RejectedRequests, s.IncompleteRequests = t.completed, t.rejected, t.incomplete
	s.FailedRequests, s.RetriedRequests, s.NoTTFTRequests = t.failed, t.retried, t.noTTFT
	s.Duration = t.duration
	s.TotalInputTokens, s.TotalOutputTokens = t.input, t.output
	if t.input > 0 {
		s.PrefixCacheReusedRatio = float64(t.cached) / float64(t.input)
	}
	if sec := s.Duration.Seconds(); sec > 0 {
		s.RequestThroughput = float64(s.CompletedRequests) / sec
		s.InputTokenThroughput = float64(s.TotalInputTokens) / sec
		s.OutputTokenThroughput = float64(s.TotalOutputTokens) / sec
	}

	// Samples of requests still in flight stay out, and in gaps for a later Summary.
	c.settleGaps()

	// One distribution at a time, in one buffer: the held requests' samples of one latency.
	var keys []uint64
	describe := func(l latency) Stats {
		keys = c.held(keys[:0], l)
		return c.done.cols[l].describe(keys, keyFloat)
	}
	s.TTFT = describe(ttftLatency)
	s.TTST = describe(ttstLatency)
	s.TPOT = describe(tpotLatency)
	s.ITL = c.itl.describe(nil, durationMs)
	s.E2E = describe(e2eLatency)
	return s
}

// held appends to keys, sorted, the floatKeys of latency l of the completed requests held (not retired),
// those that have one. It settles the retired ones' first, so that the two share no sort scratch.
func (c *Collector) held(keys []uint64, l latency) []uint64 {
	c.done.cols[l].settle()
	keys = slices.Grow(keys, len(c.reqs))
	for i := range c.reqs {
		if r := &c.reqs[i]; r.completed() {
			if x, ok := samplers[l](r); ok {
				keys = append(keys, floatKey(x))
			}
		}
	}
	if len(keys) < 1<<12 {
		slices.Sort(keys)
		return keys
	}
	if sorted, _ := c.radix.sort(keys, nil); &sorted[0] != &keys[0] {
		copy(keys, sorted)
	}
	return keys
}

// WriteJSON writes s as one JSON object with its keys in a fixed order (DESIGN.md, "Report
// JSON keys"), indented by two spaces and followed by a newline. Times are float
// milliseconds. The output depends only on s, so equal runs give byte-identical files.
func (s Summary) WriteJSON(w io.Writer) error {
	var o object
	o.int("completed_requests", s.CompletedRequests)
	o.int("rejected_requests", s.RejectedRequests)
	if s.IncompleteRequests > 0 {
		// Only when present, so the report of a run that drained stays byte-stable.
		o.int("incomplete_requests", s.IncompleteRequests)
	}
	if s.NoTTFTRequests > 0 {
		o.int("no_ttft_requests", s.NoTTFTRequests)
	}
	if s.WorkerFailures > 0 {
		o.int("worker_failures", s.WorkerFailures)
		o.int("failed_requests", s.FailedRequests)
		o.int("retried_requests", s.RetriedRequests)
	}
	o.float("duration_ms", ms(s.Duration))
	o.float("request_throughput", s.RequestThroughput)
	o.float("input_token_throughput", s.InputTokenThroughput)
	o.float("output_token_throughput", s.OutputTokenThroughput)
	o.int("total_input_tokens", s.TotalInputTokens)
	o.int("total_output_tokens", s.TotalOutputTokens)
	o.float("prefix_cache_reused_ratio", s.PrefixCacheReusedRatio)
	o.int("preemptions", s.Preemptions)
	if t := s.Tiers; t.On {
		o.float("kv_gpu_hit_ratio", t.GPUHitRatio)
		o.float("kv_cpu_hit_ratio", t.CPUHitRatio)
		o.float("kv_disk_hit_ratio", t.DiskHitRatio)
		o.int("kv_onboarded_blocks", int(t.OnboardedBlocks))
		o.int("kv_offloaded_blocks", int(t.OffloadedBlocks))
		o.float("kv_onboard_time_ms", ms(t.OnboardTime))
	}
	if s.SpecMeanAcceptedLength > 0 {
		o.float("spec_mean_accepted_length", s.SpecMeanAcceptedLength)
	}
	if s.ImagesEncoded+s.EncoderCacheHits > 0 {
		o.int("images_encoded", int(s.ImagesEncoded))
		o.int("image_tokens_encoded", int(s.ImageTokensEncoded))
		o.int("encoder_cache_hits", int(s.EncoderCacheHits))
	}
	if s.LoRA {
		o.int("lora_loads", int(s.LoRALoads))
	}
	for _, d := range []struct {
		name string
		st   Stats
	}{
		{"ttft", s.TTFT},
		{"ttst", s.TTST},
		{"tpot", s.TPOT},
		{"itl", s.ITL},
		{"e2e", s.E2E},
	} {
		o.stats(d.name, d.st)
	}
	if s.GPUHours > 0 {
		o.float("gpu_hours", s.GPUHours)
	}
	if len(s.Pools) > 1 {
		for _, p := range s.Pools {
			o.int(p.Name+"_workers", p.Workers)
			o.int(p.Name+"_passes", int(p.Passes))
			o.float(p.Name+"_busy_ratio", p.BusyRatio(s.Duration))
			o.int(p.Name+"_preemptions", p.Preemptions)
			o.float(p.Name+"_prefix_hit_ratio", p.PrefixHitRatio())
			for _, st := range p.Stages {
				o.stats(st.Name, st.Stats)
			}
		}
	}
	if s.Timing.Model != "" {
		o.str("timing_model", s.Timing.Model)
		o.str("timing_source", s.Timing.Source)
		o.str("timing_version", s.Timing.Version)
	}
	b, err := o.close()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// object builds the indented JSON object of WriteJSON. encoding/json cannot keep a key
// order without a 55-field struct, and the values are only numbers and a few strings.
type object struct {
	b   []byte
	err error
}

func (o *object) key(k string) {
	if len(o.b) == 0 {
		o.b = append(o.b, "{\n  \""...)
	} else {
		o.b = append(o.b, ",\n  \""...)
	}
	o.b = append(o.b, k...)
	o.b = append(o.b, "\": "...)
}

func (o *object) int(k string, v int) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, int64(v), 10)
}

func (o *object) str(k, v string) {
	o.key(k)
	b, err := json.Marshal(v)
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("report: %s: %w", k, err)
	}
	o.b = append(o.b, b...)
}

func (o *object) float(k string, v float64) {
	o.key(k)
	var err error
	o.b, err = appendFloat(o.b, v)
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("report: %s: %w", k, err)
	}
}

// stats writes one distribution: mean_X_ms, min_X_ms, ..., p99_X_ms.
func (o *object) stats(name string, st Stats) {
	o.float("mean_"+name+"_ms", st.Mean)
	o.float("min_"+name+"_ms", st.Min)
	o.float("max_"+name+"_ms", st.Max)
	o.float("std_"+name+"_ms", st.Std)
	o.float("p50_"+name+"_ms", st.P50)
	o.float("p75_"+name+"_ms", st.P75)
	o.float("p90_"+name+"_ms", st.P90)
	o.float("p95_"+name+"_ms", st.P95)
	o.float("p99_"+name+"_ms", st.P99)
}

func (o *object) close() ([]byte, error) {
	if len(o.b) == 0 {
		return []byte("{}\n"), o.err
	}
	return append(o.b, "\n}\n"...), o.err
}

// appendFloat appends v as a JSON number: the shortest decimal that reads back as v, never
// in exponent form, so files are easy to diff and identical across platforms.
func appendFloat(b []byte, v float64) ([]byte, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, '0'), fmt.Errorf("unsupported value %v", v)
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64), nil
}
