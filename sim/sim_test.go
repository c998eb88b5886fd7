package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// small is an engine with block size 4, a budget of 8 and fixed timing: 10 ms per prefill, 5 ms per decode.
func small() engine.Options {
	return engine.Options{
		VLLM:   vllm.Options{BlockSize: 4, NumBlocks: 64, MaxNumSeqs: 8, MaxBatchedTokens: 8, ChunkedPrefill: true, PrefixCaching: true},
		Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5},
	}
}

func trace(t *testing.T, jsonl string) workload.Source {
	t.Helper()
	src, err := workload.ReadTrace(strings.NewReader(jsonl), "test.jsonl", workload.TraceOptions{TraceBlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func run(t *testing.T, src workload.Source, o Options) *Result {
	t.Helper()
	o.CheckInvariants = true
	res, err := Run(src, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func trio(s report.Stats) []float64 { return []float64{s.Mean, s.Min, s.Max} }

func eq(a, b []float64) bool {
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return len(a) == len(b)
}

// TestEqualTimeOrder: a pass ending at t frees its tokens before a request arriving at t is queued, and
// that request joins the pass starting at t.
func TestEqualTimeOrder(t *testing.T) {
	src := trace(t, `{"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1, 2]}
{"timestamp": 15, "input_length": 4, "output_length": 1, "hash_ids": [3]}
`)
	res := run(t, src, Options{Workers: 1, Engine: small()})
	s := res.Summary
	// r0: pass [0,15] prefill+decode, first token at 15; pass [15,30] decodes r0 and prefills r1.
	if s.CompletedRequests != 2 || !eq(trio(s.TTFT), []float64{15, 15, 15}) || !eq(trio(s.E2E), []float64{22.5, 15, 30}) {
		t.Fatalf("TTFT %v E2E %v", trio(s.TTFT), trio(s.E2E))
	}
	if s.Duration != 30*time.Millisecond || res.Passes != 2 {
		t.Fatalf("duration %v passes %d, want 30ms and 2", s.Duration, res.Passes)
	}
}

// TestFrontendLatency: a request is routed FrontendLatency after it arrives, and its TTFT and E2E still
// run from its arrival. TestEqualTimeOrder's trace with 2.5 ms of frontend: r0 is routed at 2.5, its pass
// [2.5,17.5] gives its first token; r1 arrives at 15, is routed at 17.5 as r0's pass ends, and joins the
// pass [17.5,32.5]. Every TTFT and E2E is 2.5 ms longer than without a frontend.
func TestFrontendLatency(t *testing.T) {
	const jsonl = `{"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1, 2]}
{"timestamp": 15, "input_length": 4, "output_length": 1, "hash_ids": [3]}
`
	res := run(t, trace(t, jsonl), Options{Workers: 1, Engine: small(), FrontendLatency: 2500 * time.Microsecond})
	s := res.Summary
	if s.CompletedRequests != 2 || !eq(trio(s.TTFT), []float64{17.5, 17.5, 17.5}) || !eq(trio(s.E2E), []float64{25, 17.5, 32.5}) {
		t.Fatalf("TTFT %v E2E %v", trio(s.TTFT), trio(s.E2E))
	}
	if res.End != 32500*time.Microsecond || res.Passes != 2 {
		t.Fatalf("end %v passes %d, want 32.5ms and 2", res.End, res.Passes)
	}
	// Zero latency is the path without a frontend.
	res = run(t, trace(t, jsonl), Options{Workers: 1, Engine: small()})
	if s := res.Summary; !eq(trio(s.TTFT), []float64{15, 15, 15}) || !eq(trio(s.E2E), []float64{22.5, 15, 30}) {
		t.Fatalf("no frontend: TTFT %v E2E %v", trio(s.TTFT), trio(s.E2E))
	}
}

// TestSessionsAreClosedLoop: turn 2 arrives its delay after turn 1 completes and reuses its KV.
func TestSessionsAreClosedLoop(t *testing.T) {
	src := trace(t, `{"session_id": "a", "timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1]}
{"session_id": "a", "delay": 100, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}
`)
	res := run(t, src, Options{Workers: 1, Engine: small()})
	s := res.Summary
	if s.Duration != 130*time.Millisecond || !eq(trio(s.E2E), []float64{15, 15, 15}) {
		t.Fatalf("duration %v E2E %v, want 130ms and every request 15ms", s.Duration, trio(s.E2E))
	}
	if want := 4.0 / 12; math.Abs(s.PrefixCacheReusedRatio-want) > 1e-12 {
		t.Fatalf("reuse %v, want %v (turn 2 hits turn 1's block)", s.PrefixCacheReusedRatio, want)
	}
	// Arrival speed-up divides delays too.
	res = run(t, trace(t, `{"session_id": "a", "timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1]}
{"session_id": "a", "delay": 100, "input_length": 8, "output_length": 1, "hash_ids": [1, 2]}
`), Options{Workers: 1, Engine: small(), ArrivalSpeedup: 4})
	if res.Summary.Duration != 55*time.Millisecond {
		t.Fatalf("with arrival speed-up 4: duration %v, want 55ms", res.Summary.Duration)
	}
}

func TestConcurrencyKeepsNInFlight(t *testing.T) {
	jsonl := strings.Repeat(`{"timestamp": 5000, "input_length": 4, "output_length": 1}`+"\n", 3)
	res := run(t, trace(t, jsonl), Options{Workers: 1, Engine: small(), Concurrency: 1})
	// One at a time, timestamps ignored: each request runs alone for 15 ms.
	if s := res.Summary; s.Duration != 45*time.Millisecond || !eq(trio(s.TTFT), []float64{15, 15, 15}) {
		t.Fatalf("duration %v TTFT %v", s.Duration, trio(s.TTFT))
	}
	res = run(t, trace(t, jsonl), Options{Workers: 1, Engine: small(), Concurrency: 3})
	if d := res.Summary.Duration; d >= 45*time.Millisecond {
		t.Fatalf("concurrency 3: duration %v, want the requests batched", d)
	}
}

func TestRejectedRequestsAreCounted(t *testing.T) {
	src := trace(t, `{"timestamp": 0, "input_length": 4, "output_length": 1}
{"timestamp": 0, "input_length": 1000, "output_length": 1}
`)
	res := run(t, src, Options{Workers: 1, Engine: small()})
	if res.Summary.CompletedRequests != 1 || res.Summary.RejectedRequests != 1 {
		t.Fatalf("completed %d rejected %d", res.Summary.CompletedRequests, res.Summary.RejectedRequests)
	}
}

func synthetic(t *testing.T, seed uint64) workload.Source {
	t.Helper()
	src, err := workload.NewSynthetic(workload.SyntheticOptions{
		NumRequests: 60, Input: workload.Length{Mean: 300, Stddev: 100}, Output: workload.Length{Mean: 40, Stddev: 20},
		RequestRate: 50, Arrival: "poisson", SharedPrefixRatio: 0.5, NumPrefixGroups: 3,
		TurnsPerSession: 3, InterTurnDelay: 50 * time.Millisecond, InterTurnDist: "exponential", Seed: seed,
	})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func reportBytes(t *testing.T, res *Result) []byte {
	var b bytes.Buffer
	if err := res.Summary.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := res.Collector.WriteRequestsJSONL(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDeterministic(t *testing.T) {
	o := Options{Workers: 3, Engine: engine.Options{DPSize: 2,
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 120, MaxNumSeqs: 16, MaxBatchedTokens: 512, ChunkedPrefill: true, PrefixCaching: true},
		Timing: timing.Polynomial{}}}
	a := reportBytes(t, run(t, synthetic(t, 7), o))
	b := reportBytes(t, run(t, synthetic(t, 7), o))
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different reports")
	}
	if c := reportBytes(t, run(t, synthetic(t, 8), o)); bytes.Equal(a, c) {
		t.Fatal("different seeds, same report")
	}
	res := run(t, synthetic(t, 7), o)
	if s := res.Summary; s.CompletedRequests != 180 || s.Preemptions == 0 {
		t.Fatalf("completed %d preemptions %d: want 180 and a pool small enough to preempt", s.CompletedRequests, s.Preemptions)
	}
}

// TestMultiTurnHistoryHits: later turns carry the conversation so far (prompt and generated output), so
// with a pool that never evicts they hit most of their prompt.
func TestMultiTurnHistoryHits(t *testing.T) {
	o := Options{Workers: 1, Engine: engine.Options{
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 100000, MaxNumSeqs: 256, MaxBatchedTokens: 8192, ChunkedPrefill: true, PrefixCaching: true},
		Timing: timing.Polynomial{}}}
	res := run(t, synthetic(t, 7), o)
	if s := res.Summary; s.PrefixCacheReusedRatio < 0.5 || s.Preemptions != 0 {
		t.Fatalf("reuse %.3f preemptions %d: want most of the history reused", s.PrefixCacheReusedRatio, s.Preemptions)
	}
}

func dataPath(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", "data", "mooncake", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data not available (%v): skipping", err)
	}
	return p
}

func TestMooncakeFirst20(t *testing.T) {
	src, err := workload.OpenTrace(dataPath(t, "mooncake_trace_first20.jsonl"), workload.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Workers: 1, Engine: engine.Options{
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 16384, MaxNumSeqs: 256, MaxBatchedTokens: 8192, ChunkedPrefill: true, PrefixCaching: true},
		Timing: timing.Polynomial{}}}
	res := run(t, src, o)
	if res.Summary.CompletedRequests != 20 || res.Summary.TotalOutputTokens != 5675 {
		t.Fatalf("completed %d, output tokens %d; want 20 and 5675", res.Summary.CompletedRequests, res.Summary.TotalOutputTokens)
	}
}

// TestDPIdleRankWaitsAtBarrier: with two ranks, a request for the idle rank that arrives while the other
// rank's pass runs starts only when that pass ends (reference §7).
func TestDPIdleRankWaitsAtBarrier(t *testing.T) {
	src := trace(t, `{"timestamp": 0, "input_length": 8, "output_length": 1}
{"timestamp": 5, "input_length": 4, "output_length": 1}
`)
	o := small()
	o.DPSize = 2
	res := run(t, src, Options{Workers: 1, Engine: o})
	var b bytes.Buffer
	res.Collector.WriteRequestsJSONL(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	// Request 1 (rank 1) arrives at 5 ms, waits for the pass [0, 15] to end, then takes 15 ms.
	if !strings.Contains(lines[1], `"first_admission_ms":15`) || !strings.Contains(lines[1], `"ttft_ms":25`) {
		t.Fatalf("request 1: %s", lines[1])
	}
}

// TestClientsDesync: closed-loop clients that start together finish their first requests together;
// with Desync 40 ms client k then sends its second k × 10 ms after that, instead of all at once.
func TestClientsDesync(t *testing.T) {
	arrivals := func(desync time.Duration) []float64 {
		src, err := workload.NewSynthetic(workload.SyntheticOptions{
			NumRequests: 8, Input: workload.Length{Mean: 8}, Output: workload.Length{Mean: 3},
			RequestRate: math.Inf(1), Clients: 4, Desync: desync, Seed: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Workers: 1, Concurrency: 4, Engine: small()}
		o.Engine.VLLM.MaxBatchedTokens = 64
		var b bytes.Buffer
		if err := run(t, src, o).Collector.WriteRequestsJSONL(&b); err != nil {
			t.Fatal(err)
		}
		var at []float64
		for dec := json.NewDecoder(&b); dec.More(); {
			var r struct {
				Arrival float64 `json:"arrival_ms"`
			}
			if err := dec.Decode(&r); err != nil {
				t.Fatal(err)
			}
			at = append(at, r.Arrival)
		}
		return at
	}
	// One 32-token prefill pass that samples the first tokens (10 + 5 ms) and two decode passes (5 ms
	// each): the first round ends at 25 ms.
	if got, want := arrivals(0), []float64{0, 0, 0, 0, 25, 25, 25, 25}; !slices.Equal(got, want) {
		t.Errorf("lock step: arrivals %v, want %v", got, want)
	}
	if got, want := arrivals(40*time.Millisecond), []float64{0, 0, 0, 0, 25, 35, 45, 55}; !slices.Equal(got, want) {
		t.Errorf("desync 40 ms: arrivals %v, want %v", got, want)
	}
}

// TestWaitingRequestsHoldNoSequence: a trace request holds its hashed prompt only from routing to its
// dispatch; the engine makes it again when it admits the request. With 60 requests arriving at once on a
// worker that runs 2 at a time, no request in flight holds a sequence after any pass.
func TestWaitingRequestsHoldNoSequence(t *testing.T) {
	var rows strings.Builder
	for i := range 60 {
		fmt.Fprintf(&rows, `{"timestamp": 0, "input_length": 20, "output_length": 3, "hash_ids": [%d, %d, %d, %d, %d]}`+"\n", i%4, 10+i%7, 100+i, 200+i, 300+i)
	}
	o := Options{Workers: 1, Engine: small()}
	o.Engine.VLLM.MaxNumSeqs = 2
	held := countHeld(&o)
	res := run(t, trace(t, rows.String()), o)
	if *held != 0 || res.Summary.CompletedRequests != 60 {
		t.Fatalf("requests in flight held %d sequences over the passes, %d completed; want 0 and 60", *held, res.Summary.CompletedRequests)
	}
}

// TestSessionsBetweenTurnsHoldNoHistory: a conversation waiting for its next turn holds its turns and
// their output counts, not its history's tokens: with 500 conversations all between turns, the live heap
// grows by less than 6 MiB when their prompts are 8,000 tokens instead of 1,000 (the pool's and the
// recycled sequences' blocks: ~3 MB); it grew 16 MB when sessions held their histories, 4 bytes a token.
func TestSessionsBetweenTurnsHoldNoHistory(t *testing.T) {
	const sessions = 500
	between := func(input int) uint64 {
		src, err := workload.NewSynthetic(workload.SyntheticOptions{
			NumRequests: sessions, Input: workload.Length{Mean: float64(input)}, Output: workload.Length{Mean: 100},
			Arrival: "burst", TurnsPerSession: 2, InterTurnDelay: time.Hour, Seed: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Workers: 1, Engine: engine.Options{
			VLLM:   vllm.Options{BlockSize: 64, NumBlocks: 40000, MaxNumSeqs: 256, MaxBatchedTokens: 8192, ChunkedPrefill: true, PrefixCaching: true},
			Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5}}}
		var before, at runtime.MemStats
		o.Progress = func(ended int) {
			if ended == sessions { // every first turn has ended; the second ones come an hour later
				runtime.GC()
				runtime.ReadMemStats(&at)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		if res := run(t, src, o); res.Summary.CompletedRequests != 2*sessions {
			t.Fatalf("%d requests completed, want %d", res.Summary.CompletedRequests, 2*sessions)
		}
		return at.HeapAlloc - before.HeapAlloc
	}
	short, long := between(1000), between(8000)
	if long > short+6<<20 {
		t.Errorf("between turns, 500 conversations of 8,000-token prompts hold %d bytes, of 1,000-token prompts %d: want at most 6 MiB more", long, short)
	}
}

// TestWaitingTurnsHoldNoSequence: a conversation's turn, like a trace request, holds its hashed prompt
// only from routing to its dispatch (the engine makes it again from the session's past turns): with 60
// conversations of 3 turns on a worker that runs 2 requests at a time, no request in flight holds a
// sequence after any pass, and the later turns still find their history cached.
func TestWaitingTurnsHoldNoSequence(t *testing.T) {
	src, err := workload.NewSynthetic(workload.SyntheticOptions{
		NumRequests: 60, Input: workload.Length{Mean: 40, Stddev: 10}, Output: workload.Length{Mean: 6, Stddev: 2},
		Arrival: "burst", TurnsPerSession: 3, InterTurnDelay: 10 * time.Millisecond, Seed: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Workers: 1, Engine: small()}
	o.Engine.VLLM.MaxNumSeqs, o.Engine.VLLM.NumBlocks = 2, 4096
	held := countHeld(&o)
	res := run(t, src, o)
	if s := res.Summary; *held != 0 || s.CompletedRequests != 180 || s.PrefixCacheReusedRatio < 0.5 {
		t.Fatalf("requests in flight held %d sequences over the passes, %d completed, prefix reuse %.3f; want 0, 180 and at least 0.5",
			*held, s.CompletedRequests, s.PrefixCacheReusedRatio)
	}
}

// countHeld counts, after every pass of a run with o, the requests that hold a sequence.
func countHeld(o *Options) *int {
	held := new(int)
	o.inspect = func(r *runner, w *worker) error {
		for _, req := range r.reqs {
			if req != nil && req.seq != nil {
				*held++
			}
		}
		return nil
	}
	return held
}

// TestSGLangQueueHoldsNoPrompts: an SGLang worker's waiting requests hold their sources, not their
// prompts: with 398 requests waiting behind 2 running at page size 1, the live heap grows by less than
// 12 MiB when the prompts are 8,000 tokens instead of 1,000 (4 MB: the requests in flight and the spare
// buffers); it grew by 46 MB (16 bytes a token of every waiting prompt) when the scheduler made every
// prompt at once.
func TestSGLangQueueHoldsNoPrompts(t *testing.T) {
	const requests = 400
	queued := func(input int) uint64 {
		src, err := workload.NewSynthetic(workload.SyntheticOptions{
			NumRequests: requests, Input: workload.Length{Mean: float64(input)}, Output: workload.Length{Mean: 4}, Arrival: "burst", Seed: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Workers: 1, Engine: engine.Options{Backend: engine.SGLang,
			SGLang: sglang.Options{PageSize: 1, NumPages: 20000, MaxRunning: 2, MaxPrefillTokens: 16384, ChunkedPrefillSize: 8192,
				ClipMaxNewTokens: 4096, Conservativeness: 1}, // no prefix cache: its pages would count
			Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5}}}
		var before, at runtime.MemStats
		o.Progress = func(ended int) {
			if ended == 2 { // 398 wait
				runtime.GC()
				runtime.ReadMemStats(&at)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		if res := run(t, src, o); res.Summary.CompletedRequests != requests {
			t.Fatalf("%d requests completed, want %d", res.Summary.CompletedRequests, requests)
		}
		return at.HeapAlloc - before.HeapAlloc
	}
	short, long := queued(1000), queued(8000)
	if long > short+12<<20 {
		t.Errorf("398 waiting requests of 8,000-token prompts hold %d bytes, of 1,000-token prompts %d: want at most 12 MiB more", long, short)
	}
}
