package router

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

var (
	tA = Target{Worker: 0}
	tB = Target{Worker: 1}
	tC = Target{Worker: 2}
)

// prompt returns a request for toks cut into blocks of bs.
func prompt(id uint64, bs int, toks ...uint32) Request {
	s := tokens.NewSequence(bs)
	s.Append(toks...)
	return Request{ID: id, Blocks: s.Blocks(), PromptTokens: len(toks)}
}

// run returns n tokens counting up from first.
func run(first uint32, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = first + uint32(i)
	}
	return t
}

func cat(parts ...[]uint32) []uint32 { return slices.Concat(parts...) }

func newRouter(t *testing.T, o Options, targets ...Target) *Router {
	t.Helper()
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range targets {
		r.AddTarget(x)
	}
	return r
}

func kvOptions(bs int) Options {
	o := DefaultOptions()
	o.Policy, o.BlockSize = KV, bs
	return o
}

// store tells r that t cached req's blocks.
func store(r *Router, t Target, req Request) {
	r.Apply(t, kvcache.Event{Kind: kvcache.Stored, Blocks: req.Blocks})
}

// place makes req active on t as if the router had chosen t.
func place(t *testing.T, r *Router, tg Target, req Request) {
	t.Helper()
	i := slices.Index(r.Targets(), tg)
	if i < 0 {
		t.Fatalf("no target %v", tg)
	}
	q := r.newRequest(req)
	r.reqs[req.ID] = q
	r.activate(q, i, r.Overlap(req.Blocks)[i])
}

func route(t *testing.T, r *Router, req Request) Decision {
	t.Helper()
	d, queued := r.Route(req)
	if queued {
		t.Fatalf("request %d queued", req.ID)
	}
	return d
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.Policy = 9 }, "router"},
		{func(o *Options) { o.OverlapScoreWeight = -1 }, "overlap-score-weight"},
		{func(o *Options) { o.Temperature = -0.5 }, "router-temperature"},
		{func(o *Options) { o.BlockSize = 0 }, "block-size"},
		{func(o *Options) { o.QueueThreshold = -1 }, "router-queue-threshold"},
		{func(o *Options) { o.QueueThreshold, o.MaxBatchedTokens = 1, 0 }, "max-num-batched-tokens"},
		{func(o *Options) { o.QueuePolicy = 7 }, "router-queue-policy"},
	} {
		o := DefaultOptions()
		tc.edit(&o)
		if _, err := New(o); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", o, err, tc.want)
		}
	}
	if _, err := New(DefaultOptions()); err != nil {
		t.Errorf("New(DefaultOptions()) = %v", err)
	}
}

func TestParse(t *testing.T) {
	for _, p := range []Policy{RoundRobin, Random, KV, LeastLoaded} {
		if got, err := ParsePolicy(p.String()); got != p || err != nil {
			t.Errorf("ParsePolicy(%q) = %v, %v", p, got, err)
		}
	}
	for _, q := range []QueuePolicy{FCFS, LCFS, WSPT} {
		if got, err := ParseQueuePolicy(q.String()); got != q || err != nil {
			t.Errorf("ParseQueuePolicy(%q) = %v, %v", q, got, err)
		}
	}
	if _, err := ParsePolicy("kv-aware"); err == nil || !strings.HasPrefix(err.Error(), "router ") {
		t.Errorf("ParsePolicy(kv-aware) = %v, want an error naming router", err)
	}
	if _, err := ParseQueuePolicy("sjf"); err == nil || !strings.HasPrefix(err.Error(), "router-queue-policy") {
		t.Errorf("ParseQueuePolicy(sjf) = %v, want an error naming router-queue-policy", err)
	}
}

// checkLogits compares the KV costs of req with want (in target order) and routes it, expecting target.
func checkLogits(t *testing.T, r *Router, req Request, want []float64, target Target, overlap int) {
	t.Helper()
	q := r.newRequest(req)
	if got := r.logits(q); !slices.Equal(got, want) {
		t.Fatalf("logits(%d) = %v, want %v", req.ID, got, want)
	}
	if d := route(t, r, req); d != (Decision{ID: req.ID, Target: target, Overlap: overlap}) {
		t.Fatalf("Route(%d) = %+v, want %v with overlap %d", req.ID, d, target, overlap)
	}
}

