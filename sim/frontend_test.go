package sim

import (
	"strings"
	"testing"
	"time"
)

// TestFrontendProcess: a single-threaded frontend spends 1 ms on each request and 8 ms on each chunk, more
// than small()'s 5 ms decode pass, so chunks queue behind it.
func TestFrontendProcess(t *testing.T) {
	front := Options{Workers: 1, Engine: small(), FrontendPerRequest: time.Millisecond, FrontendPerChunk: 8 * time.Millisecond}

	// One client, two requests of 3 tokens. r0: taken in [0,1], routed at 1; the engine gives its tokens
	// at 16 (prefill pass [1,16]), 21 and 26; the frontend sends them in [16,24], [24,32] and [32,40]. The
	// client sees r0 end at 40, not 26, and only then sends r1, which runs the same 40 ms later.
	o := front
	o.Concurrency = 1
	jsonl := `{"timestamp": 0, "input_length": 4, "output_length": 3, "hash_ids": [1]}
{"timestamp": 0, "input_length": 4, "output_length": 3, "hash_ids": [2]}
`
	res := run(t, trace(t, jsonl), o)
	s := res.Summary
	if s.CompletedRequests != 2 || !eq(trio(s.TTFT), []float64{24, 24, 24}) || !eq(trio(s.E2E), []float64{40, 40, 40}) ||
		!eq(trio(s.ITL), []float64{8, 8, 8}) {
		t.Fatalf("closed loop: TTFT %v E2E %v ITL %v", trio(s.TTFT), trio(s.E2E), trio(s.ITL))
	}
	if res.End != 80*time.Millisecond || res.Passes != 6 {
		t.Fatalf("closed loop: end %v passes %d, want 80ms and 6", res.End, res.Passes)
	}

	// A request waits behind the chunks taken before it. r0 as above; r1 (1 token) arrives at 20 while the
	// frontend sends r0's first chunk until 24: taken in [24,25], routed at 25. r0's chunks of 21 and 26
	// go out in [25,33] and [33,41]; r1 is prefilled in [26,41] and its chunk goes out in [41,49]. r0: TTFT
	// 24, E2E 41; r1: TTFT and E2E 29.
	jsonl = `{"timestamp": 0, "input_length": 4, "output_length": 3, "hash_ids": [1]}
{"timestamp": 20, "input_length": 4, "output_length": 1, "hash_ids": [2]}
`
	res = run(t, trace(t, jsonl), front)
	s = res.Summary
	if s.CompletedRequests != 2 || !eq(trio(s.TTFT), []float64{26.5, 24, 29}) || !eq(trio(s.E2E), []float64{35, 29, 41}) {
		t.Fatalf("open loop: TTFT %v E2E %v", trio(s.TTFT), trio(s.E2E))
	}
	if res.End != 49*time.Millisecond || res.Passes != 4 {
		t.Fatalf("open loop: end %v passes %d, want 49ms and 4", res.End, res.Passes)
	}
}

// TestFrontendProcessRefusesFailures: the frontend's queue is not modelled with workers that fail.
func TestFrontendProcessRefusesFailures(t *testing.T) {
	o := Options{Workers: 1, Engine: small(), FrontendPerChunk: time.Millisecond, Failures: []Failure{{At: time.Second}}}
	_, err := Run(trace(t, `{"timestamp": 0, "input_length": 4, "output_length": 1}`+"\n"), o)
	if err == nil || !strings.Contains(err.Error(), "not modelled with worker failures") {
		t.Fatalf("err %v, want a refusal naming worker failures", err)
	}
}
