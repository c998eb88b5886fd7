package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/mocker-sim/mocker/live/natsevents"
)

// TestReadyOfflineAfterSettings: predict, recommend and sweep-worker ready the heap (readyOffline) only
// once their settings have passed: a bad flag, a bad output path or an unreachable server costs nothing.
func TestReadyOfflineAfterSettings(t *testing.T) {
	ns, url, err := natsevents.StartEmbedded(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })

	calls := 0
	was := readyOffline
	readyOffline = func() { calls++ }
	t.Cleanup(func() { readyOffline = was })

	predict := []string{"predict", "--num-requests", "10", "--timing", "fixed", "--prefill-ms", "20", "--decode-ms", "5"}
	rec := append(small, "--ttft-p90-ms", "60", "--tp-list", "1", "--max-workers", "1")
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{append(predict, "--block-size", "-1"), false},
		{append(predict, "--report-json", "/nonexistent/r.json"), false},
		{predict, true},
		{[]string{"recommend", "--tp-list", "1"}, false}, // no target
		{append(rec, "--report-json", "/nonexistent/r.json"), false},
		{rec, true},
		{[]string{"sweep-worker", "--jobs", "0"}, false},
		{[]string{"sweep-worker", "--nats", "nats://127.0.0.1:1"}, false},
		{[]string{"sweep-worker", "--nats", url}, true},
	} {
		calls = 0
		cmd := newRootCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		ctx, cancel := context.WithCancel(context.Background())
		if tc.args[0] == "sweep-worker" {
			cancel() // serve nothing, return at once
		}
		err := cmd.ExecuteContext(ctx)
		cancel()
		if (err == nil) != tc.ok {
			t.Fatalf("%v: error %v, want success %v", tc.args, err, tc.ok)
		}
		want := 0
		if tc.ok {
			want = 1
		}
		if calls != want {
			t.Errorf("%v: readyOffline called %d times, want %d", tc.args, calls, want)
		}
	}
}
