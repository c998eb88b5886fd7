package report

import (
	"testing"
	"time"
)

// TestPercentileMatchesSummary: at the summary's percentiles, Percentile gives the summary's figures,
// for TTFT, E2E and ITL (whose gaps are held as runs), over completed requests only.
func TestPercentileMatchesSummary(t *testing.T) {
	c := NewCollector()
	ms := time.Millisecond
	for id := range 40 {
		at := time.Duration(id) * 7 * ms
		c.Arrived(id, at, 100, 8)
		if id%9 == 8 {
			c.Rejected(id, at+ms, "too long")
			continue
		}
		tok := at + time.Duration(5+id*id%23)*ms
		c.Tokens(id, tok, 1)
		run := make([]time.Duration, 3+id%4)
		for i := range run {
			tok += time.Duration(2+(id+i)%5) * ms
			run[i] = tok
		}
		c.TokenRun(id, run)
		c.Finished(id, tok)
	}
	s := c.Summary()
	for _, m := range []struct {
		metric Metric
		stats  Stats
	}{{TTFT, s.TTFT}, {E2E, s.E2E}, {ITL, s.ITL}} {
		for _, p := range []struct {
			p    int
			want float64
		}{{0, m.stats.Min}, {50, m.stats.P50}, {75, m.stats.P75}, {90, m.stats.P90}, {95, m.stats.P95}, {99, m.stats.P99}, {100, m.stats.Max}} {
			if got, ok := c.Percentile(m.metric, p.p); !ok || got != p.want {
				t.Errorf("Percentile(%s, %d) = %v, %v; want %v as in the summary", m.metric, p.p, got, ok, p.want)
			}
		}
	}
	if _, ok := NewCollector().Percentile(ITL, 90); ok {
		t.Error("Percentile of no sample: ok")
	}
}
