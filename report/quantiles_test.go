package report

import (
	"slices"
	"testing"
	"time"
)

func TestQuantiles(t *testing.T) {
	c := NewCollector()
	// Request 0: TTFT 10, gaps 1, 1, 98, E2E 110. Request 1: TTFT 30, gaps 5, 5, E2E 50.
	// Request 2 is rejected and request 3 never finishes: neither counts.
	c.Arrived(0, 0, 100, 4)
	c.Admitted(0, 0, 0)
	for _, at := range []time.Duration{10, 11, 12, 110} {
		c.Tokens(0, at*msec, 1)
	}
	c.Finished(0, 110*msec)
	c.Arrived(1, 10*msec, 100, 3)
	c.Admitted(1, 10*msec, 0)
	c.TokenRun(1, []time.Duration{40 * msec, 45 * msec, 50 * msec})
	c.Finished(1, 60*msec)
	c.Arrived(2, 20*msec, 100, 3)
	c.Rejected(2, 20*msec, "too long")
	c.Arrived(3, 20*msec, 100, 3)
	c.Admitted(3, 20*msec, 0)
	c.Tokens(3, 21*msec, 1)
	c.Tokens(3, 500*msec, 1)

	ttft, itl, e2e := c.Quantiles(4)
	for _, tc := range []struct {
		name      string
		got, want []float64
	}{
		{"ttft", ttft, []float64{10, 10, 30, 30, 30}},  // n=2: ranks 0, 0.25→0, 0.5→1 (half up), 1, 1
		{"itl", itl, []float64{1, 1, 5, 5, 98}},        // 1,1,5,5,98: ranks 0,1,2,3,4
		{"e2e", e2e, []float64{50, 50, 110, 110, 110}}, // 50,110
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("Quantiles(4) %s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if a, b, e := NewCollector().Quantiles(10); a != nil || b != nil || e != nil {
		t.Errorf("Quantiles of nothing = %v %v %v, want nil", a, b, e)
	}
}

// TestQuantilesMatchSummary: the quantiles at the report's percentiles are the report's percentiles.
func TestQuantilesMatchSummary(t *testing.T) {
	c := NewCollector()
	for id := range 37 {
		at := time.Duration(id) * 7 * msec
		c.Arrived(id, at, 10, 5)
		c.Admitted(id, at, 0)
		tok := at + time.Duration(id%5+1)*3*msec
		for k := range 5 {
			c.Tokens(id, tok, 1)
			tok += time.Duration((id*k)%4+1) * msec
		}
		c.Finished(id, tok)
	}
	s := c.Summary()
	ttft, itl, e2e := c.Quantiles(100)
	for _, tc := range []struct {
		name string
		q    []float64
		st   Stats
	}{{"ttft", ttft, s.TTFT}, {"itl", itl, s.ITL}, {"e2e", e2e, s.E2E}} {
		got := []float64{tc.q[0], tc.q[50], tc.q[90], tc.q[99], tc.q[100]}
		want := []float64{tc.st.Min, tc.st.P50, tc.st.P90, tc.st.P99, tc.st.Max}
		if !slices.Equal(got, want) {
			t.Errorf("%s quantiles min/50/90/99/max = %v, want the summary's %v", tc.name, got, want)
		}
	}
}
