package engine

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

func roleEngine(t *testing.T, b Backend, role sched.Role, blocks int) *Engine {
	t.Helper()
	e, err := New(Options{Backend: b, Role: role, Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5},
		VLLM:   vllm.Options{BlockSize: 4, NumBlocks: blocks, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true},
		SGLang: sglang.Options{PageSize: 4, NumPages: blocks, MaxPrefillTokens: 64, ChunkedPrefillSize: 64, ClipMaxNewTokens: 64, Conservativeness: 1, PrefixCaching: true}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func check(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestPrefillWorkerHoldsKV: a prefill worker finishes a request with its prompt, at no decode cost, and
// keeps its KV until released (reference §8: the source holds until the transfer completes).
func TestPrefillWorkerHoldsKV(t *testing.T) {
	for _, b := range []Backend{VLLM, SGLang} {
		t.Run(b.String(), func(t *testing.T) {
			e := roleEngine(t, b, sched.Prefill, 16)
			e.Enqueue(&sched.Request{ID: 1, Prompt: prompt(0, 10), MaxTokens: 1})
			p := e.Step(0)
			check(t, e)
			if p.End != 10*time.Millisecond || len(p.Ranks[0].Outputs) != 1 || !p.Ranks[0].Outputs[0].Done {
				t.Fatalf("pass ends %v with outputs %+v: want a 10 ms prefill-only pass finishing the request", p.End, p.Ranks[0].Outputs)
			}
			if m := e.Metrics()[0]; m.ActiveBlocks != 3 || !e.Idle() {
				t.Fatalf("after the prefill: %+v, idle %v; want 3 held blocks and nothing to run", m, e.Idle())
			}
			if !e.Release(0, 1) || e.Release(0, 1) {
				t.Fatal("Release reported wrongly")
			}
			check(t, e)
			if m := e.Metrics()[0]; m.ActiveBlocks != 0 || m.InactiveBlocks != 2 {
				t.Fatalf("after release: %+v; want the 2 full blocks cached, nothing active", m)
			}
		})
	}
}

// TestDecodeWorkerReservesAndActivates: a decode worker reserves the prompt's room, is told how much of
// the prompt it lacks (only the missing blocks travel), and decodes from the first token once activated.
func TestDecodeWorkerReservesAndActivates(t *testing.T) {
	for _, b := range []Backend{VLLM, SGLang} {
		t.Run(b.String(), func(t *testing.T) {
			e := roleEngine(t, b, sched.Decode, 8)
			missing, ok, err := e.Reserve(&sched.Request{ID: 1, Prompt: prompt(0, 10), MaxTokens: 2})
			if err != nil || !ok || missing != 10 {
				t.Fatalf("Reserve = %d, %v, %v; want all 10 tokens missing", missing, ok, err)
			}
			check(t, e)
			if !e.Idle() {
				t.Fatal("a reservation is not work yet")
			}
			e.Activate(0, 1)
			p := e.Step(0)
			check(t, e)
			rp := p.Ranks[0]
			if p.End != 5*time.Millisecond || len(rp.Outputs) != 1 || len(rp.Outputs[0].Tokens) != 1 || rp.Batch.Seqs[0].Prefill {
				t.Fatalf("first pass ends %v, outputs %+v, batch %+v: want one 5 ms decode step with the first token", p.End, rp.Outputs, rp.Batch.Seqs)
			}
			p = e.Step(p.End)
			if !p.Ranks[0].Outputs[0].Done || !e.Idle() {
				t.Fatalf("second pass %+v", p.Ranks[0].Outputs)
			}
			check(t, e)

			// The same prompt again: its two full blocks are cached here, only the tail travels.
			missing, ok, _ = e.Reserve(&sched.Request{ID: 2, Prompt: prompt(0, 10), MaxTokens: 2})
			if !ok || missing != 2 {
				t.Fatalf("Reserve of a cached prompt: %d missing, want 2", missing)
			}
			missing, ok, _ = e.Reserve(&sched.Request{ID: 3, Prompt: prompt(0, 8), MaxTokens: 2})
			if !ok || missing != 0 {
				t.Fatalf("Reserve of a fully cached prompt: %d missing, want 0", missing)
			}
			check(t, e)
			if !e.Unreserve(0, 2) || !e.Unreserve(0, 3) {
				t.Fatal("Unreserve failed")
			}
			check(t, e)
		})
	}
}

// TestReserveWaitsForCapacity: a destination that cannot hold the prompt says so, and accepts it once
// capacity frees.
func TestReserveWaitsForCapacity(t *testing.T) {
	for _, b := range []Backend{VLLM, SGLang} {
		t.Run(b.String(), func(t *testing.T) {
			e := roleEngine(t, b, sched.Decode, 4)
			if _, ok, _ := e.Reserve(&sched.Request{ID: 1, Prompt: prompt(0, 12), MaxTokens: 4}); !ok {
				t.Fatal("first reservation failed")
			}
			if _, ok, err := e.Reserve(&sched.Request{ID: 2, Prompt: prompt(100, 8), MaxTokens: 2}); ok || err != nil {
				t.Fatalf("second reservation: ok %v err %v; want a retry later", ok, err)
			}
			check(t, e)
			e.Activate(0, 1)
			for now := time.Duration(0); !e.Idle(); {
				now = e.Step(now).End
			}
			if _, ok, _ := e.Reserve(&sched.Request{ID: 2, Prompt: prompt(100, 8), MaxTokens: 2}); !ok {
				t.Fatal("reservation still refused after the pool freed")
			}
			check(t, e)
		})
	}
}

func prompt(base, n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(base + i)
	}
	return p
}

// TestCancelAtEveryStage cancels a disaggregated request at each stage it passes through on either side
// (prefill: waiting, part prefilled, held for its transfer; decode: reserved while its KV arrives,
// activated but not yet admitted, decoding) and checks that Cancel finds it and that exactly its
// computed full blocks stay behind, cached and inactive: nothing active, nothing held, nothing queued.
func TestCancelAtEveryStage(t *testing.T) {
	stages := []struct {
		name     string
		role     sched.Role
		reach    func(t *testing.T, e *Engine) // brings request 1 to the stage
		active   int                           // its blocks there
		inactive int                           // full blocks cached after the cancel
	}{
		{"prefill waiting", sched.Prefill, func(t *testing.T, e *Engine) {
			e.Enqueue(&sched.Request{ID: 1, Prompt: prompt(0, 10), MaxTokens: 1})
		}, 0, 0},
		{"prefill chunked", sched.Prefill, func(t *testing.T, e *Engine) {
			e.Enqueue(&sched.Request{ID: 1, Prompt: prompt(0, 100), MaxTokens: 1})
			if p := e.Step(0); len(p.Ranks[0].Outputs) != 0 {
				t.Fatalf("a 100-token prompt finished in one 64-token chunk: %+v", p.Ranks[0].Outputs)
			}
		}, 16, 16},
		{"prefill held", sched.Prefill, func(t *testing.T, e *Engine) {
			e.Enqueue(&sched.Request{ID: 1, Prompt: prompt(0, 10), MaxTokens: 1})
			if p := e.Step(0); len(p.Ranks[0].Outputs) != 1 || !p.Ranks[0].Outputs[0].Done {
				t.Fatalf("prefill pass outputs %+v, want request 1 done", p.Ranks[0].Outputs)
			}
		}, 3, 2},
		{"decode reserved", sched.Decode, func(t *testing.T, e *Engine) {
			if _, ok, err := e.Reserve(&sched.Request{ID: 1, Prompt: prompt(0, 10), MaxTokens: 8}); !ok || err != nil {
				t.Fatalf("Reserve: %v %v", ok, err)
			}
		}, 3, 0},
		{"decode activated", sched.Decode, func(t *testing.T, e *Engine) {
			e.Reserve(&sched.Request{ID: 1, Prompt: prompt(0, 10), MaxTokens: 8})
			if !e.Activate(0, 1) {
				t.Fatal("Activate failed")
			}
		}, 3, 2},
		{"decoding", sched.Decode, func(t *testing.T, e *Engine) {
			e.Reserve(&sched.Request{ID: 1, Prompt: prompt(0, 10), MaxTokens: 8})
			e.Activate(0, 1)
			if p := e.Step(0); len(p.Ranks[0].Outputs) != 1 || p.Ranks[0].Outputs[0].Done {
				t.Fatalf("decode pass outputs %+v, want one token of request 1", p.Ranks[0].Outputs)
			}
		}, 3, 2},
	}
	for _, b := range []Backend{VLLM, TRTLLM, SGLang} {
		for _, st := range stages {
			t.Run(b.String()+"/"+st.name, func(t *testing.T) {
				e := roleEngine(t, b, st.role, 64)
				st.reach(t, e)
				check(t, e)
				if m := e.Metrics()[0]; m.ActiveBlocks != st.active {
					t.Fatalf("before the cancel: %+v; want %d active blocks", m, st.active)
				}
				if !e.Cancel(1) {
					t.Fatal("Cancel did not find the request")
				}
				check(t, e)
				if m := e.Metrics()[0]; m.ActiveBlocks != 0 || m.InactiveBlocks != st.inactive || m.Running != 0 || m.Waiting != 0 || !e.Idle() {
					t.Fatalf("after the cancel: %+v, idle %v; want 0 active and %d inactive blocks, no request", m, e.Idle(), st.inactive)
				}
				if e.Cancel(1) || e.Release(0, 1) || e.Unreserve(0, 1) || e.Activate(0, 1) {
					t.Fatal("the cancelled request is still known")
				}
			})
		}
	}
}
