package profile

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Curve is a piecewise-linear function through knots (x, y), continued linearly beyond both ends with the
// slope of the end segments. A Curve with one knot is constant. The zero Curve is 0 everywhere.
//
// Measured tables have few points and are extrapolated on purpose: a simulated pass may be larger than
// anything profiled, and a straight line through the last two measurements is the least surprising guess.
type Curve struct {
	x, y  []float64
	slope []float64 // slope[i] of the segment [x[i], x[i+1]], precomputed so that At does not divide
}

// NewCurve builds a Curve from knots with strictly increasing, finite x and finite y. The slices are copied.
func NewCurve(x, y []float64) (Curve, error) {
	if len(x) != len(y) {
		return Curve{}, fmt.Errorf("curve: %d x values but %d y values", len(x), len(y))
	}
	if len(x) == 0 {
		return Curve{}, errors.New("curve: no knots")
	}
	for i := range x {
		if !finite(x[i]) || !finite(y[i]) {
			return Curve{}, fmt.Errorf("curve: knot %d (%v, %v) is not finite", i, x[i], y[i])
		}
		if i > 0 && x[i] <= x[i-1] {
			return Curve{}, fmt.Errorf("curve: x not strictly increasing at knot %d (%v after %v)", i, x[i], x[i-1])
		}
	}
	c := Curve{x: slices.Clone(x), y: slices.Clone(y), slope: make([]float64, max(len(x)-1, 0))}
	for i := range c.slope {
		c.slope[i] = (y[i+1] - y[i]) / (x[i+1] - x[i])
	}
	return c, nil
}

// At evaluates the curve at x. At a knot it returns the knot's y exactly.
func (c Curve) At(x float64) float64 {
	switch len(c.x) {
	case 0:
		return 0
	case 1:
		return c.y[0]
	}
	i := segment(c.x, x)
	if x == c.x[i+1] {
		return c.y[i+1]
	}
	return c.y[i] + (x-c.x[i])*c.slope[i]
}

// Knots returns copies of the curve's knots.
func (c Curve) Knots() (x, y []float64) { return slices.Clone(c.x), slices.Clone(c.y) }

// segment returns the index i of the segment [xs[i], xs[i+1]] used for x: the last knot at or below x,
// clamped to [0, len(xs)-2] so that points outside the range use the end segments. len(xs) >= 2.
func segment(xs []float64, x float64) int {
	// Binary search by hand: sort.Search's closure costs more than the whole interpolation.
	lo, hi := 0, len(xs)-2
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if xs[m] <= x {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// Grid interpolates a function of two variables z(u, v) from rows: at each of a few values of u, a Curve
// over v. At (u, v) it evaluates the two rows whose u bracket u and interpolates linearly between them;
// beyond the first or last row it extrapolates linearly from the two end rows.
//
// On a complete rectangular grid (every row has knots at the same v) this is exactly bilinear interpolation
// with linear extrapolation. Measured tables are rarely complete: the expensive corner (large batch at long
// context, high KV usage at short context) is often missing or was measured at other v. Each row then
// extrapolates along its own v axis, which keeps the row's own trend, rather than leaving a hole.
type Grid struct {
	u    []float64
	inv  []float64 // 1/(u[j+1]-u[j])
	rows []Curve
}

// NewGrid builds a Grid from rows at strictly increasing, finite u. The slices are copied.
func NewGrid(u []float64, rows []Curve) (Grid, error) {
	if len(u) != len(rows) {
		return Grid{}, fmt.Errorf("grid: %d u values but %d rows", len(u), len(rows))
	}
	if len(u) == 0 {
		return Grid{}, errors.New("grid: no rows")
	}
	for j := range u {
		if !finite(u[j]) {
			return Grid{}, fmt.Errorf("grid: row %d at u = %v is not finite", j, u[j])
		}
		if j > 0 && u[j] <= u[j-1] {
			return Grid{}, fmt.Errorf("grid: u not strictly increasing at row %d (%v after %v)", j, u[j], u[j-1])
		}
		if len(rows[j].x) == 0 {
			return Grid{}, fmt.Errorf("grid: row %d at u = %v has no knots", j, u[j])
		}
	}
	g := Grid{u: slices.Clone(u), rows: slices.Clone(rows), inv: make([]float64, len(u)-1)}
	for j := range g.inv {
		g.inv[j] = 1 / (u[j+1] - u[j])
	}
	return g, nil
}

// NewGridPoints builds a Grid from scattered points (u[i], v[i], z[i]): points with equal u form a row,
// a Curve over v. Two points with the same (u, v) are an error.
func NewGridPoints(u, v, z []float64) (Grid, error) {
	if len(u) != len(v) || len(u) != len(z) {
		return Grid{}, fmt.Errorf("grid: %d u, %d v and %d z values", len(u), len(v), len(z))
	}
	idx := make([]int, len(u))
	for i := range idx {
		if !finite(u[i]) || !finite(v[i]) || !finite(z[i]) {
			return Grid{}, fmt.Errorf("grid: point %d (%v, %v, %v) is not finite", i, u[i], v[i], z[i])
		}
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp.Compare(u[a], u[b]); c != 0 {
			return c
		}
		return cmp.Compare(v[a], v[b])
	})
	var us []float64
	var rows []Curve
	for lo := 0; lo < len(idx); {
		hi := lo
		var vs, zs []float64
		for ; hi < len(idx) && u[idx[hi]] == u[idx[lo]]; hi++ {
			i := idx[hi]
			if len(vs) > 0 && v[i] == vs[len(vs)-1] {
				return Grid{}, fmt.Errorf("grid: two points at (%v, %v)", u[i], v[i])
			}
			vs, zs = append(vs, v[i]), append(zs, z[i])
		}
		c, err := NewCurve(vs, zs)
		if err != nil {
			return Grid{}, fmt.Errorf("grid: row at u = %v: %w", u[idx[lo]], err)
		}
		us, rows = append(us, u[idx[lo]]), append(rows, c)
		lo = hi
	}
	return NewGrid(us, rows)
}

// At evaluates the grid at (u, v). At a row's knot it returns the knot's z exactly.
func (g Grid) At(u, v float64) float64 {
	switch len(g.u) {
	case 0:
		return 0
	case 1:
		return g.rows[0].At(v)
	}
	j := segment(g.u, u)
	switch u {
	case g.u[j]:
		return g.rows[j].At(v)
	case g.u[j+1]:
		return g.rows[j+1].At(v)
	}
	z0 := g.rows[j].At(v)
	return z0 + (u-g.u[j])*g.inv[j]*(g.rows[j+1].At(v)-z0)
}

// Rows returns the u of each row and the rows themselves (shared, not copied; Curves are immutable).
func (g Grid) Rows() ([]float64, []Curve) { return slices.Clone(g.u), slices.Clone(g.rows) }

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
