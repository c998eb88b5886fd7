package planner

import (
	"fmt"
	"math"
	"time"

	"github.com/mocker-sim/mocker/timing"
)

// Perf is how one worker of a pool performs, for the throughput floor.
type Perf struct {
	Model    timing.Model // prices one rank's passes
	KVTokens int          // KV capacity of one rank, tokens
	Ranks    int          // data-parallel ranks per worker, each with its own KV; 0 means 1
}

func (p Perf) validate() error {
	switch {
	case p.Model == nil:
		return fmt.Errorf("no timing model")
	case p.KVTokens < 1:
		return fmt.Errorf("kv tokens %d: want >= 1", p.KVTokens)
	case p.Ranks < 0:
		return fmt.Errorf("ranks %d: want >= 0", p.Ranks)
	}
	return nil
}

func (p Perf) ranks() float64 { return float64(max(p.Ranks, 1)) }

// PrefillCapacity returns the requests per second one worker prefills with each batch finishing within
// ttft: the largest batch of k prompts of isl tokens, hitRate of them cached, whose prefill is priced
// within ttft and whose KV (k × isl) fits the rank, run back to back: k / prefill(k). If even one prompt
// takes longer than ttft, the worker cannot meet the target at any rate and its capacity is
// 1 / prefill(1), what it sustains serving prompts one at a time. A prompt that is fully cached costs
// nothing, and the capacity is +Inf.
//
// Batching is what a loaded vLLM or SGLang worker does; taking the largest batch within the target rather
// than the most efficient one keeps the number a plain "how much fits", like DecodeCapacity.
func PrefillCapacity(p Perf, isl, hitRate float64, ttft time.Duration) float64 {
	total := max(int(math.Round(isl)), 1)
	fresh := int(math.Round(isl * (1 - clamp01(hitRate))))
	if fresh <= 0 {
		return math.Inf(1)
	}
	fresh = min(fresh, total)
	b := timing.Batch{TotalKVTokens: p.KVTokens}
	cost := func(k int) time.Duration {
		b.Seqs = growSeqs(b.Seqs, k, timing.Seq{New: fresh, Cached: total - fresh, Prefill: true})
		b.ActiveKVTokens = min(k*total, p.KVTokens)
		return p.Model.Cost(&b).Prefill
	}
	k, d := largestWithin(max(p.KVTokens/total, 1), ttft, cost)
	if d <= 0 {
		return math.Inf(1)
	}
	return p.ranks() * float64(k) / d.Seconds()
}

// DecodeCapacity returns the requests per second one worker decodes within itl: the largest batch B of
// requests at the mean context isl + osl/2 whose decode step is priced within itl, with B × context KV
// tokens active, capped by the rank's KV capacity. The worker then emits B / step(B) tokens per second,
// and a request needs osl of them. (Pricing the step at B rather than charging the target itself counts
// the tokens the worker really produces; step(B) ≤ itl.) If even B = 1 exceeds itl, the capacity is
// 1 / (step(1) × osl): the target cannot be met, but the floor still counts throughput.
func DecodeCapacity(p Perf, isl, osl float64, itl time.Duration) float64 {
	osl = math.Max(osl, 1)
	ctx := max(int(math.Round(isl+osl/2)), 1)
	b := timing.Batch{TotalKVTokens: p.KVTokens}
	cost := func(n int) time.Duration {
		b.Seqs = growSeqs(b.Seqs, n, timing.Seq{New: 1, Cached: ctx - 1, Samples: true})
		b.ActiveKVTokens = min(n*ctx, p.KVTokens)
		return p.Model.Cost(&b).Decode
	}
	n, d := largestWithin(max(p.KVTokens/ctx, 1), itl, cost)
	if d <= 0 {
		return math.Inf(1)
	}
	return p.ranks() * float64(n) / d.Seconds() / osl
}

// AggCapacity combines an aggregated worker's prefill and decode capacities. The same GPU does both
// phases and the timing models price a pass as prefill time plus decode time, so a request's share of a
// worker's time is the sum of its shares in each phase: 1 / (1/prefill + 1/decode). This is tighter than
// min(prefill, decode), which would pretend the phases run on separate hardware.
func AggCapacity(prefill, decode float64) float64 {
	return 1 / (1/prefill + 1/decode) // an infinite phase costs nothing: 1/Inf = 0
}

// largestWithin returns the largest n in [1, limit] whose cost is within target, and that cost. It
// assumes cost does not fall as n grows (more work never takes less time), so it doubles to bracket the
// answer and bisects, pricing O(log limit) batches. If even n = 1 exceeds the target it returns 1.
func largestWithin(limit int, target time.Duration, cost func(int) time.Duration) (int, time.Duration) {
	best, bestCost := 1, cost(1)
	if bestCost > target {
		return best, bestCost
	}
	lo, hi := 1, 2 // cost(lo) within target; hi is the next candidate
	for hi <= limit {
		c := cost(hi)
		if c > target {
			break
		}
		best, bestCost, lo = hi, c, hi
		hi *= 2
	}
	hi = min(hi, limit+1) // cost(hi) exceeds target, or hi is past the limit
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if c := cost(mid); c <= target {
			best, bestCost, lo = mid, c, mid
		} else {
			hi = mid
		}
	}
	return best, bestCost
}

// growSeqs returns n copies of s, reusing buf, which holds only copies of s.
func growSeqs(buf []timing.Seq, n int, s timing.Seq) []timing.Seq {
	for len(buf) < n {
		buf = append(buf, s)
	}
	return buf[:n]
}

// floor returns the workers pool needs for traffic t, before clamping, and the per-worker capacity.
func floorFor(pool Pool, p Perf, t Traffic, ttft, itl time.Duration) (workers int, capacity float64) {
	switch pool {
	case Prefill:
		capacity = PrefillCapacity(p, t.ISL, t.HitRate, ttft)
	case Decode:
		capacity = DecodeCapacity(p, t.ISL, t.OSL, itl)
	default:
		capacity = AggCapacity(PrefillCapacity(p, t.ISL, t.HitRate, ttft), DecodeCapacity(p, t.ISL, t.OSL, itl))
	}
	return ceilWorkers(t.Rate / capacity), capacity
}

// ceilWorkers rounds a fractional worker count up, forgiving float noise: 3.0000000001 workers is 3.
func ceilWorkers(x float64) int {
	if !(x > 0) { // also NaN
		return 0
	}
	if x > 1e9 {
		return 1e9
	}
	return int(math.Ceil(x - 1e-9))
}

func clamp01(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return math.Min(x, 1)
}
