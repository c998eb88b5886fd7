// Package chart draws plots as inline SVG for the HTML reports: linear axes with nice ticks, lines,
// step lines, points, shaded regions and a legend. It has no script and no style sheet of its own
// (colours are attributes), so a page that embeds a chart needs nothing from the network.
//
// Start with [Chart.SVG]. The output depends only on the chart's values, so a report drawn from a
// deterministic run is byte-identical too. Every drawn series is an element of class "mark" (a path per
// line, a circle per point), which is what a test counts to tell a drawn chart from an empty frame.
package chart

import (
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is how a series is drawn.
type Kind uint8

const (
	Line   Kind = iota // straight segments between points
	Step               // a value holds until the next point's x (a CDF, a counter)
	Points             // one dot per point
)

// Series is one set of points. X and Y have the same length; a NaN Y breaks a line (no data there)
// and is left out of points.
type Series struct {
	Name  string
	Kind  Kind
	X, Y  []float64
	Color string // CSS colour; "" takes the palette's next
	Faint bool   // thin and translucent: a companion of another series, such as a bucket's max beside its mean
	// Labels, for Points, are each point's tooltip (nil: none).
	Labels []string
}

// Region is a shaded rectangle in data coordinates, such as an SLA's feasible area. Infinite edges
// reach the plot's edges.
type Region struct {
	X0, X1, Y0, Y1 float64
	Label          string
	Color          string // "" is a pale green
}

// Chart is one plot. The axes start at zero (or below, for negative data) and end at a nice number
// above the data, or above YMax when that is larger (YMax 1 keeps a fraction's axis at [0, 1]).
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	Regions               []Region
	YMax                  float64
	// XLog puts x on a log scale (a latency CDF whose tail is a hundred times its median); points
	// with x ≤ 0 are left out.
	XLog          bool
	Width, Height int // in SVG user units; 0: 640 by 300
}

// Palette is the colours series take in turn (Tableau 10: distinguishable, also in grey print).
var Palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// Margins around the plot area, in SVG units: room for tick labels, axis titles, title and legend.
const (
	marginLeft   = 64
	marginRight  = 20
	marginTop    = 30
	marginBottom = 44
	legendRow    = 16
	charWidth    = 6.5 // mean width of a 11px sans-serif character, to lay out the legend
)

// SVG returns the chart as an <svg> element scaled to its container's width.
func (c *Chart) SVG() string {
	w, h := c.Width, c.Height
	if w <= 0 || h <= 0 {
		w, h = 640, 300
	}
	legend := c.legend(w)
	top := marginTop + legendRow*legend.rows + 4*min(legend.rows, 1)
	plot := box{x0: marginLeft, y0: float64(top), x1: float64(w - marginRight), y1: float64(h - marginBottom)}

	xlo, xhi, ylo, yhi := c.extent()
	xt, yt := Ticks(xlo, xhi, 6), Ticks(ylo, yhi, 5)
	if c.XLog {
		xt = LogTicks(xlo, xhi)
	}
	sx := Scale{Lo: xt.Lo, Hi: xt.Hi, From: plot.x0, To: plot.x1, Log: c.XLog}
	sy := Scale{Lo: yt.Lo, Hi: yt.Hi, From: plot.y1, To: plot.y0}

	var b svg
	b.printf(`<svg class="chart" viewBox="0 0 %d %d" width="100%%" role="img" xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">`, w, h)
	b.printf(`<title>%s</title>`, esc(c.Title))
	b.printf(`<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`, marginLeft, esc(c.Title))
	for _, r := range c.Regions {
		c.region(&b, r, sx, sy, plot)
	}
	axes(&b, xt, yt, sx, sy, plot)
	b.printf(`<text x="%s" y="%d" text-anchor="middle">%s</text>`, num((plot.x0+plot.x1)/2), h-8, esc(c.XLabel))
	b.printf(`<text transform="translate(14 %s) rotate(-90)" text-anchor="middle">%s</text>`, num((plot.y0+plot.y1)/2), esc(c.YLabel))
	marks := 0
	for i := range c.Series {
		marks += c.series(&b, i, sx, sy)
	}
	if marks == 0 {
		b.printf(`<text x="%s" y="%s" text-anchor="middle" fill="#888">no data</text>`, num((plot.x0+plot.x1)/2), num((plot.y0+plot.y1)/2))
	}
	legend.draw(&b, c)
	b.printf(`</svg>`)
	return b.String()
}

