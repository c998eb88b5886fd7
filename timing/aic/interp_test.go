package aic

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

// TestSegNear: from any guess, in range or not, segNear finds what seg finds, and keeps it as the next
// guess; a nil guess is seg.
func TestSegNear(t *testing.T) {
	xs := []float64{1, 2, 4, 8, 16, 32, 33}
	for _, v := range []float64{-1, 0, 1, 1.5, 2, 3.999, 4, 7, 8, 16, 31, 32, 32.5, 33, 40} {
		wi, wt := seg(xs, v)
		for guess := -2; guess <= len(xs)+1; guess++ {
			h := guess
			if i, tp := segNear(xs, v, &h); i != wi || tp != wt || h != wi {
				t.Errorf("segNear(%v) from %d = %d, %v (guess now %d), want %d, %v", v, guess, i, tp, h, wi, wt)
			}
		}
		if i, tp := segNear(xs, v, nil); i != wi || tp != wt {
			t.Errorf("segNear(%v, nil) = %d, %v, want %d, %v", v, i, tp, wi, wt)
		}
	}
}

func TestSeg(t *testing.T) {
	xs := []float64{1, 2, 4, 8}
	for _, tc := range []struct {
		v     float64
		i     int
		tpos  float64
		label string
	}{
		{1, 0, 0, "first point"},
		{1.5, 0, 0.5, "inside first"},
		{2, 0, 1, "knot"}, // either adjacent segment is right; the lower one is returned
		{3, 1, 0.5, "inside"},
		{8, 2, 1, "last point"},
		{0.5, 0, -0.5, "below"},
		{16, 2, 3, "above"},
	} {
		i, tp := seg(xs, tc.v)
		if (i != tc.i || !near(tp, tc.tpos, 1e-12)) && !(tc.v == 2 && i == 1 && tp == 0) {
			t.Errorf("seg(%v) [%s] = %d, %v, want %d, %v", tc.v, tc.label, i, tp, tc.i, tc.tpos)
		}
	}
	if i, tp := seg([]float64{3}, 7); i != 0 || tp != 0 {
		t.Errorf("seg of one point = %d, %v, want 0, 0", i, tp)
	}
}

// A curve returns measured points exactly, is monotone between points where the data is, and
// beyond the data scales the boundary utilisation by the roofline.
func TestCurve(t *testing.T) {
	x := []float64{1, 16, 256, 4096}
	y := []float64{0.01, 0.012, 0.05, 0.9}
	sol := func(v float64) float64 { return 1e-4 * v } // a roofline linear in x
	for _, sqrt := range []bool{false, true} {
		c := newCurve(x, y, sol, 1, sqrt)
		for i := range x {
			if got := c.at(x[i], sol(x[i])); got != y[i] {
				t.Errorf("sqrt=%v: at(%v) = %v, want the measured %v", sqrt, x[i], got, y[i])
			}
		}
		prev := 0.0
		for v := 1.0; v <= 4096; v *= 1.01 {
			got := c.at(v, sol(v))
			if got < prev {
				t.Fatalf("sqrt=%v: at(%v) = %v < %v: not monotone over monotone data", sqrt, v, got, prev)
			}
			prev = got
		}
		// Above: util at 4096 is 0.4096/0.9; at 8192 the roofline doubles, so the latency does.
		if got, want := c.at(8192, sol(8192)), 1.8; !near(got, want, 1e-12) {
			t.Errorf("sqrt=%v: at(8192) = %v, want %v (boundary util held)", sqrt, got, want)
		}
		// Below: util at 1 is 1e-4/0.01; at 0.5 the latency halves.
		if got, want := c.at(0.5, sol(0.5)), 0.005; !near(got, want, 1e-12) {
			t.Errorf("sqrt=%v: at(0.5) = %v, want %v", sqrt, got, want)
		}
	}
	// Sqrt blending is exact for a quadratic.
	q := func(v float64) float64 { return (1 + v) * (1 + v) }
	c := newCurve([]float64{0, 10}, []float64{q(0), q(10)}, sol, 1, true)
	if got := c.at(4, 0); !near(got, q(4), 1e-12) {
		t.Errorf("sqrt curve at 4 = %v, want %v", got, q(4))
	}
}

func TestEdgeUtilMedian(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5}
	y := []float64{1, 1, 1, 1, 10} // a saw-tooth end point
	sol := func(v float64) float64 { return v }
	c := newCurve(x, y, sol, 3, false)
	// Utils of the last three points are 3, 4, 0.5: the median 3 ignores the outlier.
	if c.utilHi != 3 {
		t.Errorf("utilHi = %v, want 3", c.utilHi)
	}
	if c.utilLo != 2 { // utils 1, 2, 3
		t.Errorf("utilLo = %v, want 2", c.utilLo)
	}
}

