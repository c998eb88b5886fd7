// Package schedtest is the conformance suite every scheduler the engine drives must pass: a scheduler
// package runs it from a test with a Factory that builds its scheduler for a Shape,
//
//	func TestConformance(t *testing.T) {
//		schedtest.Run(t, func(s schedtest.Shape) (schedtest.Scheduler, error) { return New(...) })
//	}
//
// The checks drive the scheduler as the engine does, over random workloads with shared prefixes, and
// hold it to what the engine and its drivers rely on: invariants after every pass (CheckInvariants and
// the suite's own bookkeeping: admissions of waiting requests, preemptions of running ones, every output
// token the one OutputToken gives, a completion exactly at MaxTokens, metrics that count the live
// requests, an idle scheduler that plans nothing and holds no block); cancellation anywhere; the
// disaggregated roles' hand-offs; and plain decode passes (PlainDecode, PlainBatch, PlainStep) that do
// exactly what Step would. Each check is a function returning an error, so a test can also show that a
// broken scheduler fails it.
package schedtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/timing"
)

// Scheduler is what the engine needs of one data-parallel rank's scheduler.
type Scheduler = sched.Scheduler

// Shape is the pool and limits a check asks for. Factories map it onto their own options (block size
// and blocks; running requests and tokens per pass), with prefix caching on and speculative decoding off.
type Shape struct {
	BlockSize, NumBlocks         int
	MaxNumSeqs, MaxBatchedTokens int
	Role                         sched.Role
}

// Factory builds a fresh scheduler of a shape.
type Factory func(Shape) (Scheduler, error)

// Seeds is how many random workloads each check of Run replays.
var Seeds = 12

// Checks are the checks Run runs, each on one seed's workload.
var Checks = []struct {
	Name  string
	Check func(Factory, uint64) error
}{
	{"Serve", Serve}, {"Cancel", Cancel}, {"PlainDecode", PlainDecode}, {"Prefill", Prefill}, {"Decode", Decode},
}

