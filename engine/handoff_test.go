package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

// TestActivatedTransfersRespectMaxRunning: a decode worker with room for one running request keeps the
// second activated transfer waiting (holding its KV) until the first finishes.
func TestActivatedTransfersRespectMaxRunning(t *testing.T) {
	for _, b := range []Backend{VLLM, SGLang} {
		t.Run(b.String(), func(t *testing.T) {
			e, err := New(Options{Backend: b, Role: sched.Decode, Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5},
				VLLM:   vllm.Options{BlockSize: 4, NumBlocks: 32, MaxNumSeqs: 1, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true},
				SGLang: sglang.Options{PageSize: 4, NumPages: 32, MaxRunning: 1, MaxPrefillTokens: 64, ChunkedPrefillSize: 64, ClipMaxNewTokens: 64, Conservativeness: 1, PrefixCaching: true}})
			if err != nil {
				t.Fatal(err)
			}
			for id := uint64(1); id <= 2; id++ {
				if _, ok, err := e.Reserve(&sched.Request{ID: id, Prompt: prompt(int(id)*100, 8), MaxTokens: 2}); !ok || err != nil {
					t.Fatalf("reserve %d: %v %v", id, ok, err)
				}
				e.Activate(0, id)
			}
			var running []int
			for !e.Idle() {
				e.Step(0)
				check(t, e)
				running = append(running, e.Metrics()[0].Running)
			}
			if slices.Max(running) != 1 {
				t.Fatalf("running per pass %v: want at most 1", running)
			}
		})
	}
}

// TestOneTokenPromptTransfer: a decode worker receiving a one-token prompt decodes it from the block it
// reserved, and frees that block when done (vLLM once admitted it as a fresh request and leaked the
// reservation).
func TestOneTokenPromptTransfer(t *testing.T) {
	for _, b := range []Backend{VLLM, SGLang} {
		t.Run(b.String(), func(t *testing.T) {
			e := roleEngine(t, b, sched.Decode, 8)
			e.Reserve(&sched.Request{ID: 1, Prompt: prompt(0, 1), MaxTokens: 3})
			e.Activate(0, 1)
			check(t, e)
			tokens := 0
			for !e.Idle() {
				p := e.Step(0)
				check(t, e)
				for _, out := range p.Ranks[0].Outputs {
					tokens += len(out.Tokens)
				}
			}
			if m := e.Metrics()[0]; tokens != 3 || m.ActiveBlocks != 0 {
				t.Fatalf("%d tokens, %d blocks still active; want 3 and 0", tokens, m.ActiveBlocks)
			}
		})
	}
}

// TestEventsFollowCache: with speculative decoding, after every pass the KV events so far describe exactly
// the blocks the engine caches (the blocks accepted drafts complete are announced by their own pass).
func TestEventsFollowCache(t *testing.T) {
	for _, b := range []Backend{VLLM, TRTLLM, SGLang} {
		t.Run(b.String(), func(t *testing.T) {
			spec := sched.Spec{Tokens: 3, AcceptRates: []float64{0.9, 0.7, 0.5}}
			e, err := New(Options{Backend: b, Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5}, Seed: 7,
				VLLM:   vllm.Options{BlockSize: 2, NumBlocks: 64, MaxBatchedTokens: 16, ChunkedPrefill: true, PrefixCaching: true, Events: true, Spec: spec},
				SGLang: sglang.Options{PageSize: 2, NumPages: 64, MaxPrefillTokens: 16, ChunkedPrefillSize: 16, ClipMaxNewTokens: 64, Conservativeness: 1, PrefixCaching: true, Events: true, Spec: spec}})
			if err != nil {
				t.Fatal(err)
			}
			for id := uint64(1); id <= 4; id++ {
				if err := e.Enqueue(&sched.Request{ID: id, Prompt: prompt(int(id%2)*100, 5+int(id)), MaxTokens: 9}); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[uint64]bool{}
			for pass := 0; !e.Idle(); pass++ {
				p := e.Step(0)
				check(t, e)
				for _, ev := range p.Ranks[0].Events {
					switch ev.Kind {
					case kvcache.Stored:
						for _, blk := range ev.Blocks {
							seen[blk.Hash] = true
						}
					case kvcache.Removed:
						for _, h := range ev.Hashes {
							delete(seen, h)
						}
					}
				}
				cached := e.AppendCached(0, nil)
				if len(cached) != len(seen) {
					t.Fatalf("pass %d: events announce %d blocks, the engine caches %d", pass, len(seen), len(cached))
				}
				for _, h := range cached {
					if !seen[h] {
						t.Fatalf("pass %d: block %x cached but never announced", pass, h)
					}
				}
			}
		})
	}
}