// TestCostOverlapCredit pins reference §10's cost: a cached prefix removes its tokens from the prefill
// term.
func TestCostOverlapCredit(t *testing.T) {
	r := newRouter(t, kvOptions(4), tA, tB)
	p := prompt(1, 4, run(1, 16)...) // 4 full blocks
	store(r, tA, p)
	// 18 tokens: the 4 cached blocks and a partial one. A: (18−16)/4 + 5 blocks; B: 18/4 + 5.
	req := prompt(2, 4, cat(run(1, 16), run(100, 2))...)
	checkLogits(t, r, req, []float64{0.5 + 5, 4.5 + 5}, tA, 4)
	if got, want := r.Load(tA), (Load{Requests: 1, PrefillTokens: 2, Blocks: 5}); got != want {
		t.Errorf("Load(A) = %+v, want %+v", got, want)
	}
	if got := r.Overlap(req.Blocks); !slices.Equal(got, []int{4, 0}) {
		t.Errorf("Overlap = %v, want [4 0]", got)
	}
}

// TestCostSharedPrefixDedup: active blocks count each hash once per target, so a request sharing an
// active prefix adds only its own blocks.
func TestCostSharedPrefixDedup(t *testing.T) {
	r := newRouter(t, kvOptions(4), tA, tB)
	x := prompt(1, 4, run(1, 16)...)   // A: 4 blocks
	y := prompt(2, 4, run(500, 16)...) // B: 4 unrelated blocks
	place(t, r, tA, x)
	place(t, r, tB, y)
	r.PrefillDone(1)
	r.PrefillDone(2)
	// z shares x's first 3 blocks, then 1 block of its own and 3 tokens: 4 blocks + 1 partial, 19 tokens.
	z := prompt(3, 4, cat(run(1, 12), run(900, 7))...)
	// A: 19/4 + 4 active + 1 new full + 1 partial; B: 19/4 + 4 + 4 + 1.
	checkLogits(t, r, z, []float64{4.75 + 6, 4.75 + 9}, tA, 0)
	if got := r.Load(tA).Blocks; got != 6 {
		t.Errorf("A's active blocks = %d, want 6 (x's 4, z's own block and partial)", got)
	}
	r.Finished(1)
	if got := r.Load(tA).Blocks; got != 5 {
		t.Errorf("after x finished, A's active blocks = %d, want z's 5", got)
	}
	r.Finished(3)
	if got := r.Load(tA); got != (Load{}) {
		t.Errorf("after z finished, Load(A) = %+v, want zero", got)
	}
}

// TestCostLoadBeatsCache: enough prefill work queued on the caching target sends the request elsewhere.
func TestCostLoadBeatsCache(t *testing.T) {
	r := newRouter(t, kvOptions(4), tA, tB)
	p := prompt(1, 4, run(1, 16)...)
	store(r, tA, p)
	place(t, r, tA, prompt(2, 4, run(300, 40)...)) // 40 uncached tokens in prefill, 10 blocks
	// A: (40+0)/4 + 10 + 4 = 24; B: 16/4 + 4 = 8.
	checkLogits(t, r, prompt(3, 4, run(1, 16)...), []float64{24, 8}, tB, 0)
}

func TestCostTieSmallerCache(t *testing.T) {
	r := newRouter(t, kvOptions(4), tA, tB, tC)
	store(r, tA, prompt(0, 4, run(1000, 12)...)) // 3 unrelated blocks
	store(r, tB, prompt(0, 4, run(2000, 4)...))  // 1
	store(r, tC, prompt(0, 4, run(3000, 8)...))  // 2
	checkLogits(t, r, prompt(1, 4, run(1, 8)...), []float64{4, 4, 4}, tB, 0)
}

