package report

import (
	"strings"
	"testing"
	"time"
)

// TestRetriedAndFailed: a retry drops what the request got (tokens, ITL gaps, admission) but keeps its
// arrival; a failed request counts only as failed; both keys and rows appear with worker failures.
func TestRetriedAndFailed(t *testing.T) {
	ms := time.Millisecond
	c := NewCollector()
	c.Arrived(0, 0, 8, 3)
	c.Routed(0, 1)
	c.Admitted(0, 0, 4)
	c.Tokens(0, 10*ms, 1)
	c.Tokens(0, 11*ms, 1) // a 1 ms gap, lost with the retry
	c.Retried(0, 12*ms)
	c.Routed(0, 0)
	c.Admitted(0, 15*ms, 0)
	c.Tokens(0, 30*ms, 1)
	c.Tokens(0, 35*ms, 1)
	c.Tokens(0, 40*ms, 1)
	c.Finished(0, 40*ms)
	c.Arrived(1, 0, 4, 1)
	c.Retried(1, 5*ms)
	c.Failed(1, 6*ms, "worker 0 failed at 6ms")

	s := c.Summary()
	s.WorkerFailures = 2
	if s.CompletedRequests != 1 || s.FailedRequests != 1 || s.RetriedRequests != 2 || s.RejectedRequests != 0 ||
		s.TTFT.Mean != 30 || s.ITL.Min != 5 || s.ITL.Max != 5 || s.TotalOutputTokens != 3 || s.PrefixCacheReusedRatio != 0 {
		t.Fatalf("summary %+v", s)
	}
	var b strings.Builder
	if err := c.WriteRequestsJSONL(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if want := `{"id":0,"request_id":null,"trace_line":null,"worker":0,"arrival_ms":0,"first_admission_ms":15,"first_token_ms":30,"finish_ms":40,"input_tokens":8,"max_tokens":3,"output_tokens":3,"cached_tokens":0,"ttft_ms":30,"tpot_ms":5,"e2e_ms":40,"rejected":false,"retries":1}`; lines[0] != want {
		t.Errorf("retried record:\n%s\nwant\n%s", lines[0], want)
	}
	if want := `{"id":1,"request_id":null,"trace_line":null,"worker":null,"arrival_ms":0,"first_admission_ms":null,"first_token_ms":null,"finish_ms":6,"input_tokens":4,"max_tokens":1,"output_tokens":0,"cached_tokens":0,"ttft_ms":null,"tpot_ms":null,"e2e_ms":null,"rejected":false,"failed":true,"fail_reason":"worker 0 failed at 6ms","retries":1}`; lines[1] != want {
		t.Errorf("failed record:\n%s\nwant\n%s", lines[1], want)
	}
	b.Reset()
	if err := s.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"worker_failures": 2,
  "failed_requests": 1,
  "retried_requests": 2,`) {
		t.Errorf("JSON:\n%s", b.String())
	}
	b.Reset()
	if err := s.WriteTable(&b, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Failed requests:                         1\n") {
		t.Errorf("table:\n%s", b.String())
	}
	// Without failures the report is what it was.
	s.WorkerFailures = 0
	b.Reset()
	s.WriteJSON(&b)
	if strings.Contains(b.String(), "failed_requests") {
		t.Errorf("JSON without worker failures has their keys:\n%s", b.String())
	}
	defer func() {
		if recover() == nil {
			t.Error("a call after Failed did not panic")
		}
	}()
	c.Tokens(1, 7*ms, 1)
}