// Run runs every check over Seeds workloads.
func Run(t *testing.T, f Factory) {
	for _, c := range Checks {
		t.Run(c.Name, func(t *testing.T) {
			for seed := range uint64(Seeds) {
				if err := c.Check(f, seed); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
		})
	}
}

// Check is Run without a test: the first failure of any check over Seeds workloads, nil if none.
func Check(f Factory) error {
	for _, c := range Checks {
		for seed := range uint64(Seeds) {
			if err := c.Check(f, seed); err != nil {
				return fmt.Errorf("%s, seed %d: %w", c.Name, seed, err)
			}
		}
	}
	return nil
}

// shape is the checks' pool: small enough that workloads preempt, large enough that every prompt fits.
func shape(rng *rand.Rand, role sched.Role) Shape {
	return Shape{BlockSize: []int{4, 16}[rng.IntN(2)], NumBlocks: 48 + rng.IntN(48), MaxNumSeqs: 4 + rng.IntN(12),
		MaxBatchedTokens: 64 + rng.IntN(192), Role: role}
}

// workload makes n requests whose prompts share prefixes (4 groups) and fit a quarter of the pool.
func workload(rng *rand.Rand, s Shape, n, maxTokens int) []*sched.Request {
	capacity := s.BlockSize * s.NumBlocks
	groups := make([][]uint32, 4)
	for g := range groups {
		for range capacity / 8 {
			groups[g] = append(groups[g], uint32(rng.IntN(50000)))
		}
	}
	reqs := make([]*sched.Request, n)
	for i := range reqs {
		g := groups[rng.IntN(len(groups))]
		prompt := slices.Clone(g[:rng.IntN(len(g))])
		for range 1 + rng.IntN(capacity/8) {
			prompt = append(prompt, uint32(rng.IntN(50000)))
		}
		reqs[i] = &sched.Request{ID: uint64(i) + 1, Prompt: prompt, MaxTokens: rng.IntN(maxTokens + 1)}
	}
	return reqs
}

// state is a request's place in the suite's model of the scheduler.
type state uint8

const (
	waiting state = iota + 1
	running
	held // prefill role: finished, its KV kept for the transfer
)

// book is the suite's bookkeeping of one scheduler.
type book struct {
	s       Scheduler
	shape   Shape
	reqs    map[uint64]*sched.Request
	state   map[uint64]state
	emitted map[uint64]int
	passes  int
	stalled int // passes in a row that planned nothing while requests were left
}

func newBook(s Scheduler, sh Shape) *book {
	return &book{s: s, shape: sh, reqs: map[uint64]*sched.Request{}, state: map[uint64]state{}, emitted: map[uint64]int{}}
}

func (b *book) enqueue(r *sched.Request) error {
	if err := b.s.Enqueue(r); err != nil {
		return fmt.Errorf("enqueue %d (%d prompt tokens, %d blocks in the pool): %w", r.ID, len(r.Prompt), b.shape.NumBlocks, err)
	}
	b.reqs[r.ID], b.state[r.ID] = r, waiting
	return nil
}

// live counts the requests the scheduler still serves (held ones are the driver's now).
func (b *book) live() int {
	n := 0
	for _, st := range b.state {
		if st != held {
			n++
		}
	}
	return n
}

// step runs one pass and checks it against the book.
func (b *book) step() (*sched.Pass, error) {
	b.passes++
	if b.stalled > 1000 {
		return nil, fmt.Errorf("no progress in %d passes: %d requests left, metrics %+v", b.stalled, b.live(), b.s.Metrics())
	}
	idle := b.s.Idle()
	p := b.s.Step()
	if b.stalled++; !p.Empty() {
		b.stalled = 0
	}
	if idle && !p.Empty() {
		return nil, fmt.Errorf("pass %d: an idle scheduler planned %+v", b.passes, p)
	}
	for _, a := range p.Admitted {
		if b.state[a.ID] != waiting {
			return nil, fmt.Errorf("pass %d: admitted request %d, which is not waiting (state %d)", b.passes, a.ID, b.state[a.ID])
		}
		// A resumed request's cached tokens run over its generated ones too.
		if n := b.reqs[a.ID].PromptLen() + b.emitted[a.ID]; a.Cached < 0 || a.Cached > n {
			return nil, fmt.Errorf("pass %d: request %d admitted with %d cached tokens of %d", b.passes, a.ID, a.Cached, n)
		}
		b.state[a.ID] = running
	}
	for _, id := range p.Preempted {
		if b.state[id] != running {
			return nil, fmt.Errorf("pass %d: preempted request %d, which is not running (state %d)", b.passes, id, b.state[id])
		}
		b.state[id] = waiting
	}
	for _, q := range p.Batch.Seqs {
		if q.New < 1 || q.Cached < 0 {
			return nil, fmt.Errorf("pass %d: batch entry %+v computes nothing", b.passes, q)
		}
	}
	for _, out := range p.Outputs {
		r, st := b.reqs[out.ID], b.state[out.ID]
		if r == nil || st != running {
			return nil, fmt.Errorf("pass %d: output for request %d, which is not running (state %d)", b.passes, out.ID, st)
		}
		for i, tok := range out.Tokens {
			if want := sched.OutputToken(r.ID, b.emitted[r.ID]+i, r.OutputTokens); tok != want {
				return nil, fmt.Errorf("pass %d: request %d token %d is %d, want %d", b.passes, r.ID, b.emitted[r.ID]+i, tok, want)
			}
		}
		b.emitted[r.ID] += len(out.Tokens)
		if err := b.finished(r, out.Done); err != nil {
			return nil, fmt.Errorf("pass %d: %w", b.passes, err)
		}
	}
	if err := b.s.CheckInvariants(); err != nil {
		return nil, fmt.Errorf("pass %d: %w", b.passes, err)
	}
	m := b.s.Metrics()
	if m.Running+m.Waiting != b.live() || m.TotalBlocks != b.shape.NumBlocks || m.ActiveBlocks < 0 ||
		m.ActiveBlocks+m.InactiveBlocks > m.TotalBlocks || m.PrefixHits > m.PrefixQueries {
		return nil, fmt.Errorf("pass %d: metrics %+v with %d live requests in a pool of %d blocks", b.passes, m, b.live(), b.shape.NumBlocks)
	}
	if w := b.s.Waiting(); w != m.Waiting {
		return nil, fmt.Errorf("pass %d: Waiting %d, metrics say %d", b.passes, w, m.Waiting)
	}
	return p, nil
}

// finished checks a request's output count at (and only at) its completion.
func (b *book) finished(r *sched.Request, done bool) error {
	n := b.emitted[r.ID]
	switch {
	case b.shape.Role == sched.Prefill:
		// The prompt's pass samples the first token, which the driver drops: the decode worker makes it.
		if n > 1 {
			return fmt.Errorf("prefill worker emitted %d tokens for request %d", n, r.ID)
		}
		if !done {
			return fmt.Errorf("prefill worker: request %d has an output but did not finish with its prompt", r.ID)
		}
		b.state[r.ID] = held
		return nil
	case n > r.MaxTokens || done && n != r.MaxTokens:
		return fmt.Errorf("request %d: %d tokens emitted (done %v) of %d", r.ID, n, done, r.MaxTokens)
	case !done && n == r.MaxTokens:
		return fmt.Errorf("request %d: all %d tokens emitted but not done", r.ID, n)
	case done:
		delete(b.state, r.ID)
	}
	return nil
}

// start builds a scheduler of a random shape for role, drawn from the check's own stream of seed.
func start(f Factory, seed, stream uint64, role sched.Role) (*book, *rand.Rand, error) {
	rng := rand.New(rand.NewPCG(seed, stream))
	sh := shape(rng, role)
	s, err := f(sh)
	if err != nil {
		return nil, nil, err
	}
	return newBook(s, sh), rng, nil
}

// arrive enqueues up to k of the requests left, taking them off reqs.
func (b *book) arrive(reqs *[]*sched.Request, k int) error {
	for ; k > 0 && len(*reqs) > 0; k-- {
		if err := b.enqueue((*reqs)[0]); err != nil {
			return err
		}
		*reqs = (*reqs)[1:]
	}
	return nil
}

// drain steps until the scheduler is idle, then checks that it is empty.
func (b *book) drain() error {
	for !b.s.Idle() {
		if _, err := b.step(); err != nil {
			return err
		}
	}
	return b.empty()
}

func (b *book) empty() error {
	if n := b.live(); n > 0 {
		return fmt.Errorf("idle with %d requests unfinished", n)
	}
	if p := b.s.Step(); !p.Empty() {
		return fmt.Errorf("idle scheduler planned %+v", p)
	}
	if m := b.s.Metrics(); m.Running != 0 || m.Waiting != 0 || m.ActiveBlocks != 0 {
		return fmt.Errorf("idle scheduler's metrics %+v: want nothing running, waiting or in use", m)
	}
	return nil
}

// Serve replays a random workload arriving over the passes and checks every pass.
func Serve(f Factory, seed uint64) error {
	b, rng, err := start(f, seed, 1, sched.Aggregated)
	if err != nil {
		return err
	}
	s := b.s
	reqs := workload(rng, b.shape, 60, 24)
	for len(reqs) > 0 || !s.Idle() {
		if err := b.arrive(&reqs, rng.IntN(4)); err != nil {
			return err
		}
		if _, err := b.step(); err != nil {
			return err
		}
	}
	return b.empty()
}

// Cancel cancels requests wherever they are; a cancelled request emits nothing more and frees its KV.
func Cancel(f Factory, seed uint64) error {
	b, rng, err := start(f, seed, 2, sched.Aggregated)
	if err != nil {
		return err
	}
	s := b.s
	reqs := workload(rng, b.shape, 60, 24)
	var gone []uint64
	for len(reqs) > 0 || !s.Idle() {
		if err := b.arrive(&reqs, rng.IntN(4)); err != nil {
			return err
		}
		if rng.IntN(3) == 0 && b.live() > 0 {
			ids := make([]uint64, 0, len(b.state))
			for id := range b.state {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			id := ids[rng.IntN(len(ids))]
			if !s.Cancel(id) {
				return fmt.Errorf("cancel of live request %d (state %d) reported unknown", id, b.state[id])
			}
			delete(b.state, id)
			gone = append(gone, id)
		}
		if len(gone) > 0 && s.Cancel(gone[rng.IntN(len(gone))]) {
			return fmt.Errorf("a request cancelled or finished before was cancelled again")
		}
		if _, err := b.step(); err != nil {
			return err
		}
	}
	if len(gone) == 0 {
		return fmt.Errorf("nothing was cancelled: the check lost its teeth")
	}
	return b.empty()
}

// PlainDecode serves one workload on two schedulers, one through Step alone and one through PlainStep
// whenever PlainDecode holds: each plain pass must be a pass Step would plan, with the same batch and
// the same tokens in the same order, and nothing else.
func PlainDecode(f Factory, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 3))
	sh := shape(rng, sched.Aggregated)
	sh.BlockSize = 16 // a pass that completes a block is not plain: small blocks leave few plain passes
	ref, err := f(sh)
	if err != nil {
		return err
	}
	fast, err := f(sh)
	if err != nil {
		return err
	}
	rb, fb := newBook(ref, sh), newBook(fast, sh)
	reqs := workload(rng, sh, 40, 64)
	var batch timing.Batch
	var samples []sched.Sample
	plain := 0
	for len(reqs) > 0 || !ref.Idle() {
		if rng.IntN(12) == 0 { // bursts, then long plain stretches
			for k := 1 + rng.IntN(6); k > 0 && len(reqs) > 0; k-- {
				r := *reqs[0]
				if err := rb.enqueue(reqs[0]); err != nil {
					return err
				}
				if err := fb.enqueue(&r); err != nil {
					return err
				}
				reqs = reqs[1:]
			}
		}
		if ref.Idle() {
			continue
		}
		if fast.PlainDecode() {
			plain++
			fast.PlainBatch(&batch)
			samples = fast.PlainStep(samples[:0])
			p, err := rb.step()
			if err != nil {
				return err
			}
			if len(p.Admitted) > 0 || len(p.Preempted) > 0 || len(p.Events) > 0 || !slices.Equal(p.Batch.Seqs, batch.Seqs) ||
				p.Batch.ActiveKVTokens != batch.ActiveKVTokens || p.Batch.TotalKVTokens != batch.TotalKVTokens || len(p.Outputs) != len(samples) {
				return fmt.Errorf("plain pass %d: Step planned %+v, PlainBatch %+v with %d samples", rb.passes, p, batch, len(samples))
			}
			for i, out := range p.Outputs {
				if out.Done || len(out.Tokens) != 1 || out.ID != samples[i].ID || out.Tokens[0] != samples[i].Token {
					return fmt.Errorf("plain pass %d: Step output %+v, PlainStep sample %+v", rb.passes, out, samples[i])
				}
				fb.emitted[out.ID]++
			}
			if err := fast.CheckInvariants(); err != nil {
				return fmt.Errorf("after plain pass %d: %w", rb.passes, err)
			}
			continue
		}
		p, err := rb.step()
		if err != nil {
			return err
		}
		q, err := fb.step()
		if err != nil {
			return err
		}
		if len(p.Outputs) != len(q.Outputs) || !slices.Equal(p.Batch.Seqs, q.Batch.Seqs) {
			return fmt.Errorf("pass %d: the schedulers diverged after plain passes: %+v and %+v", rb.passes, p, q)
		}
	}
	if plain == 0 {
		return fmt.Errorf("no plain decode pass in %d passes: the check lost its teeth", rb.passes)
	}
	if err := rb.empty(); err != nil {
		return err
	}
	return fb.drain()
}

