package router

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSoftmaxFrequencies checks the sampler against its formula (reference §10):
// p_i ∝ exp(−(logit_i − min)/((max − min)·T)).
func TestSoftmaxFrequencies(t *testing.T) {
	for _, tc := range []struct {
		logits []float64
		temp   float64
	}{
		{[]float64{10, 12, 20}, 0.5},
		{[]float64{10, 12, 20}, 1},
		{[]float64{3, 3, 4}, 2},
		{[]float64{5, 5, 5}, 1}, // all equal: uniform
	} {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, l := range tc.logits {
			lo, hi = min(lo, l), max(hi, l)
		}
		want := make([]float64, len(tc.logits))
		sum := 0.0
		for i, l := range tc.logits {
			want[i] = 1
			if hi > lo {
				want[i] = math.Exp(-(l - lo) / ((hi - lo) * tc.temp))
			}
			sum += want[i]
		}
		rng := rand.New(rand.NewPCG(42, streamRouter))
		const n = 100_000
		counts := make([]int, len(tc.logits))
		for range n {
			counts[sample(rng, tc.logits, tc.temp)]++
		}
		for i := range want {
			if got := float64(counts[i]) / n; math.Abs(got-want[i]/sum) > 0.01 {
				t.Errorf("logits %v T=%v: target %d drawn %.4f, want %.4f", tc.logits, tc.temp, i, got, want[i]/sum)
			}
		}
	}
}
