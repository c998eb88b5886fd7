package report

import (
	"testing"
	"time"
)

// TestHeaderTokens: with a reply header of 3 tokens (gpt-oss's <|channel|>analysis<|message|>),
// request 0 gets tokens at 10, 14, 18 (one Tokens call each, then a TokenRun) and 22, 26, 30 ms:
// its first token shown is the 4th, at 22 ms (TTFT 22), its second at 26 (TTST 4), ITL 4 and 4, and
// TPOT (30 − 22)/(3 − 1) = 4 over the 3 tokens shown, while all 6 count as output. Request 1 gets
// 2 tokens at 50 ms then 3 at 60 ms: the second burst carries its header's last token and its first
// 2 shown, so TTFT is 60 − 40 = 20, and it has no TTST. Without the header request 0's TTFT is 10.
func TestHeaderTokens(t *testing.T) {
	run := func(header int) Summary {
		c := NewCollector()
		c.SetHeader(header)
		c.Arrived(0, 0, 100, 6)
		c.Admitted(0, 0, 0)
		c.Tokens(0, 10*msec, 1)
		c.TokenRun(0, []time.Duration{14 * msec, 18 * msec, 22 * msec})
		c.Tokens(0, 26*msec, 1)
		c.Tokens(0, 30*msec, 1)
		c.Finished(0, 30*msec)
		c.Arrived(1, 40*msec, 100, 5)
		c.Admitted(1, 40*msec, 0)
		c.Tokens(1, 50*msec, 2)
		c.Tokens(1, 60*msec, 3)
		c.Finished(1, 60*msec)
		return c.Summary()
	}
	s := run(3)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"TTFT min", s.TTFT.Min, 20},
		{"TTFT max", s.TTFT.Max, 22},
		{"TTST", s.TTST.Mean, 4},
		{"ITL mean", s.ITL.Mean, 4},
		{"TPOT mean (request 1 shows 2 tokens at once: TPOT 0)", s.TPOT.Mean, 2},
		{"output throughput", s.OutputTokenThroughput, perSec(11, 0.060)},
	} {
		if c.got != c.want {
			t.Errorf("header 3: %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.TTFT.Count != 2 || s.TTST.Count != 1 || s.ITL.Count != 2 || s.TPOT.Count != 2 {
		t.Errorf("header 3: counts TTFT/TTST/ITL/TPOT = %d/%d/%d/%d, want 2/1/2/2", s.TTFT.Count, s.TTST.Count, s.ITL.Count, s.TPOT.Count)
	}
	if s := run(0); s.TTFT.Min != 10 || s.TTFT.Max != 10 {
		t.Errorf("no header: TTFT %v to %v, want 10 (both)", s.TTFT.Min, s.TTFT.Max)
	}
}

// TestSetHeaderAfterArrived: the header is set before the first request arrives.
func TestSetHeaderAfterArrived(t *testing.T) {
	c := NewCollector()
	c.Arrived(0, 0, 1, 1)
	defer func() {
		if recover() == nil {
			t.Error("SetHeader after Arrived did not panic")
		}
	}()
	c.SetHeader(3)
}

// TestRepliesWithinHeader: with a 3-token header, a reply of 2 tokens (one delivery) or of 3 (a run of
// decode passes) shows none: it completes, its tokens count as output, but it has no TTFT, and the
// summary counts it among NoTTFTRequests, in a compact collector too. When every reply is one, TTFT
// has no sample: Percentile says so rather than 0.
func TestRepliesWithinHeader(t *testing.T) {
	for _, compact := range []bool{false, true} {
		c := NewCollector()
		c.SetHeader(3)
		if compact {
			c.Forget(nil)
		}
		c.Arrived(0, 0, 10, 2)
		c.Tokens(0, 10*msec, 2)
		c.Finished(0, 10*msec)
		c.Arrived(1, 0, 10, 3)
		c.TokenRun(1, []time.Duration{10 * msec, 14 * msec, 18 * msec})
		c.Finished(1, 18*msec)
		if _, ok := c.Percentile(TTFT, 90); ok {
			t.Errorf("compact %v: header-only replies have a p90 TTFT", compact)
		}
		c.Arrived(2, 0, 10, 4)
		c.TokenRun(2, []time.Duration{10 * msec, 14 * msec, 18 * msec, 25 * msec})
		c.Finished(2, 25*msec)
		s := c.Summary()
		if s.CompletedRequests != 3 || s.NoTTFTRequests != 2 || s.TotalOutputTokens != 9 || s.TTFT.Count != 1 || s.TTFT.Mean != 25 {
			t.Errorf("compact %v: completed %d, no TTFT %d, output tokens %d, TTFT %d samples of mean %v; want 3, 2, 9, 1 of 25",
				compact, s.CompletedRequests, s.NoTTFTRequests, s.TotalOutputTokens, s.TTFT.Count, s.TTFT.Mean)
		}
		if v, ok := c.Percentile(TTFT, 90); !ok || v != 25 {
			t.Errorf("compact %v: p90 TTFT %v (%v), want 25", compact, v, ok)
		}
	}
}
