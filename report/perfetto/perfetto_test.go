package perfetto

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timeline"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// deployment is a run's shape: an aggregated pool of 2 workers with 2 DP ranks each, tight enough on KV
// to preempt, or a disaggregated one (2 prefill workers, 1 decode) whose prefill worker 0 fails at 400 ms
// and comes back, its requests retried.
func deployment(name string) sim.Options {
	e := engine.Options{
		VLLM: vllm.Options{BlockSize: 16, NumBlocks: 60, MaxNumSeqs: 8, MaxBatchedTokens: 256, ChunkedPrefill: true,
			PrefixCaching: true, Events: true},
		Timing: timing.Polynomial{}}
	if name == "agg" {
		e.DPSize = 2
		return sim.Options{Workers: 2, Engine: e, Router: router.DefaultOptions()}
	}
	e.VLLM.NumBlocks = 200
	dr := router.DefaultOptions()
	dr.OverlapScoreWeight, dr.TrackPrefillTokens = 0, false
	return sim.Options{PrefillWorkers: 2, DecodeWorkers: 1, PrefillEngine: e, DecodeEngine: e, Engine: e,
		Router: router.DefaultOptions(), DecodeRouter: dr,
		Transfer: disagg.Transfer{GBps: 10, BytesPerToken: 1e5, Mode: disagg.DestinationMissing},
		Failures: []sim.Failure{{Worker: 0, At: 400 * time.Millisecond, Duration: 100 * time.Millisecond}}}
}

