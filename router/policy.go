package router

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Policy chooses the target of a request.
type Policy uint8

const (
	// RoundRobin sends requests to the targets in turn, in the order they were added.
	RoundRobin Policy = iota
	// Random picks a target uniformly with the router's seeded generator.
	Random
	// KV is Dynamo's KV-aware selector: the lowest cost of prefill work left after the cached prefix plus
	// active blocks (reference §10).
	KV
	// LeastLoaded picks the target with the fewest active requests, the first added on a tie.
	LeastLoaded
)

var policyNames = [...]string{RoundRobin: "round-robin", Random: "random", KV: "kv", LeastLoaded: "least-loaded"}

func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", p)
}

// ParsePolicy parses a router flag value: kv (also the empty string, as in DefaultOptions), round-robin,
// random or least-loaded.
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return KV, nil
	}
	for p, name := range policyNames {
		if s == name {
			return Policy(p), nil
		}
	}
	return 0, fmt.Errorf("router %q: want kv, round-robin, random or least-loaded", s)
}

// QueuePolicy orders the requests waiting for a target that is not busy.
type QueuePolicy uint8

const (
	// FCFS serves the earliest arrival first.
	FCFS QueuePolicy = iota
	// LCFS serves the latest arrival first.
	LCFS
	// WSPT (weighted shortest processing time) serves the fewest new prefill tokens first: the prompt
	// less the longest cached prefix any target had when the request arrived; ties by arrival.
	WSPT
)

var queuePolicyNames = [...]string{FCFS: "fcfs", LCFS: "lcfs", WSPT: "wspt"}

func (q QueuePolicy) String() string {
	if int(q) < len(queuePolicyNames) {
		return queuePolicyNames[q]
	}
	return fmt.Sprintf("QueuePolicy(%d)", q)
}

// ParseQueuePolicy parses a router-queue-policy flag value: fcfs (also the empty string), lcfs or wspt.
func ParseQueuePolicy(s string) (QueuePolicy, error) {
	if s == "" {
		return FCFS, nil
	}
	for q, name := range queuePolicyNames {
		if s == name {
			return QueuePolicy(q), nil
		}
	}
	return 0, fmt.Errorf("router-queue-policy %q: want fcfs, lcfs or wspt", s)
}

// choose returns the index (in target order) of req's target. The KV policy leaves the overlaps it
// computed in r.ov.
func (r *Router) choose(req *request) int {
	switch r.o.Policy {
	case RoundRobin:
		i := r.next % len(r.targets)
		r.next = i + 1
		return i
	case Random:
		return r.rng.IntN(len(r.targets))
	case LeastLoaded:
		best := 0
		for i, t := range r.targets {
			if t.requests < r.targets[best].requests {
				best = i
			}
		}
		return best
	}
	return r.chooseKV(req)
}

// chooseKV computes every target's cost and picks one (reference §10).
func (r *Router) chooseKV(req *request) int {
	logits := r.logits(req)
	if r.o.Temperature > 0 {
		return sample(r.rng, logits, r.o.Temperature)
	}
	// Argmin; ties go to the smaller cache (the target with less to lose), then to a seeded draw.
	ties := r.ties[:0]
	for i, l := range logits {
		switch {
		case len(ties) == 0 || l < logits[ties[0]]:
			ties = append(ties[:0], i)
		case l == logits[ties[0]]:
			ties = append(ties, i)
		}
	}
	if len(ties) > 1 {
		least := math.MaxInt
		for _, i := range ties {
			least = min(least, r.cached(r.targets[i]))
		}
		k := 0
		for _, i := range ties {
			if r.cached(r.targets[i]) == least {
				ties[k] = i
				k++
			}
		}
		ties = ties[:k]
	}
	r.ties = ties
	if len(ties) == 1 {
		return ties[0]
	}
	return ties[r.rng.IntN(len(ties))]
}

// logits returns each target's cost for req, in target order:
//
//	overlap_score_weight × prefill_blocks + decode_blocks
//
// where prefill_blocks is the target's active prefill tokens plus the request's tokens beyond its cached
// prefix there, in blocks, and decode_blocks is the target's active blocks plus the request's blocks not
// already active there. The cached prefix counts its GPU blocks whole and the blocks that continue it in
// the target's lower tiers at LowerHitWeight. The slice is reused by the next call.
func (r *Router) logits(req *request) []float64 {
	ov := r.overlaps(req.Blocks)
	bs := r.o.BlockSize
	partial := req.partial()
	r.costs = r.costs[:0]
	for i, t := range r.targets {
		cached := float64(ov[i] * bs)
		if r.o.LowerHitWeight > 0 {
			cached += r.o.LowerHitWeight * float64(t.lowerOverlap(req.Blocks[ov[i]:])*bs)
		}
		prefill := float64(t.prefill) + max(float64(req.PromptTokens)-cached, 0)
		decode := t.activeBlocks() + len(req.Blocks) - t.seqs.match(req.Blocks) + partial
		r.costs = append(r.costs, r.o.OverlapScoreWeight*prefill/float64(bs)+float64(decode))
	}
	return r.costs
}

// sample draws an index with probability ∝ exp(−(logit − min)/((max − min)·temperature)): lower cost is
// likelier, the spread of costs is normalised away so the temperature means the same at any load, and
// equal costs are uniform. The draw walks the cumulative sum, as Dynamo's does.
func sample(rng *rand.Rand, logits []float64, temperature float64) int {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range logits {
		lo, hi = min(lo, l), max(hi, l)
	}
	if lo == hi {
		return rng.IntN(len(logits))
	}
	scale := 1 / ((hi - lo) * temperature)
	sum := 0.0
	for _, l := range logits {
		sum += math.Exp(-(l - lo) * scale)
	}
	u, cum := rng.Float64()*sum, 0.0
	for i, l := range logits {
		cum += math.Exp(-(l - lo) * scale)
		if u < cum {
			return i
		}
	}
	return len(logits) - 1
}
