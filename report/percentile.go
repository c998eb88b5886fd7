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
		c.itl.settle()
		if c.itl.n == 0 {
			return 0, false
		}
		xs := make([]float64, len(c.itl.keys))
		for i, k := range c.itl.keys {
			xs[i] = ms(time.Duration(k))
		}
		return atRank(xs, c.itl.counts, c.itl.n, p), true
	}
	var xs []float64
	for i := range c.reqs {
		r := &c.reqs[i]
		switch {
		case !r.completed():
		case metric == E2E:
			xs = append(xs, ms(r.end-r.arrival))
		case r.deliveries >= 1:
			xs = append(xs, ms(r.firstToken-r.arrival))
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	sortFloats(xs)
	return percentile(xs, p), true
}

// Latency is completed request id's TTFT and E2E; first is false when it produced no token (no TTFT).
// It panics unless the request has finished.
func (c *Collector) Latency(id int) (ttft, e2e time.Duration, first bool) {
	r := &c.reqs[id]
	if !r.completed() {
		panic("report: Latency: request has not finished")
	}
	return r.firstToken - r.arrival, r.end - r.arrival, r.deliveries >= 1
}
