package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPredictFailWorker: sim's worked case (TestWorkerFailureRetry) through the CLI: worker 1 fails at
// 12 ms for 20 ms, its request starts over on worker 0 (TTFT 45 ms); the times may be Go durations or
// seconds, flags or YAML; with --on-worker-failure fail the request fails instead.
func TestPredictFailWorker(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 8, "output_length": 4}
{"timestamp": 0, "input_length": 8, "output_length": 4}
{"timestamp": 40, "input_length": 4, "output_length": 1}
`), 0o644)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("fail-worker: [\"1@12ms:20ms\"]\non-worker-failure: retry\n"), 0o644)
	base := []string{"predict", "--trace", trace, "--timing", "fixed", "--prefill-ms", "10",
		"--decode-ms", "5", "--block-size", "4", "--num-gpu-blocks", "64", "--max-num-batched-tokens", "8", "--workers", "2",
		"--router", "least-loaded", "--check-invariants"}
	var records []string
	for i, extra := range [][]string{
		{"--fail-worker", "1@12ms:20ms"},
		{"--fail-worker", "1@0.012:0.02", "--on-worker-failure", "retry"},
		{"--config", cfg},
	} {
		jsonl, report := filepath.Join(dir, "r.jsonl"), filepath.Join(dir, "r.json")
		out, stderr, err := mocker(t, append(append(base, extra...), "--requests-jsonl", jsonl, "--report-json", report)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr)
		}
		if !strings.Contains(out, "Worker failures:                         1\n") || !strings.Contains(out, "Retried requests:                        1\n") ||
			!strings.Contains(out, "Failed requests:                         0\n") {
			t.Fatalf("%v: summary:\n%s", extra, out)
		}
		m := readReport(t, report)
		if m["worker_failures"] != 1 || m["retried_requests"] != 1 || m["failed_requests"] != 0 || m["completed_requests"] != 3 {
			t.Fatalf("%v: report %v", extra, m)
		}
		data, _ := os.ReadFile(jsonl)
		records = append(records, string(data))
		if i > 0 && records[i] != records[0] {
			t.Fatalf("%v: records differ from the first run's:\n%s\n%s", extra, records[i], records[0])
		}
	}
	if line := strings.Split(records[0], "\n")[1]; !strings.Contains(line, `"ttft_ms":45,`) || !strings.Contains(line, `"retries":1}`) {
		t.Fatalf("request 1: %s", line)
	}

	report := filepath.Join(dir, "f.json")
	if _, stderr, err := mocker(t, append(base, "--fail-worker", "1@12ms", "--on-worker-failure", "fail", "--report-json", report)...); err != nil {
		t.Fatalf("fail: %v\n%s", err, stderr)
	}
	if m := readReport(t, report); m["failed_requests"] != 1 || m["retried_requests"] != 0 || m["completed_requests"] != 2 {
		t.Fatalf("fail: report %v", m)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fail-worker", "2@1s"}, "there are 2 workers (0 to 1)"},
		{[]string{"--fail-worker", "1@later"}, `fail-worker "1@later": time`},
		{[]string{"--fail-worker", "1@1s", "--fail-worker", "1@2s"}, "worker 1 is still down"},
		{[]string{"--on-worker-failure", "maybe"}, `on-worker-failure "maybe": want retry or fail`},
	} {
		if _, _, err := mocker(t, append(base, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestNothingCompletedForFailures: a run in which every request failed says how many and why the first
// did, as one whose requests were all rejected does; it said only "no request completed". A trace's
// request is named by its line; with one completed request the run succeeds.
func TestNothingCompletedForFailures(t *testing.T) {
	out, _, err := mocker(t, "predict", "--num-requests", "3", "--fail-worker", "0@0")
	if want := `no request completed: 3 of 3 requests failed; the first (request "0"): no agg worker left`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if !strings.Contains(out, "Failed requests:                         3") {
		t.Errorf("no summary:\n%s", out)
	}
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 100, "output_length": 5}
{"timestamp": 5000, "input_length": 100, "output_length": 5}
`), 0o644)
	_, _, err = mocker(t, "predict", "--trace", trace, "--fail-worker", "0@1s")
	if err != nil {
		t.Errorf("one of two completed: %v", err)
	}
	// Kept whole (--perfetto) or forgotten as they end, the requests name the same first failure.
	for _, more := range [][]string{nil, {"--perfetto", filepath.Join(t.TempDir(), "p.json")}} {
		_, _, err = mocker(t, append([]string{"predict", "--trace", trace, "--fail-worker", "0@0"}, more...)...)
		if want := `no request completed: 2 of 2 requests failed; the first (trace line 1): no agg worker left`; err == nil || err.Error() != want {
			t.Errorf("%v: error %v, want %q", more, err, want)
		}
	}
}
