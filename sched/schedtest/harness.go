package schedtest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
)

// Harness drives one scheduler in a scheduler package's own tests, checking its invariants after every
// pass.
type Harness[S Scheduler] struct {
	T *testing.T
	S S
}

// NewHarness returns a harness of s, failing the test if err (New's) is not nil.
func NewHarness[S Scheduler](t *testing.T, s S, err error) *Harness[S] {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return &Harness[S]{t, s}
}

// Enqueue enqueues a request of the prompt toks, failing the test if it is rejected.
func (h *Harness[S]) Enqueue(id uint64, toks []uint32, maxTokens int) {
	h.T.Helper()
	h.EnqueueLoRA(id, toks, maxTokens, "")
}

// EnqueueLoRA enqueues a request of the prompt toks under adapter lora, failing the test if it is
// rejected.
func (h *Harness[S]) EnqueueLoRA(id uint64, toks []uint32, maxTokens int, lora string) {
	h.T.Helper()
	if err := h.S.Enqueue(&sched.Request{ID: id, Prompt: toks, MaxTokens: maxTokens, LoRA: lora}); err != nil {
		h.T.Fatal(err)
	}
}

// Step plans a pass and checks the invariants after it.
func (h *Harness[S]) Step() *sched.Pass {
	h.T.Helper()
	p := h.S.Step()
	if err := h.S.CheckInvariants(); err != nil {
		h.T.Fatal(err)
	}
	return p
}

// Prompt returns n distinct tokens starting at base.
func Prompt(base, n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(base + i)
	}
	return p
}

// Admitted lists the ids of a pass's admissions.
func Admitted(p *sched.Pass) []uint64 {
	var ids []uint64
	for _, a := range p.Admitted {
		ids = append(ids, a.ID)
	}
	return ids
}

// LoRAPass is what LoRAPasses expects of a pass: the requests it admits, the adapters it loads, and the
// adapters of the running and the waiting requests after it (Metrics' RunningLoRAs, WaitingLoRAs).
type LoRAPass struct {
	Admitted         []uint64
	Loads            int
	Running, Waiting string
}

// LoRAPasses steps one pass for each of want, failing the test unless it does what that one expects.
func (h *Harness[S]) LoRAPasses(want ...LoRAPass) {
	h.T.Helper()
	for i, w := range want {
		p := h.Step()
		m := h.S.Metrics()
		if got := Admitted(p); !slices.Equal(got, w.Admitted) || p.LoRALoads != w.Loads || m.RunningLoRAs != w.Running || m.WaitingLoRAs != w.Waiting {
			h.T.Fatalf("pass %d: admitted %v, loads %d, running %q, waiting %q; want %v, %d, %q, %q",
				i+1, got, p.LoRALoads, m.RunningLoRAs, m.WaitingLoRAs, w.Admitted, w.Loads, w.Running, w.Waiting)
		}
	}
}

// Outputs summarises a pass's outputs as "id:tokens[:done]".
func Outputs(p *sched.Pass) []string {
	var s []string
	for _, o := range p.Outputs {
		x := fmt.Sprintf("%d:%d", o.ID, len(o.Tokens))
		if o.Done {
			x += ":done"
		}
		s = append(s, x)
	}
	return s
}

// Drain steps until the scheduler is idle, failing the test after 100,000 passes, and returns the tokens
// and completions it output.
func (h *Harness[S]) Drain() (tokens, done int) {
	h.T.Helper()
	for passes := 0; !h.S.Idle(); passes++ {
		if passes > 100000 {
			h.T.Fatal("no progress")
		}
		for _, o := range h.Step().Outputs {
			tokens += len(o.Tokens)
			if o.Done {
				done++
			}
		}
	}
	return tokens, done
}

// EnqueueMany enqueues requests 0 to n-1, each of a distinct prompt of length tokens but for its first
// shared ones, which all have, asking for maxTokens each.
func (h *Harness[S]) EnqueueMany(n, length, shared, maxTokens int) {
	h.T.Helper()
	for i := range n {
		toks := Prompt(i*1000, length)
		copy(toks, Prompt(1<<30, shared))
		h.Enqueue(uint64(i), toks, maxTokens)
	}
}

// LoRAsShareNothing enqueues one 13-token prompt under adapters a, b and none, then under each again,
// running each request to completion before the next, and fails the test unless each first admission
// finds nothing cached and each second finds cached tokens: blocks are hashed with their adapter.
func (h *Harness[S]) LoRAsShareNothing(cached int) {
	h.T.Helper()
	p := Prompt(1, 13)
	for i, c := range []struct {
		lora   string
		cached int
	}{{"a", 0}, {"b", 0}, {"", 0}, {"a", cached}, {"b", cached}, {"", cached}} {
		if err := h.S.Enqueue(&sched.Request{ID: uint64(i + 1), Prompt: p, MaxTokens: 1, LoRA: c.lora}); err != nil {
			h.T.Fatal(err)
		}
		pass := h.Step()
		h.Drain()
		if len(pass.Admitted) != 1 || pass.Admitted[0].Cached != c.cached {
			h.T.Fatalf("request %d (adapter %q): admitted %+v, want %d cached tokens", i+1, c.lora, pass.Admitted, c.cached)
		}
	}
}
