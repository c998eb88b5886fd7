package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesUnboundedFlags: numbers that would overflow or never serve a request are refused
// before the server listens.
func TestServeRefusesUnboundedFlags(t *testing.T) {
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"--default-max-tokens", "9223372036854775807", "default max tokens 9223372036854775807: must be below"},
		{"--max-request-body-mb", "1e13", "max-request-body-mb"},
		{"--max-request-body-mb", "4097", "max-request-body-mb"},
		{"--read-timeout", "-1", "read-timeout"},
		{"--write-timeout", "1e300", "write-timeout"},
		{"--max-connections", "-5", "max-connections"},
		{"--max-connections", "9223372036854775807", "max-connections"},
		{"--shutdown-timeout", "1e300", "shutdown-timeout"},
		{"--failure-rate", "1.5", "failure-rate"},
		{"--failure-types", "rate_limit,timeout", `failure-types "timeout": want one of`},
	} {
		_, _, err := mocker(t, "serve", "--nats", "none", "--port", "0", tc.flag, tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %s %s: %v, want an error containing %q", tc.flag, tc.value, err, tc.want)
		}
	}
}

// TestServeHugeMaxTokens is the reproduction, on each backend: max_tokens 2^63-1 is a 400 and
// the server keeps serving.
func TestServeHugeMaxTokens(t *testing.T) {
	for _, backend := range []string{"vllm", "trtllm", "sglang"} {
		t.Run(backend, func(t *testing.T) {
			cfg := serveConfig()
			cfg.NATS, cfg.Backend = "none", backend
			info, c := startServe(t, cfg)
			hc := &http.Client{Timeout: time.Minute}
			res, err := hc.Post("http://"+info.Addr+"/v1/completions", "application/json",
				strings.NewReader(`{"model":"llama-3.1-8b","prompt":"hi","max_tokens":9223372036854775807}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"param":"max_tokens"`) {
				t.Fatalf("status %d, body %s; want 400 naming max_tokens", res.StatusCode, body)
			}
			if got := complete(t, c, "hello there", 3); got.Usage.CompletionTokens != 3 {
				t.Fatalf("then a plain request: %+v", got.Usage)
			}
		})
	}
}

// TestContradictoryWorkerFlags: --workers with --prefill-workers/--decode-workers is refused by every
// command, even when --workers is given its default value.
func TestContradictoryWorkerFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--nats", "none", "--port", "0"},
		{"predict", "--num-requests", "1"},
		{"estimate", "--decode-requests", "1", "--decode-context", "100"},
	} {
		args = append(args, "--workers", "1", "--prefill-workers", "1", "--decode-workers", "1")
		if _, _, err := mocker(t, args...); err == nil || !strings.Contains(err.Error(), "contradicts --prefill-workers") {
			t.Errorf("mocker %s: %v, want the contradiction named", strings.Join(args, " "), err)
		}
	}
}

// TestServeRefusesPredictFlags: settings of the simulation alone are not serve's flags, so serve refuses
// them rather than ignore them.
func TestServeRefusesPredictFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--planner-config", "planner.yaml"}, {"--fail-worker", "0@1s"}, {"--concurrency", "4"}, {"--report-json", "r.json"}, {"--frontend-latency-ms", "1"},
	} {
		_, _, err := mocker(t, append([]string{"serve", "--nats", "none", "--port", "0"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "unknown flag: "+args[0]) {
			t.Errorf("serve %s: %v, want unknown flag", strings.Join(args, " "), err)
		}
	}
}

// TestEstimateSharedTiming: estimate prices one pass at the shared settings, and reports that timing,
// not a disaggregated file's per-pool ones.
func TestEstimateSharedTiming(t *testing.T) {
	out, _, err := mocker(t, "estimate", "--decode-requests", "4", "--decode-context", "100",
		"--prefill-workers", "1", "--decode-workers", "1", "--prefill-timing", "polynomial")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"timing_model":"default"`) {
		t.Errorf("estimate: %s, want the shared op-level timing", out)
	}
}
