package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

// TestCoastIsStepRepeated drives two engines with the same random arrivals, one with Step alone and one
// coasting until each next arrival before stepping, through block boundaries (Run.Blocks): both must emit
// the same tokens and KV events (ids, blocks, parents, hashes, ranks) at the same times and end in the same
// state. vLLM's and TensorRT-LLM's coasts must have crossed block boundaries, evicting blocks too, and
// gone on while requests waited that could not be admitted.
func TestCoastIsStepRepeated(t *testing.T) {
	coasted := map[string]int{} // by backend and dp size
	crossed := map[string]int{} // coasted passes with KV events, by backend
	waited := map[string]int{}  // coasted passes while requests waited, by backend
	evicted := 0                // Removed events in coasts
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		backend := []Backend{VLLM, TRTLLM, SGLang}[seed%3]
		dp := 1 + rng.IntN(2)
		bs := []int{1, 4, 6, 16}[rng.IntN(4)]
		vo := vllm.Options{
			BlockSize:        bs,
			NumBlocks:        40 + rng.IntN(200),
			MaxNumSeqs:       rng.IntN(8),
			MaxBatchedTokens: []int{0, 3, 64, 512}[rng.IntN(4)],
			ChunkedPrefill:   rng.IntN(4) > 0,
			PrefixCaching:    rng.IntN(4) > 0,
			Events:           true,
			// TensorRT-LLM's engine admits by GuaranteedNoEvict whatever is drawn here, so its seeds
			// exercise headBlocked's reservations (waited["trtllm"] below).
			Capacity: []vllm.Capacity{vllm.MaxUtilization, vllm.ChunkFit}[rng.IntN(2)],
			MaxLoRAs: rng.IntN(3),
		}
		if backend != SGLang {
			vo.MaxCPULoRAs = []int{0, vo.MaxLoRAs, vo.MaxLoRAs + 1}[rng.IntN(3)]
		}
		so := sglang.Options{
			PageSize:           bs,
			NumPages:           vo.NumBlocks,
			MaxRunning:         vo.MaxNumSeqs,
			MaxPrefillTokens:   []int{16, 128, 16384}[rng.IntN(3)],
			ChunkedPrefillSize: []int{0, 64, 8192}[rng.IntN(3)] / bs * bs,
			ClipMaxNewTokens:   []int{16, 4096}[rng.IntN(2)],
			Conservativeness:   []float64{0.3, 1}[rng.IntN(2)],
			MixedChunk:         rng.IntN(3) == 0,
			Overlap:            rng.IntN(2) == 0,
			PrefixCaching:      vo.PrefixCaching,
			Events:             true,
		}
		var arrivals []coastArrival
		at := time.Duration(0)
		for id := range uint64(60) {
			at += time.Duration(rng.ExpFloat64() * float64(300*time.Millisecond))
			toks := make([]uint32, 1+rng.IntN(bs*10))
			for i := range toks {
				toks[i] = uint32(id%3)*1000 + uint32(i)
			}
			req := sched.Request{ID: id, Prompt: toks, MaxTokens: rng.IntN(150), Rank: rng.IntN(dp)}
			if backend != SGLang {
				req.LoRA = []string{"", "", "a", "b", "c"}[rng.IntN(5)]
			}
			if rng.IntN(2) == 0 {
				// Its output goes on with its prompt's pattern, as a longer prompt of the same group does:
				// the blocks it completes may be such a waiting prompt's next ones.
				for i := range req.MaxTokens {
					req.OutputTokens = append(req.OutputTokens, uint32(id%3)*1000+uint32(len(toks)+i))
				}
			}
			arrivals = append(arrivals, coastArrival{at, req})
		}
		// Polynomial prices a vLLM coast's passes alike; contextModel reads what changes from pass to pass,
		// through its pricer of plain passes (Engine.coastPlain).
		var model timing.Model = timing.Polynomial{}
		if seed%2 == 0 {
			model = contextModel{}
		}
		o := Options{Backend: backend, DPSize: dp, VLLM: vo, SGLang: so, Timing: model, LoRALoad: 3 * time.Millisecond}
		want, wantM, _ := replayCoast(t, o, arrivals, false)
		got, gotM, st := replayCoast(t, o, arrivals, true)
		if !slices.Equal(got, want) || !slices.Equal(gotM, wantM) {
			t.Fatalf("seed %d (%v dp %d %+v): coasting diverges %s\nmetrics %+v / %+v", seed, backend, dp, vo, divergence(got, want), gotM, wantM)
		}
		coasted[fmt.Sprintf("%v/dp%d", backend, dp)] += st.coasted
		crossed[backend.String()] += st.crossed
		waited[backend.String()] += st.waited
		evicted += st.evicted
	}
	for _, k := range []string{"vllm/dp1", "vllm/dp2", "trtllm/dp1", "trtllm/dp2", "sglang/dp1", "sglang/dp2"} {
		if coasted[k] < 200 {
			t.Fatalf("passes coasted by backend and dp size: %v: the test does not exercise Coast on %s", coasted, k)
		}
	}
	if crossed["vllm"] < 100 || crossed["trtllm"] < 100 || evicted == 0 {
		t.Fatalf("coasted ranks' passes with KV events by backend %v, %d Removed events among them: the test does not exercise block boundaries", crossed, evicted)
	}
	if waited["vllm"] < 100 || waited["trtllm"] < 100 {
		t.Fatalf("passes coasted while requests waited, by backend: %v: the test does not exercise admissions that cannot start", waited)
	}
	t.Logf("passes coasted by backend and dp size: %v; ranks' with KV events, by backend: %v (%d Removed events); while requests waited: %v",
		coasted, crossed, evicted, waited)
}

