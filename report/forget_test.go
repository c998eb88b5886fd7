package report

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// drive makes the same random calls on every collector: requests arrive in id order while earlier ones
// are in flight, and each is admitted, delivers tokens (single, in bursts or in runs), is retried, and
// finishes, is rejected or fails, or (a few of the last) stays in flight to the end. Some gaps recur (pass lengths) and some do not. check runs every few
// hundred calls.
func drive(rng *rand.Rand, requests int, check func(), cs ...*Collector) {
	each := func(f func(c *Collector)) {
		for _, c := range cs {
			f(c)
		}
	}
	now := time.Duration(0)
	var live []int
	next := 0
	for step := 0; next < requests || len(live) > 0; step++ {
		if step%300 == 299 {
			check()
		}
		if rng.IntN(4) == 0 {
			now += time.Duration(1+rng.IntN(50)) * 100 * time.Microsecond
		} else {
			now += time.Duration(1 + rng.IntN(1e6))
		}
		if next < requests && (len(live) == 0 || rng.IntN(len(live)+4) < 4) {
			id := next
			next++
			in, out := 1+rng.IntN(4000), rng.IntN(300)
			each(func(c *Collector) { c.Arrived(id, now, in, out) })
			if id%5 != 0 {
				each(func(c *Collector) { c.Identify(id, fmt.Sprintf("req-%d", id), id%3*(id+1)) })
			}
			live = append(live, id)
			continue
		}
		i := rng.IntN(len(live))
		id := live[i]
		end := func() { live = append(live[:i], live[i+1:]...) }
		switch k := rng.IntN(100); {
		case k < 10:
			w := uint64(rng.IntN(8))
			each(func(c *Collector) { c.Routed(id, w) })
		case k < 20:
			n := rng.IntN(2000)
			each(func(c *Collector) { c.Admitted(id, now, n) })
		case k < 60:
			n := 1 + rng.IntN(3)*rng.IntN(3)
			each(func(c *Collector) { c.Tokens(id, now, n) })
		case k < 70:
			ats := []time.Duration{now, now + time.Millisecond, now + 2*time.Millisecond}
			now = ats[2]
			each(func(c *Collector) { c.TokenRun(id, ats) })
		case k < 72:
			each(func(c *Collector) { c.Retried(id, now) })
		case k < 74:
			each(func(c *Collector) { c.Rejected(id, now, fmt.Sprintf("too long %d", id)) })
			end()
		case k < 76:
			each(func(c *Collector) { c.Failed(id, now, "worker down") })
			end()
		case k < 77:
			if id >= requests-50 { // stays in flight to the end
				end()
			}
		case k < 95:
			each(func(c *Collector) { c.Finished(id, now) })
			end()
		}
	}
}