// TestCostTieSeeded: among equal costs and caches the choice is a seeded draw: the same seed repeats it,
// and every tied target is drawn.
func TestCostTieSeeded(t *testing.T) {
	decide := func(seed uint64) []Target {
		o := kvOptions(4)
		o.Seed = seed
		r := newRouter(t, o, tA, tB, tC)
		var got []Target
		for i := range 30 {
			d := route(t, r, prompt(uint64(i), 4, run(1, 8)...))
			r.Finished(d.ID) // back to equal loads
			got = append(got, d.Target)
		}
		return got
	}
	a := decide(1)
	if b := decide(1); !slices.Equal(a, b) {
		t.Fatalf("seed 1 gave %v then %v", a, b)
	}
	for _, x := range []Target{tA, tB, tC} {
		if !slices.Contains(a, x) {
			t.Errorf("%v never drawn in %v", x, a)
		}
	}
	if c := decide(2); slices.Equal(a, c) {
		t.Errorf("seeds 1 and 2 drew the same %v", a)
	}
}

// TestCostUntrackedPrefill: a decode router does not count prefill tokens as load: only the request's
// own new tokens enter its cost, and no target gets busy.
func TestCostUntrackedPrefill(t *testing.T) {
	o := kvOptions(4)
	o.TrackPrefillTokens = false
	o.QueueThreshold, o.MaxBatchedTokens = 0.5, 8
	r := newRouter(t, o, tA, tB)
	place(t, r, tA, prompt(1, 4, run(1, 40)...))
	if got := r.Load(tA); got != (Load{Requests: 1, Blocks: 10}) {
		t.Fatalf("Load(A) = %+v, want 1 request, 10 blocks, no prefill tokens", got)
	}
	// A: 8/4 + 10 + 2; B: 8/4 + 2.
	checkLogits(t, r, prompt(2, 4, run(700, 8)...), []float64{14, 4}, tB, 0)
}

// TestCostNoOverlapWeight: with weight 0 only active blocks count, so the cache does not attract.
func TestCostNoOverlapWeight(t *testing.T) {
	o := kvOptions(4)
	o.OverlapScoreWeight = 0
	r := newRouter(t, o, tA, tB)
	store(r, tA, prompt(0, 4, run(1, 16)...))
	place(t, r, tA, prompt(1, 4, run(300, 4)...)) // 1 active block on A
	checkLogits(t, r, prompt(2, 4, run(1, 16)...), []float64{5, 4}, tB, 0)
}

func TestTemperatureSamplesAll(t *testing.T) {
	o := kvOptions(4)
	o.Temperature, o.Seed = 1, 3
	r := newRouter(t, o, tA, tB)
	store(r, tA, prompt(0, 4, run(1, 16)...))
	seen := map[Target]int{}
	for i := range 200 {
		d := route(t, r, prompt(uint64(i), 4, run(1, 16)...))
		r.Finished(d.ID)
		seen[d.Target]++
	}
	// Costs 4 (A, cached) and 8 (B): p(A) = 1/(1+e^−1) ≈ 0.73.
	if seen[tA] < 120 || seen[tA] > 170 {
		t.Errorf("A chosen %d of 200 times, want about 146", seen[tA])
	}
}

func TestRoundRobin(t *testing.T) {
	o := DefaultOptions()
	o.Policy = RoundRobin
	r := newRouter(t, o, tA, tB, tC)
	var got []Target
	for i := range 4 {
		got = append(got, route(t, r, prompt(uint64(i), 64, 1)).Target)
	}
	r.RemoveTarget(tA)
	got = append(got, route(t, r, prompt(4, 64, 1)).Target)
	r.AddTarget(tA)
	for i := 5; i < 9; i++ {
		got = append(got, route(t, r, prompt(uint64(i), 64, 1)).Target)
	}
	want := []Target{tA, tB, tC, tA, tB, tC, tA, tB, tC}
	if !slices.Equal(got, want) {
		t.Errorf("round robin = %v, want %v", got, want)
	}
}

