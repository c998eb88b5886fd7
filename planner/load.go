package planner

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/sched"
)

// PassSample is one forward pass of an engine, as the planner sees it: its forward-pass metrics and how
// long it took.
type PassSample struct {
	FPM  sched.ForwardPass
	Wall time.Duration
}

// minFitPasses is the fewest passes an engine's fit is trusted on; fewer and the load step holds.
const minFitPasses = 5

// fit models an engine's pass wall time, in seconds, as linear in its prefill tokens p and decode KV
// tokens d, in centered form around the window's means:
//
//	wall(p, d) = meanY + b·(p − meanP) + c·(d − meanD)
//
// A slope is known when its variable varied in the window (least squares, 2-D for an aggregated engine).
// When it did not, the data says nothing about the slope except that latency does not fall with load,
// so the slope lies in [0, ∞): the estimate away from the observed value is then a one-sided bound.
// Slopes are never negative: a noisy fit that says more work is faster is clamped to 0.
type fit struct {
	n                   int
	meanY, meanP, meanD float64
	b, c                float64
	bKnown, cKnown      bool
}

// fitPasses fits wall time against the variables the pool's engines work on: prefill tokens, decode KV
// tokens, or both for an aggregated engine.
func fitPasses(samples []PassSample, usePrefill, useDecode bool) fit {
	f := fit{n: len(samples)}
	if f.n == 0 {
		return f
	}
	for _, s := range samples {
		f.meanY += s.Wall.Seconds()
		f.meanP += float64(s.FPM.SumPrefillTokens)
		f.meanD += float64(s.FPM.SumDecodeKVTokens)
	}
	n := float64(f.n)
	f.meanY, f.meanP, f.meanD = f.meanY/n, f.meanP/n, f.meanD/n
	var spp, sdd, spd, spy, sdy float64
	for _, s := range samples {
		p := float64(s.FPM.SumPrefillTokens) - f.meanP
		d := float64(s.FPM.SumDecodeKVTokens) - f.meanD
		y := s.Wall.Seconds() - f.meanY
		spp += p * p
		sdd += d * d
		spd += p * d
		spy += p * y
		sdy += d * y
	}
	// Token counts are integers, so a variable that varied at all over n ≥ 2 passes has a centered sum
	// of squares of at least (n−1)/n ≥ 1/2; anything far below that is rounding noise of a constant.
	varP := usePrefill && spp > 0.25
	varD := useDecode && sdd > 0.25
	one := func(sxy, sxx float64) float64 { return math.Max(sxy/sxx, 0) }
	switch {
	case varP && varD:
		det := spp*sdd - spd*spd
		if det > 1e-9*spp*sdd { // not collinear
			f.b = (sdd*spy - spd*sdy) / det
			f.c = (spp*sdy - spd*spy) / det
			f.bKnown, f.cKnown = true, true
			switch {
			case f.b < 0 && f.c < 0:
				f.b, f.c = 0, 0
			case f.b < 0: // refit without the prefill term
				f.b, f.c = 0, one(sdy, sdd)
			case f.c < 0:
				f.b, f.c = one(spy, spp), 0
			}
			break
		}
		// p and d moved together, so the window cannot tell their costs apart: explain the time by
		// prefill alone and keep the decode slope unknown.
		f.b, f.bKnown = one(spy, spp), true
	case varP:
		f.b, f.bKnown = one(spy, spp), true
	case varD:
		f.c, f.cKnown = one(sdy, sdd), true
	}
	return f
}

// span is an estimate that may be only bounded: the true value lies in [lo, hi], hi possibly +Inf.
type span struct{ lo, hi float64 }

// at estimates the wall time of a pass with p prefill tokens and d decode KV tokens.
func (f fit) at(p, d float64) span {
	s := span{f.meanY, f.meanY}
	term := func(known bool, slope, dx float64) {
		switch {
		case known:
			s.lo += slope * dx
			s.hi += slope * dx
		case math.Abs(dx) < 0.5: // the value seen, within a token
		case dx > 0: // more load than seen: at least as slow
			s.hi = math.Inf(1)
		default: // less load than seen: at most as slow
			s.lo = math.Inf(-1)
		}
	}
	term(f.bKnown, f.b, p-f.meanP)
	term(f.cKnown, f.c, d-f.meanD)
	s.lo = math.Max(s.lo, 0) // a pass takes no negative time
	s.hi = math.Max(s.hi, s.lo)
	return s
}

// engineState is what the load step knows about one engine.
type engineState int

const (
	engineFitted engineState = iota // enough passes to estimate
	engineIdle                      // no passes in the window: not overloaded, counts as below target
	engineSparse                    // some passes, too few to fit: the step holds
)

// estimate is one engine's estimated latencies, in seconds.
type estimate struct {
	state     engineState
	passes    int
	ttft, itl span
}