// TestForgetKeepsTheReport: a collector that forgets ended requests (Forget) gives the same Summary,
// percentiles, quantiles, first rejection and per-request records, byte for byte, as one that keeps them
// all, mid-run and at the end, while holding only the window of records from the earliest request in
// flight.
func TestForgetKeepsTheReport(t *testing.T) {
	for seed := range uint64(6) {
		keep, forget := NewCollector(), NewCollector()
		var records bytes.Buffer
		forget.Forget(&records)
		rng := rand.New(rand.NewPCG(seed, 17))
		compare := func(when string) {
			t.Helper()
			if a, b := keep.Summary(), forget.Summary(); !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d, %s: Summary\n%+v\nwant\n%+v", seed, when, b, a)
			}
			for _, m := range []Metric{TTFT, ITL, E2E} {
				for _, p := range []int{0, 37, 50, 90, 99, 100} {
					a, aok := keep.Percentile(m, p)
					b, bok := forget.Percentile(m, p)
					if a != b || aok != bok {
						t.Fatalf("seed %d, %s: Percentile(%s, %d) = %v, %v; want %v, %v", seed, when, m, p, b, bok, a, aok)
					}
				}
			}
			at, ai, ae := keep.Quantiles(20)
			bt, bi, be := forget.Quantiles(20)
			if !reflect.DeepEqual([][]float64{at, ai, ae}, [][]float64{bt, bi, be}) {
				t.Fatalf("seed %d, %s: Quantiles differ", seed, when)
			}
			aid, arid, aline, areason, aok := keep.FirstRejection()
			bid, brid, bline, breason, bok := forget.FirstRejection()
			if aid != bid || arid != brid || aline != bline || areason != breason || aok != bok {
				t.Fatalf("seed %d, %s: FirstRejection = %d %q %d %q %v; want %d %q %d %q %v", seed, when,
					bid, brid, bline, breason, bok, aid, arid, aline, areason, aok)
			}
		}
		checks, held := 0, 0
		drive(rng, 3000, func() {
			compare("mid-run")
			checks++
			held = max(held, len(forget.reqs))
		}, keep, forget)
		compare("at the end")
		if err := forget.Flush(); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := keep.WriteRequestsJSONL(&want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(records.Bytes(), want.Bytes()) {
			t.Fatalf("seed %d: records streamed differ from WriteRequestsJSONL's (%d and %d bytes)", seed, records.Len(), want.Len())
		}
		if checks < 10 || len(keep.reqs) != 3000 {
			t.Fatalf("seed %d: %d checks, %d records kept; want at least 10 and 3000", seed, checks, len(keep.reqs))
		}
		// The window reaches back to the earliest request in flight: a few hundred records, not 3000.
		if held > 600 {
			t.Errorf("seed %d: the forgetting collector held up to %d records mid-run; want at most 600", seed, held)
		}
	}
}

// TestForgetWithoutWriter: with no writer, nothing is written and Flush has nothing to report;
// WriteRequestsJSONL says why it cannot write, and Latency still reads the request that just finished.
func TestForgetWithoutWriter(t *testing.T) {
	c := NewCollector()
	c.Forget(nil)
	for id := range 3 {
		c.Arrived(id, time.Duration(id)*msec, 10, 1)
		c.Tokens(id, time.Duration(id+5)*msec, 1)
		c.Finished(id, time.Duration(id+5)*msec)
		if ttft, e2e, first := c.Latency(id); ttft != 5*msec || e2e != 5*msec || !first {
			t.Fatalf("Latency(%d) = %v, %v, %v; want 5ms, 5ms, true", id, ttft, e2e, first)
		}
	}
	if n := len(c.reqs); n != 1 {
		t.Errorf("%d records held after 3 requests ended in order; want 1 (the latest)", n)
	}
	if err := c.Flush(); err != nil {
		t.Errorf("Flush: %v", err)
	}
	err := c.WriteRequestsJSONL(&bytes.Buffer{})
	if want := "report: WriteRequestsJSONL: the collector forgets ended requests (Forget writes their records)"; err == nil || err.Error() != want {
		t.Errorf("WriteRequestsJSONL: %v; want %q", err, want)
	}
	if s := c.Summary(); s.CompletedRequests != 3 || s.TTFT.Count != 3 || s.TTFT.P50 != 5 {
		t.Errorf("Summary: %d completed, TTFT %+v; want 3 completed, 3 samples of 5 ms", s.CompletedRequests, s.TTFT)
	}
}

// TestForgetAfterArrivedPanics: Forget must come first, or requests before it would be half kept.
func TestForgetAfterArrivedPanics(t *testing.T) {
	c := NewCollector()
	c.Arrived(0, 0, 1, 1)
	defer func() {
		if recover() == nil {
			t.Fatal("Forget after Arrived did not panic")
		}
	}()
	c.Forget(nil)
}

