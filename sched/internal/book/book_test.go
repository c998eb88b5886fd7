package book

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"
)

type req struct{ Request }

// fake is a scheduler whose hooks record what the Book asks of them.
type fake struct {
	b       *Book[*req]
	room    bool // Room's answer
	calls   []string
	created int
}

func newFake(t *testing.T, role sched.Role, spec sched.Spec) *fake {
	t.Helper()
	f := &fake{room: true}
	f.b = New(Hooks[*req]{
		New: func(bare bool) *req {
			r := f.b.Reuse()
			if r == nil {
				f.created++
				r = &req{}
			}
			*r = req{}
			if !bare {
				r.Seq = tokens.NewSequence(4)
			}
			return r
		},
		Room: func(r *req, maxTokens int) (int, bool) {
			f.calls = append(f.calls, "room")
			return 4, f.room
		},
		Remove: func(r *req) { f.calls = append(f.calls, "remove") },
		Free:   func(r *req) { f.calls = append(f.calls, "free") },
	}, Limits{MaxModelLen: 100, BlockSize: 4, NumBlocks: 8, Unit: "blocks"}, role, spec)
	return f
}

func request(id uint64, n, maxTokens int) *sched.Request {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(i)
	}
	return &sched.Request{ID: id, Prompt: p, MaxTokens: maxTokens}
}

