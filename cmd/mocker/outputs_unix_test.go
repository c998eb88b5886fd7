//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputsIntoPipesAndLinks: a report path that is a device or a named pipe (--report-json
// /dev/stdout, /dev/null) is written into as it is, by as many outputs as name it; one that is a
// symbolic link writes the file it names and keeps the link, and a link to the trace is the trace.
// Renaming a temporary file over such a path replaced it: /dev/null, run as root, became a regular
// file, and two outputs on one device were refused as the same file.
func TestOutputsIntoPipesAndLinks(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 100, "output_length": 5}`+"\n"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0) // lets the writers open; EOF if none did
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	page, link := filepath.Join(other, "report.html"), filepath.Join(dir, "link.html")
	os.WriteFile(page, nil, 0o644)
	if err := os.Symlink(page, link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	if _, _, err := mocker(t, "predict", "--trace", trace, "--report-json", fifo, "--requests-jsonl", fifo, "--html", link); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	if !strings.HasPrefix(string(got), `{"id":0,`) || !strings.Contains(string(got), `"completed_requests": 1,`) {
		t.Errorf("the pipe's reader got %q, want the request's record and the report", got)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the pipe became %v (%v)", fi.Mode(), err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link became %v (%v)", fi.Mode(), err)
	}
	if b, err := os.ReadFile(page); !strings.HasPrefix(string(b), "<!DOCTYPE html>") {
		t.Errorf("the linked page holds %.40q (%v), want the HTML report", b, err)
	}
	traceLink := filepath.Join(other, "t.jsonl")
	if err := os.Symlink(trace, traceLink); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mocker(t, "predict", "--trace", trace, "--report-json", traceLink); err == nil || err.Error() != "--report-json "+traceLink+": is also --trace" {
		t.Errorf("--report-json a link to the trace: %v", err)
	}
}

// TestRecommendReadsAPipedTraceOnce: a search reads its trace for its bounds and for every run, and a
// pipe (--trace <(zcat t.jsonl.gz)) gives its bytes once: recommend holds them, finding what it finds
// on the file, and its errors name the pipe; with --nats, whose workers read the trace's path, it
// refuses the pipe before reaching the server.
func TestRecommendReadsAPipedTraceOnce(t *testing.T) {
	dir := t.TempDir()
	var trace strings.Builder
	for i := range 40 {
		fmt.Fprintf(&trace, `{"timestamp": %d, "input_length": 600, "output_length": 20, "hash_ids": [%d, %d]}`+"\n", i*100, i%3, 10+i)
	}
	file := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(file, []byte(trace.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	wrote := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until recommend opens it
		if err == nil {
			_, err = io.WriteString(w, trace.String())
			w.Close()
		}
		wrote <- err
	}()
	args := []string{"recommend", "--ttft-p90-ms", "5000", "--itl-p90-ms", "300", "--tp-list", "1", "--max-workers", "2"}
	table := func(out string) string { // without the line of the search's wall time
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if !strings.Contains(l, "wall time") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	// A search that opened the spent pipe again would wait for a writer for ever: a bound for that hang,
	// not a timing.
	type result struct {
		out string
		err error
	}
	ran := make(chan result, 1)
	go func() {
		out, _, err := mocker(t, append(args, "--trace", fifo)...)
		ran <- result{out, err}
	}()
	var piped string
	select {
	case r := <-ran:
		if r.err != nil {
			t.Fatal(r.err)
		}
		piped = r.out
	case <-time.After(2 * time.Minute):
		t.Fatal("recommend still waits on the pipe: it read it more than once")
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	want, _, err := mocker(t, append(args, "--trace", file)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want, "vllm agg tp1") || table(piped) != table(want) {
		t.Errorf("through a pipe:\n%s\nwant, as from the file:\n%s", piped, want)
	}
	_, _, err = mocker(t, append(args, "--trace", fifo, "--nats", "nats://127.0.0.1:1")...)
	if want := "--trace " + fifo + ": not a regular file, and --nats's sweep workers read the trace from its path: give a file"; err == nil || err.Error() != want {
		t.Errorf("with --nats: %v, want %q", err, want)
	}
}