// run simulates n synthetic requests on a deployment and writes the trace, watched by a recorder with
// the given window.
func run(t *testing.T, name string, n int, from, to time.Duration) (*sim.Result, []byte) {
	t.Helper()
	src, err := workload.NewSynthetic(workload.SyntheticOptions{
		NumRequests: n, Input: workload.Length{Mean: 300, Stddev: 100}, Output: workload.Length{Mean: 30, Stddev: 15},
		RequestRate: 60, Arrival: "poisson", SharedPrefixRatio: 0.5, NumPrefixGroups: 4, Seed: 9,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &timeline.Recorder{From: from, To: to}
	o := deployment(name)
	o.Observer = rec
	res, err := sim.Run(src, o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, rec, res.Collector); err != nil {
		t.Fatal(err)
	}
	return res, b.Bytes()
}

// phases returns each request's slices in the trace: its "request" slice first, then its phases, as
// [name, start, end] in nanoseconds.
type span struct {
	name       string
	start, end int64
}

func requestSpans(t *testing.T, evs []event) map[int][]span {
	t.Helper()
	spans := map[int][]span{}
	open := map[int][]int{} // indices into spans[id] of the open slices
	for _, e := range evs {
		if e.Ph != "b" && e.Ph != "e" {
			continue
		}
		id := *e.ID
		if e.Ph == "b" {
			open[id] = append(open[id], len(spans[id]))
			spans[id] = append(spans[id], span{e.Name, e.TS, -1})
			continue
		}
		o := open[id]
		spans[id][o[len(o)-1]].end = e.TS
		open[id] = o[:len(o)-1]
	}
	return spans
}

// TestTraceIsValid: the trace of an aggregated run (DP ranks, preemptions) and of a disaggregated one
// (a failed and retried prefill worker) parses and follows the trace-event format; every pass the
// recorder kept is a slice on its rank's thread whose args add up to the run's tokens and completions;
// every route is an instant event.
func TestTraceIsValid(t *testing.T) {
	for _, name := range []string{"agg", "disagg"} {
		t.Run(name, func(t *testing.T) {
			res, data := run(t, name, 80, 0, 0)
			evs, err := parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(evs); err != nil {
				t.Fatal(err)
			}
			// A prefill worker samples a token too, which the decode worker's first pass replaces.
			var passes, sampled, finished, preempted, routes int64
			generates := map[int]bool{}
			for _, e := range evs {
				if e.Ph == "M" && (e.Args["name"] == "agg workers" || e.Args["name"] == "decode workers") {
					generates[*e.Pid] = true
				}
			}
			for _, e := range evs {
				switch {
				case e.Ph == "X" && e.Name == "pass":
					passes++
					preempted += num(t, e.Args["preempted"])
					if generates[*e.Pid] {
						sampled += num(t, e.Args["sampled"])
						finished += num(t, e.Args["finished"])
					}
				case e.Ph == "i":
					routes++
				}
			}
			s := res.Summary
			// Each pass is one slice per rank that worked: at least one per pass, at most two (DP 2).
			if passes < res.Passes || passes > 2*res.Passes || sampled != int64(s.TotalOutputTokens) ||
				finished != int64(s.CompletedRequests) || preempted != int64(s.Preemptions) {
				t.Errorf("pass slices %d (passes %d), sampled %d/%d, finished %d/%d, preempted %d/%d", passes, res.Passes,
					sampled, s.TotalOutputTokens, finished, s.CompletedRequests, preempted, s.Preemptions)
			}
			wantRoutes := int64(s.CompletedRequests)
			if name == "disagg" {
				wantRoutes = 2 * int64(s.CompletedRequests) // into each pool
				if s.RetriedRequests == 0 {
					t.Error("no request was retried: the test lost its teeth")
				}
			} else if s.Preemptions == 0 {
				t.Error("no preemption: the test lost its teeth")
			}
			if routes < wantRoutes {
				t.Errorf("%d routes, want at least %d", routes, wantRoutes)
			}
		})
	}
}

func num(t *testing.T, v any) int64 {
	t.Helper()
	n, err := intOf(v)
	if err != nil {
		t.Fatal(err)
	}
	return int64(n)
}

// TestRequestsAddUp: every completed request is one "request" slice from its arrival to its finish,
// tiled by its phases in order, so they add up to its E2E exactly; its first token ends "prefill"
// (aggregated) or "first token" (disaggregated); a disaggregated request goes through every phase.
func TestRequestsAddUp(t *testing.T) {
	for _, name := range []string{"agg", "disagg"} {
		t.Run(name, func(t *testing.T) {
			res, data := run(t, name, 80, 0, 0)
			evs, err := parse(data)
			if err != nil {
				t.Fatal(err)
			}
			spans := requestSpans(t, evs)
			var checked, decoded int
			for id, l := range res.Collector.Lifetimes() {
				if !l.Completed {
					continue
				}
				checked++
				s := spans[id]
				if len(s) < 2 || s[0].name != "request" || s[0].start != int64(l.Arrival) || s[0].end != int64(l.End) {
					t.Fatalf("request %d: %+v, want a request slice [%d, %d] and phases", id, s, l.Arrival, l.End)
				}
				var sum int64
				at := s[0].start
				var names []string
				for _, p := range s[1:] {
					if p.start != at || p.end <= p.start {
						t.Fatalf("request %d: phases %+v do not tile [%d, %d]", id, s[1:], l.Arrival, l.End)
					}
					sum += p.end - p.start
					at = p.end
					names = append(names, p.name)
				}
				if sum != int64(l.End-l.Arrival) {
					t.Fatalf("request %d: phases add up to %d ns, E2E %d", id, sum, l.End-l.Arrival)
				}
				// The phase before decode ends at the first token; a request with no token after its first
				// has no decode phase.
				ttftEnd := map[string]string{"agg": "prefill", "disagg": "first token"}[name]
				i := index(names, "decode")
				if l.Tokens > 0 && l.FirstToken < l.End {
					if i < 1 || names[i-1] != ttftEnd || s[i+1].start != int64(l.FirstToken) {
						t.Fatalf("request %d: phases %v, first token at %v", id, names, l.FirstToken)
					}
					decoded++
				} else if i >= 0 || names[len(names)-1] != ttftEnd {
					t.Fatalf("request %d: %d tokens, phases %v", id, l.Tokens, names)
				}
				if name == "disagg" && index(names, "transfer") < 0 {
					t.Fatalf("request %d: phases %v, no transfer", id, names)
				}
			}
			if checked != res.Summary.CompletedRequests || checked != 80 || decoded < 70 {
				t.Errorf("checked %d requests (%d decoded), %d completed", checked, decoded, res.Summary.CompletedRequests)
			}
		})
	}
}

func index(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestWindow: with a window, the trace holds only passes and routes that overlap it, and every request
// that overlaps it, whole.
func TestWindow(t *testing.T) {
	from, to := 300*time.Millisecond, 600*time.Millisecond
	res, data := run(t, "disagg", 80, from, to)
	evs, err := parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(evs); err != nil {
		t.Fatal(err)
	}
	var passes int
	for _, e := range evs {
		if e.Ph == "X" && e.Name == "pass" {
			passes++
			if e.TS+e.Dur < int64(from) || e.TS >= int64(to) {
				t.Fatalf("pass [%d, +%d] outside the window", e.TS, e.Dur)
			}
		}
		if e.Ph == "i" && (e.TS < int64(from) || e.TS >= int64(to)) {
			t.Fatalf("route at %d outside the window", e.TS)
		}
	}
	spans := requestSpans(t, evs)
	want := 0
	for id, l := range res.Collector.Lifetimes() {
		in := l.Arrival < to && l.End >= from
		if in {
			want++
		}
		if s := spans[id]; in != (len(s) > 0) || in && (s[0].start != int64(l.Arrival) || s[0].end != int64(l.End)) {
			t.Fatalf("request %d [%v, %v]: slices %+v", id, l.Arrival, l.End, s)
		}
	}
	if passes == 0 || want == 0 || want == 80 {
		t.Fatalf("%d passes and %d of 80 requests in the window: the test lost its teeth", passes, want)
	}
}

// TestGolden: a tiny run's trace, byte for byte, and the same bytes from a second run.
func TestGolden(t *testing.T) {
	for _, name := range []string{"agg", "disagg"} {
		_, a := run(t, name, 4, 0, 0)
		_, b := run(t, name, 4, 0, 0)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: two runs wrote different traces", name)
		}
		path := filepath.Join("testdata", name+".json.golden")
		if *update {
			if err := os.WriteFile(path, a, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(a, want) {
			t.Errorf("%s differs (run go test -update and review the diff)\ngot:\n%s", path, a)
		}
	}
}

// TestParseWindow: FROM:TO in durations or seconds; anything else is refused with the reason.
func TestParseWindow(t *testing.T) {
	for _, tc := range []struct {
		in       string
		from, to time.Duration
		err      string
	}{
		{"30s:40s", 30 * time.Second, 40 * time.Second, ""},
		{"1.5:2m", 1500 * time.Millisecond, 2 * time.Minute, ""},
		{"0:250ms", 0, 250 * time.Millisecond, ""},
		{"30s", 0, 0, `window "30s": no colon (want FROM:TO, e.g. 30s:40s)`},
		{"40s:30s", 0, 0, `window "40s:30s": TO must be after FROM`},
		{"5s:5s", 0, 0, `window "5s:5s": TO must be after FROM`},
		{"-1s:5s", 0, 0, `window "-1s:5s": from: "-1s" is negative`},
		{"1s:x", 0, 0, `window "1s:x": to: "x" is not a duration (90s, 1m30s, 250ms) or seconds (90, 0.25)`},
	} {
		from, to, err := ParseWindow(tc.in)
		if got := errString(err); got != tc.err || from != tc.from || to != tc.to {
			t.Errorf("ParseWindow(%q) = %v, %v, %q; want %v, %v, %q", tc.in, from, to, got, tc.from, tc.to, tc.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzParseWindow: any input is a window that starts at or after 0 and ends after it starts, or an
// error naming the input; never a panic.
func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"30s:40s", "1.5:2m", "0:250ms", "5s:5s", ":", "1e300:1e301", "-0:1ns", "NaN:1", "9223372036s:9223372037s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		from, to, err := ParseWindow(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseWindow(%q): error %q does not name the input", s, err)
			}
			return
		}
		if from < 0 || to <= from {
			t.Fatalf("ParseWindow(%q) = %v, %v", s, from, to)
		}
	})
}

// TestEndedWithoutCompleting: a rejected or a failed request is one phase of its name from arrival to
// its end, with the reason in the request's args; a request still running when the run stopped is left
// out; hand-off times out of order with the collector's are an error, not a torn request.
func TestEndedWithoutCompleting(t *testing.T) {
	col := report.NewCollector()
	col.Arrived(0, 1000, 10, 2)
	col.Rejected(0, 1000, "prompt too long")
	col.Arrived(1, 2000, 10, 2)
	col.Routed(1, 0)
	col.Admitted(1, 3000, 0)
	col.Failed(1, 5000, "no agg worker left")
	col.Arrived(2, 2500, 10, 2)
	var b bytes.Buffer
	if err := Write(&b, &timeline.Recorder{}, col); err != nil {
		t.Fatal(err)
	}
	evs, err := parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(evs); err != nil {
		t.Fatal(err)
	}
	spans := requestSpans(t, evs)
	want := map[int][]span{
		0: {{"request", 1000, 1000}},
		1: {{"request", 2000, 5000}, {"failed", 2000, 5000}},
	}
	if len(spans) != 2 || !slices.Equal(spans[0], want[0]) || !slices.Equal(spans[1], want[1]) {
		t.Fatalf("spans %+v, want %+v", spans, want)
	}
	if !bytes.Contains(b.Bytes(), []byte(`"reason":"no agg worker left"`)) {
		t.Errorf("no reason in\n%s", b.Bytes())
	}

	col.Finished(2, 9000)
	rec := &timeline.Recorder{Prefills: []timeline.Prefill{{ID: 2, At: 3500}}, Transfers: []timeline.Transfer{{ID: 2, Start: 4000, End: 3000}}}
	err = Write(io.Discard, rec, col)
	if want := "perfetto: request 2: first token at 3µs is before transfer at 4µs"; err == nil || err.Error() != want {
		t.Errorf("out-of-order transfer: error %v, want %q", err, want)
	}
}

// TestReplyHeader: with a reply header of 3 tokens (gpt-oss), a request whose 2 output tokens are all
// header has no first token: no decode phase and no ttft_ms, its prefill running to its end; one whose
// 4th token is its first shown decodes from that token.
func TestReplyHeader(t *testing.T) {
	col := report.NewCollector()
	col.SetHeader(3)
	for id := range 2 {
		col.Arrived(id, 1000, 10, 4)
		col.Routed(id, 0)
		col.Admitted(id, 2000, 0)
	}
	col.Tokens(0, 5000, 2)
	col.Finished(0, 5000)
	col.Tokens(1, 4000, 3)
	col.Tokens(1, 6000, 1)
	col.Finished(1, 7000)
	var b bytes.Buffer
	if err := Write(&b, &timeline.Recorder{}, col); err != nil {
		t.Fatal(err)
	}
	evs, err := parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(evs); err != nil {
		t.Fatal(err)
	}
	spans := requestSpans(t, evs)
	want := map[int][]span{
		0: {{"request", 1000, 5000}, {"queued", 1000, 2000}, {"prefill", 2000, 5000}},
		1: {{"request", 1000, 7000}, {"queued", 1000, 2000}, {"prefill", 2000, 6000}, {"decode", 6000, 7000}},
	}
	if len(spans) != 2 || !slices.Equal(spans[0], want[0]) || !slices.Equal(spans[1], want[1]) {
		t.Fatalf("spans %+v, want %+v", spans, want)
	}
	ttft := map[int]any{}
	for _, e := range evs {
		if e.Ph == "b" && e.Name == "request" {
			if v, ok := e.Args["ttft_ms"]; ok {
				ttft[*e.ID] = v.(json.Number).String()
			}
		}
	}
	if len(ttft) != 1 || ttft[1] != "0.005" {
		t.Errorf("ttft_ms by request %v, want only request 1's, 0.005", ttft)
	}
}