// Prefill serves a workload on a prefill worker: each request finishes with its prompt, emitting at
// most the first token, and keeps its KV until released or cancelled; then it is gone.
func Prefill(f Factory, seed uint64) error {
	b, rng, err := start(f, seed, 4, sched.Prefill)
	if err != nil {
		return err
	}
	s := b.s
	reqs := workload(rng, b.shape, 40, 1)
	for _, r := range reqs {
		r.MaxTokens = 1
	}
	released := 0
	for len(reqs) > 0 || len(b.state) > 0 {
		if err := b.arrive(&reqs, rng.IntN(3)); err != nil {
			return err
		}
		if _, err := b.step(); err != nil {
			return err
		}
		for id, st := range b.state {
			if st != held || rng.IntN(2) == 0 {
				continue
			}
			// A held request is released after its transfer, or cancelled before it ends.
			if rng.IntN(4) == 0 {
				if !s.Cancel(id) {
					return fmt.Errorf("cancel of held request %d reported unknown", id)
				}
			} else if !s.Release(id) {
				return fmt.Errorf("release of held request %d reported unknown", id)
			}
			if s.Release(id) || s.Cancel(id) {
				return fmt.Errorf("request %d released or cancelled twice", id)
			}
			delete(b.state, id)
			released++
		}
		// Held requests are the driver's: the scheduler is idle without them, but their KV stays in use.
		m := s.Metrics()
		if s.Idle() != (b.live() == 0) || len(b.state) > b.live() && m.ActiveBlocks == 0 {
			return fmt.Errorf("idle %v with %d requests served and %d held (metrics %+v)", s.Idle(), b.live(), len(b.state)-b.live(), m)
		}
	}
	if released != 40 {
		return fmt.Errorf("%d of 40 requests released", released)
	}
	return b.empty()
}