// color is series i's colour.
func (c *Chart) color(i int) string {
	if s := c.Series[i].Color; s != "" {
		return s
	}
	return Palette[i%len(Palette)]
}

// extent is the data's range, zero included (on a log x axis, from the least positive x), and YMax.
func (c *Chart) extent() (xlo, xhi, ylo, yhi float64) {
	yhi = max(c.YMax, 0)
	if c.XLog {
		xlo = math.Inf(1)
	}
	for _, s := range c.Series {
		for i, y := range s.Y {
			x := s.X[i]
			if !finite(x) || !finite(y) || c.XLog && x <= 0 {
				continue
			}
			xlo, xhi = min(xlo, x), max(xhi, x)
			ylo, yhi = min(ylo, y), max(yhi, y)
		}
	}
	for _, r := range c.Regions { // finite edges of a region are part of the picture
		for _, x := range []float64{r.X0, r.X1} {
			if finite(x) {
				xlo, xhi = min(xlo, x), max(xhi, x)
			}
		}
		for _, y := range []float64{r.Y0, r.Y1} {
			if finite(y) {
				ylo, yhi = min(ylo, y), max(yhi, y)
			}
		}
	}
	return xlo, xhi, ylo, yhi
}

// series draws series i and returns how many marks it drew.
func (c *Chart) series(b *svg, i int, sx, sy Scale) int {
	s := &c.Series[i]
	color := c.color(i)
	n := min(len(s.X), len(s.Y))
	if s.Kind == Points {
		marks := 0
		for j := range n {
			x, y := sx.Map(s.X[j]), sy.Map(s.Y[j])
			if !finite(x) || !finite(y) {
				continue
			}
			b.printf(`<circle class="mark" cx="%s" cy="%s" r="3.5" fill="%s" fill-opacity="0.8">`, num(x), num(y), color)
			if j < len(s.Labels) {
				b.printf(`<title>%s</title>`, esc(s.Labels[j]))
			}
			b.printf(`</circle>`)
			marks++
		}
		return marks
	}
	var d strings.Builder
	pen := false // whether the path has a current point
	for j := range n {
		x, y := sx.Map(s.X[j]), sy.Map(s.Y[j])
		if !finite(x) || !finite(y) {
			pen = false
			continue
		}
		px, py := num(x), num(y)
		switch {
		case !pen:
			d.WriteString("M" + px + " " + py)
		case s.Kind == Step:
			d.WriteString("H" + px + "V" + py)
		default:
			d.WriteString("L" + px + " " + py)
		}
		pen = true
	}
	if d.Len() == 0 {
		return 0
	}
	width, opacity := "1.8", "1"
	if s.Faint {
		width, opacity = "1", "0.45"
	}
	b.printf(`<path class="mark" d="%s" fill="none" stroke="%s" stroke-width="%s" stroke-opacity="%s" stroke-linejoin="round"><title>%s</title></path>`,
		d.String(), color, width, opacity, esc(s.Name))
	return 1
}

// region shades r, clipped to the plot.
func (c *Chart) region(b *svg, r Region, sx, sy Scale, plot box) {
	// An infinite edge is the axis's end, and so is one the scale cannot place (≤ 0 on a log axis);
	// then the edges are clipped to the plot.
	edge := func(s Scale, v float64) float64 {
		if math.IsInf(v, 1) {
			return s.To
		}
		if p := s.Map(v); !math.IsNaN(p) {
			return p
		}
		return s.From
	}
	clampX := func(v float64) float64 { return min(max(edge(sx, v), plot.x0), plot.x1) }
	clampY := func(v float64) float64 { return min(max(edge(sy, v), plot.y0), plot.y1) }
	x0, x1 := clampX(r.X0), clampX(r.X1)
	y0, y1 := clampY(r.Y1), clampY(r.Y0) // SVG's y grows downward
	if x1 <= x0 || y1 <= y0 {
		return
	}
	color := r.Color
	if color == "" {
		color = "#59a14f"
	}
	b.printf(`<rect class="region" x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.12"><title>%s</title></rect>`,
		num(x0), num(y0), num(x1-x0), num(y1-y0), color, esc(r.Label))
	if r.Label != "" {
		b.printf(`<text x="%s" y="%s" fill="%s">%s</text>`, num(x0+4), num(y0+12), color, esc(r.Label))
	}
}

