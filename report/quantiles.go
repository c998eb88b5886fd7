package report

// Quantiles returns the TTFT, ITL and E2E of completed requests in milliseconds at points+1 evenly
// spaced quantiles from 0 to 1 (the minimum, then q = i/points, up to the maximum), by the report's
// nearest-rank rule: a CDF drawn with a fixed number of points however many samples the run has. A
// distribution with no sample is nil.
func (c *Collector) Quantiles(points int) (ttft, itl, e2e []float64) {
	latency := func(l latency) []float64 {
		keys := c.held(nil, l)
		s := &c.done.cols[l]
		return quantiles(s, keys, keyFloat, s.n+len(keys), points)
	}
	ttft, e2e = latency(ttftLatency), latency(e2eLatency)
	// As Summary: the samples of requests in flight stay out.
	c.settleGaps()
	return ttft, quantiles(&c.itl, nil, durationMs, c.itl.n, points), e2e
}

// quantiles returns the n samples of s and extra (see samples.walk) at q = i/points for i = 0..points: the
// sample of rank round((n−1)·q).
func quantiles(s *samples, extra []uint64, value func(uint64) float64, n, points int) []float64 {
	if n == 0 || points < 1 {
		return nil
	}
	ranks := make([]int, points+1)
	for i := range ranks {
		ranks[i] = ((n-1)*i*2 + points) / (2 * points) // round((n−1)·i/points), half up
	}
	return s.atRanks(extra, value, ranks)
}
