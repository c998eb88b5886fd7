package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStreamedRecordsMatchKept: without --perfetto, predict forgets ended requests and streams
// --requests-jsonl as they end (sim.Options.Compact); with it, every record is kept to the end. The
// report, the per-request records and the HTML page (its CDFs come from the compact samples) are the
// same, byte for byte, either way, on a run with rejections and sessions.
func TestStreamedRecordsMatchKept(t *testing.T) {
	dir := t.TempDir()
	files := []string{"report-json", "requests-jsonl", "html"}
	var got [2][][]byte
	for i, mode := range []string{"compact", "kept"} {
		args := []string{"predict", "--num-requests", "300", "--request-rate", "30", "--turns-per-session", "3",
			"--workers", "2", "--router", "kv", "--num-gpu-blocks", "400", "--input-tokens-stddev", "2000", "--seed", "5"}
		for _, f := range files {
			args = append(args, "--"+f, filepath.Join(dir, mode+"."+f))
		}
		if mode == "kept" {
			args = append(args, "--perfetto", filepath.Join(dir, "trace.pftrace"))
		}
		if _, stderr, err := mocker(t, args...); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, stderr)
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dir, mode+"."+f))
			if err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], b)
		}
	}
	for j, f := range files {
		if len(got[0][j]) == 0 || !bytes.Equal(got[0][j], got[1][j]) {
			t.Errorf("--%s: %d bytes streamed, %d kept, not the same", f, len(got[0][j]), len(got[1][j]))
		}
	}
	if !bytes.Contains(got[0][1], []byte(`"rejected":true`)) {
		t.Error("no request was rejected: the run does not cover rejections")
	}
}

// TestStreamedRecordsUnwritable: a --requests-jsonl whose directory goes away after the outputs were
// checked (readyOffline runs between the check and the run) fails with the file's error; the run does
// not start and nothing panics.
func TestStreamedRecordsUnwritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	was := readyOffline
	readyOffline = func() {
		if err := os.Remove(dir); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { readyOffline = was })
	jsonl := filepath.Join(dir, "r.jsonl")
	_, _, err := mocker(t, "predict", "--num-requests", "10", "--timing", "fixed", "--prefill-ms", "20", "--decode-ms", "5",
		"--requests-jsonl", jsonl)
	if want := "report: write " + jsonl + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestPredictInterrupted: a predict whose context is done once the run is under way (as Ctrl-C does
// through signal.NotifyContext) stops with the context's error and leaves no file behind, not even
// the temporary one of the streamed --requests-jsonl.
func TestPredictInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	was := readyOffline
	readyOffline = cancel // after the settings passed, before the run
	t.Cleanup(func() { readyOffline = was })
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"predict", "--num-requests", "1000", "--timing", "fixed", "--prefill-ms", "20", "--decode-ms", "5",
		"--requests-jsonl", filepath.Join(dir, "r.jsonl"), "--report-json", filepath.Join(dir, "r.json")})
	if err := cmd.ExecuteContext(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want %v", err, context.Canceled)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Errorf("left %v (%v), want nothing", left, err)
	}
	if out.Len() != 0 {
		t.Errorf("printed a report of an interrupted run:\n%s", out.String())
	}
}

// TestPredictInterruptedLifetime: interrupted while --concurrency-desync-ms auto replays a request's
// lifetime (200 requests of 100 clients in lock step, before the run), predict stops there at the next
// request that completes, as the run would: no desync is chosen, no report printed.
func TestPredictInterruptedLifetime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	was := readyOffline
	readyOffline = cancel // after the settings passed, before the lifetime replay
	t.Cleanup(func() { readyOffline = was })
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"predict", "--num-requests", "1000", "--concurrency", "100", "--timing", "fixed", "--prefill-ms", "20", "--decode-ms", "5"})
	if err := cmd.ExecuteContext(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want %v", err, context.Canceled)
	}
	if strings.Contains(errb.String(), "concurrency-desync-ms auto:") || out.Len() != 0 {
		t.Errorf("the lifetime replay ran to its end:\n%s%s", errb.String(), out.String())
	}
}
