package report

import "time"

// PoolSummary is one pool of workers' own figures, for disaggregated serving: its size and load, and the
// latencies of the stage it serves.
type PoolSummary struct {
	Name          string // "prefill", "decode", "agg"
	Workers       int    // workers that served in the run
	Passes        int64
	Busy          time.Duration // Σ pass durations over the pool's workers
	Preemptions   int
	PrefixQueries int64 // prompt tokens looked up at admissions
	PrefixHits    int64 // of those, found cached
	Stages        []Stage
}

// Stage is a latency distribution of part of a request's life, such as prefill or KV transfer.
type Stage struct {
	Name  string // JSON keys mean_<Name>_ms ...
	Stats Stats
}

// BusyRatio is the fraction of the run's duration the pool's workers spent in passes.
func (p PoolSummary) BusyRatio(duration time.Duration) float64 {
	if duration <= 0 || p.Workers == 0 {
		return 0
	}
	return float64(p.Busy) / float64(duration) / float64(p.Workers)
}

// PrefixHitRatio is the fraction of prompt tokens the pool's engines found cached at admission.
func (p PoolSummary) PrefixHitRatio() float64 {
	if p.PrefixQueries == 0 {
		return 0
	}
	return float64(p.PrefixHits) / float64(p.PrefixQueries)
}

// Samples is a distribution of milliseconds a caller gathers beside the collector's own (the disaggregated
// pools' stages): added one by one, described by the report's rules. Made by Collector.Samples, it goes to
// the collector's temporary file as the collector's distributions do (Forget).
type Samples struct{ s samples }

// Samples returns an empty distribution that shares c's temporary file, if c forgets (call Forget first).
func (c *Collector) Samples() *Samples {
	d := &Samples{}
	d.s.spill, d.s.radix = c.spill, &c.radix
	return d
}

// Add adds a sample of x milliseconds.
func (d *Samples) Add(x float64) {
	d.s.addFloat(x)
}

// Describe is the Stats of the samples added.
func (d *Samples) Describe() Stats { return d.s.describe(nil, keyFloat) }
