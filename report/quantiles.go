package report

// Quantiles returns the TTFT, ITL and E2E of completed requests in milliseconds at points+1 evenly
// spaced quantiles from 0 to 1 (the minimum, then q = i/points, up to the maximum), by the report's
// nearest-rank rule: a CDF drawn with a fixed number of points however many samples the run has. A
// distribution with no sample is nil.
func (c *Collector) Quantiles(points int) (ttft, itl, e2e []float64) {
	t := c.samples(nil, ttftLatency)
	e := c.samples(nil, e2eLatency)
	// As Summary: the samples of requests in flight stay out.
	c.settleGaps()
	xs := c.itl.millis()
	sortFloats(t)
	sortFloats(e)
	return quantiles(t, nil, len(t), points), quantiles(xs, c.itl.counts, c.itl.n, points), quantiles(e, nil, len(e), points)
}

// quantiles returns the sorted values xs (value i occurring counts[i] times; counts nil: once each),
// n samples in all, at q = i/points for i = 0..points: the sample of rank round((n−1)·q).
func quantiles(xs []float64, counts []uint64, n, points int) []float64 {
	if n == 0 || points < 1 {
		return nil
	}
	out := make([]float64, points+1)
	j, below := 0, 0 // the run holding rank r, and the samples before it
	for i := range out {
		r := ((n-1)*i*2 + points) / (2 * points) // round((n−1)·i/points), half up
		if counts == nil {
			out[i] = xs[r]
			continue
		}
		for r >= below+int(counts[j]) {
			below += int(counts[j])
			j++
		}
		out[i] = xs[j]
	}
	return out
}