// TestActiveBlocksOnlyForKV: policies that do not read the active blocks do not track them: requests
// routed round robin leave the targets' active trees empty (and Load's Blocks 0), and finish cleanly.
func TestActiveBlocksOnlyForKV(t *testing.T) {
	o := DefaultOptions()
	o.Policy = RoundRobin
	r := newRouter(t, o, tA, tB)
	for i := range 6 {
		route(t, r, prompt(uint64(i), o.BlockSize, run(uint32(100*i), 4*o.BlockSize)...)) // 4 blocks each
	}
	for _, x := range r.targets {
		if x.seqs.blocks != 0 || len(x.seqs.root.kids) != 0 || x.requests != 3 {
			t.Fatalf("target %v: %d active blocks in its tree, %d requests; want 0 and 3", x.id, x.seqs.blocks, x.requests)
		}
	}
	if got := r.Load(tA); got != (Load{Requests: 3, PrefillTokens: 12 * o.BlockSize}) {
		t.Fatalf("Load(A) = %+v, want 3 requests, 12 blocks of prefill tokens, no active blocks", got)
	}
	for i := range 6 {
		r.Finished(uint64(i))
	}
	if got := r.Load(tA); got != (Load{}) {
		t.Fatalf("after finishing, Load(A) = %+v, want zero", got)
	}
}

func TestRandomIsSeeded(t *testing.T) {
	decide := func(seed uint64) []Target {
		o := DefaultOptions()
		o.Policy, o.Seed = Random, seed
		r := newRouter(t, o, tA, tB, tC)
		var got []Target
		for i := range 40 {
			got = append(got, route(t, r, prompt(uint64(i), 64, 1)).Target)
		}
		return got
	}
	a := decide(7)
	if !slices.Equal(a, decide(7)) {
		t.Fatal("same seed, different choices")
	}
	if slices.Equal(a, decide(8)) {
		t.Error("seeds 7 and 8 made the same 40 choices")
	}
	for _, x := range []Target{tA, tB, tC} {
		if !slices.Contains(a, x) {
			t.Errorf("%v never chosen", x)
		}
	}
}

func TestLeastLoaded(t *testing.T) {
	o := DefaultOptions()
	o.Policy = LeastLoaded
	r := newRouter(t, o, tA, tB, tC)
	var got []Target
	for i := range 4 {
		got = append(got, route(t, r, prompt(uint64(i), 64, 1)).Target)
	}
	r.Finished(1) // B now has none
	got = append(got, route(t, r, prompt(4, 64, 1)).Target)
	want := []Target{tA, tB, tC, tA, tB}
	if !slices.Equal(got, want) {
		t.Errorf("least loaded = %v, want %v", got, want)
	}
}

// TestRemoveTarget drops the target's cache and requests; their late calls and events are ignored, and
// the target can come back empty.
func TestRemoveTarget(t *testing.T) {
	r := newRouter(t, kvOptions(4), tA, tB)
	p := prompt(1, 4, run(1, 16)...)
	store(r, tA, p)
	place(t, r, tA, p)
	r.RemoveTarget(tA)
	if got := r.Targets(); !slices.Equal(got, []Target{tB}) {
		t.Fatalf("Targets = %v, want [B]", got)
	}
	r.PrefillDone(1)
	r.Finished(1)
	store(r, tA, p) // trailing event of the removed worker
	r.AddTarget(tA)
	if r.Indexed(tA) != 0 || r.Load(tA) != (Load{}) {
		t.Fatalf("re-added A has %d blocks indexed and load %+v, want nothing", r.Indexed(tA), r.Load(tA))
	}
	if got := r.Overlap(p.Blocks); !slices.Equal(got, []int{0, 0}) {
		t.Fatalf("Overlap = %v, want [0 0]", got)
	}
	// The re-added A's events reach it, not the removed one's state (A now comes after B).
	store(r, tA, p)
	if got := r.Overlap(p.Blocks); r.Indexed(tA) != len(p.Blocks) || !slices.Equal(got, []int{0, len(p.Blocks)}) {
		t.Fatalf("re-added A indexes %d blocks, Overlap = %v; want %d and [0 %d]", r.Indexed(tA), got, len(p.Blocks), len(p.Blocks))
	}
	r.Apply(tA, kvcache.Event{Kind: kvcache.Cleared})
	// The request id is free again.
	place(t, r, tB, p)
	r.Finished(1)
	r.Finished(1)
}

