package report

import "time"

// Metric names a latency distribution of completed requests: TTFT, ITL or E2E.
type Metric string

const (
	TTFT Metric = "ttft"
	ITL  Metric = "itl"
	E2E  Metric = "e2e"
)

// Percentile is the p-th percentile (0–100, nearest rank as in Stats, so Percentile(TTFT, 90) is
// Summary().TTFT.P90) of metric over completed requests, in milliseconds; ok is false when there is no
// sample.
func (c *Collector) Percentile(metric Metric, p int) (v float64, ok bool) {
	if p < 0 || p > 100 {
		panic("report: Percentile: p out of [0, 100]")
	}
	if metric == ITL {
		// As Summary: the samples of requests in flight stay out.
		c.settleGaps()
		if c.itl.n == 0 {
			return 0, false
		}
		return c.itl.atRanks(nil, durationMs, []int{rank(c.itl.n, p)})[0], true
	}
	l := ttftLatency
	if metric == E2E {
		l = e2eLatency
	}
	keys := c.held(nil, l)
	n := c.done.cols[l].n + len(keys)
	if n == 0 {
		return 0, false
	}
	return c.done.cols[l].atRanks(keys, keyFloat, []int{rank(n, p)})[0], true
}

// Latency is completed request id's TTFT and E2E; first is false when it produced no token (no TTFT).
// It panics unless the request has finished and is held (with Forget: no request has arrived since).
func (c *Collector) Latency(id int) (ttft, e2e time.Duration, first bool) {
	r := c.record(id)
	if r == nil || !r.completed() {
		panic("report: Latency: request has not finished")
	}
	return r.firstToken - r.arrival, r.end - r.arrival, r.deliveries >= 1
}
