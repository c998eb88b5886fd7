package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name, or rewrites the file under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update and review the diff)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// event is one Collector call, so a run can be replayed in different interleavings.
type event struct {
	id     int
	at     time.Duration
	kind   byte // a(rrived) d(mitted) t(okens) f(inished) r(ejected)
	n, m   int  // input, max tokens (a); cached (d); tokens (t)
	worker int
	reason string
}

// runEvents is a small run touching every rule: the acceptance request, a burst, a
// preemption, a 0-token request, a rejection and a request still in flight.
var runEvents = [][]event{
	{ // acceptance case (reference §13)
		{at: 0, kind: 'a', n: 100, m: 4, worker: 0},
		{at: 1, kind: 'd', n: 0},
		{at: 10, kind: 't', n: 1},
		{at: 11, kind: 't', n: 1},
		{at: 12, kind: 't', n: 1},
		{at: 110, kind: 't', n: 1},
		{at: 110, kind: 'f'},
	},
	{ // burst, then preempted and readmitted with more cached (ignored)
		{at: 5, kind: 'a', n: 200, m: 8, worker: 1},
		{at: 6, kind: 'd', n: 64},
		{at: 20, kind: 't', n: 1},
		{at: 25, kind: 't', n: 3},
		{at: 40, kind: 'd', n: 128},
		{at: 60, kind: 't', n: 2},
		{at: 70, kind: 't', n: 2},
		{at: 70, kind: 'f'},
	},
	{ // no output tokens
		{at: 7, kind: 'a', n: 50, m: 0, worker: 0},
		{at: 8, kind: 'd', n: 32},
		{at: 30, kind: 'f'},
	},
	{ // rejected
		{at: 9, kind: 'a', n: 5000, m: 16, worker: 1},
		{at: 9, kind: 'r', reason: `prompt exceeds "KV cache" capacity`},
	},
	{ // still in flight
		{at: 100, kind: 'a', n: 10, m: 10, worker: 0},
		{at: 101, kind: 'd', n: 0},
		{at: 120, kind: 't', n: 1},
	},
}

// playNames identifies the first requests of a run: a trace row with its request_id, one whose
// id needs escaping, a synthetic request (no line); the others are not identified.
var playNames = []name{{"r-17", 3}, {"a\"b\u00e9\n", 5}, {"42", 0}}

// play feeds the events to a new Collector. Requests' events are interleaved round-robin
// when interleave is set, else played one request after another.
func play(reqs [][]event, interleave bool) *Collector {
	c := NewCollector()
	apply := func(id int, e event) {
		at := e.at * msec
		switch e.kind {
		case 'a':
			c.Arrived(id, at, e.n, e.m)
			c.Routed(id, uint64(e.worker))
			if id < len(playNames) {
				c.Identify(id, playNames[id].requestID, playNames[id].line)
			}
		case 'd':
			c.Admitted(id, at, e.n)
		case 't':
			c.Tokens(id, at, e.n)
		case 'f':
			c.Finished(id, at)
		case 'r':
			c.Rejected(id, at, e.reason)
		}
	}
	if !interleave {
		for id, evs := range reqs {
			for _, e := range evs {
				apply(id, e)
			}
		}
		return c
	}
	// Arrivals first, in id order, as ids are assigned in arrival order.
	for id, evs := range reqs {
		apply(id, evs[0])
	}
	for k := 1; ; k++ {
		more := false
		for id := len(reqs) - 1; id >= 0; id-- {
			if k < len(reqs[id]) {
				apply(id, reqs[id][k])
				more = true
			}
		}
		if !more {
			return c
		}
	}
}

func runSummary(c *Collector) Summary {
	s := c.Summary()
	s.Preemptions = 1
	return s
}

func TestGolden(t *testing.T) {
	c := play(runEvents, false)
	s := runSummary(c)

	var js, table, jsonl bytes.Buffer
	if err := s.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteTable(&table, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteRequestsJSONL(&jsonl); err != nil {
		t.Fatal(err)
	}
	golden(t, "run.json.golden", js.Bytes())
	golden(t, "run.table.golden", table.Bytes())
	golden(t, "run.requests.jsonl.golden", jsonl.Bytes())

	// The acceptance request alone: a drained run, so no incomplete_requests key.
	js.Reset()
	if err := play(runEvents[:1], false).Summary().WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "acceptance.json.golden", js.Bytes())
}

// summaryKeys is the key order of a drained run (DESIGN.md, "Report JSON keys").
var summaryKeys = func() []string {
	keys := []string{
		"completed_requests", "rejected_requests", "duration_ms", "request_throughput",
		"input_token_throughput", "output_token_throughput", "total_input_tokens",
		"total_output_tokens", "prefix_cache_reused_ratio", "preemptions",
	}
	for _, x := range []string{"ttft", "ttst", "tpot", "itl", "e2e"} {
		for _, s := range []string{"mean", "min", "max", "std", "p50", "p75", "p90", "p95", "p99"} {
			keys = append(keys, s+"_"+x+"_ms")
		}
	}
	return keys
}()