// coastArrival is a request and when it arrives.
type coastArrival struct {
	at  time.Duration
	req sched.Request
}

// coastStats counts what a coasted replay did: passes coasted, ranks' coasted passes with KV events, Removed
// events among them, and passes coasted while requests waited.
type coastStats struct{ coasted, crossed, evicted, waited int }

// replayCoast replays arrivals on an engine made with o, stepping every pass, or with coast, coasting
// (through block boundaries) until each next arrival before stepping, and logs the tokens and KV events
// with their times; it returns the log, the final metrics, and what the coasts did.
func replayCoast(t *testing.T, o Options, arrivals []coastArrival, coast bool) (log []string, m []sched.Metrics, st coastStats) {
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	run := Run{Blocks: true}
	now, next := time.Duration(0), 0
	for next < len(arrivals) || !e.Idle() {
		for next < len(arrivals) && arrivals[next].at <= now {
			r := arrivals[next].req
			if err := e.Enqueue(&r); err != nil {
				log = append(log, fmt.Sprintf("rejected %d", r.ID))
			}
			next++
		}
		until := time.Duration(1 << 62)
		if next < len(arrivals) {
			until = arrivals[next].at
		}
		if e.Idle() {
			now = until
			continue
		}
		if coast {
			e.Coast(now, until, &run)
			k := 0
			if len(run.Ends) > 0 {
				k = len(run.Samples) / len(run.Ends)
			}
			from, em := 0, run.Emitted
			for j, end := range run.Ends {
				for ; len(em) > 0 && em[0].Pass == j; em = em[1:] {
					for _, ev := range run.Events[from:em[0].End] {
						log = append(log, fmt.Sprintf("%v rank %d event %v", now, em[0].Rank, ev))
						if ev.Kind == kvcache.Removed {
							st.evicted++
						}
					}
					from = em[0].End
					st.crossed++
				}
				for _, s := range run.Samples[j*k : (j+1)*k] {
					log = append(log, fmt.Sprintf("%v %d %d", end, s.ID, s.Token))
				}
				now = end
			}
			st.coasted += len(run.Ends)
			if e.Waiting() > 0 {
				st.waited += len(run.Ends)
			}
		}
		p := e.Step(now)
		if p.Empty() {
			now = until // blocked until something arrives
			continue
		}
		for _, rp := range p.Ranks {
			for _, ev := range rp.Events {
				log = append(log, fmt.Sprintf("%v rank %d event %v", p.Start, rp.Rank, ev))
			}
		}
		for _, rp := range p.Ranks {
			for _, out := range rp.Outputs {
				for _, tok := range out.Tokens {
					log = append(log, fmt.Sprintf("%v %d %d", p.End, out.ID, tok))
				}
				if out.Done {
					log = append(log, fmt.Sprintf("%v %d done", p.End, out.ID))
				}
			}
		}
		now = p.End
		if err := e.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	return log, e.Metrics(), st
}

// contextModel charges a pass for its requests' contexts and its group (its ranks' tokens, and whether
// any computes prompt tokens), so that a coast priced with the wrong contexts or group shows; its
// PlainPricer prices plain passes alike from their counts.
type contextModel struct{}

func (contextModel) Cost(b *timing.Batch) timing.Cost {
	var c timing.Cost
	n, ctx := 0, 0
	for _, s := range b.Seqs {
		if s.Prefill {
			c.Prefill += time.Duration(s.New) * time.Microsecond
		} else {
			n++
			ctx += s.Cached
		}
	}
	if n > 0 {
		c.Decode = contextDecode(n, ctx, b.Group)
	}
	return c
}

func (contextModel) PlainPricer() func(*timing.PlainPass) timing.Cost {
	return func(p *timing.PlainPass) timing.Cost {
		return timing.Cost{Decode: contextDecode(p.Requests, p.Cached, p.Group)}
	}
}

// contextDecode is contextModel's price of n decode steps with ctx tokens of context in all, in group g:
// whole hundreds of nanoseconds.
func contextDecode(n, ctx int, g timing.Group) time.Duration {
	d := time.Millisecond + time.Duration(ctx*100+n*1000+g.Tokens*3000+g.MaxTokens*g.Ranks*500)
	if g.Prefill {
		d += 700
	}
	return d
}

// TestStepPricesPlainPassesAlike: Step prices a plain decode pass by the model's plain pricer and any other
// by Cost; with a model that charges every pass its requests' contexts and its group, and a pass that is
// not plain what makes it so (prompt tokens, drafts, a request that does not sample), stepping with the
// pricer and without one (costOnly hides it) gives the same pass lengths, so the pricer took the plain
// passes alone, with their contexts and group. Some passes must have been plain, some not, with one
// rank and with two.
func TestStepPricesPlainPassesAlike(t *testing.T) {
	plain, other := map[int]int{}, map[int]int{} // by dp size
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		dp := 1 + int(seed%2)
		vo := vllm.Options{BlockSize: 4, NumBlocks: 60 + rng.IntN(100), MaxBatchedTokens: []int{0, 8, 64}[rng.IntN(3)],
			ChunkedPrefill: true, PrefixCaching: true, Events: true}
		if seed%3 == 0 {
			vo.Spec = sched.Spec{Tokens: 2, AcceptRates: []float64{0.7, 0.4}}
		}
		var reqs []sched.Request
		for id := range uint64(30) {
			toks := make([]uint32, 1+rng.IntN(40))
			for i := range toks {
				toks[i] = uint32(id%4)*100 + uint32(i)
			}
			reqs = append(reqs, sched.Request{ID: id, Prompt: toks, MaxTokens: 1 + rng.IntN(60), Rank: rng.IntN(dp)})
		}
		replay := func(model timing.Model) (lengths []time.Duration) {
			e, err := New(Options{Backend: VLLM, DPSize: dp, VLLM: vo, Timing: model, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Duration(0)
			for i, r := range reqs {
				if err := e.Enqueue(&r); err != nil {
					t.Fatal(err)
				}
				for range i % 3 { // a few passes between arrivals
					p := e.Step(now)
					if p.Empty() {
						break
					}
					lengths = append(lengths, p.End-now)
					now = p.End
				}
			}
			for !e.Idle() {
				p := e.Step(now)
				lengths = append(lengths, p.End-now)
				now = p.End
			}
			return lengths
		}
		got, want := replay(strictModel{}), replay(costOnly{strictModel{}})
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d (dp %d): pass lengths with the plain pricer %v, without %v", seed, dp, got, want)
		}
		for _, d := range got {
			if d%100 == 0 { // strictModel: a plain pass costs whole hundreds of nanoseconds
				plain[dp]++
			} else {
				other[dp]++
			}
		}
	}
	for dp := 1; dp <= 2; dp++ {
		if plain[dp] < 100 || other[dp] < 100 {
			t.Fatalf("dp %d: %d passes ended on whole hundreds of nanoseconds, %d not: the test does not exercise both pricings", dp, plain[dp], other[dp])
		}
	}
}

// strictModel charges a pass contextModel's decode price for all its requests (their contexts, its
// group), and one that is not a plain decode pass 1 ns more for each request that makes it so and
// 100 ns for each of their tokens: a plain pass costs whole hundreds of nanoseconds, another not (with
// fewer than 100 such requests). Its plain pricer, contextModel's, knows only the former.
type strictModel struct{ contextModel }

func (strictModel) Cost(b *timing.Batch) timing.Cost {
	var c timing.Cost
	ctx := 0
	for _, s := range b.Seqs {
		ctx += s.Cached
		if s.New != 1 || s.Prefill || !s.Samples {
			c.Prefill += time.Duration(1 + 100*s.New)
		}
	}
	c.Decode = contextDecode(len(b.Seqs), ctx, b.Group)
	return c
}

// costOnly hides a model's plain pricer.
type costOnly struct{ m timing.Model }

func (c costOnly) Cost(b *timing.Batch) timing.Cost { return c.m.Cost(b) }

// TestCoastStopsWhereAWaitingPrefixGrows: a coast that goes on while a request waits stops before a pass
// in which a running request completes a block of the waiting one's prompt. Without chunked prefill and
// with a budget of 32 tokens, 14 requests decode and B (24 tokens, one block cached) waits for its
// uncached part to fit the 18 tokens left; A, whose output goes on with B's prompt, completes B's second
// block in the fifth pass, whose admission then takes B. Coasted and stepped, B is admitted in that pass.
// B of 22 tokens fits the budget at once: no pass is coasted while it waits.
func TestCoastStopsWhereAWaitingPrefixGrows(t *testing.T) {
	o := Options{Backend: VLLM, Timing: contextModel{},
		VLLM: vllm.Options{BlockSize: 4, NumBlocks: 100, MaxBatchedTokens: 32, PrefixCaching: true, Events: true}}
	seq := func(from, n int) []uint32 {
		s := make([]uint32, n)
		for i := range s {
			s[i] = uint32(from + i)
		}
		return s
	}
	arrivals := []coastArrival{{0, sched.Request{ID: 0, Prompt: seq(0, 4), MaxTokens: 20, OutputTokens: seq(4, 20)}}}
	for id := range uint64(13) {
		arrivals = append(arrivals, coastArrival{0, sched.Request{ID: 1 + id, Prompt: seq(1000*int(id+1), 4), MaxTokens: 20}})
	}
	// B arrives as the fourth pass starts, once all 14 run.
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Duration(0)
	for _, a := range arrivals {
		if err := e.Enqueue(&a.req); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		now = e.Step(now).End
	}
	if m := e.Metrics()[0]; m.Running != 14 {
		t.Fatalf("%d requests run after three passes, want 14", m.Running)
	}
	for _, c := range []struct{ length, waited, hits int }{{24, 1, 8}, {22, 0, 4}} {
		b := coastArrival{now, sched.Request{ID: 14, Prompt: seq(0, c.length), MaxTokens: 2}}
		arrivals := append(slices.Clip(arrivals), b)
		want, wantM, _ := replayCoast(t, o, arrivals, false)
		got, gotM, st := replayCoast(t, o, arrivals, true)
		if !slices.Equal(got, want) || !slices.Equal(gotM, wantM) {
			t.Fatalf("B of %d tokens: coasting diverges %s", c.length, divergence(got, want))
		}
		if st.waited != c.waited {
			t.Fatalf("B of %d tokens: %d passes coasted while it waited, want %d", c.length, st.waited, c.waited)
		}
		if h := wantM[0].PrefixHits; h != int64(c.hits) {
			t.Fatalf("B of %d tokens was admitted with %d tokens cached, want %d", c.length, h, c.hits)
		}
	}
}

// divergence says where a coasted replay's lines (got) first differ from the stepped one's (want), with
// the three lines from there on each side.
func divergence(got, want []string) string {
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("at line %d of %d/%d:\n%q\n%q", i, len(got), len(want), got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
}