// box is the plot area in SVG units.
type box struct{ x0, y0, x1, y1 float64 }

// axes draws the grid, the axis lines and the tick labels.
func axes(b *svg, xt, yt Axis, sx, sy Scale, plot box) {
	for i, v := range yt.Values {
		y := num(sy.Map(v))
		b.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e5e5e5"/>`, num(plot.x0), y, num(plot.x1), y)
		b.printf(`<text x="%s" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`, num(plot.x0-6), y, yt.Labels[i])
	}
	for i, v := range xt.Values {
		x := num(sx.Map(v))
		b.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e5e5e5"/>`, x, num(plot.y0), x, num(plot.y1))
		b.printf(`<text x="%s" y="%s" text-anchor="middle">%s</text>`, x, num(plot.y1+16), xt.Labels[i])
	}
	b.printf(`<path d="M%s %sV%sH%s" fill="none" stroke="#333"/>`, num(plot.x0), num(plot.y0), num(plot.y1), num(plot.x1))
}

// legendLayout places the series' names in rows above the plot.
type legendLayout struct {
	rows int
	at   [][2]float64 // each series' swatch position; none when only one unnamed series
}

func (c *Chart) legend(width int) legendLayout {
	var l legendLayout
	named := 0
	for _, s := range c.Series {
		if s.Name != "" && !s.Faint {
			named++
		}
	}
	if named < 2 {
		return l
	}
	x, row := float64(marginLeft), 0
	l.at = make([][2]float64, len(c.Series))
	for i, s := range c.Series {
		if s.Name == "" || s.Faint {
			l.at[i] = [2]float64{-1, -1}
			continue
		}
		w := 18 + charWidth*float64(len([]rune(s.Name))) + 14
		if x+w > float64(width-marginRight) && x > marginLeft {
			x, row = marginLeft, row+1
		}
		l.at[i] = [2]float64{x, float64(marginTop + 6 + legendRow*row)}
		x += w
	}
	l.rows = row + 1
	return l
}

func (l legendLayout) draw(b *svg, c *Chart) {
	for i, p := range l.at {
		if p[0] < 0 {
			continue
		}
		b.printf(`<rect x="%s" y="%s" width="12" height="8" fill="%s"/>`, num(p[0]), num(p[1]-9), c.color(i))
		b.printf(`<text x="%s" y="%s">%s</text>`, num(p[0]+16), num(p[1]-1), esc(c.Series[i].Name))
	}
}

// Scale maps data values in [Lo, Hi] onto [From, To], linearly or, with Log, linearly in log10.
type Scale struct {
	Lo, Hi, From, To float64
	Log              bool
}

// Map returns v's position: NaN for a non-finite v, or v ≤ 0 on a log scale; From on a scale of no width.
func (s Scale) Map(v float64) float64 {
	lo, hi := s.Lo, s.Hi
	if s.Log {
		if v <= 0 {
			return math.NaN()
		}
		v, lo, hi = math.Log10(v), math.Log10(lo), math.Log10(hi)
	}
	if !finite(v) {
		return math.NaN()
	}
	if hi == lo {
		return s.From
	}
	return s.From + (v-lo)/(hi-lo)*(s.To-s.From)
}

// Axis is an axis's domain, widened to nice numbers, and its ticks.
type Axis struct {
	Lo, Hi float64
	Values []float64
	Labels []string
}

