package chart

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// FuzzTicks: whatever the range, the axis is a few ascending finite ticks, one label each, that
// cover it (within ±10^300, where Ticks clamps).
func FuzzTicks(f *testing.F) {
	for _, s := range [][3]float64{{0, 1, 5}, {0, 1742, 5}, {-3, 7, 5}, {12, 12, 5}, {0, 1e-300, 3}, {-1e308, 1e308, 6}, {1e15, 1e15 + 1, 5}, {3.2, 15000, 0}} {
		f.Add(s[0], s[1], int(s[2]))
	}
	f.Fuzz(func(t *testing.T, lo, hi float64, n int) {
		for _, a := range []Axis{Ticks(lo, hi, n%20), LogTicks(lo, hi)} {
			if len(a.Values) < 2 || len(a.Values) > 40 || len(a.Labels) != len(a.Values) {
				t.Fatalf("(%v, %v, %d): %d ticks, %d labels", lo, hi, n, len(a.Values), len(a.Labels))
			}
			for i, v := range a.Values {
				if !finite(v) || i > 0 && v <= a.Values[i-1] {
					t.Fatalf("(%v, %v, %d): ticks %v", lo, hi, n, a.Values)
				}
			}
			if a.Lo != a.Values[0] || a.Hi != a.Values[len(a.Values)-1] {
				t.Fatalf("(%v, %v, %d): domain [%v, %v], ticks %v", lo, hi, n, a.Lo, a.Hi, a.Values)
			}
		}
		a := Ticks(lo, hi, n%20)
		if math.Abs(lo) <= 1e300 && math.Abs(hi) <= 1e300 && hi > lo && (a.Lo > lo || a.Hi < hi) {
			t.Fatalf("(%v, %v): domain [%v, %v] does not cover it", lo, hi, a.Lo, a.Hi)
		}
	})
}

// FuzzSVG: any values and names give well-formed XML with no NaN or Inf in it.
func FuzzSVG(f *testing.F) {
	f.Add("a <b> & \"c\"", 0.0, 1.0, 2.0, 3.0, uint8(0), false)
	f.Add("cdf", 1.0, 0.0, 1e4, 1.0, uint8(1), true)
	f.Add("", math.NaN(), math.Inf(1), -1e308, 1e308, uint8(2), true)
	f.Fuzz(func(t *testing.T, name string, x0, y0, x1, y1 float64, kind uint8, xlog bool) {
		c := Chart{Title: name, XLabel: name, XLog: xlog, Series: []Series{
			{Name: name, Kind: Kind(kind % 3), X: []float64{x0, x1}, Y: []float64{y0, y1}, Labels: []string{name}},
			{Name: "other", X: []float64{x1, x0}, Y: []float64{y0, y1}},
		}, Regions: []Region{{X0: x0, X1: x1, Y0: y0, Y1: y1, Label: name}}}
		svg := c.SVG()
		if strings.Contains(svg, "NaN") && !strings.Contains(name, "NaN") || strings.Contains(svg, "Inf") && !strings.Contains(name, "Inf") {
			t.Fatalf("NaN or Inf in\n%s", svg)
		}
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("not XML: %v\n%s", err, svg)
			}
		}
	})
}
