package sim

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// TestLookaheadChangesNothing: workers that run ahead of the event heap between arrivals, on one thread
// or on lanes, produce the report, byte for byte, of strict time order, across backends, routers,
// visibility, queueing and a frontend latency (whose route events bound the lookahead as arrivals do);
// each router target hears the same KV events at the same times in the same order, coasts through block
// boundaries included, and delayed events reach the routers in the same order overall.
func TestLookaheadChangesNothing(t *testing.T) {
	vllmEngine := engine.Options{
		VLLM:   vllm.Options{BlockSize: 16, NumBlocks: 150, MaxNumSeqs: 16, MaxBatchedTokens: 512, ChunkedPrefill: true, PrefixCaching: true, Events: true},
		Timing: timing.Polynomial{}}
	sglangEngine := engine.Options{Backend: engine.SGLang,
		SGLang: sglang.Options{PageSize: 16, NumPages: 150, MaxPrefillTokens: 1024, ChunkedPrefillSize: 512, ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true, Events: true},
		Timing: timing.Polynomial{}}
	trtEngine := vllmEngine
	trtEngine.Backend, trtEngine.DPSize = engine.TRTLLM, 2
	kv := router.DefaultOptions()
	kv.QueueThreshold = 0
	queueing := router.DefaultOptions()
	queueing.QueueThreshold = 0.5
	rr := router.DefaultOptions()
	rr.Policy = router.RoundRobin

	single := func(seed uint64) workload.Source {
		src, err := workload.NewSynthetic(workload.SyntheticOptions{
			NumRequests: 150, Input: workload.Length{Mean: 400, Stddev: 150}, Output: workload.Length{Mean: 60, Stddev: 30},
			RequestRate: 40, Arrival: "poisson", SharedPrefixRatio: 0.5, NumPrefixGroups: 4, Seed: seed,
		})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	for _, tc := range []struct {
		name string
		o    Options
		src  func(uint64) workload.Source
	}{
		{"vllm-kv", Options{Workers: 4, Engine: vllmEngine, Router: kv}, single},
		{"vllm-kv-queueing", Options{Workers: 4, Engine: vllmEngine, Router: queueing}, single},
		{"vllm-kv-pass-end-delayed", Options{Workers: 3, Engine: vllmEngine, Router: kv, RouterEventsAtPassEnd: true, RouterEventDelay: 30 * time.Millisecond}, single},
		{"sglang-kv", Options{Workers: 3, Engine: sglangEngine, Router: kv}, single},
		{"trtllm-dp2-round-robin", Options{Workers: 2, Engine: trtEngine, Router: rr}, single},
		{"vllm-multi-turn", Options{Workers: 3, Engine: vllmEngine, Router: kv}, func(seed uint64) workload.Source { return synthetic(t, seed) }},
		{"vllm-kv-frontend", Options{Workers: 4, Engine: vllmEngine, Router: kv, FrontendLatency: 14 * time.Millisecond}, single},
		{"vllm-kv-queueing-frontend", Options{Workers: 4, Engine: vllmEngine, Router: queueing, FrontendLatency: 7300 * time.Microsecond}, single},
		{"sglang-multi-turn-frontend", Options{Workers: 3, Engine: sglangEngine, Router: kv, FrontendLatency: 14 * time.Millisecond}, func(seed uint64) workload.Source { return synthetic(t, seed) }},
		{"vllm-agentic", Options{Workers: 3, Engine: vllmEngine, Router: kv}, func(uint64) workload.Source { return agentic(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.noLookahead = true
			var heard heardLog
			o.heard = heard.add
			strict := run(t, tc.src(3), o) // with invariant checks after every pass
			want := heard
			// Lookahead with invariant checks, then without (then plain decode passes coast too), on one
			// thread and on four (the windows' workers on lanes).
			for _, check := range []bool{true, false} {
				for _, threads := range []int{1, 4} {
					o := tc.o
					o.CheckInvariants, o.Threads = check, threads
					heard = heardLog{}
					o.heard = heard.add
					ahead, err := Run(tc.src(3), o)
					if err != nil {
						t.Fatal(err)
					}
					if a, b := reportBytes(t, ahead), reportBytes(t, strict); !bytes.Equal(a, b) {
						t.Fatalf("checks %v, %d threads: reports differ:\n%s\n---\n%s", check, threads, a[:min(len(a), 2000)], b[:min(len(b), 2000)])
					}
					if err := heard.same(&want, o.RouterEventDelay > 0); err != nil {
						t.Fatalf("checks %v, %d threads: %v", check, threads, err)
					}
					if ahead.End != strict.End || ahead.Passes != strict.Passes {
						t.Fatalf("checks %v, %d threads: end %v / %v, passes %d / %d", check, threads, ahead.End, strict.End, ahead.Passes, strict.Passes)
					}
					if threads == 4 && tc.o.Workers > 1 && ahead.laned == 0 {
						t.Fatalf("checks %v: no window ran on lanes", check)
					}
					// vLLM's scheduler (TensorRT-LLM's too) coasts through block boundaries, unchecked.
					if !check && tc.o.Engine.Backend != engine.SGLang && ahead.crossed == 0 {
						t.Fatalf("%d threads: of %d passes coasted, none with KV events", threads, ahead.coasted)
					}
					t.Logf("checks %v, %d threads: %d of %d passes delivered ahead, %d coasted (%d with KV events), %d stretches on lanes; %d preemptions",
						check, threads, ahead.ahead, ahead.Passes, ahead.coasted, ahead.crossed, ahead.laned, ahead.Summary.Preemptions)
				}
			}
			if strict.ahead != 0 {
				t.Fatalf("%d passes delivered ahead with lookahead off", strict.ahead)
			}
		})
	}
}

// heardLog keeps the KV events routers hear (Options.heard), with when: per target in order, and all in
// order.
type heardLog struct {
	byTarget map[string][]string
	all      []string
}

func (h *heardLog) add(p *pool, t router.Target, epoch uint32, at time.Duration, ev kvcache.Event) {
	if h.byTarget == nil {
		h.byTarget = map[string][]string{}
	}
	k := fmt.Sprintf("%s %d/%d", p.name, t.Worker, t.Rank)
	h.byTarget[k] = append(h.byTarget[k], fmt.Sprintf("%v %d %v", at, epoch, ev))
	h.all = append(h.all, k+" "+ev.String())
}

// same reports where h differs from want: a target's events, or with global, the order of all.
func (h *heardLog) same(want *heardLog, global bool) error {
	if len(h.byTarget) != len(want.byTarget) || len(h.all) != len(want.all) {
		return fmt.Errorf("routers heard %d events of %d targets, want %d of %d", len(h.all), len(h.byTarget), len(want.all), len(want.byTarget))
	}
	for k, evs := range want.byTarget {
		if got := h.byTarget[k]; !slices.Equal(got, evs) {
			i := 0
			for i < min(len(got), len(evs)) && got[i] == evs[i] {
				i++
			}
			return fmt.Errorf("target %s heard %d events, want %d; from %d: %.300q, want %.300q", k, len(got), len(evs), i, got[i:], evs[i:])
		}
	}
	if global && !slices.Equal(h.all, want.all) {
		return fmt.Errorf("routers heard the events in another order")
	}
	return nil
}

// agentic is a trace of 20 agents: each one's first request launches three subagents (sessions of one
// request, whose ends send no later turn of their own) and its second waits for all three.
func agentic(t *testing.T) workload.Source {
	var b strings.Builder
	ids := func(first, n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = strconv.Itoa(first + i)
		}
		return strings.Join(s, ", ")
	}
	for a := range 20 {
		p := fmt.Sprintf("a%d", a)
		fmt.Fprintf(&b, `{"request_id": "%s-0", "session_id": "%s", "timestamp": %d, "input_length": 320, "output_length": %d, "hash_ids": [%s]}`+"\n",
			p, p, a*40, 20+a%7, ids(a*1000, 20))
		for c := range 3 {
			fmt.Fprintf(&b, `{"request_id": "%s-c%d", "session_id": "%s-c%d", "timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%s], "wait_for": ["%s-0"], "delay": %d}`+"\n",
				p, c, p, c, a*40+1, 160+64*c, 10+9*c+a%5, ids(a*1000, 5)+", "+ids(a*1000+100*(c+1), 5+4*c), p, 3*c)
		}
		fmt.Fprintf(&b, `{"request_id": "%s-1", "session_id": "%s", "timestamp": %d, "input_length": 480, "output_length": 12, "hash_ids": [%s], "wait_for": ["%s-0", "%s-c0", "%s-c1", "%s-c2"], "tool_wait_ms": 4}`+"\n",
			p, p, a*40+2, ids(a*1000, 30), p, p, p, p)
	}
	src, err := workload.ReadTrace(strings.NewReader(b.String()), "agentic.jsonl", workload.TraceOptions{TraceBlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	return src
}