// estimateEngine fits an engine's window and estimates what a request arriving now would see: its TTFT
// is one pass prefilling the queued prompts and its own (both at the window's miss rate, since the
// queue has not been matched against the cache yet) with the current decode load; its ITL is a pass at
// the window's mean prefill and current decode load. "Current" loads are the window's means over the
// passes, so one quiet moment at the tick does not decide; preempted requests waiting to resume count as
// decode load, since they will be back.
func estimateEngine(pool Pool, samples []PassSample, isl, hitRate float64) estimate {
	e := estimate{passes: len(samples)}
	switch {
	case len(samples) == 0:
		e.state = engineIdle
		return e
	case len(samples) < minFitPasses:
		e.state = engineSparse
		return e
	}
	f := fitPasses(samples, pool != Decode, pool != Prefill)
	var queuedP, queuedD float64
	for _, s := range samples {
		queuedP += float64(s.FPM.SumQueuedPrefillTokens)
		queuedD += float64(s.FPM.SumQueuedDecodeTokens)
	}
	n := float64(len(samples))
	queuedP, queuedD = queuedP/n, queuedD/n
	miss := 1 - clamp01(hitRate)
	decodeLoad := f.meanD + queuedD
	if pool == Prefill {
		decodeLoad = f.meanD // a prefill engine decodes nothing; keep the unused term at its mean
	}
	prefillLoad := (queuedP + isl) * miss
	e.ttft = f.at(prefillLoad, decodeLoad)
	e.itl = f.at(f.meanP, decodeLoad)
	return e
}

// loadVote is the load step's verdict for a pool: +1, −1 or 0, and why.
func loadVote(pool Pool, ests []estimate, ttftTarget, itlTarget time.Duration, sensitivity float64) (int, string) {
	if len(ests) == 0 {
		return 0, "load: no ready workers to observe"
	}
	for i, e := range ests {
		if e.state == engineSparse {
			return 0, fmt.Sprintf("load: worker %d had %d passes, too few to fit (want %d)", i, e.passes, minFitPasses)
		}
	}
	ttft, itl := ttftTarget.Seconds(), itlTarget.Seconds()
	// above: the estimate is surely over the target; below: surely under target × sensitivity. An idle
	// engine is below everything and above nothing.
	above := func(get func(estimate) span, target float64) bool {
		for _, e := range ests {
			if e.state == engineIdle || !(get(e).lo > target) {
				return false
			}
		}
		return true
	}
	below := func(get func(estimate) span, target float64) bool {
		for _, e := range ests {
			if e.state != engineIdle && !(get(e).hi < target*sensitivity) {
				return false
			}
		}
		return true
	}
	getTTFT := func(e estimate) span { return e.ttft }
	getITL := func(e estimate) span { return e.itl }
	useTTFT, useITL := pool != Decode, pool != Prefill
	var summary []string
	if useTTFT {
		summary = append(summary, "ttft "+describe(ests, getTTFT, ttftTarget))
	}
	if useITL {
		summary = append(summary, "itl "+describe(ests, getITL, itlTarget))
	}
	what := strings.Join(summary, ", ")
	all := fmt.Sprintf("all %d workers", len(ests))
	if len(ests) == 1 {
		all = "the 1 worker"
	}
	switch {
	// An aggregated pool scales up if either phase is overloaded everywhere, down only if both are
	// underloaded everywhere (Dynamo's planner design, aggregated mode).
	case useTTFT && above(getTTFT, ttft):
		return +1, fmt.Sprintf("load +1: TTFT above target on %s (%s)", all, what)
	case useITL && above(getITL, itl):
		return +1, fmt.Sprintf("load +1: ITL above target on %s (%s)", all, what)
	case (!useTTFT || below(getTTFT, ttft)) && (!useITL || below(getITL, itl)):
		return -1, fmt.Sprintf("load -1: below target × %g on %s (%s)", sensitivity, all, what)
	}
	return 0, fmt.Sprintf("load hold: %s", what)
}

// describe summarises a pool's estimates of one latency: the range over the fitted engines and the
// target, e.g. "310ms..620ms vs 500ms"; bounds print as ">310ms" or "<620ms".
func describe(ests []estimate, get func(estimate) span, target time.Duration) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	idle := 0
	for _, e := range ests {
		if e.state == engineIdle {
			idle++
			continue
		}
		s := get(e)
		lo, hi = math.Min(lo, s.lo), math.Max(hi, s.hi)
	}
	var r string
	switch {
	case math.IsInf(lo, 1): // every engine idle
		r = "idle"
	case lo == hi:
		r = secs(lo)
	case math.IsInf(hi, 1):
		r = ">" + secs(lo)
	case lo == 0:
		r = "<" + secs(hi)
	default:
		r = secs(lo) + ".." + secs(hi)
	}
	if idle > 0 && !math.IsInf(lo, 1) {
		r += fmt.Sprintf(", %d idle", idle)
	}
	return r + " vs " + target.String()
}

// secs prints seconds as a rounded duration.
func secs(s float64) string {
	return time.Duration(s * 1e9).Round(100 * time.Microsecond).String()
}