func TestApplyRemovedAndCleared(t *testing.T) {
	r := newRouter(t, kvOptions(2), tA, tB)
	p := prompt(1, 2, run(1, 8)...) // 4 blocks
	store(r, tA, p)
	store(r, tB, p)
	r.Apply(tA, kvcache.Event{Kind: kvcache.Removed, Hashes: []uint64{p.Blocks[2].Hash, 12345}})
	if got := r.Overlap(p.Blocks); !slices.Equal(got, []int{2, 4}) {
		t.Fatalf("after removing block 2 from A, Overlap = %v, want [2 4]", got)
	}
	if r.Indexed(tA) != 3 || r.Indexed(tB) != 4 {
		t.Fatalf("Indexed = %d, %d; want 3, 4", r.Indexed(tA), r.Indexed(tB))
	}
	store(r, tA, p) // storing again is idempotent
	if r.Indexed(tA) != 4 {
		t.Fatalf("Indexed(A) = %d after restoring, want 4", r.Indexed(tA))
	}
	r.Apply(tB, kvcache.Event{Kind: kvcache.Cleared})
	if got := r.Overlap(p.Blocks); !slices.Equal(got, []int{4, 0}) || r.Indexed(tB) != 0 {
		t.Fatalf("after clearing B, Overlap = %v and Indexed(B) = %d, want [4 0] and 0", got, r.Indexed(tB))
	}
}

func TestRouteRejectsBadRequests(t *testing.T) {
	r := newRouter(t, kvOptions(4), tA)
	for name, req := range map[string]Request{
		"too few tokens":  {ID: 1, Blocks: prompt(1, 4, run(1, 8)...).Blocks, PromptTokens: 7},
		"too many tokens": {ID: 1, Blocks: prompt(1, 4, run(1, 8)...).Blocks, PromptTokens: 12},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			r.Route(req)
		}()
	}
	route(t, r, prompt(2, 4, 1))
	defer func() {
		if recover() == nil {
			t.Error("routing an active id twice: no panic")
		}
	}()
	r.Route(prompt(2, 4, 1))
}

// TestManyTargets: 70 targets, one replaced, each keeping its own blocks.
func TestManyTargets(t *testing.T) {
	r := newRouter(t, kvOptions(2))
	var ts []Target
	for w := range 70 {
		ts = append(ts, Target{Worker: w})
		r.AddTarget(ts[w])
		// Target w caches the first w%9 blocks.
		p := prompt(0, 2, run(1, 2*(w%9))...)
		store(r, ts[w], p)
	}
	p := prompt(0, 2, run(1, 20)...)
	ov := r.Overlap(p.Blocks)
	for w, o := range ov {
		if o != w%9 {
			t.Fatalf("Overlap[%d] = %d, want %d", w, o, w%9)
		}
	}
	r.RemoveTarget(ts[3])
	r.AddTarget(Target{Worker: 99})
	ov = r.Overlap(p.Blocks)
	if len(ov) != 70 || ov[3] != 4 || ov[69] != 0 {
		t.Fatalf("after replacing target 3: Overlap[3] = %d (target 4), Overlap[69] = %d, want 4 and 0", ov[3], ov[69])
	}
}