// TestForgetRetiresHoles: an id that never arrives (a hole) leaves the window with the ended requests
// around it rather than pinning it, and the report and records are those of a collector keeping all;
// the hole arriving later breaks the arrival order, a caller bug, and panics saying so.
func TestForgetRetiresHoles(t *testing.T) {
	keep, forget := NewCollector(), NewCollector()
	var records bytes.Buffer
	forget.Forget(&records)
	for _, c := range []*Collector{keep, forget} {
		for _, id := range []int{0, 2, 3, 6} { // holes: 1, 4 and 5
			at := time.Duration(id) * msec
			c.Arrived(id, at, 10, 1)
			c.Tokens(id, at+2*msec, 1)
			c.Finished(id, at+2*msec)
		}
		c.Arrived(7, 7*msec, 10, 1)
	}
	if forget.base != 7 || len(forget.reqs) != 1 {
		t.Errorf("window = ids %d.. (%d records); want 7.. (1 record)", forget.base, len(forget.reqs))
	}
	if a, b := keep.Summary(), forget.Summary(); !reflect.DeepEqual(a, b) {
		t.Errorf("Summary\n%+v\nwant\n%+v", b, a)
	}
	if err := forget.Flush(); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := keep.WriteRequestsJSONL(&want); err != nil {
		t.Fatal(err)
	}
	if records.String() != want.String() {
		t.Errorf("records streamed:\n%s\nwant:\n%s", records.String(), want.String())
	}
	defer func() {
		if r := recover(); r != "report: Arrived: request 5 arrived twice or after a later id" {
			t.Errorf("Arrived(5) after 7 panicked with %v", r)
		}
	}()
	forget.Arrived(5, 8*msec, 10, 1)
}

// TestForgetFreesReasons: a compact collector frees a rejection's reason as the request retires, and a
// failure's once its ITL samples are settled (they must not count), so that a long run with many
// rejections holds the reasons of its window only; FirstRejection still names the first.
func TestForgetFreesReasons(t *testing.T) {
	c := NewCollector()
	c.Forget(nil)
	const n = 3001 // ids 0, 3, ... rejected at once; 1, 4, ... failed after 3 tokens; the rest complete
	for id := range n {
		at := time.Duration(id) * msec
		c.Arrived(id, at, 10, 3)
		switch id % 3 {
		case 0:
			c.Rejected(id, at, fmt.Sprintf("reason %d", id))
			continue
		case 1:
			c.Admitted(id, at, 0)
			c.Tokens(id, at+1*msec, 1)
			c.Tokens(id, at+2*msec, 1)
			c.Tokens(id, at+3*msec, 1)
			c.Failed(id, at+3*msec, "worker failed")
		case 2:
			c.Admitted(id, at, 0)
			c.Tokens(id, at+1*msec, 1)
			c.Tokens(id, at+3*msec, 1)
			c.Tokens(id, at+5*msec, 1)
			c.Finished(id, at+5*msec)
		}
	}
	for id := range c.reasons {
		if id < c.base && id%3 != 1 {
			t.Fatalf("reason of retired rejected request %d kept", id)
		}
	}
	s := c.Summary()
	if len(c.reasons) != 1 || c.reasons[n-1] != fmt.Sprintf("reason %d", n-1) {
		t.Errorf("reasons held after the summary: %d (%v); want only the window's request %d", len(c.reasons), c.reasons[n-1], n-1)
	}
	// Each of the 1,000 completed requests has two gaps of 2 ms; the failed ones' gaps do not count.
	if s.ITL.Count != 2000 || s.ITL.P50 != 2 || s.CompletedRequests != 1000 || s.RejectedRequests != 1001 {
		t.Errorf("ITL %+v, %d completed, %d rejected; want 2,000 samples of 2 ms, 1,000, 1,001", s.ITL, s.CompletedRequests, s.RejectedRequests)
	}
	if id, _, _, reason, ok := c.FirstRejection(); id != 0 || reason != "reason 0" || !ok {
		t.Errorf("FirstRejection = %d, %q, %v; want 0, reason 0, true", id, reason, ok)
	}
}
