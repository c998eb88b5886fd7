package main

import (
	"context"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestLiveThreads: serve, worker and frontend refuse a negative --threads by name, and serve runs with
// GOMAXPROCS set to what --threads gives.
func TestLiveThreads(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--port", "0", "--nats", "none"},
		{"worker", "--nats", "nats://127.0.0.1:1"},
		{"frontend", "--port", "0", "--nats", "nats://127.0.0.1:1"},
	} {
		_, _, err := mocker(t, append(args, "--threads", "-1")...)
		if err == nil || !strings.Contains(err.Error(), "--threads -1: must not be negative") {
			t.Errorf("%s --threads -1: %v", args[0], err)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	want := runtime.GOMAXPROCS(0) + 1
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve starts, then stops at once
	cmd := newRootCmd()
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--port", "0", "--nats", "none", "--threads", strconv.Itoa(want)})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Errorf("serve --threads %d ran with GOMAXPROCS %d", want, got)
	}
}