// TestTRTLLMRejectsWhatFitsOnlyWithoutDrafts: TRT-LLM admits a request only when its prompt, its whole
// output and the draft tokens of a step fit; a request that fits only without the drafts is refused at
// once (it used to wait forever).
func TestTRTLLMRejectsWhatFitsOnlyWithoutDrafts(t *testing.T) {
	e, err := New(Options{Backend: TRTLLM, Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5},
		VLLM: vllm.Options{BlockSize: 1, NumBlocks: 8, MaxBatchedTokens: 16, ChunkedPrefill: true, Spec: sched.Spec{Tokens: 2, AcceptRates: []float64{1, 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	var rej *sched.RejectError
	if err := e.Enqueue(&sched.Request{ID: 1, Prompt: prompt(0, 4), MaxTokens: 4}); !errors.As(err, &rej) {
		t.Fatalf("4 + 4 tokens and 2 drafts in 8 blocks: %v, want a rejection", err)
	}
	if err := e.Enqueue(&sched.Request{ID: 2, Prompt: prompt(0, 4), MaxTokens: 2}); err != nil {
		t.Fatalf("4 + 2 tokens and 2 drafts in 8 blocks: %v", err)
	}
	for !e.Idle() {
		e.Step(0)
		check(t, e)
	}
}

// TestSGLangDraftsInAFullPool: a request that fills the pool with its prompt and output has no room for
// its draft tokens at the end: it verifies fewer drafts instead of taking pages the pool lacks (the
// private page count went wrong, then the radix cache panicked).
func TestSGLangDraftsInAFullPool(t *testing.T) {
	spec := sched.Spec{Tokens: 3} // every draft rejected: one token per step
	e, err := New(Options{Backend: SGLang, Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5},
		SGLang: sglang.Options{PageSize: 4, NumPages: 3, MaxPrefillTokens: 64, ChunkedPrefillSize: 64, ClipMaxNewTokens: 64, Conservativeness: 1, PrefixCaching: true, Spec: spec}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Enqueue(&sched.Request{ID: 1, Prompt: prompt(0, 4), MaxTokens: 8}); err != nil {
		t.Fatal(err)
	}
	tokens := 0
	for !e.Idle() {
		p := e.Step(0)
		check(t, e)
		for _, out := range p.Ranks[0].Outputs {
			tokens += len(out.Tokens)
		}
	}
	if tokens != 8 {
		t.Fatalf("%d tokens, want 8", tokens)
	}
}

// TestSGLangCachedPromptTransfer: a decode worker with one-token pages that already caches a whole prompt
// shares all but its last page with the next transfer of it (the first decode step recomputes the last
// token); sharing the last one too made Activate free a page of the tree (a radix panic).
func TestSGLangCachedPromptTransfer(t *testing.T) {
	e, err := New(Options{Backend: SGLang, Role: sched.Decode, Timing: timing.Fixed{PrefillMs: 10, DecodeMs: 5},
		SGLang: sglang.Options{PageSize: 1, NumPages: 32, MaxPrefillTokens: 64, ChunkedPrefillSize: 64, ClipMaxNewTokens: 64, Conservativeness: 1, PrefixCaching: true}})
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 2; id++ {
		missing, ok, err := e.Reserve(&sched.Request{ID: id, Prompt: prompt(0, 5), MaxTokens: 2})
		if want := []int{5, 1}[id-1]; !ok || err != nil || missing != want {
			t.Fatalf("reserve %d: missing %d, %v, %v; want %d", id, missing, ok, err, want)
		}
		e.Activate(0, id)
		check(t, e)
		for !e.Idle() {
			e.Step(0)
			check(t, e)
		}
	}
}

// TestTRTLLMReservationKeepsTheGuarantee: a TRT-LLM decode worker reserves a transfer only when its whole
// output fits beside what the requests it holds may still claim, as admission does; otherwise they fill
// the pool and, since nothing preempts, stall.
func TestTRTLLMReservationKeepsTheGuarantee(t *testing.T) {
	e := roleEngine(t, TRTLLM, sched.Decode, 12)
	if _, ok, err := e.Reserve(&sched.Request{ID: 1, Prompt: prompt(0, 8), MaxTokens: 20}); !ok || err != nil {
		t.Fatalf("first reservation: %v %v", ok, err)
	}
	e.Activate(0, 1)
	if _, ok, _ := e.Reserve(&sched.Request{ID: 2, Prompt: prompt(100, 8), MaxTokens: 20}); ok {
		t.Fatal("second reservation accepted: 7 + 7 blocks promised in a pool of 12")
	}
	for !e.Idle() {
		e.Step(0)
		check(t, e)
	}
	if _, ok, _ := e.Reserve(&sched.Request{ID: 2, Prompt: prompt(100, 8), MaxTokens: 20}); !ok {
		t.Fatal("second reservation refused once the first request is done")
	}
}
