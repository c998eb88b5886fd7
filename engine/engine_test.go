package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

func newEngine(t *testing.T, o vllm.Options, dp int, m timing.Model) *Engine {
	t.Helper()
	e, err := New(Options{DPSize: dp, VLLM: o, Timing: m})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPassEndsAfterModelledTime(t *testing.T) {
	e := newEngine(t, vllm.Options{BlockSize: 4, NumBlocks: 16, MaxBatchedTokens: 8, ChunkedPrefill: true, PrefixCaching: true},
		1, timing.Fixed{PrefillMs: 10, DecodeMs: 3})
	if err := e.Enqueue(&sched.Request{ID: 1, Prompt: make([]uint32, 6), MaxTokens: 2}); err != nil {
		t.Fatal(err)
	}
	p := e.Step(100 * time.Millisecond)
	if p.Start != 100*time.Millisecond || p.End != 113*time.Millisecond {
		t.Fatalf("pass [%v, %v], want [100ms, 113ms]: prefill 10 + first-token decode 3", p.Start, p.End)
	}
	p = e.Step(p.End)
	if p.End-p.Start != 3*time.Millisecond || len(p.Ranks) != 1 || !p.Ranks[0].Outputs[0].Done {
		t.Fatalf("decode pass %v..%v %+v", p.Start, p.End, p.Ranks)
	}
	if !e.Idle() || !e.Step(p.End).Empty() {
		t.Fatal("engine not idle after its only request finished")
	}
}

// TestDPBarrier: all ranks step together and the pass ends at the slowest rank; an idle rank does nothing.
func TestDPBarrier(t *testing.T) {
	e := newEngine(t, vllm.Options{BlockSize: 4, NumBlocks: 64, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true},
		3, timing.Polynomial{})
	e.Enqueue(&sched.Request{ID: 1, Prompt: make([]uint32, 40), MaxTokens: 1, Rank: 0})
	e.Enqueue(&sched.Request{ID: 2, Prompt: make([]uint32, 4), MaxTokens: 1, Rank: 2})
	p := e.Step(0)
	if len(p.Ranks) != 2 || p.Ranks[0].Rank != 0 || p.Ranks[1].Rank != 2 {
		t.Fatalf("ranks %+v, want 0 and 2", p.Ranks)
	}
	slow := p.Ranks[0].Cost.Total()
	if p.Ranks[1].Cost.Total() >= slow || p.End != slow {
		t.Fatalf("pass ends %v; rank costs %v, %v", p.End, slow, p.Ranks[1].Cost.Total())
	}
	var rej *sched.RejectError
	if err := e.Enqueue(&sched.Request{ID: 3, Prompt: make([]uint32, 4), MaxTokens: 1, Rank: 3}); !errors.As(err, &rej) {
		t.Fatalf("rank out of range: %v", err)
	}
}

// groupModel charges each rank 1 ms per token of its group and records the groups it was asked about.
type groupModel struct{ seen []timing.Group }

func (g *groupModel) Cost(b *timing.Batch) timing.Cost {
	g.seen = append(g.seen, b.Group)
	return timing.Cost{Decode: time.Duration(b.Group.Tokens) * time.Millisecond}
}

// TestDPGroup: every rank's batch is priced knowing its group, all ranks idle ones included, with the
// new tokens of the ranks that step (three prompts of 40, 4 and 0: rank 1 is idle), in Step and in
// Coast alike.
func TestDPGroup(t *testing.T) {
	m := &groupModel{}
	e := newEngine(t, vllm.Options{BlockSize: 4, NumBlocks: 64, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true}, 3, m)
	e.Enqueue(&sched.Request{ID: 1, Prompt: make([]uint32, 40), MaxTokens: 50, Rank: 0})
	e.Enqueue(&sched.Request{ID: 2, Prompt: make([]uint32, 4), MaxTokens: 50, Rank: 2})
	p := e.Step(0)
	want := timing.Group{Ranks: 3, Tokens: 44, MaxTokens: 40, Prefill: true}
	if len(m.seen) != 2 || m.seen[0] != want || m.seen[1] != want {
		t.Fatalf("groups priced %+v, want %+v for each of the two stepping ranks", m.seen, want)
	}
	if p.End != 44*time.Millisecond {
		t.Fatalf("pass ends %v, want 44ms", p.End)
	}
	p = e.Step(p.End) // the first decodes, which open new blocks
	m.seen = m.seen[:0]
	var run Run
	e.Coast(p.End, p.End+time.Second, &run)
	want = timing.Group{Ranks: 3, Tokens: 2, MaxTokens: 1}
	if len(run.Ends) == 0 || run.Ends[0] != p.End+2*time.Millisecond {
		t.Fatalf("coast from %v: passes ending %v, want the first at +2ms", p.End, run.Ends)
	}
	for _, g := range m.seen {
		if g != want {
			t.Fatalf("coast: groups %+v, want %+v", m.seen, want)
		}
	}
}

// TestWaiting: Waiting sums the ranks' queues, as Metrics does, before and after a pass admits some.
func TestWaiting(t *testing.T) {
	e := newEngine(t, vllm.Options{BlockSize: 4, NumBlocks: 64, MaxBatchedTokens: 8, MaxNumSeqs: 1, ChunkedPrefill: true, PrefixCaching: true},
		2, timing.Fixed{PrefillMs: 1, DecodeMs: 1})
	for id := range uint64(5) {
		if err := e.Enqueue(&sched.Request{ID: id + 1, Prompt: make([]uint32, 4), MaxTokens: 2, Rank: int(id % 2)}); err != nil {
			t.Fatal(err)
		}
	}
	sum := func() int {
		n := 0
		for _, m := range e.Metrics() {
			n += m.Waiting
		}
		return n
	}
	if w := e.Waiting(); w != 5 || sum() != 5 {
		t.Fatalf("Waiting %d, metrics %d; want 5", w, sum())
	}
	e.Step(0) // one request admitted per rank
	if w := e.Waiting(); w != 3 || sum() != 3 {
		t.Fatalf("after a pass: Waiting %d, metrics %d; want 3", w, sum())
	}
}

// TestRandomWorkloadInvariants runs random workloads through engines of many shapes — the three backends,
// vLLM's two admission gates, DP, speculative decoding — and checks after every pass the block accounting, that every request ends
// exactly once, and that each emits exactly the tokens it asked for. MOCKER_SEEDS=600 runs more seeds.
func TestRandomWorkloadInvariants(t *testing.T) {
	seeds := uint64(60)
	if s := os.Getenv("MOCKER_SEEDS"); s != "" {
		seeds, _ = strconv.ParseUint(s, 10, 64)
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		backend := Backend(seed % 3)
		bs := []int{1, 4, 6, 16}[rng.IntN(4)]
		blocks := 40 + rng.IntN(200)
		vo := vllm.Options{
			BlockSize:        bs,
			NumBlocks:        blocks,
			MaxNumSeqs:       rng.IntN(8),
			MaxBatchedTokens: []int{0, 16, 64, 512}[rng.IntN(4)],
			ChunkedPrefill:   rng.IntN(4) > 0,
			PrefixCaching:    rng.IntN(4) > 0,
			Preemption:       vllm.Preemption(rng.IntN(2)),
			Capacity:         []vllm.Capacity{vllm.MaxUtilization, vllm.ChunkFit}[rng.IntN(2)],
			Events:           true,
		}
		so := sglang.Options{
			PageSize:           bs,
			NumPages:           blocks,
			MaxRunning:         vo.MaxNumSeqs,
			MaxPrefillTokens:   []int{16, 128, 16384}[rng.IntN(3)],
			ChunkedPrefillSize: []int{0, 64, 8192}[rng.IntN(3)] / bs * bs,
			ClipMaxNewTokens:   []int{4, 4096}[rng.IntN(2)],
			Conservativeness:   []float64{0.3, 1}[rng.IntN(2)],
			Policy:             sglang.Policy(rng.IntN(2)),
			MixedChunk:         rng.IntN(3) == 0,
			Overlap:            rng.IntN(2) == 0,
			PrefixCaching:      vo.PrefixCaching,
			Events:             true,
		}
		if rng.IntN(3) == 0 {
			spec := sched.Spec{Tokens: 1 + rng.IntN(3), AcceptRates: []float64{0.8, 0.5}}
			vo.Spec, so.Spec = spec, spec
		}
		dp := 1 + rng.IntN(2)
		name := fmt.Sprintf("%d/%v/%+v/dp%d", seed, backend, vo, dp)
		if backend == SGLang {
			name = fmt.Sprintf("%d/%v/%+v/dp%d", seed, backend, so, dp)
		}
		t.Run(name, func(t *testing.T) {
			e, err := New(Options{Backend: backend, DPSize: dp, VLLM: vo, SGLang: so, Timing: timing.Polynomial{}, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			asked := map[uint64]int{}
			got := map[uint64]int{}
			done := map[uint64]bool{}
			next, now := uint64(0), time.Duration(0)
			for pass := 0; pass < 3000 && (next < 120 || !e.Idle()); pass++ {
				for k := rng.IntN(3); k > 0 && next < 120; k-- {
					n := 1 + rng.IntN(bs*12)
					toks := make([]uint32, n)
					family := uint32(rng.IntN(4))
					for i := range toks {
						toks[i] = family*1000 + uint32(i)
						if i > n/2 {
							toks[i] = uint32(rng.IntN(1 << 20))
						}
					}
					r := &sched.Request{ID: next, Prompt: toks, MaxTokens: rng.IntN(20), Rank: rng.IntN(dp)}
					next++
					if err := e.Enqueue(r); err != nil {
						var rej *sched.RejectError
						if !errors.As(err, &rej) {
							t.Fatal(err)
						}
						done[r.ID] = true
						continue
					}
					asked[r.ID] = r.MaxTokens
				}
				if rng.IntN(50) == 0 && next > 0 {
					id := rng.Uint64N(next)
					if !done[id] && e.Cancel(id) {
						done[id] = true
						delete(asked, id)
					}
				}
				p := e.Step(now)
				if p.End < now {
					t.Fatalf("pass ends before it starts")
				}
				now = p.End
				for _, rp := range p.Ranks {
					for _, out := range rp.Outputs {
						if done[out.ID] {
							t.Fatalf("output for finished request %d", out.ID)
						}
						got[out.ID] += len(out.Tokens)
						if out.Done {
							done[out.ID] = true
							if got[out.ID] != asked[out.ID] {
								t.Fatalf("request %d emitted %d tokens, asked %d", out.ID, got[out.ID], asked[out.ID])
							}
						}
					}
				}
				if err := e.CheckInvariants(); err != nil {
					t.Fatalf("pass %d: %v", pass, err)
				}
			}
			if !e.Idle() {
				t.Fatal("work left after 3000 passes")
			}
			for _, m := range e.Metrics() {
				if backend == TRTLLM && m.Preemptions != 0 {
					t.Fatalf("%d preemptions under guaranteed_no_evict", m.Preemptions)
				}
			}
			for id := range asked {
				if !done[id] {
					t.Fatalf("request %d never finished", id)
				}
			}
		})
	}
}

// TestSGLangDecodeSpeedup ports test_decode_speedup_ratio_scales_sglang_decode_time: a decode speed-up
// of 4 makes SGLang's decode passes 4 times shorter and leaves prefill alone.
func TestSGLangDecodeSpeedup(t *testing.T) {
	so := sglang.Options{PageSize: 4, NumPages: 64, MaxPrefillTokens: 16384, ChunkedPrefillSize: 8192, ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true}
	var costs [2][2]time.Duration
	for i, ratio := range []float64{1, 4} {
		e, err := New(Options{Backend: SGLang, SGLang: so, Timing: timing.Scaled{Model: timing.Polynomial{}, DecodeSpeedup: ratio}})
		if err != nil {
			t.Fatal(err)
		}
		e.Enqueue(&sched.Request{ID: 1, Prompt: make([]uint32, 12), MaxTokens: 3})
		p := e.Step(0)
		costs[i][0] = p.Ranks[0].Cost.Prefill
		p = e.Step(p.End)
		costs[i][1] = p.Ranks[0].Cost.Decode
	}
	if costs[0][0] != costs[1][0] || costs[1][1] != time.Duration(math.Round(float64(costs[0][1])/4)) {
		t.Fatalf("prefill %v vs %v, decode %v vs %v: want equal prefill and decode / 4", costs[0][0], costs[1][0], costs[0][1], costs[1][1])
	}
}

// TestEventVisibility: SGLang's KV events are visible at the end of the pass, vLLM's (the reference's
// default) at its start.
func TestEventVisibility(t *testing.T) {
	for _, tc := range []struct {
		b   Backend
		end bool
	}{{VLLM, false}, {TRTLLM, false}, {SGLang, true}} {
		e, err := New(Options{Backend: tc.b, VLLM: vllm.Options{BlockSize: 4, NumBlocks: 8}, Timing: timing.Polynomial{},
			SGLang: sglang.Options{PageSize: 4, NumPages: 8, MaxPrefillTokens: 64, ClipMaxNewTokens: 8, Conservativeness: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if e.EventsAtPassEnd() != tc.end {
			t.Errorf("%v: events at pass end = %v, want %v", tc.b, e.EventsAtPassEnd(), tc.end)
		}
	}
}
