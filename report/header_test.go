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
