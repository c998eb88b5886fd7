package workload

import (
	"fmt"
	"testing"
)

// TestSyntheticLoRAs: --lora-adapters names an adapter per session (its turns share it), drawn from the
// seed alone (exact counts pinned; uniform near n/N, zipf near 1/(k+1)), and leaves every other draw as it
// was without adapters.
func TestSyntheticLoRAs(t *testing.T) {
	base := SyntheticOptions{NumRequests: 4000, Input: Length{Mean: 100, Stddev: 20}, Output: Length{Mean: 10}, RequestRate: 10, TurnsPerSession: 2, Seed: 7}
	plain := collect(t, mustSynthetic(t, base))
	for _, c := range []struct {
		dist string
		want string
	}{
		{"uniform", "[954 997 993 1056]"},
		{"zipf", "[1874 953 667 506]"},
	} {
		o := base
		o.LoRAAdapters, o.LoRADist = 4, c.dist
		sessions := collect(t, mustSynthetic(t, o))
		counts := make([]int, 4)
		for i, s := range sessions {
			first := s.Turns[0].LoRA
			var k int
			if _, err := fmt.Sscanf(first, "lora-%d", &k); err != nil || k < 0 || k > 3 {
				t.Fatalf("%s: session %d: adapter %q", c.dist, i, first)
			}
			counts[k]++
			for j, r := range turns(s) {
				p := plain[i].Turn(j)
				if r.LoRA != first || r.InputLen != p.InputLen || r.OutputLen != p.OutputLen || r.At != p.At {
					t.Fatalf("%s: session %d turn %d: %+v, want adapter %q and the plain run's %+v", c.dist, i, j, r, first, p)
				}
			}
		}
		if got := fmt.Sprint(counts); got != c.want {
			t.Errorf("%s: sessions per adapter %s, want %s", c.dist, got, c.want)
		}
	}
	for _, s := range plain {
		if s.Turns[0].LoRA != "" {
			t.Fatalf("without adapters: %q", s.Turns[0].LoRA)
		}
	}
	for _, c := range []struct {
		n    int
		dist string
		err  string
	}{
		{-1, "", "synthetic: lora-adapters: must be in [0, 65536], got -1"},
		{0, "zipf", `synthetic: lora-dist: "zipf" needs lora-adapters > 0`},
		{2, "pareto", `synthetic: lora-dist: unknown distribution "pareto" (want uniform or zipf)`},
	} {
		o := base
		o.LoRAAdapters, o.LoRADist = c.n, c.dist
		if _, err := NewSynthetic(o); err == nil || err.Error() != c.err {
			t.Errorf("%d %q: %v, want %s", c.n, c.dist, err, c.err)
		}
	}
}

func mustSynthetic(t *testing.T, o SyntheticOptions) Source {
	t.Helper()
	src, err := NewSynthetic(o)
	if err != nil {
		t.Fatal(err)
	}
	return src
}