func TestTable1(t *testing.T) {
	tb := table1{x: []float64{1, 2, 4}, y: []float64{10, 20, 25}}
	for _, tc := range []struct{ v, want float64 }{
		{1, 10}, {2, 20}, {4, 25}, // knots
		{1.5, 15}, {3, 22.5}, // linear between
		{8, 35},   // linear beyond the last knot
		{0.5, 10}, // held below the first
	} {
		if got := tb.at(tc.v); !near(got, tc.want, 1e-12) {
			t.Errorf("at(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

// testGEMM builds a GEMM table on an n × k grid of sites whose utilisation is known.
func testGEMM(t *testing.T) *gemmData {
	t.Helper()
	rf := &roofline{flops: map[string]float64{"bfloat16": 1e15}, memBW: 4e12, effBW: 3.2e12}
	g := &gemmData{dtype: "bfloat16", flops: 1e15, elem: 2, rf: rf, sites: map[[2]float64]*gemmSite{}}
	ms := []float64{1, 8, 64, 512, 4096}
	for _, n := range []float64{1024, 4096} {
		for _, k := range []float64{1024, 4096} {
			util := 0.5
			if n == 4096 && k == 4096 {
				util = 0.8
			}
			lat := make([]float64, len(ms))
			for i, m := range ms {
				lat[i] = g.sol(m, n, k) / util
			}
			sol := func(m float64) float64 { return g.sol(m, n, k) }
			g.sites[[2]float64{n, k}] = &gemmSite{n: n, k: k, c: newCurve(ms, lat, sol, 3, false)}
		}
	}
	g.ns, g.ks, g.ms = []float64{1024, 4096}, []float64{1024, 4096}, ms
	return g
}

func TestGEMMLatency(t *testing.T) {
	g := testGEMM(t)
	// On a site and on a measured m: the measurement.
	if got, want := g.latency(64, 4096, 4096), g.sol(64, 4096, 4096)/0.8; !near(got, want, 1e-12) {
		t.Errorf("on-site = %v, want %v", got, want)
	}
	// Between sites, utilisation blends bilinearly in log n, log k: halfway in both (n = k = 2048)
	// is 3/4 · 0.5 + 1/4 · 0.8.
	if got, want := g.latency(64, 2048, 2048), g.sol(64, 2048, 2048)/(0.75*0.5+0.25*0.8); !near(got, want, 1e-12) {
		t.Errorf("off-site = %v, want %v", got, want)
	}
	// Beyond the n range the edge sites' utilisation is held and the roofline carries the shape.
	if got, want := g.latency(64, 16384, 4096), g.sol(64, 16384, 4096)/0.8; !near(got, want, 1e-12) {
		t.Errorf("beyond n = %v, want %v", got, want)
	}
	// Beyond the m sweep: boundary utilisation, roofline growth.
	if got, want := g.latency(65536, 4096, 4096), g.sol(65536, 4096, 4096)/0.8; !near(got, want, 1e-12) {
		t.Errorf("beyond m = %v, want %v", got, want)
	}
	// Monotone in m where every site is.
	prev := 0.0
	for m := 1.0; m < 1e5; m *= 1.05 {
		v := g.latency(m, 3000, 1500)
		if v < prev {
			t.Fatalf("latency(%v) = %v < %v: not monotone", m, v, prev)
		}
		prev = v
	}
}

func TestCompareVersions(t *testing.T) {
	ordered := []string{"0.1.dev19262", "0.5.6rc1", "0.5.6", "0.5.6.post2", "0.5.9", "0.5.10", "0.5.14", "0.14.0", "0.24.0", "2.23", "2.26.2"}
	for i := 1; i < len(ordered); i++ {
		if c := compareVersions(ordered[i-1], ordered[i]); c >= 0 {
			t.Errorf("compareVersions(%q, %q) = %d, want < 0", ordered[i-1], ordered[i], c)
		}
	}
	if c := compareVersions("0.24.0", "0.24.0"); c != 0 {
		t.Errorf("compareVersions of equal versions = %d", c)
	}
}

func TestNearestVersion(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"0.14.0", "0.18.0", "0.24.0", ".cache"} {
		if err := os.MkdirAll(filepath.Join(root, "h200_sxm", "gemm", "vllm", v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for want, exp := range map[string]string{
		"":       "",       // the model's default
		"0.18.0": "0.18.0", // present
		"0.12.0": "0.14.0", // older than all: the oldest newer one
		"0.16.0": "0.18.0", // between: the next newer one
		"0.19.0": "0.24.0",
		"0.30.0": "0.24.0", // newer than all: the newest
	} {
		got, err := NearestVersion(root, "h200_sxm", "vllm", want)
		if err != nil || got != exp {
			t.Errorf("NearestVersion(%q) = %q, %v; want %q", want, got, err, exp)
		}
	}
	if _, err := NearestVersion(root, "h200_sxm", "sglang", "0.5.6"); err == nil {
		t.Error("NearestVersion for a backend with no versions: no error")
	}
}