// TestRandomScript drives two routers with the same random calls: their decisions must be identical (no
// map order leaks), and after every call each target's Load must equal a naive recount over the requests
// routed to it.
func TestRandomScript(t *testing.T) {
	script := func(seed uint64, check bool) []Decision {
		o := kvOptions(4)
		o.Temperature, o.Seed = 0.7, seed
		o.QueueThreshold, o.MaxBatchedTokens, o.QueuePolicy = 2, 16, WSPT
		r := newRouter(t, o)
		rng := rand.New(rand.NewPCG(seed, 1))
		type live struct {
			req     Request
			target  Target
			prefill int
		}
		active := map[uint64]*live{}
		var log []Decision
		took := func(ds ...Decision) {
			for _, d := range ds {
				if _, dup := active[d.ID]; dup {
					t.Fatalf("request %d routed twice", d.ID)
				}
				req := reqs[d.ID]
				active[d.ID] = &live{req, d.Target, req.PromptTokens - 4*d.Overlap}
				log = append(log, d)
			}
		}
		for id := uint64(0); id < 600; id++ {
			switch k := rng.IntN(10); {
			case k == 0:
				r.AddTarget(Target{Worker: rng.IntN(5)})
				took(r.Ready(nil)...)
			case k == 1 && rng.IntN(4) == 0:
				x := Target{Worker: rng.IntN(5)}
				r.RemoveTarget(x)
				for i, a := range active {
					if a.target == x {
						delete(active, i)
					}
				}
			case k == 2:
				if ts := r.Targets(); len(ts) > 0 {
					x := ts[rng.IntN(len(ts))]
					req := reqs[rng.IntN(len(reqs))]
					from := rng.IntN(len(req.Blocks) + 1)
					r.Apply(x, kvcache.Event{Kind: kvcache.Stored, Blocks: req.Blocks[:from]})
					if rng.IntN(3) == 0 && from > 0 {
						r.Apply(x, kvcache.Event{Kind: kvcache.Removed, Hashes: []uint64{req.Blocks[rng.IntN(from)].Hash}})
					}
				}
			case k < 6:
				req := reqs[id]
				if d, queued := r.Route(req); !queued {
					took(d)
				}
			default:
				victim := uint64(rng.IntN(int(id) + 1))
				if rng.IntN(2) == 0 {
					r.PrefillDone(victim)
					if a := active[victim]; a != nil {
						a.prefill = 0
					}
				} else {
					r.Finished(victim)
					delete(active, victim)
				}
				took(r.Ready(nil)...)
			}
			if !check {
				continue
			}
			for _, x := range r.Targets() {
				want := Load{}
				held := map[uint64]bool{}
				for _, a := range active {
					if a.target != x {
						continue
					}
					want.Requests++
					want.PrefillTokens += a.prefill
					for _, b := range a.req.Blocks {
						held[b.Hash] = true
					}
					if a.req.PromptTokens%4 != 0 {
						want.Blocks++
					}
				}
				want.Blocks += len(held)
				if got := r.Load(x); got != want {
					t.Fatalf("request %d: Load(%v) = %+v, want %+v", id, x, got, want)
				}
			}
		}
		return log
	}
	for seed := uint64(1); seed <= 5; seed++ {
		a, b := script(seed, true), script(seed, false)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: two runs decided differently", seed)
		}
		if len(a) < 50 {
			t.Fatalf("seed %d: only %d decisions", seed, len(a))
		}
	}
}

// reqs are the requests of TestRandomScript, by id: a few families of shared prefixes.
var reqs = func() []Request {
	rng := rand.New(rand.NewPCG(11, 11))
	out := make([]Request, 600)
	for i := range out {
		toks := run(uint32(rng.IntN(4))*1000, rng.IntN(30))
		toks = append(toks, run(uint32(10000+i*100), rng.IntN(10))...)
		out[i] = prompt(uint64(i), 4, toks...)
	}
	return out
}()

// TestRouteTo pins a request to a worker whatever the policy prefers: the worker's rank with the
// longest cached prefix takes it, the request counts on that rank until Finished, and a worker with no
// target refuses it and keeps nothing.
func TestRouteTo(t *testing.T) {
	w1r0, w1r1 := Target{Worker: 1, Rank: 0}, Target{Worker: 1, Rank: 1}
	r := newRouter(t, kvOptions(4), tA, w1r0, w1r1)
	req := prompt(1, 4, run(0, 12)...)
	store(r, tA, req)                          // worker 0 has all three blocks: Route would pick it
	store(r, w1r1, prompt(9, 4, run(0, 4)...)) // worker 1 rank 1 has the first one
	d, ok := r.RouteTo(req, 1)
	if !ok || d.Target != w1r1 || d.Overlap != 1 {
		t.Fatalf("RouteTo(worker 1) = %+v, %v; want rank 1 with overlap 1", d, ok)
	}
	if got := r.Load(w1r1).Requests; got != 1 {
		t.Fatalf("requests on %v = %d, want 1", w1r1, got)
	}
	r.Finished(1)
	if got := r.Load(w1r1).Requests; got != 0 {
		t.Fatalf("requests on %v after Finished = %d, want 0", w1r1, got)
	}
	if d, ok := r.RouteTo(prompt(2, 4, run(0, 4)...), 7); ok {
		t.Fatalf("RouteTo(worker 7) = %+v, true; want false", d)
	}
	if d, queued := r.Route(prompt(2, 4, run(0, 4)...)); queued || d.ID != 2 {
		t.Fatalf("request 2 after a refused RouteTo: Route = %+v, %v; want it routed", d, queued)
	}
}
