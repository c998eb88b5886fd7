package timing

import (
	"math"
	"time"
)

// minDecodeMs is the reference's floor on any decode step.
const minDecodeMs = 1.0

// Fixed charges a constant prefill time to a pass that computes prompt tokens and a constant decode time
// (at least 1 ms) to a pass that samples tokens.
type Fixed struct {
	PrefillMs float64
	DecodeMs  float64
}

// Cost implements Model.
func (f Fixed) Cost(b *Batch) Cost {
	var c Cost
	if n, isl, prefix := b.Prefill(); n > 0 && isl > prefix {
		c.Prefill = ms(f.PrefillMs)
	}
	if n, _ := b.Sampling(); n > 0 {
		c.Decode = ms(math.Max(f.DecodeMs, minDecodeMs))
	}
	return c
}

// PlainPricer implements PlainModel: a plain pass samples and computes no prompt token.
func (f Fixed) PlainPricer() func(*PlainPass) Cost {
	return func(p *PlainPass) Cost {
		var c Cost
		if p.Requests > 0 {
			c.Decode = ms(math.Max(f.DecodeMs, minDecodeMs))
		}
		return c
	}
}

// Polynomial is Dynamo's default, uncalibrated model (reference §6):
//
//	prefill_ms = 4.209989e-07·T² + 1.518344e-02·T + 1.650142e+01, T = batch × (isl − prefix) new tokens, 0 if T = 0
//	decode_ms  = max(1, −25.74·x² + 54.01·x + 5.74), x = active KV tokens / total KV tokens
type Polynomial struct{}

// Cost implements Model.
func (Polynomial) Cost(b *Batch) Cost {
	var c Cost
	if n, isl, prefix := b.Prefill(); n > 0 && isl > prefix {
		// batch × (mean isl − mean prefix) is the number of new tokens.
		t := float64(isl - prefix)
		c.Prefill = ms(4.209989e-07*t*t + 1.518344e-02*t + 1.650142e+01)
	}
	if n, _ := b.Sampling(); n > 0 {
		x := 0.0
		if b.TotalKVTokens > 0 {
			x = math.Min(1, float64(b.ActiveKVTokens)/float64(b.TotalKVTokens))
		}
		c.Decode = ms(math.Max(-25.74*x*x+54.01*x+5.74, minDecodeMs))
	}
	return c
}

// HostOverhead adds the engine's host (CPU) time per request in a pass to a model's GPU time: the
// scheduler's per-request bookkeeping, sampling post-processing and output hand-off, which kernel
// measurements do not contain and which an engine does not fully hide behind the GPU. It goes to the
// decode part of a pass that samples tokens, else to its prefill part.
type HostOverhead struct {
	Model      Model
	PerRequest time.Duration
}

// Cost implements Model.
func (h HostOverhead) Cost(b *Batch) Cost {
	n, _ := b.Sampling()
	return h.withHost(h.Model.Cost(b), len(b.Seqs), n)
}

// withHost adds the host time of a pass of seqs requests, sampling of them, to its GPU time c.
func (h HostOverhead) withHost(c Cost, seqs, sampling int) Cost {
	host := nanos(float64(h.PerRequest) * float64(seqs))
	if sampling > 0 {
		c.Decode += host
	} else {
		c.Prefill += host
	}
	return c
}

// Scaled divides a model's times: all by Speedup, decode additionally by DecodeSpeedup. A ratio <= 0
// means 1 (unscaled), as in the reference; +Inf makes passes take no time.
type Scaled struct {
	Model         Model
	Speedup       float64
	DecodeSpeedup float64
}

// Cost implements Model.
func (s Scaled) Cost(b *Batch) Cost { return s.scaled(s.Model.Cost(b)) }

// scaled divides the model's cost c by the ratios.
func (s Scaled) scaled(c Cost) Cost {
	sp, dsp := ratio(s.Speedup), ratio(s.DecodeSpeedup)
	c.Prefill = scale(c.Prefill, sp)
	c.Decode = scale(c.Decode, sp*dsp)
	return c
}

func ratio(r float64) float64 {
	if r <= 0 || math.IsNaN(r) {
		return 1
	}
	return r
}

func scale(d time.Duration, r float64) time.Duration {
	if r == 1 {
		return d
	}
	return nanos(math.Round(float64(d) / r))
}