// Decode serves a workload on a decode worker: each request is reserved (needing at most its prompt),
// some are unreserved as if their transfer failed, the others activated; each activated one emits all its
// tokens from the first.
func Decode(f Factory, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 5))
	sh := shape(rng, sched.Decode)
	s, err := f(sh)
	if err != nil {
		return err
	}
	b := newBook(s, sh)
	reqs := workload(rng, sh, 40, 24)
	var reserved []*sched.Request
	for len(reqs) > 0 || len(reserved) > 0 || !s.Idle() {
		if len(reqs) > 0 {
			r := reqs[0]
			missing, ok, err := s.Reserve(r)
			if err != nil {
				return fmt.Errorf("reserve %d: %w", r.ID, err)
			}
			if ok {
				if missing < 0 || missing > r.PromptLen() {
					return fmt.Errorf("reserve %d: %d tokens missing of a %d-token prompt", r.ID, missing, r.PromptLen())
				}
				reserved = append(reserved, r)
				reqs = reqs[1:]
			} else if s.Idle() && len(reserved) == 0 {
				return fmt.Errorf("reserve %d (%d tokens) refused by an empty worker of %d blocks", r.ID, r.PromptLen(), sh.NumBlocks)
			}
		}
		if len(reserved) > 0 && rng.IntN(2) == 0 {
			r := reserved[0]
			reserved = reserved[1:]
			if rng.IntN(5) == 0 {
				if !s.Unreserve(r.ID) {
					return fmt.Errorf("unreserve of reserved request %d reported unknown", r.ID)
				}
			} else {
				if !s.Activate(r.ID) {
					return fmt.Errorf("activate of reserved request %d reported unknown", r.ID)
				}
				b.reqs[r.ID], b.state[r.ID] = r, waiting
			}
		}
		if !s.Idle() {
			if _, err := b.step(); err != nil {
				return err
			}
		}
	}
	return b.empty()
}
