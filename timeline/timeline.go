// Package timeline records what happened during a simulated run — every forward pass of every worker and
// every request's hand-offs — as compact values, for the reports drawn from it (the Perfetto trace). A
// *Recorder is a sim.Observer, shown every pass, so a recorded run does not coast (sim.RunObserver; the
// HTML report's series are bucketed as they come by html.Series instead); per-request times (arrival,
// admission, tokens, finish) are the report.Collector's and are not repeated here.
package timeline

import (
	"cmp"
	"slices"
	"time"

	"github.com/mocker-sim/mocker/sim"
)

// Recorder keeps a run's passes and hand-offs. Its zero value records everything; From and To, when To
// is above 0, keep only the passes and routes that overlap [From, To), so a long run's timeline stays
// small. A request's prefill completion and KV transfer are kept whatever the window: they are a few
// values per request, as the collector's records are, and a report that draws a request straddling the
// window needs them.
type Recorder struct {
	From, To time.Duration

	workers   map[uint64]*Worker
	Routes    []Route    // in the order they happened
	Prefills  []Prefill  // disaggregated: in the order their passes started
	Transfers []Transfer // in the order they completed
	Skipped   int64      // passes outside the window
}

// Worker is one worker's passes, in time order.
type Worker struct {
	Serial uint64 // unique over all pools, as in the per-request records
	Pool   string // "agg", "prefill" or "decode"
	Ranks  int    // data-parallel ranks
	Passes []Pass
}

// Pass is one forward pass of a worker.
type Pass struct {
	Start, End time.Duration
	Ranks      []Rank // every rank of the worker, idle ones included, in rank order
}

// Rank is one data-parallel rank's share of a pass and its state once the pass was planned.
type Rank struct {
	PrefillSeqs   int           // requests computing prompt (or recomputed) tokens
	PrefillTokens int           // tokens those compute
	DecodeSeqs    int           // requests computing one decode step
	Sampled       int           // tokens emitted at the pass end
	Admitted      int           // requests admitted at the pass start
	Preempted     int           // requests preempted at the pass start
	Finished      int           // requests that finished at the pass end
	Prefill       time.Duration // modelled prefill part of the rank's duration
	Decode        time.Duration // modelled decode part

	Running, Waiting          int
	ActiveBlocks, TotalBlocks int
	// Cumulative since the worker started.
	Preemptions, PrefixQueries, PrefixHits int64
}

// CacheUsage is the fraction of KV blocks in use after planning, vLLM's kv_cache_usage_perc.
func (r *Rank) CacheUsage() float64 {
	if r.TotalBlocks == 0 {
		return 0
	}
	return float64(r.ActiveBlocks) / float64(r.TotalBlocks)
}

// Route is a request handed to a worker's rank.
type Route struct {
	At     time.Duration
	ID     uint64
	Pool   string
	Worker uint64
	Rank   int
}

// Prefill is a disaggregated request's prompt done on its prefill worker: the end of the pass that
// computed its last prompt tokens. A retried request has one for each time it was prefilled.
type Prefill struct {
	ID uint64
	At time.Duration
}

// Transfer is a disaggregated request's KV transfer, from the decode worker's reservation to arrival.
type Transfer struct {
	ID         uint64
	Start, End time.Duration
}

func (c *Recorder) keeps(start, end time.Duration) bool {
	return c.To <= 0 || end >= c.From && start < c.To
}

// Pass records a pass (sim.Observer).
func (c *Recorder) Pass(p *sim.ObservedPass) {
	if p.Pool == "prefill" {
		// A prefill worker's outputs are its requests' prompts done, handed off at the pass end.
		for _, rp := range p.Ranks {
			for _, out := range rp.Outputs {
				c.Prefills = append(c.Prefills, Prefill{ID: out.ID, At: p.End})
			}
		}
	}
	if !c.keeps(p.Start, p.End) {
		c.Skipped++
		return
	}
	if c.workers == nil {
		c.workers = map[uint64]*Worker{}
	}
	w := c.workers[p.Worker]
	if w == nil {
		w = &Worker{Serial: p.Worker, Pool: p.Pool, Ranks: len(p.Metrics)}
		c.workers[p.Worker] = w
	}
	pass := Pass{Start: p.Start, End: p.End, Ranks: make([]Rank, len(p.Metrics))}
	for i, m := range p.Metrics {
		pass.Ranks[i] = Rank{Running: m.Running, Waiting: m.Waiting, ActiveBlocks: m.ActiveBlocks, TotalBlocks: m.TotalBlocks,
			Preemptions: m.Preemptions, PrefixQueries: m.PrefixQueries, PrefixHits: m.PrefixHits}
	}
	for _, rp := range p.Ranks {
		r := &pass.Ranks[rp.Rank]
		for _, s := range rp.Batch.Seqs {
			if s.Prefill {
				r.PrefillSeqs++
				r.PrefillTokens += s.New
			} else {
				r.DecodeSeqs++
			}
		}
		for _, out := range rp.Outputs {
			r.Sampled += len(out.Tokens)
			if out.Done {
				r.Finished++
			}
		}
		r.Admitted, r.Preempted = len(rp.Admitted), len(rp.Preempted)
		r.Prefill, r.Decode = rp.Cost.Prefill, rp.Cost.Decode
	}
	w.Passes = append(w.Passes, pass)
}

// Routed records a hand-off (sim.Observer).
func (c *Recorder) Routed(at time.Duration, id uint64, pool string, worker uint64, rank int) {
	if c.keeps(at, at) {
		c.Routes = append(c.Routes, Route{At: at, ID: id, Pool: pool, Worker: worker, Rank: rank})
	}
}

// Transferred records a KV transfer (sim.Observer).
func (c *Recorder) Transferred(id uint64, start, end time.Duration) {
	c.Transfers = append(c.Transfers, Transfer{ID: id, Start: start, End: end})
}

// Workers returns the workers that ran a pass in the window, by serial.
func (c *Recorder) Workers() []*Worker {
	ws := make([]*Worker, 0, len(c.workers))
	for _, w := range c.workers {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *Worker) int { return cmp.Compare(a.Serial, b.Serial) })
	return ws
}
