package sim

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/router"
)

func TestParseFailure(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Failure
		err  string
	}{
		{in: "1@30s:10s", want: Failure{Worker: 1, At: 30 * time.Second, Duration: 10 * time.Second}},
		{in: "0@1m30s", want: Failure{At: 90 * time.Second}},
		{in: "2@2.5", want: Failure{Worker: 2, At: 2500 * time.Millisecond}},
		{in: "3@0:0.25", want: Failure{Worker: 3, Duration: 250 * time.Millisecond}},
		{in: "1", err: "no @"},
		{in: "x@1s", err: `worker "x" is not a worker number`},
		{in: "-1@1s", err: "not a worker number"},
		{in: "1@-1s", err: "is negative"},
		{in: "1@soon", err: "is not a duration"},
		{in: "1@1s:0", err: "duration 0"},
		{in: "1@1s:-2", err: "is not a duration"},
	} {
		got, err := ParseFailure(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "ID@TIME[:DURATION]") {
				t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// failTrace: two requests at 0 (8-token prompts, 4 tokens out) and one at 40 ms (4 tokens, 1 out).
const failTrace = `{"timestamp": 0, "input_length": 8, "output_length": 4}
{"timestamp": 0, "input_length": 8, "output_length": 4}
{"timestamp": 40, "input_length": 4, "output_length": 1}
`

// failOptions: two small() workers (budget 8, 10 ms per prefill, 5 ms per decode) behind a least-loaded
// router, so request 0 goes to worker 0 and request 1 to worker 1; worker 1 fails at 12 ms and comes back
// at 32 ms. Every pass checks the accounting and that the router's index is the engines' caches.
func failOptions(m OnFailure) Options {
	ro := router.DefaultOptions()
	ro.Policy, ro.QueueThreshold = router.LeastLoaded, 0
	o := Options{Workers: 2, Engine: small(), Router: ro, OnFailure: m,
		Failures: []Failure{{Worker: 1, At: 12 * time.Millisecond, Duration: 20 * time.Millisecond}}}
	o.Engine.VLLM.Events = true
	o.inspect = checkIndex
	return o
}

// TestWorkerFailureRetry: request 1 loses its prefill on worker 1 at 12 ms and starts over on worker 0,
// behind request 0: it joins worker 0's pass at 15 ms, whose budget of 8 tokens leaves it 7 beside
// request 0's decode ([15, 30]), computes its last prompt token and samples its first token in the next
// ([30, 45]): TTFT 45 ms from its arrival; then two 5 ms decodes, with request 0's last (45-50) and
// alone (50-60). Worker 1 is back, empty, at 32 ms, and takes request 2 at 40 ms: TTFT 15 ms.
func TestWorkerFailureRetry(t *testing.T) {
	res := run(t, trace(t, failTrace), failOptions(Retry))
	want := []string{
		`{"id":0,"request_id":"0","trace_line":1,"worker":0,"arrival_ms":0,"first_admission_ms":0,"first_token_ms":15,"finish_ms":50,"input_tokens":8,"max_tokens":4,"output_tokens":4,"cached_tokens":0,"ttft_ms":15,"tpot_ms":11.666666666666666,"e2e_ms":50,"rejected":false}`,
		`{"id":1,"request_id":"1","trace_line":2,"worker":0,"arrival_ms":0,"first_admission_ms":15,"first_token_ms":45,"finish_ms":60,"input_tokens":8,"max_tokens":4,"output_tokens":4,"cached_tokens":0,"ttft_ms":45,"tpot_ms":5,"e2e_ms":60,"rejected":false,"retries":1}`,
		`{"id":2,"request_id":"2","trace_line":3,"worker":1,"arrival_ms":40,"first_admission_ms":40,"first_token_ms":55,"finish_ms":55,"input_tokens":4,"max_tokens":1,"output_tokens":1,"cached_tokens":0,"ttft_ms":15,"tpot_ms":null,"e2e_ms":15,"rejected":false}`,
	}
	if got := requestsJSONL(t, res); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	s := res.Summary
	if s.CompletedRequests != 3 || s.WorkerFailures != 1 || s.FailedRequests != 0 || s.RetriedRequests != 1 || s.TotalOutputTokens != 9 {
		t.Fatalf("completed %d, failures %d, failed %d, retried %d, tokens %d; want 3, 1, 0, 1, 9",
			s.CompletedRequests, s.WorkerFailures, s.FailedRequests, s.RetriedRequests, s.TotalOutputTokens)
	}
	js := string(reportBytes(t, res))
	if !strings.Contains(js, `"worker_failures": 1,
  "failed_requests": 0,
  "retried_requests": 1,`) {
		t.Fatalf("report JSON lacks the failure keys:\n%s", js)
	}
	var tb strings.Builder
	if err := s.WriteTable(&tb, ""); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"Worker failures:", "Failed requests:", "Retried requests:"} {
		if !strings.Contains(tb.String(), row) {
			t.Errorf("summary table lacks %q:\n%s", row, tb.String())
		}
	}
}

// TestWorkerFailureFail: with --on-worker-failure fail, request 1 ends failed at 12 ms; request 0 runs
// alone (tokens at 15, 20, 25, 30 ms); request 2 goes to the first of two idle workers, worker 0.
func TestWorkerFailureFail(t *testing.T) {
	res := run(t, trace(t, failTrace), failOptions(Fail))
	got := requestsJSONL(t, res)
	if want := `{"id":1,"request_id":"1","trace_line":2,"worker":1,"arrival_ms":0,"first_admission_ms":0,"first_token_ms":null,"finish_ms":12,"input_tokens":8,"max_tokens":4,"output_tokens":0,"cached_tokens":0,"ttft_ms":null,"tpot_ms":null,"e2e_ms":null,"rejected":false,"failed":true,"fail_reason":"worker 1 failed at 12ms"}`; got[1] != want {
		t.Fatalf("request 1: %s\nwant %s", got[1], want)
	}
	s := res.Summary
	if s.CompletedRequests != 2 || s.FailedRequests != 1 || s.RetriedRequests != 0 || s.E2E.Max != 30 || s.Duration != 55*time.Millisecond {
		t.Fatalf("completed %d, failed %d, retried %d, max E2E %v, duration %v; want 2, 1, 0, 30, 55ms",
			s.CompletedRequests, s.FailedRequests, s.RetriedRequests, s.E2E.Max, s.Duration)
	}
}

// TestWorkerFailureForGood: the only worker fails for good at 12 ms: its request cannot be retried and
// fails, and so does every later arrival; the run ends instead of waiting for a worker.
func TestWorkerFailureForGood(t *testing.T) {
	o := failOptions(Retry)
	o.Workers, o.Failures = 1, []Failure{{Worker: 0, At: 12 * time.Millisecond}}
	res := run(t, trace(t, failTrace), o)
	s := res.Summary
	if s.CompletedRequests != 0 || s.FailedRequests != 3 || s.RetriedRequests != 0 {
		t.Fatalf("completed %d, failed %d, retried %d; want 0, 3, 0", s.CompletedRequests, s.FailedRequests, s.RetriedRequests)
	}
	if got := requestsJSONL(t, res)[2]; !strings.Contains(got, `"finish_ms":40,`) || !strings.Contains(got, `"fail_reason":"no agg worker left"`) {
		t.Fatalf("request 2: %s", got)
	}
}

// TestWorkerFailureDisagg: one prefill worker (0) and one decode worker (1), 1 ms per token of KV moved.
// The request's prompt is computed in [0, 10] and its 8 tokens' KV is on its way (10-18) when the decode
// worker fails at 14 ms for 10 ms. Retried, it prefills again on worker 0, which still caches the
// prompt's first block ([14, 24]); it waits for the decode worker, back at 24 ms and empty, so all 8
// tokens move again (24-32); the first token comes 5 ms later (TTFT 37), then two more (42, 47). Failed
// instead, it ends at 14 ms and the prefill worker lets go of its KV.
func TestWorkerFailureDisagg(t *testing.T) {
	for _, m := range []OnFailure{Retry, Fail} {
		o := disaggOptions(1, 1)
		o.PrefillEngine.VLLM.Events = true
		o.OnFailure, o.Failures = m, []Failure{{Worker: 1, At: 14 * time.Millisecond, Duration: 10 * time.Millisecond}}
		o.inspect = checkIndex
		res := run(t, trace(t, `{"timestamp": 0, "input_length": 8, "output_length": 3, "hash_ids": [1, 2]}`+"\n"), o)
		s := res.Summary
		if m == Retry && (s.CompletedRequests != 1 || s.RetriedRequests != 1 || s.TTFT.Mean != 37 || s.E2E.Mean != 47) {
			t.Errorf("retry: completed %d, retried %d, TTFT %v, E2E %v; want 1, 1, 37, 47", s.CompletedRequests, s.RetriedRequests, s.TTFT.Mean, s.E2E.Mean)
		}
		if m == Fail && (s.CompletedRequests != 0 || s.FailedRequests != 1 || !strings.Contains(requestsJSONL(t, res)[0], `"finish_ms":14,`)) {
			t.Errorf("fail: completed %d, failed %d, %s; want 0, 1, ended at 14 ms", s.CompletedRequests, s.FailedRequests, requestsJSONL(t, res)[0])
		}
		if m := res.Pools[0].Metrics[0][0]; m.ActiveBlocks != 0 {
			t.Errorf("%v: the prefill worker still holds %d blocks", o.OnFailure, m.ActiveBlocks)
		}
	}
}

// TestKVRouterAvoidsFailedWorker: requests sharing a prompt every 100 ms follow its cached copy; worker 0
// fails at 150 ms for 300 ms, and while it is down every request goes to worker 1, whose cache the router
// then follows. The router's index equals the caches at every pass (the failed worker's blocks leave it).
func TestKVRouterAvoidsFailedWorker(t *testing.T) {
	var b strings.Builder
	for i := range 8 {
		b.WriteString(`{"timestamp": ` + strconv.Itoa(i*100) + `, "input_length": 16, "output_length": 1, "hash_ids": [1, 2, 3, 4]}` + "\n")
	}
	o := Options{Workers: 2, Engine: small(), Router: router.DefaultOptions(),
		Failures: []Failure{{Worker: 0, At: 150 * time.Millisecond, Duration: 300 * time.Millisecond}}}
	o.Engine.VLLM.Events = true
	o.inspect = checkIndex
	res := run(t, trace(t, b.String()), o)
	for i, line := range requestsJSONL(t, res) {
		if i >= 2 && i <= 4 && !strings.Contains(line, `"worker":1,`) {
			t.Errorf("request %d, arriving while worker 0 is down: %s", i, line)
		}
		if i >= 5 && !strings.Contains(line, `"worker":1,`) {
			t.Errorf("request %d: %s; want worker 1, which holds the prompt", i, line)
		}
	}
}

// TestFailureValidation: a failure names an existing worker and does not overlap another of the same
// worker.
func TestFailureValidation(t *testing.T) {
	for _, tc := range []struct {
		fs   []Failure
		want string
	}{
		{[]Failure{{Worker: 2}}, "there are 2 workers (0 to 1)"},
		{[]Failure{{Worker: 1, At: time.Second, Duration: time.Second}, {Worker: 1, At: 1500 * time.Millisecond}}, "worker 1 is still down from 1@1s:1s"},
		{[]Failure{{Worker: 1, At: 2 * time.Second}, {Worker: 1, At: 3 * time.Second}}, "worker 1 is still down from 1@2s"},
	} {
		o := failOptions(Retry)
		o.Failures = tc.fs
		if _, err := Run(trace(t, failTrace), o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.fs, err, tc.want)
		}
	}
	o := failOptions(Retry)
	o.Failures = []Failure{{Worker: 1, At: time.Second, Duration: time.Second}, {Worker: 1, At: 2 * time.Second}}
	if _, err := Run(trace(t, failTrace), o); err != nil {
		t.Errorf("a failure as the worker comes back: %v", err)
	}
}
