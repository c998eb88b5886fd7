package report

import "iter"

// Quantiles returns the TTFT, ITL and E2E of completed requests in milliseconds at points+1 evenly
// spaced quantiles from 0 to 1 (the minimum, then q = i/points, up to the maximum), by the report's
// nearest-rank rule: a CDF drawn with a fixed number of points however many samples the run has. A
// distribution with no sample is nil.
func (c *Collector) Quantiles(points int) (ttft, itl, e2e []float64) {
	t := c.completed(c.done.ttft.appendTo(nil), (*request).ttft)
	e := c.completed(c.done.e2e.appendTo(nil), func(r *request) (float64, bool) { return r.e2e(), true })
	// As Summary: the samples of requests in flight stay out.
	c.settleGaps()
	sortFloats(t)
	sortFloats(e)
	return quantiles(each(t), len(t), points), quantiles(c.itl.runs(), c.itl.n, points), quantiles(each(e), len(e), points)
}

// quantiles returns the sorted values runs yields (each with how many times it occurs), n samples in all,
// at q = i/points for i = 0..points: the sample of rank round((n−1)·q).
func quantiles(runs iter.Seq2[float64, uint64], n, points int) []float64 {
	if n == 0 || points < 1 {
		return nil
	}
	out := make([]float64, points+1)
	i, seen := 0, 0 // the next point; the samples up to the current run
	for x, c := range runs {
		seen += int(c)
		for ; i <= points && ((n-1)*i*2+points)/(2*points) < seen; i++ { // round((n−1)·i/points), half up
			out[i] = x
		}
		if i > points {
			break
		}
	}
	return out
}
