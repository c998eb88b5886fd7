package profile

import (
	"math"
	"testing"
)

func mustCurve(t *testing.T, x, y []float64) Curve {
	t.Helper()
	c, err := NewCurve(x, y)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCurveAt(t *testing.T) {
	c := mustCurve(t, []float64{1, 2, 4, 8}, []float64{10, 12, 20, 20})
	for _, tc := range []struct {
		x, want float64
	}{
		// exact at knots
		{1, 10}, {2, 12}, {4, 20}, {8, 20},
		// midpoints
		{1.5, 11}, {3, 16}, {6, 20},
		// extrapolation with the end segments' slopes
		{0, 8}, {-1, 6}, {16, 20},
	} {
		if got := c.At(tc.x); got != tc.want {
			t.Errorf("At(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	up := mustCurve(t, []float64{0, 10}, []float64{0, 5})
	if got := up.At(30); got != 15 {
		t.Errorf("extrapolated above: At(30) = %v, want 15", got)
	}
	one := mustCurve(t, []float64{3}, []float64{7})
	if got := one.At(-100); got != 7 {
		t.Errorf("one knot: At(-100) = %v, want 7", got)
	}
	if got := (Curve{}).At(5); got != 0 {
		t.Errorf("zero Curve: At(5) = %v, want 0", got)
	}
}

// TestCurveExactAtKnots checks exactness on awkward values, where y[i] + (x[i+1]-x[i])·slope would round.
func TestCurveExactAtKnots(t *testing.T) {
	x := []float64{0.1, 0.30000000000000004, 1.0 / 3, 7.7, 1e6 + 0.1}
	y := []float64{0.7, 1.1, math.Pi, 1.0 / 7, 123456.789}
	c := mustCurve(t, x, y)
	for i := range x {
		if got := c.At(x[i]); got != y[i] {
			t.Errorf("At(%v) = %v, want %v", x[i], got, y[i])
		}
	}
}

func TestNewCurveErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		x, y []float64
	}{
		{"empty", nil, nil},
		{"lengths differ", []float64{1, 2}, []float64{1}},
		{"not increasing", []float64{1, 1}, []float64{1, 2}},
		{"decreasing", []float64{2, 1}, []float64{1, 2}},
		{"NaN x", []float64{1, math.NaN()}, []float64{1, 2}},
		{"Inf y", []float64{1, 2}, []float64{1, math.Inf(1)}},
	} {
		if _, err := NewCurve(tc.x, tc.y); err == nil {
			t.Errorf("%s: NewCurve accepted %v, %v", tc.name, tc.x, tc.y)
		}
	}
}

func TestCurveCopiesInput(t *testing.T) {
	x, y := []float64{0, 1}, []float64{0, 1}
	c := mustCurve(t, x, y)
	x[1], y[1] = 100, 100
	if got := c.At(1); got != 1 {
		t.Fatalf("At(1) after mutating the input = %v, want 1", got)
	}
}

// TestGridBilinear: on a complete grid a bilinear function z = a + b·u + c·v + d·u·v is reproduced exactly
// by bilinear interpolation, inside the grid and (with linear extrapolation) outside it.
func TestGridBilinear(t *testing.T) {
	f := func(u, v float64) float64 { return 1 + 2*u + 3*v + 0.5*u*v }
	us, vs := []float64{1, 2, 4}, []float64{0, 10, 30}
	var pu, pv, pz []float64
	for _, u := range us {
		for _, v := range vs {
			pu, pv, pz = append(pu, u), append(pv, v), append(pz, f(u, v))
		}
	}
	g, err := NewGridPoints(pu, pv, pz)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ u, v float64 }{
		{1, 0}, {2, 10}, {4, 30}, // knots
		{1.5, 5}, {3, 20}, {2, 20}, {3, 10}, // midpoints, and on grid lines
		{0, 0}, {8, 50}, {-1, -10}, {3, 100}, // extrapolation
	} {
		got, want := g.At(tc.u, tc.v), f(tc.u, tc.v)
		if math.Abs(got-want) > 1e-9*math.Abs(want) {
			t.Errorf("At(%v, %v) = %v, want %v", tc.u, tc.v, got, want)
		}
	}
	// Knots come back bit-exact.
	for i := range pu {
		if got := g.At(pu[i], pv[i]); got != pz[i] {
			t.Errorf("At(%v, %v) = %v, want exactly %v", pu[i], pv[i], got, pz[i])
		}
	}
}

// TestGridRaggedRows: rows measured at different v; each row extrapolates along v on its own, then the two
// bracketing rows are mixed linearly in u.
func TestGridRaggedRows(t *testing.T) {
	// Row u=0: z = v on [0, 10]; row u=10: z = 2v + 5 measured only on [0, 4].
	g, err := NewGridPoints(
		[]float64{0, 0, 10, 10, 10},
		[]float64{0, 10, 0, 2, 4},
		[]float64{0, 10, 5, 9, 13},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ u, v, want float64 }{
		{10, 10, 25},           // row u=10 extrapolated to v=10
		{5, 10, 17.5},          // halfway between the rows at v=10
		{0, 20, 20},            // row u=0 extrapolated
		{20, 0, 10},            // beyond the last row: 5 + (5-0)
		{-10, 4, 4 - (13 - 4)}, // below the first row
	} {
		if got := g.At(tc.u, tc.v); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("At(%v, %v) = %v, want %v", tc.u, tc.v, got, tc.want)
		}
	}
	one, err := NewGridPoints([]float64{3, 3}, []float64{0, 1}, []float64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := one.At(100, 0.5); got != 1.5 {
		t.Errorf("one row: At(100, 0.5) = %v, want 1.5", got)
	}
}

func TestGridErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		u, v, z []float64
	}{
		{"empty", nil, nil, nil},
		{"lengths differ", []float64{1}, []float64{1, 2}, []float64{1}},
		{"duplicate point", []float64{1, 1}, []float64{2, 2}, []float64{3, 4}},
		{"NaN u", []float64{math.NaN()}, []float64{1}, []float64{1}},
		{"Inf z", []float64{1}, []float64{1}, []float64{math.Inf(-1)}},
	} {
		if _, err := NewGridPoints(tc.u, tc.v, tc.z); err == nil {
			t.Errorf("%s: NewGridPoints accepted it", tc.name)
		}
	}
	c := mustCurve(t, []float64{0}, []float64{0})
	if _, err := NewGrid([]float64{1, 1}, []Curve{c, c}); err == nil {
		t.Error("NewGrid accepted equal u")
	}
	if _, err := NewGrid([]float64{1}, []Curve{{}}); err == nil {
		t.Error("NewGrid accepted an empty row")
	}
}
