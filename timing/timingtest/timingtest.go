// Package timingtest is the conformance suite every timing model runs: a model package calls Run from a
// test with its models. It holds a model to what the engine and the reports rely on: an empty pass
// costs nothing; the same batch costs the same; no part is negative; a pass that samples no token has no
// decode part and one that computes no prompt token no prefill part; more work never costs less (one
// more request, more new tokens, a longer context, a fuller cache); pricing a pass allocates nothing,
// since Cost runs once per simulated forward pass; and a model that prices plain decode passes from their
// counts (timing.PlainModel) gives Cost's value, bit for bit.
package timingtest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mocker-sim/mocker/timing"
)

// Options bound the batches the checks build, to what the model was made for.
type Options struct {
	MaxBatch   int // requests in a pass; 0 means 256
	MaxContext int // context tokens of one request; 0 means 32,768
	MaxChunk   int // new prompt tokens of one request in a pass; 0 means 8,192
	// Slack is the relative dip Monotone allows (e.g. 0.01), for models read off measured tables whose
	// noise the model keeps; 0 allows none.
	Slack float64
}

func (o *Options) defaults() {
	if o.MaxBatch == 0 {
		o.MaxBatch = 256
	}
	if o.MaxContext == 0 {
		o.MaxContext = 32768
	}
	if o.MaxChunk == 0 {
		o.MaxChunk = 8192
	}
}

// Checks are the checks Run runs.
var Checks = []struct {
	Name  string
	Check func(timing.Model, Options) error
}{
	{"Zero", Zero}, {"Split", Split}, {"Monotone", Monotone}, {"NoAllocs", NoAllocs}, {"Plain", Plain},
}

