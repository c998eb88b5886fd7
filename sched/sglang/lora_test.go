package sglang

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/internal/book"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// TestLoRAsShareNoPages: the same prompt under another adapter matches nothing in the radix cache; under
// the same adapter, its whole pages but for the last token's.
func TestLoRAsShareNoPages(t *testing.T) {
	newHarness(t, opts(4, 64)).LoRAsShareNothing(12)
}

// loraHarness drives a scheduler over 64 pages of page tokens with max-loras-per-batch n; its enqueue
// enqueues request id, of a 4-token prompt of its own, under adapter lora.
func loraHarness(t *testing.T, page, n int) (*schedtest.Harness[*Scheduler], func(id uint64, lora string, maxTokens int)) {
	o := opts(page, 64)
	o.MaxLoRAsPerBatch = n
	h := newHarness(t, o)
	return h, func(id uint64, lora string, maxTokens int) {
		t.Helper()
		h.EnqueueLoRA(id, schedtest.Prompt(100*int(id), 4), maxTokens, lora)
	}
}

// TestMaxLoRAsPerBatch is a worked case of SGLang's rule: a waiting request whose adapter would take the
// batch (running, chunked and admitted requests) past max-loras-per-batch distinct adapters, the base
// model counting as one, is skipped and keeps its place; requests behind it are admitted, and a
// base-model request never waits for it. The memory pool keeps max-loras-per-batch adapters loaded (LRU);
// each load is counted in the pass that first uses the adapter.
func TestMaxLoRAsPerBatch(t *testing.T) {
	h, enqueue := loraHarness(t, 4, 2)
	for i, lora := range []string{"a", "b", "c", "a", "", "b", "c"} {
		enqueue(uint64(i+1), lora, 2)
	}
	h.LoRAPasses(
		schedtest.LoRAPass{Admitted: []uint64{1, 2, 4, 5, 6}, Loads: 2, Running: "a,b", Waiting: "c"}, // 3 and 7 (c) skipped: a and b fill the batch; the base model joins
		schedtest.LoRAPass{Waiting: "c"},                                     // the running a, b and base still count: c waits; the five finish
		schedtest.LoRAPass{Admitted: []uint64{3, 7}, Loads: 1, Running: "c"}, // c loads; a, least recently used, leaves the pool
		schedtest.LoRAPass{},                                                 // 3 and 7 finish
	)
	// The base model takes one of the two places: b waits for a's request to finish, and a loads again.
	enqueue(10, "", 1)
	enqueue(11, "a", 1)
	enqueue(12, "b", 1)
	h.LoRAPasses(
		schedtest.LoRAPass{Admitted: []uint64{10, 11}, Loads: 1, Waiting: "b"},
		schedtest.LoRAPass{Admitted: []uint64{12}, Loads: 1}, // b left the pool when a came back: it loads again
	)
	if m := h.S.Metrics(); m.LoRALoads != 5 || !h.S.Idle() || h.S.book.WithLoRA != 0 {
		t.Fatalf("metrics %+v, idle %v, %d requests with adapters: want 5 loads, idle, none", m, h.S.Idle(), h.S.book.WithLoRA)
	}
}

// TestMaxLoRAsPerBatchChunked: a prompt prefilled in chunks holds its adapter's place in every pass it
// runs, as SGLang's chunked request does (test_chunked_request_lora_admission_rejected).
func TestMaxLoRAsPerBatchChunked(t *testing.T) {
	o := opts(4, 64)
	o.ChunkedPrefillSize, o.MaxLoRAsPerBatch = 8, 1
	h := newHarness(t, o)
	for i, c := range []struct {
		lora string
		len  int
	}{{"a", 20}, {"b", 4}} {
		h.EnqueueLoRA(uint64(i+1), schedtest.Prompt(100*i, c.len), 1, c.lora)
	}
	var got [][]uint64
	loads := 0
	for range 4 {
		p := h.Step()
		loads += p.LoRALoads
		got = append(got, schedtest.Admitted(p))
	}
	// 1's chunks of 8, 8 and 4 tokens, then 2 (the pool of one adapter swaps a for b).
	if want := [][]uint64{{1}, nil, nil, {2}}; !slices.EqualFunc(got, want, slices.Equal) || loads != 2 {
		t.Fatalf("admitted by pass %v with %d loads, want %v with 2", got, loads, want)
	}
}

func TestMaxLoRAsPerBatchValidate(t *testing.T) {
	o := opts(4, 64)
	o.MaxLoRAsPerBatch = -1
	if _, err := New(o); err == nil || err.Error() != "max-loras-per-batch -1: must not be negative" {
		t.Fatalf("New: %v", err)
	}
}

// TestLoRAPlainStep: plain decode passes use the running requests' adapters as Step's decode does, so
// the pool evicts the same adapters after them. Requests of b then a run, and b's second request makes a
// the least recently used; two decode passes use b then a, so d's load evicts b, and the next decode
// loads b, evicting a, then a, evicting c: 6 loads in all.
func TestLoRAPlainStep(t *testing.T) {
	for _, plain := range []bool{false, true} {
		h, enqueue := loraHarness(t, 16, 3)
		loads, plains := 0, 0
		step := func() {
			if plain && h.S.PlainDecode() {
				h.S.PlainStep(nil)
				plains++
				return
			}
			loads += h.Step().LoRALoads
		}
		enqueue(1, "b", 8)
		enqueue(2, "a", 8)
		step()
		enqueue(3, "b", 1) // an extend pass of b alone: the pool's order is a, b
		step()
		step()
		step()
		enqueue(4, "c", 1)
		step()
		enqueue(5, "d", 1)
		step()
		for !h.S.Idle() {
			step()
		}
		if loads != 6 || plain != (plains > 0) {
			t.Errorf("plain %v: %d loads (%d plain passes); want 6", plain, loads, plains)
		}
	}
}

