package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPredictHTML: --html writes the page, the same bytes for the same seed, and leaves the run's
// report as it is without it.
func TestPredictHTML(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, html bool) (page, report []byte) {
		t.Helper()
		args := []string{"predict", "--num-requests", "60", "--workers", "2", "--report-json", filepath.Join(dir, name+".json")}
		if html {
			args = append(args, "--html", filepath.Join(dir, name+".html"))
		}
		if _, stderr, err := mocker(t, args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		report, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if html {
			if page, err = os.ReadFile(filepath.Join(dir, name+".html")); err != nil {
				t.Fatal(err)
			}
		}
		return page, report
	}
	page, report := run("a", true)
	again, _ := run("b", true)
	_, plain := run("c", false)
	if !bytes.Equal(page, again) {
		t.Error("two runs of one seed wrote different pages")
	}
	if !bytes.Equal(report, plain) {
		t.Errorf("--html changed the report:\n%s\nwithout it:\n%s", report, plain)
	}
	for _, want := range []string{"<h1>mocker predict</h1>", "llama-3.1-8b on h200_sxm, TP 1: 2 vllm workers", "<td>Successful requests:</td><td>60</td>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(string(page), `<svg class="chart"`); n != 9 {
		t.Errorf("%d charts, want 9", n)
	}
}