// Run runs every check on m.
func Run(t *testing.T, m timing.Model, o Options) {
	o.defaults()
	for _, c := range Checks {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Check(m, o); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Check is Run without a test: the first failure of any check on m, nil if none.
func Check(m timing.Model, o Options) error {
	o.defaults()
	for _, c := range Checks {
		if err := c.Check(m, o); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

// batch makes a random pass: decode steps and prompt chunks.
func batch(rng *rand.Rand, o Options) timing.Batch {
	var b timing.Batch
	n := 1 + rng.IntN(o.MaxBatch)
	for range n {
		if rng.IntN(4) == 0 {
			chunk := 1 + rng.IntN(o.MaxChunk)
			b.Seqs = append(b.Seqs, timing.Seq{New: chunk, Cached: rng.IntN(o.MaxContext - chunk + 1), Prefill: true, Samples: rng.IntN(2) == 0})
		} else {
			b.Seqs = append(b.Seqs, timing.Seq{New: 1, Cached: rng.IntN(o.MaxContext), Samples: true})
		}
	}
	b.TotalKVTokens = 4 * o.MaxContext * o.MaxBatch
	for _, s := range b.Seqs {
		b.ActiveKVTokens += s.New + s.Cached
	}
	return b
}

func valid(c timing.Cost) bool { return c.Prefill >= 0 && c.Decode >= 0 }

// Zero: an empty pass costs nothing, whatever the cache holds.
func Zero(m timing.Model, _ Options) error {
	for _, b := range []timing.Batch{{}, {ActiveKVTokens: 1000, TotalKVTokens: 4000}} {
		if c := m.Cost(&b); c != (timing.Cost{}) {
			return fmt.Errorf("an empty pass (%d of %d KV tokens in use) costs %+v", b.ActiveKVTokens, b.TotalKVTokens, c)
		}
	}
	return nil
}

// Split: random passes cost the same twice and never a negative part; a pass of prompt chunks that
// sample nothing has no decode part, and a pass of decode steps no prefill part.
func Split(m timing.Model, o Options) error {
	rng := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		b := batch(rng, o)
		c := m.Cost(&b)
		if again := m.Cost(&b); !valid(c) || c != again || c.Total() <= 0 {
			return fmt.Errorf("%d-request pass costs %+v, then %+v", len(b.Seqs), c, again)
		}
		var prefill, decode timing.Batch
		prefill.TotalKVTokens, decode.TotalKVTokens = b.TotalKVTokens, b.TotalKVTokens
		for _, s := range b.Seqs {
			if s.Prefill {
				s.Samples = false
				prefill.Seqs = append(prefill.Seqs, s)
				prefill.ActiveKVTokens += s.New + s.Cached
			} else {
				decode.Seqs = append(decode.Seqs, s)
				decode.ActiveKVTokens += s.New + s.Cached
			}
		}
		if c := m.Cost(&prefill); len(prefill.Seqs) > 0 && (!valid(c) || c.Decode != 0 || c.Prefill <= 0) {
			return fmt.Errorf("%d prompt chunks that sample nothing cost %+v: want only a prefill part", len(prefill.Seqs), c)
		}
		if c := m.Cost(&decode); len(decode.Seqs) > 0 && (!valid(c) || c.Prefill != 0 || c.Decode <= 0) {
			return fmt.Errorf("%d decode steps cost %+v: want only a decode part", len(decode.Seqs), c)
		}
	}
	return nil
}

// Monotone: a random pass never costs less when it gains a decode request, a prompt chunk, a longer
// chunk, a longer context, or a fuller cache.
func Monotone(m timing.Model, o Options) error {
	rng := rand.New(rand.NewPCG(2, 2))
	for range 200 {
		b := batch(rng, o)
		b.TotalKVTokens *= 2 // room for the grown pass
		base := m.Cost(&b).Total()
		grow := func(what string, more timing.Batch) error {
			c := m.Cost(&more).Total()
			if float64(c) < float64(base)*(1-o.Slack) {
				return fmt.Errorf("%d-request pass: %s takes it from %v to %v", len(b.Seqs), what, base, c)
			}
			return nil
		}
		more := clone(b)
		ctx := rng.IntN(o.MaxContext)
		more.Seqs = append(more.Seqs, timing.Seq{New: 1, Cached: ctx, Samples: true})
		more.ActiveKVTokens += ctx + 1
		if err := grow("one more decode request", more); err != nil {
			return err
		}
		more = clone(b)
		chunk := 1 + rng.IntN(o.MaxChunk)
		more.Seqs = append(more.Seqs, timing.Seq{New: chunk, Prefill: true})
		more.ActiveKVTokens += chunk
		if err := grow("one more prompt chunk", more); err != nil {
			return err
		}
		i := rng.IntN(len(b.Seqs))
		more = clone(b)
		more.Seqs[i].Cached += 1 + rng.IntN(o.MaxContext/4)
		more.ActiveKVTokens += more.Seqs[i].Cached - b.Seqs[i].Cached
		if err := grow(fmt.Sprintf("a longer context for request %d (%+v)", i, b.Seqs[i]), more); err != nil {
			return err
		}
		if b.Seqs[i].Prefill {
			more = clone(b)
			more.Seqs[i].New += 1 + rng.IntN(o.MaxChunk/4)
			more.ActiveKVTokens += more.Seqs[i].New - b.Seqs[i].New
			if err := grow(fmt.Sprintf("a longer chunk for request %d (%+v)", i, b.Seqs[i]), more); err != nil {
				return err
			}
		}
		more = clone(b)
		more.ActiveKVTokens = more.TotalKVTokens
		if err := grow("a full cache", more); err != nil {
			return err
		}
	}
	return nil
}

func clone(b timing.Batch) timing.Batch {
	b.Seqs = append([]timing.Seq(nil), b.Seqs...)
	return b
}

// NoAllocs: pricing a pass allocates nothing.
func NoAllocs(m timing.Model, o Options) error {
	rng := rand.New(rand.NewPCG(3, 3))
	bs := make([]timing.Batch, 16)
	for i := range bs {
		bs[i] = batch(rng, o)
	}
	i := 0
	if n := testing.AllocsPerRun(100, func() { m.Cost(&bs[i%len(bs)]); i++ }); n > 0 {
		return fmt.Errorf("Cost allocates %.1f times per pass", n)
	}
	return nil
}

// Plain: a timing.PlainModel's pricer of plain decode passes (through the package's wrappers,
// timing.PlainPricer) gives Cost of the batch each pass describes, bit for bit, as an engine drives it:
// runs of passes whose contexts grow by a token each, of random sizes and groups one after another, some
// groups changing within a run (a pricer that keeps state from pass to pass must not carry it to the
// wrong one), without allocating.
// A model without such a pricer passes.
func Plain(m timing.Model, o Options) error {
	price := timing.PlainPricer(m)
	if price == nil {
		return nil
	}
	rng := rand.New(rand.NewPCG(4, 4))
	var b timing.Batch
	for run := range 100 {
		n := 1 + rng.IntN(o.MaxBatch)
		if run%10 == 9 {
			n = 1 + rng.IntN(3) // small batches, where the tables' edges are
		}
		b.Seqs = b.Seqs[:0]
		p := timing.PlainPass{Requests: n}
		for range n {
			s := timing.Seq{New: 1, Cached: rng.IntN(o.MaxContext), Samples: true}
			b.Seqs = append(b.Seqs, s)
			p.Cached += s.Cached
		}
		if ranks := rng.IntN(4); ranks > 0 { // 0: a batch priced without its group
			others := rng.IntN(ranks) * (1 + rng.IntN(o.MaxBatch))
			p.Group = timing.Group{Ranks: ranks, Tokens: n + others, MaxTokens: max(n, others)}
		}
		b.Group = p.Group
		b.TotalKVTokens = 4 * o.MaxContext * o.MaxBatch
		for pass := range 1 + rng.IntN(20) {
			if pass == 3 && p.Group.Ranks > 1 { // another rank's requests change, this one's do not
				more := 1 + rng.IntN(o.MaxBatch)
				p.Group.Tokens += more
				p.Group.MaxTokens = max(p.Group.MaxTokens, more)
				b.Group = p.Group
			}
			b.ActiveKVTokens = 0
			for _, s := range b.Seqs {
				b.ActiveKVTokens += s.New + s.Cached
			}
			if got, want := price(&p), m.Cost(&b); got != want {
				return fmt.Errorf("a plain pass of %d requests over %d cached tokens (group %+v): its pricer says %+v, Cost %+v",
					n, p.Cached, p.Group, got, want)
			}
			for i := range b.Seqs {
				b.Seqs[i].Cached++
			}
			p.Cached += n
		}
	}
	p := timing.PlainPass{Requests: 8, Cached: 8 * 1000}
	if allocs := testing.AllocsPerRun(100, func() { price(&p); p.Cached += p.Requests }); allocs > 0 {
		return fmt.Errorf("the plain pricer allocates %.1f times per pass", allocs)
	}
	return nil
}
