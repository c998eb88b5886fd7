package outlen

import (
	"math"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, s := range []string{"fixed", "uniform", "lognormal:200:0.5", "lognormal:1:0"} {
		m, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if got := m.String(); got != s {
			t.Errorf("Parse(%q).String() = %q", s, got)
		}
	}
	for s, want := range map[string]string{
		"":                   `unknown distribution ""`,
		"normal":             `unknown distribution "normal"`,
		"uniform:3":          "uniform takes no parameters",
		"lognormal:200":      "want lognormal:MEAN:SIGMA",
		"lognormal:0:1":      `MEAN "0" must be`,
		"lognormal:NaN:1":    `MEAN "NaN" must be`,
		"lognormal:100:-1":   `SIGMA "-1" must be`,
		"lognormal:100:x":    `SIGMA "x" must be`,
		"lognormal:1e300:.1": `MEAN "1e300" must be`,
	} {
		if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", s, err, want)
		}
	}
}

func TestDraw(t *testing.T) {
	var zero Model
	if got := zero.Draw(1, 2, 77); got != 77 {
		t.Fatalf("fixed: %d, want 77", got)
	}
	u, _ := Parse("uniform")
	// Keyed: the same (seed, key) gives the same length; the lengths cover [1, max] evenly.
	counts := make([]int, 5)
	for k := range uint64(5000) {
		n := u.Draw(7, k, 5)
		if n != u.Draw(7, k, 5) {
			t.Fatalf("key %d: two draws differ", k)
		}
		if n < 1 || n > 5 {
			t.Fatalf("key %d: %d outside [1, 5]", k, n)
		}
		counts[n-1]++
	}
	for i, c := range counts {
		if c < 800 || c > 1200 { // 1000 expected; binomial sd 28
			t.Errorf("uniform: length %d drawn %d times of 5000, want about 1000", i+1, c)
		}
	}
	if u.Draw(7, 1, 1) != 1 {
		t.Fatal("max_tokens 1 must give 1")
	}
	l, _ := Parse("lognormal:100:0.5")
	var sum float64
	const n = 20000
	for k := range uint64(n) {
		sum += float64(l.Draw(3, k, 1<<20))
	}
	if mean := sum / n; math.Abs(mean-100) > 3 { // sd of the mean ~0.38
		t.Errorf("lognormal:100:0.5: mean %.2f, want 100 ± 3", mean)
	}
	if got := l.Draw(3, 0, 10); got > 10 {
		t.Errorf("lognormal clipped to 10: got %d", got)
	}
	d, _ := Parse("lognormal:50:0")
	if got := d.Draw(1, 1, 1000); got != 50 {
		t.Errorf("lognormal:50:0 = %d, want 50", got)
	}
}