// TestLoRARandom serves random workloads over five adapters and the base model on two schedulers, one
// through Step alone and one through PlainStep whenever PlainDecode holds: after every pass the running
// requests name at most max-loras-per-batch adapters, the pool holds at most as many, and both
// schedulers admit the same requests and load the same adapters in every pass Step plans.
func TestLoRARandom(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		o := opts(4+12*rng.IntN(2), 96)
		o.MaxRunning, o.MaxLoRAsPerBatch, o.MixedChunk = 2+rng.IntN(8), 1+rng.IntN(4), rng.IntN(2) == 0
		o.ChunkedPrefillSize = o.PageSize * (2 + rng.IntN(8))
		ref, fast := newHarness(t, o), newHarness(t, o)
		loras := []string{"", "a", "b", "c", "d", "e"}
		var reqs []*sched.Request
		for i := range 60 {
			reqs = append(reqs, &sched.Request{ID: uint64(i + 1), Prompt: schedtest.Prompt(1000*i, 1+rng.IntN(40)),
				MaxTokens: 1 + rng.IntN(30), LoRA: loras[rng.IntN(len(loras))]})
		}
		refLoads, fastLoads, plains := 0, 0, 0
		for pass := 0; len(reqs) > 0 || !ref.S.Idle(); pass++ {
			if pass > 5000 {
				t.Fatalf("seed %d: not done after 5000 passes", seed)
			}
			if rng.IntN(4) == 0 {
				for k := 1 + rng.IntN(4); k > 0 && len(reqs) > 0; k-- {
					r := *reqs[0]
					if ref.S.Enqueue(reqs[0]) != nil || fast.S.Enqueue(&r) != nil {
						t.Fatalf("seed %d: request %d refused", seed, r.ID)
					}
					reqs = reqs[1:]
				}
			}
			if ref.S.Idle() {
				continue
			}
			if fast.S.PlainDecode() {
				fast.S.PlainStep(nil)
				plains++
				if p := ref.Step(); len(p.Admitted) > 0 || p.LoRALoads > 0 {
					t.Fatalf("seed %d pass %d: a plain pass for one, %+v for the other", seed, pass, p)
				}
				continue
			}
			p, q := ref.Step(), fast.Step()
			refLoads += p.LoRALoads
			fastLoads += q.LoRALoads
			if !slices.Equal(schedtest.Admitted(p), schedtest.Admitted(q)) || p.LoRALoads != q.LoRALoads {
				t.Fatalf("seed %d pass %d: admitted %v with %d loads, and %v with %d after plain passes",
					seed, pass, schedtest.Admitted(p), p.LoRALoads, schedtest.Admitted(q), q.LoRALoads)
			}
			for _, s := range []*Scheduler{ref.S, fast.S} {
				var named []string
				for _, r := range s.running {
					named = book.AppendLoRA(named, r.LoRA)
				}
				if len(named) > o.MaxLoRAsPerBatch || len(s.resident) > o.MaxLoRAsPerBatch {
					t.Fatalf("seed %d pass %d: running adapters %v, loaded %v: more than %d", seed, pass, named, s.resident, o.MaxLoRAsPerBatch)
				}
			}
		}
		if refLoads != fastLoads || refLoads == 0 {
			t.Fatalf("seed %d: %d and %d loads", seed, refLoads, fastLoads)
		}
		if seed == 0 && plains == 0 {
			t.Fatalf("no plain pass: the check lost its teeth")
		}
	}
}

// TestActivatedLoRAs: a decode worker's arrived transfers join the running requests only while their
// adapters fit max-loras-per-batch; one that does not waits, keeping its place, and those behind it
// join. Without the rule the running batch would use three adapters, loading one of them every pass.
func TestActivatedLoRAs(t *testing.T) {
	o := opts(4, 64)
	o.Role, o.MaxLoRAsPerBatch = sched.Decode, 2
	h := newHarness(t, o)
	for i, lora := range []string{"a", "b", "c", "a"} {
		id := uint64(i + 1)
		if _, ok, err := h.S.Reserve(&sched.Request{ID: id, Prompt: schedtest.Prompt(100*i, 10), MaxTokens: 3, LoRA: lora}); !ok || err != nil {
			t.Fatalf("Reserve %d: %v %v", id, ok, err)
		}
		h.S.Activate(id)
	}
	var admitted [][]uint64
	loads := 0
	for !h.S.Idle() {
		p := h.Step()
		admitted = append(admitted, schedtest.Admitted(p))
		loads += p.LoRALoads
	}
	// 1, 2 and 4 decode their 3 tokens (the first of them in their first pass), then 3 (c evicts a).
	if want := [][]uint64{{1, 2, 4}, nil, nil, {3}, nil, nil}; !slices.EqualFunc(admitted, want, slices.Equal) || loads != 3 {
		t.Fatalf("admitted by pass %v with %d loads; want %v with 3", admitted, loads, want)
	}
}
