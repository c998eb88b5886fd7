package sim

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/mocker-sim/mocker/workload"
)

// TestPeerTracesReplay: each trace variant of workload/testdata/peer replays to the end, every row a
// request with its prompt and output tokens; the agentic trace's turns arrive when the turn they wait
// on has ended plus their delay and tool time.
func TestPeerTracesReplay(t *testing.T) {
	type rec struct {
		ID      *string  `json:"request_id"`
		Line    int      `json:"trace_line"`
		Arrival float64  `json:"arrival_ms"`
		Finish  float64  `json:"finish_ms"`
		In      int      `json:"input_tokens"`
		Out     int      `json:"output_tokens"`
		Cached  int      `json:"cached_tokens"`
		E2E     *float64 `json:"e2e_ms"`
	}
	tests := []struct {
		file    string
		in, out []int // by request id (arrival order)
	}{
		{"aiperf_text.jsonl", []int{7, 8, 7}, []int{20, 100, 102}},
		{"aiperf_messages.jsonl", []int{23, 2, 39}, []int{12, 4, 8}},
		{"dynamo_priority.jsonl", []int{8, 8, 4}, []int{2, 3, 1}},
		{"agentic_mooncake.jsonl", []int{8, 4, 12, 16}, []int{2, 1, 1, 1}},
		{"agentic_subagents.jsonl", []int{8, 8, 4, 12, 12}, []int{2, 4, 1, 1, 1}},
		// Later calls read the conversation so far: 16 + 4 + 8, then 28 + 6 + 10.
		{"applied_compute_agentic.jsonl", []int{16, 5, 28, 44}, []int{4, 2, 6, 3}},
		{"bailian.jsonl", []int{40, 20, 70}, []int{13, 5, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			block := 4
			if tt.file == "bailian.jsonl" {
				block = 16 // as the published Bailian traces
			}
			src, err := workload.OpenTrace(filepath.Join("..", "workload", "testdata", "peer", tt.file), workload.TraceOptions{
				TraceBlockSize: block, OutputLen: func(key uint64) int { return 100 + int(key) }})
			if err != nil {
				t.Fatal(err)
			}
			e := small()
			e.VLLM.NumBlocks = 256
			res := run(t, src, Options{Workers: 1, Engine: e})
			var b bytes.Buffer
			if err := res.Collector.WriteRequestsJSONL(&b); err != nil {
				t.Fatal(err)
			}
			var recs []rec
			for dec := json.NewDecoder(&b); dec.More(); {
				var r rec
				if err := dec.Decode(&r); err != nil {
					t.Fatal(err)
				}
				if r.E2E == nil {
					t.Errorf("line %d did not complete", r.Line)
				}
				recs = append(recs, r)
			}
			if res.Summary.CompletedRequests != len(tt.in) || len(recs) != len(tt.in) {
				t.Fatalf("%d completed, %d records, want %d", res.Summary.CompletedRequests, len(recs), len(tt.in))
			}
			for i, r := range recs {
				if r.In != tt.in[i] || r.Out != tt.out[i] {
					t.Errorf("request %d (line %d): %d in %d out, want %d and %d", i, r.Line, r.In, r.Out, tt.in[i], tt.out[i])
				}
			}
			if tt.file == "applied_compute_agentic.jsonl" {
				// Each call comes the tool's latency after the one before it ends, and finds the
				// conversation before it cached in whole blocks of 4: the previous prompt and all of
				// its output but the last token, whose KV is never computed (16 + 3 → 16, 28 + 5 → 32).
				for _, w := range []struct {
					call, prev int
					wait       float64
					cached     int
				}{{2, 0, 500, 16}, {3, 2, 1250, 32}} {
					if got, want := recs[w.call].Arrival, recs[w.prev].Finish+w.wait; got != want {
						t.Errorf("request %d arrives at %v ms, want %v", w.call, got, want)
					}
					if recs[w.call].Cached != w.cached {
						t.Errorf("request %d found %d tokens cached, want %d", w.call, recs[w.call].Cached, w.cached)
					}
				}
				return
			}
			byID := map[string]rec{}
			for _, r := range recs {
				if r.ID != nil {
					byID[*r.ID] = r
				}
			}
			if tt.file == "bailian.jsonl" {
				// Chat 160 follows 159 the 1.386 s between their timestamps after 159 ends; 161 starts
				// at its own time.
				if got, want := recs[2].Arrival, recs[0].Finish+1386; got != want || recs[1].Arrival != 386 {
					t.Errorf("arrivals %v and %v ms, want %v and 386", got, recs[1].Arrival, want)
				}
				return
			}
			if tt.file == "agentic_subagents.jsonl" {
				// Each request arrives when the last of what it waits on ends, plus its delay and tool time.
				waits := []struct {
					id    string
					after []string
					wait  float64
				}{
					{"child-1", []string{"parent-1"}, 10},
					{"child-2", []string{"parent-1"}, 10 + 20},
					{"child-3", []string{"child-1"}, 50},
					{"parent-2", []string{"parent-1", "child-2", "child-3"}, 5},
				}
				for _, w := range waits {
					last := 0.0
					for _, a := range w.after {
						last = max(last, byID[a].Finish)
					}
					if got := byID[w.id].Arrival; got != last+w.wait {
						t.Errorf("%s arrives at %v ms, want the end of %v (%v) + %v", w.id, got, w.after, last, w.wait)
					}
				}
				// The parent's second request waited on child-3, which ended last.
				if byID["child-3"].Finish <= byID["child-2"].Finish {
					t.Errorf("child-3 ends at %v, child-2 at %v: the fixture no longer tests the join", byID["child-3"].Finish, byID["child-2"].Finish)
				}
				return
			}
			if tt.file != "agentic_mooncake.jsonl" {
				return
			}
			if got, want := byID["tool-1"].Arrival, byID["root"].Finish+5; got != want {
				t.Errorf("tool-1 arrives at %v ms, want root's end + 2 + 3 = %v", got, want)
			}
			if got, want := byID["tool-2"].Arrival, byID["tool-1"].Finish+40; got != want {
				t.Errorf("tool-2 arrives at %v ms, want tool-1's end + 40 = %v", got, want)
			}
			if byID["other"].Arrival != 5 {
				t.Errorf("other arrives at %v ms, want its timestamp 5", byID["other"].Arrival)
			}
		})
	}
}

// TestDependentTraceConcurrency: requests that wait on others replay on their own times; with a
// concurrency the run is refused, not deadlocked or reordered, whether a session's first turn waits or
// only a later one does.
func TestDependentTraceConcurrency(t *testing.T) {
	later := `{"request_id": "a", "session_id": "s", "timestamp": 0, "input_length": 4, "output_length": 1}
{"request_id": "b", "session_id": "t", "timestamp": 1, "input_length": 4, "output_length": 1}
{"request_id": "c", "session_id": "t", "timestamp": 2, "input_length": 4, "output_length": 1, "wait_for": ["a", "b"]}`
	src, err := workload.OpenTrace(filepath.Join("..", "workload", "testdata", "peer", "agentic_subagents.jsonl"),
		workload.TraceOptions{TraceBlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src  workload.Source
		want string
	}{
		{src, "request child-1 waits on others: a trace of dependent requests replays on its own times, not with a concurrency"},
		{trace(t, later), "request c waits on others: a trace of dependent requests replays on its own times, not with a concurrency"},
	} {
		if _, err := Run(tc.src, Options{Workers: 1, Engine: small(), Concurrency: 2}); err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