// jsonKeys returns the top-level keys of a JSON object in order.
func jsonKeys(t *testing.T, b []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if _, err := d.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	return keys
}

func TestJSONKeyOrder(t *testing.T) {
	var b bytes.Buffer
	if err := play(runEvents[:2], false).Summary().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if got := jsonKeys(t, b.Bytes()); !slices.Equal(got, summaryKeys) {
		t.Errorf("WriteJSON keys =\n%q\nwant\n%q", got, summaryKeys)
	}
	if !strings.HasSuffix(b.String(), "\n}\n") || !strings.HasPrefix(b.String(), "{\n  \"completed_requests\": 2,\n") {
		t.Errorf("WriteJSON framing:\n%s", b.String())
	}

	// runEvents[2] completes with no token, so has no TTFT; runEvents[4] is still in flight.
	b.Reset()
	if err := play(runEvents[:4], false).Summary().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	want := slices.Insert(slices.Clone(summaryKeys), 2, "no_ttft_requests")
	if got := jsonKeys(t, b.Bytes()); !slices.Equal(got, want) {
		t.Errorf("WriteJSON keys with a request with no TTFT =\n%q\nwant\n%q", got, want)
	}
	if !strings.Contains(b.String(), `"no_ttft_requests": 1,`) {
		t.Errorf("WriteJSON: no_ttft_requests is not 1:\n%s", b.String())
	}
	b.Reset()
	if err := play(runEvents, false).Summary().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	want = slices.Insert(slices.Clone(summaryKeys), 2, "incomplete_requests", "no_ttft_requests")
	if got := jsonKeys(t, b.Bytes()); !slices.Equal(got, want) {
		t.Errorf("WriteJSON keys with an incomplete request =\n%q\nwant\n%q", got, want)
	}
}

func TestRequestsJSONLKeys(t *testing.T) {
	var b bytes.Buffer
	if err := play(runEvents, false).WriteRequestsJSONL(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(runEvents) {
		t.Fatalf("%d lines, want %d", len(lines), len(runEvents))
	}
	base := []string{"id", "request_id", "trace_line", "worker", "arrival_ms", "first_admission_ms", "first_token_ms", "finish_ms",
		"input_tokens", "max_tokens", "output_tokens", "cached_tokens", "ttft_ms", "tpot_ms", "e2e_ms", "rejected"}
	for i, line := range lines {
		want := base
		if i == 3 {
			want = append(slices.Clone(base), "reject_reason")
		}
		if got := jsonKeys(t, []byte(line)); !slices.Equal(got, want) {
			t.Errorf("line %d keys = %q, want %q", i, got, want)
		}
	}
}

func TestDeterminism(t *testing.T) {
	outputs := func(c *Collector) []byte {
		var b bytes.Buffer
		s := runSummary(c)
		if err := s.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteTable(&b, "x"); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	c := play(runEvents, false)
	first := outputs(c)
	if again := outputs(c); !bytes.Equal(first, again) {
		t.Errorf("second Summary of one collector differs:\n%s\nvs\n%s", first, again)
	}
	if again := outputs(play(runEvents, false)); !bytes.Equal(first, again) {
		t.Errorf("same calls give different reports:\n%s\nvs\n%s", first, again)
	}
	// The report depends on what happened, not on how calls for different requests interleave.
	if other := outputs(play(runEvents, true)); !bytes.Equal(first, other) {
		t.Errorf("interleaved calls give a different report:\n%s\nvs\n%s", first, other)
	}
}

// TestTierKeys: the lower KV tiers' keys follow preemptions, with their values, only when tiers ran.
func TestTierKeys(t *testing.T) {
	s := play(runEvents[:2], false).Summary()
	s.Tiers = TierSummary{On: true, GPUHitRatio: 0.25, CPUHitRatio: 0.125, DiskHitRatio: 0.0625,
		OnboardedBlocks: 7, OffloadedBlocks: 9, OnboardTime: 1500 * time.Microsecond}
	var b bytes.Buffer
	if err := s.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	at := slices.Index(summaryKeys, "preemptions") + 1
	tiers := []string{"kv_gpu_hit_ratio", "kv_cpu_hit_ratio", "kv_disk_hit_ratio", "kv_onboarded_blocks", "kv_offloaded_blocks", "kv_onboard_time_ms"}
	want := slices.Insert(slices.Clone(summaryKeys), at, tiers...)
	if got := jsonKeys(t, b.Bytes()); !slices.Equal(got, want) {
		t.Errorf("WriteJSON keys with tiers =\n%q\nwant\n%q", got, want)
	}
	for _, line := range []string{`"kv_gpu_hit_ratio": 0.25,`, `"kv_cpu_hit_ratio": 0.125,`, `"kv_disk_hit_ratio": 0.0625,`,
		`"kv_onboarded_blocks": 7,`, `"kv_offloaded_blocks": 9,`, `"kv_onboard_time_ms": 1.5,`} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("WriteJSON lacks %s:\n%s", line, b.String())
		}
	}
}
