package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPredictPerfetto: --perfetto writes the trace beside the other reports: valid JSON with one pass
// slice per pass (one worker, one rank) and one request slice per completed request; with
// --perfetto-window it keeps only the passes in the window, and the run's summary is the same.
func TestPredictPerfetto(t *testing.T) {
	dir := t.TempDir()
	base := []string{"predict", "--num-requests", "40", "--request-rate", "20", "--output-tokens", "20", "--input-tokens", "200"}
	events := func(path string) (passes, requests int, first, last float64) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			TraceEvents []struct {
				Ph, Name string
				TS, Dur  float64
			}
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		first = -1
		for _, e := range f.TraceEvents {
			switch {
			case e.Ph == "X" && e.Name == "pass":
				passes++
				if first < 0 {
					first = e.TS
				}
				last = e.TS + e.Dur
			case e.Ph == "b" && e.Name == "request":
				requests++
			}
		}
		return passes, requests, first, last
	}
	all := filepath.Join(dir, "all.json")
	out, stderr, err := mocker(t, append(base, "--report-json", filepath.Join(dir, "r.json"), "--perfetto", all)...)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`, (\d+) passes,`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no pass count in %q", stderr)
	}
	runPasses, _ := strconv.Atoi(m[1])
	if p, r, _, _ := events(all); p != runPasses || r != 40 {
		t.Errorf("trace: %d pass slices, %d requests; the run had %d passes and 40 requests", p, r, runPasses)
	}
	win := filepath.Join(dir, "win.json")
	out2, _, err := mocker(t, append(base, "--perfetto", win, "--perfetto-window", "0.5:1s")...)
	if err != nil {
		t.Fatal(err)
	}
	if out2 != out {
		t.Errorf("the summary changed with a window:\n%s\nwant:\n%s", out2, out)
	}
	if p, r, first, last := events(win); p == 0 || p >= runPasses || r == 0 || r >= 40 || last < 500e3 || first >= 1e6 {
		t.Errorf("window 0.5:1s: %d pass slices of %d from %v µs to %v µs, %d requests", p, runPasses, first, last, r)
	}
}

// TestPerfettoOutputChecked: --perfetto's path goes through the checks of every report file, and a bad
// --perfetto-window is refused, all before the run.
func TestPerfettoOutputChecked(t *testing.T) {
	dir := t.TempDir()
	r := filepath.Join(dir, "r")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--perfetto", "/nonexistent/t.json"}, "--perfetto /nonexistent/t.json: directory /nonexistent: no such file or directory"},
		{[]string{"--perfetto", dir}, "--perfetto " + dir + ": is a directory"},
		{[]string{"--report-json", r, "--perfetto", r}, "--perfetto " + r + ": is also --report-json"},
		{[]string{"--perfetto-window", "1s:2s"}, `perfetto-window "1s:2s": applies to --perfetto, which is not given`},
		{[]string{"--perfetto", r, "--perfetto-window", "2s:1s"}, `perfetto-window "2s:1s": TO must be after FROM`},
		{[]string{"--perfetto", r, "--perfetto-window", "1s-2s"}, `perfetto-window "1s-2s": no colon (want FROM:TO, e.g. 30s:40s)`},
	} {
		out, stderr, err := mocker(t, append([]string{"predict", "--num-requests", "5"}, tc.args...)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
		if out != "" || strings.Contains(stderr, "simulated") {
			t.Errorf("%v: ran before failing:\n%s%s", tc.args, out, stderr)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) > 0 {
		t.Errorf("left behind %v", names)
	}
}