// TestCheck: each request the engine can never serve is rejected with its reason.
func TestCheck(t *testing.T) {
	f := newFake(t, sched.Decode, sched.Spec{})
	if _, err := f.b.Enqueue(request(1, 4, 1), false); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.b.Reserve(request(2, 4, 1)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	batched, extra := newFake(t, sched.Aggregated, sched.Spec{}), newFake(t, sched.Aggregated, sched.Spec{})
	batched.b.limits.MaxBatchedTokens = 16
	extra.b.limits.MaxModelLen, extra.b.limits.Extra = 0, 2
	for _, tc := range []struct {
		b    *Book[*req]
		r    *sched.Request
		want string
	}{
		{f.b, request(3, 0, 1), "request 3 rejected: empty prompt"},
		{f.b, request(3, 4, -1), "request 3 rejected: max_tokens -1 is negative"},
		{f.b, request(1, 4, 1), "request 1 rejected: duplicate request id"},
		{f.b, request(2, 4, 1), "request 2 rejected: duplicate request id"},
		{f.b, request(3, 60, 41), "request 3 rejected: prompt (60 tokens) + max_tokens (41) exceeds max-model-len 100"},
		{f.b, request(3, 20, 13), "request 3 rejected: needs 9 KV blocks for prompt (20 tokens) + max_tokens (13), the pool has 8"},
		{batched.b, request(3, 10, 7), "request 3 rejected: prompt (10 tokens) + max_tokens (7) exceeds max-num-batched-tokens 16 with chunked prefill off"},
		{batched.b, request(3, 10, 6), ""},
		{extra.b, request(3, 20, 10), ""},
		{extra.b, request(3, 20, 11), "request 3 rejected: needs 9 KV blocks for prompt (20 tokens) + max_tokens (11), the pool has 8"},
		{extra.b, request(3, 20, math.MaxInt-3), "request 3 rejected: max_tokens 9223372036854775804 is beyond any pool"},
	} {
		err := tc.b.Check(tc.r)
		var rej *sched.RejectError
		if tc.want == "" && err != nil || tc.want != "" && (!errors.As(err, &rej) || err.Error() != tc.want) {
			t.Errorf("Check(%d tokens, max_tokens %d) = %v, want %q", tc.r.PromptLen(), tc.r.MaxTokens, err, tc.want)
		}
	}
}

// TestLifecycle: a request is live from Enqueue (or Activate) until it is finished or cancelled, held or
// reserved in a disaggregated role, and found by Cancel in each state exactly once; the Book frees its KV
// through the hook each time, and removes a live one from the scheduler's queues first.
func TestLifecycle(t *testing.T) {
	f := newFake(t, sched.Aggregated, sched.Spec{})
	r, err := f.b.Enqueue(request(1, 6, 2), false)
	if err != nil || f.b.Live[1] != r || r.Seq.Len() != 6 || r.MaxTokens != 2 || f.b.Idle() {
		t.Fatalf("Enqueue: %v, live %v, %d prompt tokens", err, f.b.Live, r.Seq.Len())
	}
	if !f.b.Cancel(1) || f.b.Cancel(1) || !f.b.Idle() || !slices.Equal(f.calls, []string{"remove", "free"}) {
		t.Fatalf("Cancel of a live request: calls %v, idle %v", f.calls, f.b.Idle())
	}

	// A prefill worker holds a finished request until Release (or Cancel).
	f = newFake(t, sched.Prefill, sched.Spec{})
	for id := range uint64(2) {
		r, _ := f.b.Enqueue(request(id, 6, 2), false)
		f.b.Finish(r)
	}
	if !f.b.Idle() || len(f.b.Held) != 2 || len(f.calls) != 0 {
		t.Fatalf("held %d, calls %v, idle %v", len(f.b.Held), f.calls, f.b.Idle())
	}
	if !f.b.Release(0) || f.b.Release(0) || !f.b.Cancel(1) || f.b.Cancel(1) || len(f.b.Held) != 0 ||
		!slices.Equal(f.calls, []string{"free", "free"}) {
		t.Fatalf("release and cancel of held requests: calls %v, %d held", f.calls, len(f.b.Held))
	}

	// A decode worker reserves, then activates or unreserves.
	f = newFake(t, sched.Decode, sched.Spec{})
	f.room = false
	if missing, ok, err := f.b.Reserve(request(1, 10, 2)); ok || err != nil || missing != 0 || len(f.b.Reserved) != 0 {
		t.Fatalf("Reserve without room: %d missing, ok %v, %v", missing, ok, err)
	}
	f.room = true
	for id := range uint64(3) {
		if missing, ok, err := f.b.Reserve(request(id, 10, 2)); !ok || err != nil || missing != 6 {
			t.Fatalf("Reserve %d: %d missing, ok %v, %v; want 6 (4 cached)", id, missing, ok, err)
		}
	}
	if f.created != 3 {
		t.Errorf("%d requests made for 4 reservations, want 3: the refused one is reused", f.created)
	}
	a := f.b.Activate(0)
	if a == nil || f.b.Live[0] != a || a.Computed != 9 || f.b.Activate(0) != nil {
		t.Fatalf("Activate: %v, computed %d", a, a.Computed)
	}
	f.calls = f.calls[:0]
	if !f.b.Unreserve(1) || f.b.Unreserve(1) || !f.b.Cancel(2) || f.b.Cancel(2) || !slices.Equal(f.calls, []string{"free", "free"}) {
		t.Fatalf("unreserve and cancel of reservations: calls %v", f.calls)
	}
	if m := f.b.Metrics(1, 0, 3, 0, 8); m.PrefixQueries != 30 || m.PrefixHits != 12 || m.Running != 1 || m.ActiveBlocks != 3 {
		t.Fatalf("metrics %+v: want 30 prompt tokens queried, 12 hit", m)
	}
}

// TestReuse: a finished request is reused for a new one only after the next Begin, when the Pass that
// may refer to it is gone.
func TestReuse(t *testing.T) {
	f := newFake(t, sched.Aggregated, sched.Spec{})
	r, _ := f.b.Enqueue(request(1, 6, 2), false)
	f.b.Cancel(1)
	if q, _ := f.b.Enqueue(request(2, 6, 2), false); q == r {
		t.Fatal("a request cancelled in this pass was reused at once")
	}
	if got := f.b.Begin(); !slices.Equal(got, []*req{r}) {
		t.Fatalf("Begin recycled %v, want the cancelled request", got)
	}
	if q, _ := f.b.Enqueue(request(3, 6, 2), false); q != r || q.ID != 3 || q.Planned != nil {
		t.Fatalf("request 3 is %p (id %d), want the cancelled one (%p) reused", q, q.ID, r)
	}
}

// TestSample: a request samples OutputToken's tokens, one per pass, and after a speculative step the bonus
// token and its accepted drafts (all of them at rate 1), never beyond MaxTokens; the accepted drafts count
// as computed, and a prefill worker's request is done after its first.
func TestSample(t *testing.T) {
	f := newFake(t, sched.Aggregated, sched.Spec{Tokens: 3, AcceptRates: []float64{1, 1, 1}})
	r, _ := f.b.Enqueue(&sched.Request{ID: 7, Prompt: []uint32{1, 2, 3, 4, 5}, MaxTokens: 6, OutputTokens: []uint32{42}}, false)
	r.Computed = 5
	// last is the output Sample added.
	last := func() sched.Output { return f.b.Pass.Outputs[len(f.b.Pass.Outputs)-1] }
	if done := f.b.Sample(&r.Request); done || !slices.Equal(last().Tokens, []uint32{42}) || r.Computed != 5 || r.Generated != 1 {
		t.Fatalf("prefill pass: %+v, computed %d, generated %d", last(), r.Computed, r.Generated)
	}
	for _, want := range []int{4, 1} { // 1 bonus + 3 drafts, then 1 left
		r.Computed++
		r.PassDrafts = 3
		start := r.Generated
		done := f.b.Sample(&r.Request)
		out := last()
		if len(out.Tokens) != want || r.Computed != r.Seq.Len()-1 || done != (want == 1) || out.Done != done || out.ID != 7 {
			t.Fatalf("speculative step: %+v, want %d tokens; computed %d of %d", out, want, r.Computed, r.Seq.Len())
		}
		for i, tok := range out.Tokens {
			if w := sched.OutputToken(7, start+i, nil); tok != w {
				t.Fatalf("token %d = %d, want %d", start+i, tok, w)
			}
		}
	}
	if done := f.b.Sample(&r.Request); r.Generated != 6 || !done || len(last().Tokens) != 0 || len(f.b.Pass.Outputs) != 4 {
		t.Fatalf("generated %d of 6, then %+v", r.Generated, f.b.Pass.Outputs)
	}

	p := newFake(t, sched.Prefill, sched.Spec{})
	q, _ := p.b.Enqueue(request(1, 4, 5), false)
	q.Computed = 4
	if p.b.Seq(&q.Request) {
		t.Fatal("a prefill worker's request samples at a decode cost")
	}
	if done := p.b.Sample(&q.Request); !done || len(p.b.Pass.Outputs[0].Tokens) != 1 {
		t.Fatalf("a prefill worker's request output %+v, want its first token, done", p.b.Pass.Outputs)
	}
}
