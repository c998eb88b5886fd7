package timing

import "time"

// Seq is one request's share of a pass.
type Seq struct {
	New     int  // tokens whose KV the pass computes: a prompt chunk, a recompute, 1 for a decode step (1 + drafts for a speculative one)
	Cached  int  // tokens of the request already in KV before the pass (prefix-cache hits, earlier chunks)
	Prefill bool // New are prompt (or recomputed) tokens; false: a decode step
	Samples bool // the pass samples an output token for the request; its context is Cached+New
}

// Batch describes one forward pass of one engine (or one data-parallel rank).
type Batch struct {
	Seqs           []Seq
	ActiveKVTokens int // KV tokens held by requests during the pass (active blocks × block size)
	TotalKVTokens  int // KV capacity in tokens
	// Group describes the data-parallel ranks that run this pass in lock step with this one (the
	// engine sets it for every rank's pass). A model of attention data parallelism prices the MoE
	// layers, which all the group's ranks run together on all their tokens, from it; other models
	// ignore it. Zero: the batch is priced alone (a model of attention data parallelism then
	// assumes every rank has a batch like this one, as AIConfigurator does).
	Group Group
}

// Group is the data-parallel group of a pass: its ranks, idle ones included, the new tokens the
// ranks that step compute in it (Σ Seq.New over their batches) and the most any one of them computes,
// and whether any of them computes prompt tokens (SGLang's is_extend_in_batch, which picks how the
// ranks' tokens are gathered). A group of one rank is its batch: the engine leaves Tokens, MaxTokens and
// Prefill zero then (summing them would cost a pass over the batch for nothing), and a model reads them
// off the batch.
type Group struct {
	Ranks     int
	Tokens    int
	MaxTokens int
	Prefill   bool
}

// Add counts the new tokens of one stepping rank's batch into g.
func (g *Group) Add(b *Batch) {
	n := 0
	for i := range b.Seqs {
		n += b.Seqs[i].New
		g.Prefill = g.Prefill || b.Seqs[i].Prefill && b.Seqs[i].New > 0
	}
	g.Tokens += n
	g.MaxTokens = max(g.MaxTokens, n)
}

// Prefill aggregates the prefill part: how many requests compute prompt tokens, their prompt lengths up
// to the end of this chunk (Σ Cached+New) and their cached prefixes (Σ Cached).
func (b *Batch) Prefill() (n, sumISL, sumPrefix int) {
	for _, s := range b.Seqs {
		if s.Prefill {
			n++
			sumISL += s.Cached + s.New
			sumPrefix += s.Cached
		}
	}
	return n, sumISL, sumPrefix
}

// Sampling aggregates the requests that sample a token in the pass (the reference's decode part, which
// includes requests whose prompt completes): their number and Σ context length.
func (b *Batch) Sampling() (n, sumContext int) {
	for _, s := range b.Seqs {
		if s.Samples {
			n++
			sumContext += s.Cached + s.New
		}
	}
	return n, sumContext
}

// Cost is the modelled duration of one pass, by phase.
type Cost struct {
	Prefill time.Duration
	Decode  time.Duration
}

// Total is the pass duration.
func (c Cost) Total() time.Duration { return c.Prefill + c.Decode }

// Model prices a pass.
type Model interface {
	Cost(b *Batch) Cost
}

// PlainPass is a plain decode pass (the engine's Coast) as a PlainModel reads it: each of Requests
// requests computes one token after its cached context and samples it; none computes prompt tokens. A
// run of plain passes differs from pass to pass only in Cached, which grows by Requests each pass: the
// caller keeps it so instead of making and reading a Batch of Requests Seqs every pass.
type PlainPass struct {
	Requests int   // each a Seq{New: 1, Cached: its context, Samples: true}
	Cached   int   // Σ the requests' Cached
	Group    Group // as Batch.Group
}

// PlainModel is a Model that prices a plain decode pass from its PlainPass alone, which it can when its
// Cost reads nothing else of such a batch (not the KV occupancy, as Polynomial does).
type PlainModel interface {
	Model
	// PlainPricer returns a function whose value for a PlainPass is Cost of any batch the pass describes,
	// bit for bit. It may keep state from call to call (what depends only on Requests and Group, where the
	// last pass's contexts fell in its tables): each caller (an engine) takes its own, and uses it from one
	// goroutine.
	PlainPricer() func(*PlainPass) Cost
}

// PlainPricer returns m's pricer of plain decode passes (PlainModel.PlainPricer), through the wrappers
// of this package, or nil when m has none.
func PlainPricer(m Model) func(*PlainPass) Cost {
	switch m := m.(type) {
	case PlainModel:
		return m.PlainPricer()
	case Scaled:
		if f := PlainPricer(m.Model); f != nil {
			return func(p *PlainPass) Cost { return m.scaled(f(p)) }
		}
	case HostOverhead:
		if f := PlainPricer(m.Model); f != nil {
			return func(p *PlainPass) Cost { return m.withHost(f(p), p.Requests, p.Requests) }
		}
	}
	return nil
}

// MaxPass bounds the time any model prices a pass at (Ms, Scaled): past it no setting describes a GPU,
// and a run's clock, which a simulation stops at a century, stays far inside a time.Duration (292 years)
// instead of wrapping to negative times.
const MaxPass = 1000 * time.Hour

// Ms converts float milliseconds to a Duration, rounding to the nanosecond: 0 for none (or NaN), at
// most MaxPass.
func Ms(v float64) time.Duration { return nanos(v * 1e6) }

// nanos is ns nanoseconds, rounded, from 0 to MaxPass.
func nanos(ns float64) time.Duration {
	switch {
	case !(ns > 0):
		return 0
	case ns >= float64(MaxPass):
		return MaxPass
	}
	return time.Duration(ns + 0.5)
}

func ms(v float64) time.Duration { return Ms(v) }
