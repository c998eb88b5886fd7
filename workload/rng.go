package workload

import (
	"math"
	"math/rand/v2"
)

// Random streams of the synthetic generator, one per concern, so that a
// change in how one concern draws (say, a stddev set to 0, which stops the
// draws) moves nothing in the others.
const (
	streamArrivals uint64 = iota + 1
	streamInput
	streamOutput
	streamGroups
	streamDelays
	streamUniqueTokens  // salt of request-unique tokens
	streamPrefixTokens  // seed of shared-prefix tokens
	streamDatasetOrder  // seed of a dataset pool's shuffle and random orders
	streamDatasetTokens // salt of a dataset pool's entry tokens
	streamLoRA          // seed of the requests' adapters
	streamImagePick     // which pool image each synthetic image is
	streamImageKeys     // seed of synthetic images' keys
)

// streamSeed derives the 64-bit seed of one stream from the workload seed.
func streamSeed(seed, stream uint64) uint64 {
	return mix64(seed ^ mix64(stream*golden))
}

// newStream returns the random source of one stream.
func newStream(seed, stream uint64) *rand.Rand {
	s := streamSeed(seed, stream)
	return rand.New(rand.NewPCG(s, mix64(s+golden)))
}

// gammaVariate draws from Gamma(shape k, scale 1) by Marsaglia and Tsang's
// method (ACM TOMS 26(3), 2000), boosting k < 1 with U^(1/k).
func gammaVariate(r *rand.Rand, k float64) float64 {
	if k < 1 {
		return gammaVariate(r, k+1) * math.Pow(r.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