// Ticks chooses about n ticks covering [lo, hi]: a step of 1, 2 or 5 times a power of ten, the smallest
// such step giving at most n intervals, and the domain widened to multiples of it. Tick values are
// computed from integers (i·m/10^k), so 0.1 steps give 0.3, not 0.30000000000000004. An empty or
// non-finite range becomes [lo, lo+1]; values beyond ±10^300 are taken as ±10^300.
func Ticks(lo, hi float64, n int) Axis {
	// Far from zero, a range below the numbers' precision is widened, so ticks stay distinct and
	// their indexes fit an int64; the range is bounded so its width is finite.
	if !finite(lo) {
		lo = 0
	}
	if !finite(hi) || hi <= lo {
		hi = lo + 1
	}
	lo, hi = min(max(lo, -1e300), 1e300), min(max(hi, -1e300), 1e300)
	if span := max(math.Abs(lo), math.Abs(hi)) * 1e-9; hi-lo < span {
		hi = lo + span
	}
	n = max(n, 1)
	raw := (hi - lo) / float64(n)
	exp := int(math.Floor(math.Log10(raw)))
	var m int64
	for _, m = range []int64{1, 2, 5, 10} {
		if value(m, exp) >= raw {
			break
		}
	}
	if m == 10 {
		m, exp = 1, exp+1
	}
	// Ticks are i·m·10^exp for i in [first, last].
	first := int64(math.Floor(lo / value(m, exp)))
	last := int64(math.Ceil(hi / value(m, exp)))
	for value(first*m, exp) > lo { // guard against rounding in the divisions
		first--
	}
	for value(last*m, exp) < hi {
		last++
	}
	a := Axis{Lo: value(first*m, exp), Hi: value(last*m, exp)}
	prec := max(0, -exp)
	for i := first; i <= last; i++ {
		v := value(i*m, exp)
		a.Values = append(a.Values, v)
		a.Labels = append(a.Labels, label(v, prec))
	}
	return a
}

// LogTicks covers [lo, hi] (lo > 0) with whole decades, ticked at every power of ten and, across
// at most two decades, at 2 and 5 times each too. A range with no positive value becomes [1, 10].
func LogTicks(lo, hi float64) Axis {
	if !(lo > 0) || !finite(lo) {
		lo = 1
	}
	lo = min(max(lo, 1e-300), 1e300)
	if !finite(hi) || hi < lo {
		hi = lo
	}
	hi = min(hi, 1e300)
	e0, e1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	for value(1, e0) > lo { // guard against rounding in Log10
		e0--
	}
	for value(1, e1) < hi {
		e1++
	}
	if e1 == e0 {
		e1++
	}
	// Across many decades, tick every k-th power of ten only.
	k := (e1 - e0 + 9) / 10
	e0, e1 = floorTo(e0, k), -floorTo(-e1, k)
	a := Axis{Lo: value(1, e0), Hi: value(1, e1)}
	for e := e0; e <= e1; e += k {
		for _, m := range []int64{1, 2, 5} {
			if m > 1 && (e == e1 || e1-e0 > 2) {
				continue
			}
			v := value(m, e)
			a.Values = append(a.Values, v)
			a.Labels = append(a.Labels, label(v, max(0, -e)))
		}
	}
	return a
}

// floorTo rounds e down to a multiple of k.
func floorTo(e, k int) int {
	r := e % k
	if r < 0 {
		r += k
	}
	return e - r
}

// value is k·10^exp, rounded once.
func value(k int64, exp int) float64 {
	if exp < 0 {
		return float64(k) / math.Pow10(-exp)
	}
	return float64(k) * math.Pow10(exp)
}

// label formats a tick with prec decimals, with a k, M or G suffix from ten thousand on and in exponent
// form from 10^12 on, to keep labels short.
func label(v float64, prec int) string {
	switch a := math.Abs(v); {
	case a >= 1e12:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', -1, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if s == "-0" {
		s = "0"
	}
	return s
}

// esc escapes text for the SVG, which is XML inside HTML: markup characters as entities, and
// what XML cannot hold (invalid UTF-8, control characters) as U+FFFD.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}

// num formats an SVG coordinate with one decimal: enough for a screen, and short.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// svg builds the markup.
type svg struct{ strings.Builder }

func (b *svg) printf(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }
