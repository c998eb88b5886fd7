// Package outlen is the output-length model of requests that may stop early: a real model ends a
// response when it samples its end-of-sequence token, long before max_tokens as often as not, and
// clients (finish_reason "stop"), routers and autoscalers see the difference. A request with
// ignore_eos (vLLM's extension) always generates max_tokens.
//
// A Model draws a length in [1, max_tokens] from a distribution given as text (--output-length-dist):
//
//	fixed                 max_tokens, always (finish_reason "length"; mocker's behaviour before the model)
//	uniform               uniform on [1, max_tokens]
//	lognormal:MEAN:SIGMA  a log-normal length of mean MEAN tokens whose logarithm has standard deviation
//	                      SIGMA (mu = ln MEAN − SIGMA²/2), rounded, clipped to [1, max_tokens]
//
// A length reaching max_tokens ends with "length", a shorter one with "stop". Draws are keyed, not
// sequential: the same key (a seed and the request's content) gives the same length whatever order
// requests come in.
package outlen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// MaxMean bounds a lognormal mean: no request generates more tokens than a trace row may hold.
const MaxMean = 1 << 24

// Model is an output-length distribution. The zero Model is fixed.
type Model struct {
	kind        kind
	mean, sigma float64
	mu          float64
}

type kind uint8

const (
	fixed kind = iota
	uniform
	lognormal
)

// Parse reads a distribution: fixed, uniform, or lognormal:MEAN:SIGMA.
func Parse(s string) (Model, error) {
	name, args, _ := strings.Cut(strings.TrimSpace(s), ":")
	switch name {
	case "fixed", "uniform":
		if args != "" {
			return Model{}, fmt.Errorf("output length %q: %s takes no parameters", s, name)
		}
		if name == "uniform" {
			return Model{kind: uniform}, nil
		}
		return Model{}, nil
	case "lognormal":
		a, b, ok := strings.Cut(args, ":")
		if !ok {
			return Model{}, fmt.Errorf("output length %q: want lognormal:MEAN:SIGMA", s)
		}
		mean, err := strconv.ParseFloat(a, 64)
		if err != nil || !(mean >= 1 && mean <= MaxMean) {
			return Model{}, fmt.Errorf("output length %q: MEAN %q must be a number of tokens in [1, %d]", s, a, MaxMean)
		}
		sigma, err := strconv.ParseFloat(b, 64)
		if err != nil || !(sigma >= 0 && sigma <= 10) {
			return Model{}, fmt.Errorf("output length %q: SIGMA %q must be a number in [0, 10]", s, b)
		}
		return Model{kind: lognormal, mean: mean, sigma: sigma, mu: math.Log(mean) - sigma*sigma/2}, nil
	}
	return Model{}, fmt.Errorf("output length %q: unknown distribution %q (want fixed, uniform or lognormal:MEAN:SIGMA)", s, name)
}

// String is the distribution as Parse reads it.
func (m Model) String() string {
	switch m.kind {
	case uniform:
		return "uniform"
	case lognormal:
		return "lognormal:" + strconv.FormatFloat(m.mean, 'g', -1, 64) + ":" + strconv.FormatFloat(m.sigma, 'g', -1, 64)
	}
	return "fixed"
}

// Draw returns the length of the output keyed by (seed, key), at most maxTokens (>= 1).
func (m Model) Draw(seed, key uint64, maxTokens int) int {
	if maxTokens <= 1 || m.kind == fixed {
		return max(maxTokens, 1)
	}
	r := rand.New(rand.NewPCG(seed, key))
	switch m.kind {
	case uniform:
		return 1 + r.IntN(maxTokens)
	}
	x := math.Exp(m.mu + m.sigma*r.NormFloat64())
	if !(x < float64(maxTokens)) { // also +Inf
		return maxTokens
	}
	return max(int(math.Round(x)), 1)
}
