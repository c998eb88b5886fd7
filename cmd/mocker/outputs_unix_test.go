//go:build unix

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
