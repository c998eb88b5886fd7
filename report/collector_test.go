package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

const msec = time.Millisecond

// perSec divides at run time: a constant expression like 2/0.035 is computed exactly on the
// decimal 0.035, and may round differently from dividing by the float64 nearest to it.
func perSec(n, sec float64) float64 { return n / sec }

// TestReplayITLUsesPerTokenGaps pins Dynamo's collector test test_replay_itl_uses_per_token_gaps
// (reference §13): tokens at 10, 11, 12 and 110 ms.
func TestReplayITLUsesPerTokenGaps(t *testing.T) {
	c := NewCollector()
	c.Arrived(0, 0, 100, 4)
	c.Routed(0, uint64(0))
	c.Admitted(0, 0, 0)
	for _, at := range []time.Duration{10, 11, 12, 110} {
		c.Tokens(0, at*msec, 1)
	}
	c.Finished(0, 110*msec)
	s := c.Summary()

	checks := []struct {
		name      string
		got, want float64
	}{
		{"mean TPOT", s.TPOT.Mean, 100.0 / 3},
		{"p50 ITL", s.ITL.P50, 1},
		{"p75 ITL", s.ITL.P75, 98},
		{"p90 ITL", s.ITL.P90, 98},
		{"p95 ITL", s.ITL.P95, 98},
		{"p99 ITL", s.ITL.P99, 98},
		{"max ITL", s.ITL.Max, 98},
		{"min ITL", s.ITL.Min, 1},
		{"mean ITL", s.ITL.Mean, 100.0 / 3},
		{"mean TTST", s.TTST.Mean, 1},
		{"mean TTFT", s.TTFT.Mean, 10},
		{"mean E2E", s.E2E.Mean, 110},
		{"duration ms", ms(s.Duration), 110},
		{"request throughput", s.RequestThroughput, perSec(1, 0.110)},
		{"output throughput", s.OutputTokenThroughput, perSec(4, 0.110)},
		{"input throughput", s.InputTokenThroughput, perSec(100, 0.110)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.ITL.Count != 3 || s.TPOT.Count != 1 || s.TTST.Count != 1 {
		t.Errorf("counts ITL/TPOT/TTST = %d/%d/%d, want 3/1/1", s.ITL.Count, s.TPOT.Count, s.TTST.Count)
	}
}

func TestBurstIsOneDelivery(t *testing.T) {
	tests := []struct {
		name   string
		deliv  [][2]int // {ms, tokens}
		output int
		itl    []float64 // sorted gaps
		ttst   float64   // -1: no sample
		tpot   float64   // -1: no sample
	}{
		// Six tokens in three deliveries: two gaps, but TPOT spreads over five tokens.
		{"middle burst", [][2]int{{10, 1}, {20, 4}, {30, 1}}, 6, []float64{10, 10}, 10, 20.0 / 5},
		// One delivery of three tokens: no gap, no TTST; TPOT is 0 over 3 tokens.
		{"single burst", [][2]int{{10, 3}}, 3, nil, -1, 0},
		{"one token", [][2]int{{10, 1}}, 1, nil, -1, -1},
		{"first burst", [][2]int{{10, 2}, {40, 1}}, 3, []float64{30}, 30, 30.0 / 2},
	}
	for _, tt := range tests {
		c := NewCollector()
		c.Arrived(0, 0, 10, 10)
		c.Routed(0, uint64(0))
		c.Admitted(0, 0, 0)
		for _, d := range tt.deliv {
			c.Tokens(0, time.Duration(d[0])*msec, d[1])
		}
		c.Finished(0, 50*msec)
		s := c.Summary()
		if s.TotalOutputTokens != tt.output {
			t.Errorf("%s: output tokens = %d, want %d", tt.name, s.TotalOutputTokens, tt.output)
		}
		if s.ITL.Count != len(tt.itl) {
			t.Errorf("%s: ITL count = %d, want %d", tt.name, s.ITL.Count, len(tt.itl))
		} else if len(tt.itl) > 0 && (s.ITL.Min != tt.itl[0] || s.ITL.Max != tt.itl[len(tt.itl)-1]) {
			t.Errorf("%s: ITL min/max = %v/%v, want %v", tt.name, s.ITL.Min, s.ITL.Max, tt.itl)
		}
		checkSample(t, tt.name+": TTST", s.TTST, tt.ttst)
		checkSample(t, tt.name+": TPOT", s.TPOT, tt.tpot)
	}
}

// checkSample checks a one-request distribution: want is its only sample, or -1 for none.
func checkSample(t *testing.T, name string, st Stats, want float64) {
	t.Helper()
	if want < 0 {
		if st != (Stats{}) {
			t.Errorf("%s = %+v, want no samples", name, st)
		}
		return
	}
	if st.Count != 1 || st.Mean != want {
		t.Errorf("%s = %d samples, mean %v; want 1 sample %v", name, st.Count, st.Mean, want)
	}
}

func TestRejectedAndZeroToken(t *testing.T) {
	c := NewCollector()
	// 0: normal, two tokens.
	c.Arrived(0, 0, 100, 2)
	c.Routed(0, uint64(0))
	c.Admitted(0, 0, 50)
	c.Tokens(0, 10*msec, 1)
	c.Tokens(0, 20*msec, 1)
	c.Finished(0, 20*msec)
	// 1: zero output tokens: counts toward E2E and input only.
	c.Arrived(1, 5*msec, 40, 0)
	c.Routed(1, uint64(0))
	c.Admitted(1, 5*msec, 0)
	c.Finished(1, 35*msec)
	// 2: rejected at once.
	c.Arrived(2, 6*msec, 9999, 10)
	c.Routed(2, uint64(1))
	c.Rejected(2, 6*msec, "too long")
	// 3: rejected after tokens (say, it outgrew the cache): excluded from everything.
	c.Arrived(3, 7*msec, 60, 10)
	c.Routed(3, uint64(1))
	c.Admitted(3, 7*msec, 60)
	c.Tokens(3, 8*msec, 1)
	c.Tokens(3, 1000*msec, 1)
	c.Rejected(3, 2000*msec, "evicted")

	s := c.Summary()
	want := Summary{
		CompletedRequests:      2,
		RejectedRequests:       2,
		NoTTFTRequests:         1,
		Duration:               35 * msec,
		RequestThroughput:      perSec(2, 0.035),
		InputTokenThroughput:   perSec(140, 0.035),
		OutputTokenThroughput:  perSec(2, 0.035),
		TotalInputTokens:       140,
		TotalOutputTokens:      2,
		PrefixCacheReusedRatio: 50.0 / 140,
		TTFT:                   Stats{Count: 1, Mean: 10, Min: 10, Max: 10, P50: 10, P75: 10, P90: 10, P95: 10, P99: 10},
		TTST:                   Stats{Count: 1, Mean: 10, Min: 10, Max: 10, P50: 10, P75: 10, P90: 10, P95: 10, P99: 10},
		TPOT:                   Stats{Count: 1, Mean: 10, Min: 10, Max: 10, P50: 10, P75: 10, P90: 10, P95: 10, P99: 10},
		ITL:                    Stats{Count: 1, Mean: 10, Min: 10, Max: 10, P50: 10, P75: 10, P90: 10, P95: 10, P99: 10},
		E2E:                    Stats{Count: 2, Mean: 25, Min: 20, Max: 30, Std: 5, P50: 30, P75: 30, P90: 30, P95: 30, P99: 30},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Summary() =\n%+v\nwant\n%+v", s, want)
	}
}

func TestFirstAdmissionOnly(t *testing.T) {
	c := NewCollector()
	c.Arrived(0, 0, 100, 3)
	c.Routed(0, uint64(0))
	c.Admitted(0, 4*msec, 20)
	c.Tokens(0, 10*msec, 1)
	// Preempted, then readmitted with more of its prompt cached: ignored.
	c.Admitted(0, 30*msec, 100)
	c.Tokens(0, 40*msec, 2)
	c.Finished(0, 40*msec)

	if got, want := c.Summary().PrefixCacheReusedRatio, 0.2; got != want {
		t.Errorf("PrefixCacheReusedRatio = %v, want %v", got, want)
	}
	var b bytes.Buffer
	if err := c.WriteRequestsJSONL(&b); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		FirstAdmission float64 `json:"first_admission_ms"`
		Cached         int     `json:"cached_tokens"`
	}
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.FirstAdmission != 4 || rec.Cached != 20 {
		t.Errorf("first_admission_ms, cached_tokens = %v, %v; want 4, 20", rec.FirstAdmission, rec.Cached)
	}
}

func TestIncompleteNotCompleted(t *testing.T) {
	c := NewCollector()
	c.Arrived(0, 0, 10, 5)
	c.Routed(0, uint64(0))
	c.Tokens(0, 10*msec, 1)
	c.Tokens(0, 500*msec, 1) // its gap must not reach ITL
	c.Arrived(1, 1*msec, 10, 1)
	c.Routed(1, uint64(0))
	c.Tokens(1, 20*msec, 1)
	c.Finished(1, 20*msec)
	s := c.Summary()
	if s.CompletedRequests != 1 || s.IncompleteRequests != 1 || s.ITL.Count != 0 || s.Duration != 20*msec {
		t.Errorf("completed, incomplete, ITL count, duration = %d, %d, %d, %v; want 1, 1, 0, 20ms",
			s.CompletedRequests, s.IncompleteRequests, s.ITL.Count, s.Duration)
	}
	var b bytes.Buffer
	if err := s.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"incomplete_requests": 1,`) {
		t.Errorf("WriteJSON lacks incomplete_requests:\n%s", b.String())
	}
}

func TestEmpty(t *testing.T) {
	s := NewCollector().Summary()
	if !reflect.DeepEqual(s, Summary{}) {
		t.Errorf("empty Summary() = %+v, want zero", s)
	}
	var b bytes.Buffer
	if err := s.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var m map[string]float64
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("WriteJSON: %v\n%s", err, b.String())
	}
	for k, v := range m {
		if v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	if len(m) != len(summaryKeys) {
		t.Errorf("WriteJSON wrote %d keys, want %d", len(m), len(summaryKeys))
	}
}

func TestSparseIDs(t *testing.T) {
	// A hole in the ids is skipped, not counted as a request.
	c := NewCollector()
	c.Arrived(2, 0, 10, 0)
	c.Routed(2, uint64(0))
	c.Finished(2, msec)
	s := c.Summary()
	if s.CompletedRequests != 1 || s.IncompleteRequests != 0 {
		t.Errorf("completed, incomplete = %d, %d; want 1, 0", s.CompletedRequests, s.IncompleteRequests)
	}
	var b bytes.Buffer
	if err := c.WriteRequestsJSONL(&b); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != 1 {
		t.Errorf("WriteRequestsJSONL wrote %d lines, want 1:\n%s", n, b.String())
	}
}

func TestMisusePanics(t *testing.T) {
	tests := []struct {
		name string
		f    func(c *Collector)
	}{
		{"tokens before arrival", func(c *Collector) { c.Tokens(5, 0, 1) }},
		{"negative id", func(c *Collector) { c.Arrived(-1, 0, 1, 1); c.Routed(-1, uint64(0)) }},
		{"arrived twice", func(c *Collector) { c.Arrived(0, 0, 1, 1); c.Routed(0, uint64(0)) }},
		{"zero tokens", func(c *Collector) { c.Tokens(0, msec, 0) }},
		{"negative input", func(c *Collector) { c.Arrived(1, 0, -1, 1); c.Routed(1, uint64(0)) }},
		{"back in time", func(c *Collector) { c.Tokens(0, 2*msec, 1); c.Tokens(0, msec, 1) }},
		{"before arrival", func(c *Collector) { c.Admitted(0, -msec, 0) }},
		{"after finish", func(c *Collector) { c.Finished(0, msec); c.Tokens(0, msec, 1) }},
		{"after reject", func(c *Collector) { c.Rejected(0, msec, ""); c.Finished(0, msec) }},
	}
	for _, tt := range tests {
		c := NewCollector()
		c.Arrived(0, 0, 10, 10)
		c.Routed(0, uint64(0))
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tt.name)
				}
			}()
			tt.f(c)
		}()
	}
}

func BenchmarkRecordAndSummary(b *testing.B) {
	// 10^6 tokens over 10^4 requests, delivered one at a time and interleaved as in a batch.
	const requests, tokens = 10_000, 100
	b.ReportAllocs()
	for b.Loop() {
		c := NewCollector()
		for id := range requests {
			at := time.Duration(id) * msec
			c.Arrived(id, at, 1000, tokens)
			c.Routed(id, uint64(id%8))
			c.Admitted(id, at, 500)
		}
		for k := range tokens {
			for id := range requests {
				c.Tokens(id, time.Duration(requests+20*k+id%7)*msec, 1)
			}
		}
		for id := range requests {
			c.Finished(id, time.Duration(requests+20*tokens)*msec)
		}
		_ = c.Summary()
	}
}

// TestTokenRunIsTokensRepeated: a run of one-token deliveries records what one Tokens call per token
// does, from the first token on and after earlier ones.
func TestTokenRunIsTokensRepeated(t *testing.T) {
	record := func(run bool) []byte {
		c := NewCollector()
		for id := range 2 {
			c.Arrived(id, 0, 100, 6)
			c.Admitted(id, msec, 0)
		}
		ats := []time.Duration{10 * msec, 12 * msec, 15 * msec}
		later := []time.Duration{30 * msec, 40 * msec, 41 * msec}
		for id := range 2 {
			if id == 1 {
				c.Tokens(id, 5*msec, 2) // a burst before the run
			}
			for _, part := range [][]time.Duration{ats, later} {
				if run {
					c.TokenRun(id, part)
				} else {
					for _, at := range part {
						c.Tokens(id, at, 1)
					}
				}
			}
			c.Finished(id, 41*msec)
		}
		var b bytes.Buffer
		if err := c.Summary().WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteRequestsJSONL(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if got, want := record(true), record(false); !bytes.Equal(got, want) {
		t.Fatalf("TokenRun:\n%s\nTokens:\n%s", got, want)
	}
	c := NewCollector()
	c.Arrived(0, 0, 1, 2)
	defer func() {
		if recover() == nil {
			t.Error("TokenRun going back in time: no panic")
		}
	}()
	c.TokenRun(0, []time.Duration{2 * msec, msec})
}

// TestTokenRunOracle: on random runs — a header to hide, runs that start before a request's first or
// second delivery, equal gaps in a row, requests interleaved, and enough entries to settle — TokenRun leaves
// the same entries, summary and records as one Tokens call per token.
func TestTokenRunOracle(t *testing.T) {
	for seed := range uint64(20) {
		record := func(run bool) ([]byte, [][]gap) {
			rng := rand.New(rand.NewPCG(seed, 3))
			c := NewCollector()
			c.SetHeader(rng.IntN(3))
			const requests = 6
			now := make([]time.Duration, requests)
			for id := range requests {
				c.Arrived(id, 0, 10, 1<<20)
			}
			for range 3000 {
				id := rng.IntN(requests)
				ats := make([]time.Duration, rng.IntN(40))
				step := time.Duration(1 + rng.IntN(3))
				for i := range ats {
					if rng.IntN(4) == 0 {
						step = time.Duration(rng.IntN(5)) // 0: two tokens at once
					}
					now[id] += step
					ats[i] = now[id]
				}
				if run {
					c.TokenRun(id, ats)
					continue
				}
				for _, at := range ats {
					c.Tokens(id, at, 1)
				}
			}
			for id := range requests {
				if id%3 == 2 {
					c.Failed(id, now[id], "gone") // its gaps never count
				} else {
					c.Finished(id, now[id])
				}
			}
			gaps := make([][]gap, len(c.gaps))
			for i, chunk := range c.gaps {
				gaps[i] = slices.Clone(chunk)
			}
			var b bytes.Buffer
			if err := c.Summary().WriteJSON(&b); err != nil {
				t.Fatal(err)
			}
			if err := c.WriteRequestsJSONL(&b); err != nil {
				t.Fatal(err)
			}
			return b.Bytes(), gaps
		}
		got, gotGaps := record(true)
		want, wantGaps := record(false)
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: TokenRun:\n%s\nTokens:\n%s", seed, got, want)
		}
		if !reflect.DeepEqual(gotGaps, wantGaps) {
			t.Fatalf("seed %d: TokenRun and Tokens left different gap entries", seed)
		}
	}
}

// TestEqualGapsShareAnEntry: a request's equal gaps in a row take one entry; another request's or another
// length's start a new one.
func TestEqualGapsShareAnEntry(t *testing.T) {
	c := NewCollector()
	c.Arrived(0, 0, 1, 2000)
	c.Arrived(1, 0, 1, 10)
	ats := make([]time.Duration, 1001)
	for i := range ats {
		ats[i] = time.Duration(i) * 7 * msec
	}
	c.TokenRun(0, ats)
	c.Tokens(1, msec, 1)
	c.Tokens(1, 8*msec, 1)      // gap 7 ms, but another request's
	c.Tokens(0, 7007*msec+3, 1) // 7 ms + 3 ns: another length
	if got := len(c.gaps[0]); got != 3 || c.gaps[0][0].n != 1000 {
		t.Fatalf("%d entries, first counts %d: want 3 and 1000", got, c.gaps[0][0].n)
	}
	c.Finished(0, 8*time.Second)
	c.Finished(1, 8*time.Second)
	if s := c.Summary(); s.ITL.Count != 1002 || s.ITL.P50 != 7 || s.ITL.Max != 7.000003 {
		t.Fatalf("ITL %+v", s.ITL)
	}
}

func TestFirstRejection(t *testing.T) {
	c := NewCollector()
	if _, _, _, _, ok := c.FirstRejection(); ok {
		t.Fatal("FirstRejection of an empty run: ok")
	}
	for id := range 4 {
		c.Arrived(id, time.Duration(id)*msec, 10, 1)
	}
	c.Identify(2, "row-2", 4)
	c.Rejected(3, 3*msec, "later")
	c.Rejected(2, 3*msec, "pool has 1 block")
	c.Rejected(1, 3*msec, "unnamed")
	if id, rid, line, reason, ok := c.FirstRejection(); id != 1 || rid != "" || line != 0 || reason != "unnamed" || !ok {
		t.Errorf("FirstRejection() = %d, %q, %d, %q, %v; want 1, \"\", 0, \"unnamed\", true", id, rid, line, reason, ok)
	}
	c2 := NewCollector()
	c2.Arrived(0, 0, 10, 1)
	c2.Identify(0, "r0", 1)
	c2.Rejected(0, msec, "too long")
	if id, rid, line, reason, ok := c2.FirstRejection(); id != 0 || rid != "r0" || line != 1 || reason != "too long" || !ok {
		t.Errorf("FirstRejection() = %d, %q, %d, %q, %v; want 0, \"r0\", 1, \"too long\", true", id, rid, line, reason, ok)
	}
}

// TestFirstRejectionSkipsFailures: a request that failed with its worker was not rejected.
func TestFirstRejectionSkipsFailures(t *testing.T) {
	c := NewCollector()
	for id := range 3 {
		c.Arrived(id, time.Duration(id)*msec, 10, 1)
	}
	c.Failed(0, 3*msec, "worker 0 failed")
	if _, _, _, reason, ok := c.FirstRejection(); ok {
		t.Fatalf("FirstRejection with only a failure: ok, reason %q", reason)
	}
	c.Rejected(2, 3*msec, "too long")
	if id, _, _, reason, ok := c.FirstRejection(); id != 2 || reason != "too long" || !ok {
		t.Errorf("FirstRejection() = %d, %q, %v; want 2, \"too long\", true", id, reason, ok)
	}
}

// BenchmarkRecordWaves records 4·10^6 tokens as a replay does: 64 requests in flight at a time, each
// delivering a token every pass, passes of 300 distinct lengths, requests completing all along.
func BenchmarkRecordWaves(b *testing.B) {
	const requests, tokens, wave = 16_000, 250, 64
	b.ReportAllocs()
	for b.Loop() {
		c := NewCollector()
		now := time.Duration(0)
		for base := 0; base < requests; base += wave {
			for id := base; id < base+wave; id++ {
				c.Arrived(id, now, 1000, tokens)
			}
			for k := range tokens {
				now += time.Duration(1+(k*7919+base)%300) * 100 * time.Microsecond
				for id := base; id < base+wave; id++ {
					c.Tokens(id, now, 1)
				}
			}
			for id := base; id < base+wave; id++ {
				c.Finished(id, now)
			}
		}
		_ = c.Summary()
	}
}

// TestSummaryBuffersOneMetric: the report of 100,000 requests describes its per-request metrics (TTFT,
// TTST, TPOT, E2E) one after the other in one buffer with one sort scratch, so it allocates about 24 bytes
// a request, not a buffer per metric and a scratch per sort (over 96). (The first Summary settles the ITL
// gaps: the second is measured.)
func TestSummaryBuffersOneMetric(t *testing.T) {
	const n = 100_000
	c := NewCollector()
	for id := range n {
		at := time.Duration(id) * msec
		c.Arrived(id, at, 100, 3)
		first := at + time.Duration(id)*time.Microsecond // every TTFT different
		for k := range 3 {
			c.Tokens(id, first+time.Duration(k)*msec, 1)
		}
		c.Finished(id, first+2*msec)
	}
	c.Summary()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := c.Summary()
	runtime.ReadMemStats(&after)
	if s.CompletedRequests != n || s.TTFT.Count != n || s.TTST.Count != n || s.TPOT.Count != n || s.E2E.Count != n {
		t.Fatalf("summary of %d requests: %+v", n, s)
	}
	if bytes, limit := after.TotalAlloc-before.TotalAlloc, uint64(32*n); bytes > limit {
		t.Errorf("Summary allocated %d bytes, want at most %d (32 a request)", bytes, limit)
	}
}

// TestTokenRunsOracle: on random coasts — several requests decoding the same passes, some of them before
// their first or second delivery or with a header to hide, equal gaps in a row, retries and failures
// (whose shared gaps must not count), requests in flight at a mid-run Summary, a compact collector with a
// tiny spill limit, and enough entries to settle many times — TokenRuns gives the same summaries,
// percentiles and records as TokenRun for each request.
func TestTokenRunsOracle(t *testing.T) {
	for seed := range uint64(12) {
		record := func(runs bool) []byte {
			rng := rand.New(rand.NewPCG(seed, 5))
			c := NewCollector()
			c.SetHeader(rng.IntN(2))
			var out bytes.Buffer
			if seed%2 == 1 {
				c.Forget(&out)
				c.spill.limit, c.spill.dir = 7, t.TempDir()
				defer c.Close()
			}
			var b bytes.Buffer
			summary := func() {
				if err := c.Summary().WriteJSON(&b); err != nil {
					t.Fatal(err)
				}
				for _, p := range []int{0, 50, 99, 100} {
					v, ok := c.Percentile(ITL, p)
					fmt.Fprintln(&b, p, v, ok)
				}
			}
			now := time.Duration(0)
			var live []int
			next := 0
			for step := range 4000 {
				for len(live) < 10 {
					c.Arrived(next, now, 10, 1<<20)
					live = append(live, next)
					next++
				}
				switch x := rng.IntN(40); {
				case x == 0: // one ends
					i := rng.IntN(len(live))
					switch rng.IntN(3) {
					case 0:
						c.Failed(live[i], now, "gone")
					default:
						c.Finished(live[i], now)
					}
					live = slices.Delete(live, i, i+1)
				case x == 1:
					c.Retried(live[rng.IntN(len(live))], now)
				case x == 2:
					now++
					c.Tokens(live[rng.IntN(len(live))], now, 1+rng.IntN(2))
				default: // a coast of some of them, in their order
					var ids []int
					for _, id := range live {
						if rng.IntN(3) > 0 {
							ids = append(ids, id)
						}
					}
					ats := make([]time.Duration, rng.IntN(30))
					gap := time.Duration(1 + rng.IntN(3))
					for i := range ats {
						if rng.IntN(3) == 0 {
							gap = time.Duration(rng.IntN(1 << rng.IntN(12)))
						}
						now += gap
						ats[i] = now
					}
					if runs {
						c.TokenRuns(ids, ats)
					} else {
						for _, id := range ids {
							c.TokenRun(id, ats)
						}
					}
				}
				if step%1500 == 999 {
					summary()
				}
			}
			for _, id := range live[:len(live)/2] {
				c.Finished(id, now)
			}
			summary()
			if seed%2 == 1 {
				if err := c.Flush(); err != nil {
					t.Fatal(err)
				}
				b.Write(out.Bytes())
			} else if err := c.WriteRequestsJSONL(&b); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}
		if got, want := record(true), record(false); !bytes.Equal(got, want) {
			t.Fatalf("seed %d: TokenRuns and TokenRun differ:\n%s\n%s", seed, got, want)
		}
	}
}

// BenchmarkCoasts records and summarizes coasts as the 8-worker conversation replay makes them: 8
// workers' runs of 20–300 passes, each pass's length its own (as the op-level model prices them), of 1
// request (46 % of the samples), 2, 3 or 4, each request ending after 200–500 tokens, through a compact
// collector; by TokenRun for each request, and by TokenRuns.
func BenchmarkCoasts(b *testing.B) {
	for _, runs := range []bool{false, true} {
		b.Run(fmt.Sprintf("TokenRuns=%v", runs), func(b *testing.B) {
			for b.Loop() {
				rng := rand.New(rand.NewPCG(1, 2))
				c := NewCollector()
				c.Forget(nil)
				type worker struct {
					now  time.Duration
					reqs []int // in flight, each with its tokens left
					left []int
				}
				workers := make([]worker, 8)
				next := 0
				var ids []int
				ats := make([]time.Duration, 0, 300)
				for range 12_000 {
					w := &workers[rng.IntN(len(workers))]
					want := []int{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 4}[rng.IntN(13)]
					for len(w.reqs) < want {
						c.Arrived(next, w.now, 100, 1000)
						c.Tokens(next, w.now+time.Millisecond, 1)
						c.Tokens(next, w.now+2*time.Millisecond, 1)
						w.reqs, w.left = append(w.reqs, next), append(w.left, 200+rng.IntN(300))
						next++
					}
					w.now += 2 * time.Millisecond
					passes := 20 + rng.IntN(280)
					ats = ats[:0]
					for range passes {
						w.now += time.Duration(5_000_000 + rng.IntN(20_000_000))
						ats = append(ats, w.now)
					}
					ids = append(ids[:0], w.reqs...)
					if runs {
						c.TokenRuns(ids, ats)
					} else {
						for _, id := range ids {
							c.TokenRun(id, ats)
						}
					}
					for i := 0; i < len(w.reqs); i++ {
						if w.left[i] -= passes; w.left[i] <= 0 {
							c.Finished(w.reqs[i], w.now)
							w.reqs, w.left = slices.Delete(w.reqs, i, i+1), slices.Delete(w.left, i, i+1)
							i--
						}
					}
				}
				_ = c.Summary()
				c.Close()
			}
		})
	}
}
