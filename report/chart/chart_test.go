package chart

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		n      int
		values []float64
		labels []string
	}{
		{0, 1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{0, 1742, 5, []float64{0, 500, 1000, 1500, 2000}, []string{"0", "500", "1000", "1500", "2000"}},
		{0, 95, 5, []float64{0, 20, 40, 60, 80, 100}, []string{"0", "20", "40", "60", "80", "100"}},
		{-3, 7, 5, []float64{-4, -2, 0, 2, 4, 6, 8}, []string{"-4", "-2", "0", "2", "4", "6", "8"}},
		{0, 0.003, 3, []float64{0, 0.001, 0.002, 0.003}, []string{"0.000", "0.001", "0.002", "0.003"}},
		{0, 0.3, 3, []float64{0, 0.1, 0.2, 0.3}, []string{"0.0", "0.1", "0.2", "0.3"}},
		{0, 1e7, 4, []float64{0, 5e6, 1e7}, []string{"0", "5M", "10M"}},
		{0, 25000, 5, []float64{0, 5000, 10000, 15000, 20000, 25000}, []string{"0", "5000", "10k", "15k", "20k", "25k"}},
		{12, 12, 5, []float64{12, 12.2, 12.4, 12.6, 12.8, 13}, []string{"12.0", "12.2", "12.4", "12.6", "12.8", "13.0"}}, // empty range: [lo, lo+1]
		{0, math.Inf(1), 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
	} {
		a := Ticks(tc.lo, tc.hi, tc.n)
		if !slices.Equal(a.Values, tc.values) || !slices.Equal(a.Labels, tc.labels) {
			t.Errorf("Ticks(%v, %v, %d) = %v %q, want %v %q", tc.lo, tc.hi, tc.n, a.Values, a.Labels, tc.values, tc.labels)
		}
		if a.Lo != tc.values[0] || a.Hi != tc.values[len(tc.values)-1] {
			t.Errorf("Ticks(%v, %v, %d) domain [%v, %v], want its first and last tick", tc.lo, tc.hi, tc.n, a.Lo, a.Hi)
		}
	}
}

func TestScale(t *testing.T) {
	s := Scale{Lo: 0, Hi: 2, From: 256, To: 30} // a y axis: up is smaller
	for _, tc := range []struct{ v, want float64 }{{0, 256}, {1, 143}, {2, 30}, {3, -83}} {
		if got := s.Map(tc.v); got != tc.want {
			t.Errorf("Map(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if got := (Scale{Lo: 5, Hi: 5, From: 10, To: 20}).Map(7); got != 10 {
		t.Errorf("Map on an empty domain = %v, want From (10)", got)
	}
}

// The plot area of a 640 by 300 chart without a legend is x 64–624, y 30–256.
func TestSVGPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Series
		want string // the mark's path
	}{
		{"step", Series{Kind: Step, X: []float64{0, 1, 2}, Y: []float64{0, 1, 1}}, `d="M64.0 256.0H342.0V30.0H620.0V30.0"`},
		{"line", Series{X: []float64{0, 1, 2}, Y: []float64{0, 0.5, 1}}, `d="M64.0 256.0L342.0 143.0L620.0 30.0"`},
		{"gap", Series{X: []float64{0, 0.5, 1, 2}, Y: []float64{1, math.NaN(), 0, 0}}, `d="M64.0 30.0M342.0 256.0L620.0 256.0"`},
	} {
		c := Chart{Title: tc.name, Series: []Series{tc.s}}
		svg := c.SVG()
		if n := strings.Count(svg, `class="mark"`); n != 1 {
			t.Errorf("%s: %d marks, want 1", tc.name, n)
		}
		if !strings.Contains(svg, tc.want) {
			t.Errorf("%s: SVG lacks %s:\n%s", tc.name, tc.want, svg)
		}
	}
}

func TestSVGMarksRegionsAndEscaping(t *testing.T) {
	c := Chart{
		Title: "a <b> & c",
		Series: []Series{
			{Name: "pass", Kind: Points, X: []float64{1, 2, math.NaN()}, Y: []float64{1, 2, 3}, Labels: []string{"x<1>", "y"}},
			{Name: "frontier", Kind: Step, X: []float64{1, 2}, Y: []float64{2, 1}},
			{Name: "max", Faint: true, X: []float64{1, 2}, Y: []float64{3, 3}},
		},
		Regions: []Region{{X0: 1.5, X1: math.Inf(1), Y0: math.Inf(-1), Y1: math.Inf(1), Label: "SLA"}},
	}
	svg := c.SVG()
	for _, want := range []struct {
		s string
		n int
	}{
		{`class="mark"`, 4}, // two points (the NaN one left out), two paths
		{`<circle`, 2},
		{`class="region"`, 1},
		{`<title>x&lt;1&gt;</title>`, 1},
		{`a &lt;b&gt; &amp; c`, 2}, // the SVG's title and its heading
		{`stroke-opacity="0.45"`, 1},
		{`>pass</text>`, 1}, // in the legend, which leaves out the faint series
		{`>max</text>`, 0},
	} {
		if got := strings.Count(svg, want.s); got != want.n {
			t.Errorf("%d of %s, want %d", got, want.s, want.n)
		}
	}
	// The region spans x 1.5–2 of the domain 0–2 (481 to 620) and the plot's whole height (50 to 256, below the legend).
	if want := `<rect class="region" x="481.0" y="50.0" width="139.0" height="206.0"`; !strings.Contains(svg, want) {
		t.Errorf("SVG lacks %s:\n%s", want, svg)
	}
	if strings.Contains(svg, "NaN") {
		t.Errorf("SVG has a NaN:\n%s", svg)
	}
	if svg != c.SVG() {
		t.Error("two renderings of one chart differ")
	}
}

func TestSVGNoData(t *testing.T) {
	c := Chart{Title: "empty", Series: []Series{{Name: "all NaN", X: []float64{1}, Y: []float64{math.NaN()}}}}
	svg := c.SVG()
	if strings.Contains(svg, `class="mark"`) || !strings.Contains(svg, ">no data</text>") {
		t.Errorf("a chart with nothing to draw should say so and draw no mark:\n%s", svg)
	}
}

func TestYMax(t *testing.T) {
	c := Chart{YMax: 1, Series: []Series{{X: []float64{0, 1}, Y: []float64{0.1, 0.2}}}}
	// y from 0 to 1 (not 0.2): 0.2 lies at 256 − 0.2·226 = 210.8.
	if svg := c.SVG(); !strings.Contains(svg, `d="M64.0 233.4L620.0 210.8"`) {
		t.Errorf("YMax 1 should keep the axis at [0, 1]:\n%s", svg)
	}
}

func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		values []float64
		labels []string
	}{
		{3.2, 15000, []float64{1, 10, 100, 1000, 10000, 100000}, []string{"1", "10", "100", "1000", "10k", "100k"}},
		{0.04, 0.7, []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}, []string{"0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1"}},
		{0.04, 7, []float64{0.01, 0.1, 1, 10}, []string{"0.01", "0.1", "1", "10"}},        // three decades: powers only
		{100, 100, []float64{100, 200, 500, 1000}, []string{"100", "200", "500", "1000"}}, // one value: its decade
		{0, 0, []float64{1, 2, 5, 10}, []string{"1", "2", "5", "10"}},
	} {
		a := LogTicks(tc.lo, tc.hi)
		if !slices.Equal(a.Values, tc.values) || !slices.Equal(a.Labels, tc.labels) || a.Lo != tc.values[0] || a.Hi != tc.values[len(tc.values)-1] {
			t.Errorf("LogTicks(%v, %v) = [%v, %v] %v %q, want %v %q", tc.lo, tc.hi, a.Lo, a.Hi, a.Values, a.Labels, tc.values, tc.labels)
		}
	}
	s := Scale{Lo: 1, Hi: 1000, From: 0, To: 300, Log: true}
	for _, tc := range []struct{ v, want float64 }{{1, 0}, {10, 100}, {1000, 300}} {
		if got := s.Map(tc.v); got != tc.want {
			t.Errorf("log Map(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if got := s.Map(0); !math.IsNaN(got) {
		t.Errorf("log Map(0) = %v, want NaN", got)
	}
}

func TestSVGLogX(t *testing.T) {
	// x from 1 to 100 on a log axis: 10 is the middle of 64–624; the point at 0 is left out.
	c := Chart{XLog: true, Series: []Series{{Kind: Step, X: []float64{0, 1, 10, 100}, Y: []float64{0, 0, 0.5, 1}}}}
	if svg := c.SVG(); !strings.Contains(svg, `d="M64.0 256.0H342.0V143.0H620.0V30.0"`) {
		t.Errorf("log x path wrong:\n%s", svg)
	}
}
