package aic

import (
	"math"
	"slices"
)

// Interpolation follows AIConfigurator's perf_interp engine (sdk/perf_interp/config.py), the rules
// its leave-one-out validation kept:
//
//   - a measured point is returned exactly;
//   - between two measured points of one curve, blend in "raw" latency (GEMM m, batch, decode
//     length, message size: near-linear physics, so the plain lerp is exact for it) or in sqrt
//     latency along the context-attention sequence axis (latency ~ s², and sqrt linearises it);
//   - beyond the measured range, hold the boundary utilisation (util = roofline / latency) and let
//     the roofline of the query carry the growth: latency = SOL(query) / util_boundary;
//   - across shapes (a GEMM (n, k) that was not measured), transfer utilisation, not latency: a
//     neighbour's latency is meaningless at the query shape, its efficiency is not.

// seg finds the segment of ascending xs that holds v: xs[i] <= v <= xs[i+1], clamped to the first
// and last segments, with v's position t in it (t < 0 below the range, t > 1 above it). With one
// point it returns (0, 0). It does not allocate.
func seg(xs []float64, v float64) (int, float64) {
	n := len(xs)
	if n < 2 {
		return 0, 0
	}
	lo, hi := 0, n-1 // invariant: answer in [lo, hi-1]
	if v <= xs[0] {
		lo, hi = 0, 1
	} else if v >= xs[n-1] {
		lo, hi = n-2, n-1
	} else {
		for hi-lo > 1 {
			mid := int(uint(lo+hi) >> 1)
			if xs[mid] <= v {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	return lo, (v - xs[lo]) / (xs[hi] - xs[lo])
}

// segNear is seg with a guess: when h is not nil and v lies in the segment *h names, below its end, that
// is the segment seg finds, and the bisection is skipped; else seg finds it and *h keeps it for the next
// call. A caller whose v moves a little from call to call (a coast's mean context) keeps h.
func segNear(xs []float64, v float64, h *int) (int, float64) {
	if h == nil {
		return seg(xs, v)
	}
	if i := *h; i >= 0 && i+1 < len(xs) && xs[i] <= v && v < xs[i+1] {
		return i, (v - xs[i]) / (xs[i+1] - xs[i])
	}
	i, t := seg(xs, v)
	*h = i
	return i, t
}

func lerp(a, b, t float64) float64 { return a + (b-a)*t }

// sqrtLerp blends in sqrt space: exact for latency ∝ (a + b·s)². The end points come back exactly.
func sqrtLerp(a, b, t float64) float64 {
	switch t {
	case 0:
		return a
	case 1:
		return b
	}
	r := lerp(math.Sqrt(a), math.Sqrt(b), t)
	return r * r
}

// curve is a measured latency curve y(x), x ascending, with the utilisation held beyond each end.
// utilLo and utilHi are SOL/latency at the ends (medians over a few end points where the data saw-
// tooths); a caller supplies SOL at the query to extrapolate.
type curve struct {
	x, y           []float64
	utilLo, utilHi float64
	sqrt           bool // blend in sqrt(latency) between points

	// hx, hy are the lower convex hull of the points: the greatest convex function below the data
	// (see convexAt).
	hx, hy []float64
}

// newCurve builds a curve from points sorted by x, with end utilisations taken as the median of
// the last k points' SOL/latency (AIConfigurator's k_tail; 1 is the plain end point).
func newCurve(x, y []float64, sol func(x float64) float64, k int, sqrt bool) curve {
	c := curve{x: x, y: y, sqrt: sqrt}
	c.utilLo = edgeUtil(x, y, sol, k, false)
	c.utilHi = edgeUtil(x, y, sol, k, true)
	c.hx, c.hy = lowerHull(x, y)
	return c
}

// lowerHull returns the lower convex hull of points sorted by x (Andrew's monotone chain): the
// vertices of the greatest convex piecewise-linear function below them. Both end points are on it.
func lowerHull(x, y []float64) (hx, hy []float64) {
	for i := range x {
		for n := len(hx); n >= 2; n-- {
			// Pop the last vertex unless it turns left (counter-clockwise) on the way to point i.
			cross := (hx[n-1]-hx[n-2])*(y[i]-hy[n-2]) - (hy[n-1]-hy[n-2])*(x[i]-hx[n-2])
			if cross > 0 {
				break
			}
			hx, hy = hx[:n-1], hy[:n-1]
		}
		hx, hy = append(hx, x[i]), append(hy, y[i])
	}
	return hx, hy
}

// convexAt evaluates the convex minorant of the curve at v: the lower hull between its end points,
// its first segment extended below them, and beyond the last point the larger of the last segment
// extended and the roofline continuation at() uses (solV is the roofline at v). Every piece is
// convex and they join continuously, so the whole is convex on [0, ∞), which is what differences
// of it rely on (see chunkAttention).
func (c *curve) convexAt(v, solV float64) float64 {
	n := len(c.hx)
	if n == 1 {
		if v > c.hx[0] {
			return math.Max(c.hy[0], solV/c.utilHi)
		}
		return c.hy[0]
	}
	if v > c.hx[n-1] {
		slope := (c.hy[n-1] - c.hy[n-2]) / (c.hx[n-1] - c.hx[n-2])
		return math.Max(c.hy[n-1]+slope*(v-c.hx[n-1]), solV/c.utilHi)
	}
	i, t := seg(c.hx, v)
	return lerp(c.hy[i], c.hy[i+1], t)
}

func edgeUtil(x, y []float64, sol func(float64) float64, k int, high bool) float64 {
	k = min(k, len(x))
	u := make([]float64, 0, k)
	for j := range k {
		i := j
		if high {
			i = len(x) - 1 - j
		}
		if y[i] > 0 {
			u = append(u, sol(x[i])/y[i])
		}
	}
	if len(u) == 0 {
		return math.NaN()
	}
	slices.Sort(u)
	if len(u)%2 == 1 {
		return u[len(u)/2]
	}
	return (u[len(u)/2-1] + u[len(u)/2]) / 2
}

// at evaluates the curve at v; solV is the roofline at v, used only outside the measured range.
func (c *curve) at(v, solV float64) float64 { return c.atNear(v, solV, nil) }

// atNear is at, finding v's segment from the guess h (segNear).
func (c *curve) atNear(v, solV float64, h *int) float64 {
	n := len(c.x)
	switch {
	case v < c.x[0]:
		return solV / c.utilLo
	case v > c.x[n-1]:
		return solV / c.utilHi
	case n == 1:
		return c.y[0]
	}
	i, t := segNear(c.x, v, h)
	if c.sqrt {
		return sqrtLerp(c.y[i], c.y[i+1], t)
	}
	return lerp(c.y[i], c.y[i+1], t)
}

// inRange reports whether v lies within the measured x range.
func (c *curve) inRange(v float64) bool { return v >= c.x[0] && v <= c.x[len(c.x)-1] }

// table1 is a function tabulated at knots and interpolated linearly, extrapolated linearly beyond
// the last knot and held at the first below it. The per-pass token curves are tables of this kind:
// every component is piecewise linear between the knots it is tabulated at, so the sum is exact
// there and interpolation reproduces it.
type table1 struct {
	x, y []float64
}

func (t *table1) at(v float64) float64 {
	n := len(t.x)
	if n == 1 || v <= t.x[0] {
		return t.y[0]
	}
	i, f := seg(t.x, v)
	return lerp(t.y[i], t.y[i+1], f)
}

// unique sorts xs and removes duplicates.
func unique(xs []float64) []float64 {
	slices.Sort(xs)
	return slices.Compact(xs)
}
