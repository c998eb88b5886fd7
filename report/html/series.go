package html

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sim"
)

// minWidth is the narrowest bucket, 1 s / 2⁹: doubling it reaches 1 s, 2 s, 4 s... exactly.
const minWidth = time.Second >> 9

// Series builds the page's series over time as a run goes: a sim.RunObserver that buckets each pass as it
// arrives and keeps none, so its size is O(buckets × workers) however long the run. Its n buckets start
// minWidth wide; whenever something happens at or past n·width, the width doubles and each pair of
// buckets merges into one, so a run of length T ends with the narrowest width minWidth·2ᵏ whose n buckets
// cover it, and the page draws the ⌈T/width⌉ buckets of [0, T): over n/2 of them, unless the run is
// shorter than n/2 of the narrowest. Every sum is kept in integers (nanoseconds, tokens, blocks), so
// merging loses nothing: the buckets are exactly those the final width gives directly.
type Series struct {
	n     int
	width time.Duration

	throughput counts // output tokens, at the pass end
	workers    map[uint64]*workerSeries
	preempt    map[string]counts // by pool, at the pass start
	prefixHits map[string]counts // by pool: prompt tokens found cached, at the pass start
	prefixLook map[string]counts // and looked up
	transfers  samples
}

// NewSeries returns an empty Series of n buckets (0: 240).
func NewSeries(n int) *Series {
	if n <= 0 {
		n = 240
	}
	return newSeries(n, minWidth)
}

func newSeries(n int, width time.Duration) *Series {
	return &Series{n: n, width: width, throughput: make(counts, n), workers: map[uint64]*workerSeries{},
		preempt: map[string]counts{}, prefixHits: map[string]counts{}, prefixLook: map[string]counts{}, transfers: newSamples(n)}
}

// counts are per-bucket sums.
type counts []int64

// merge makes bucket i the sum of buckets 2i and 2i+1, for a doubled width.
func (c counts) merge() {
	for i := range c {
		var v int64
		if 2*i < len(c) {
			v = c[2*i]
		}
		if 2*i+1 < len(c) {
			v += c[2*i+1]
		}
		c[i] = v
	}
}

// peaks are per-bucket maxima of values ≥ 0.
type peaks []int64

func (p peaks) merge() {
	for i := range p {
		var v int64
		if 2*i < len(p) {
			v = p[2*i]
		}
		if 2*i+1 < len(p) {
			v = max(v, p[2*i+1])
		}
		p[i] = v
	}
}

// level is an integer quantity held over intervals (a worker's queue or KV blocks from one pass's start
// to the next) and zero elsewhere: per bucket, its integral and its max.
type level struct {
	area counts // value·ns
	peak peaks
}

func newLevel(n int) level { return level{make(counts, n), make(peaks, n)} }

func (l level) merge() { l.area.merge(); l.peak.merge() }

// hold records v over [start, end) on buckets of width w, the caller having fitted end-1 in them; an
// empty interval records nothing.
func (l level) hold(w, start, end time.Duration, v int64) {
	if end <= start {
		return
	}
	for i := int(start / w); i < len(l.area) && time.Duration(i)*w < end; i++ {
		lo, hi := max(start, time.Duration(i)*w), min(end, time.Duration(i+1)*w)
		l.area[i] += v * int64(hi-lo)
		l.peak[i] = max(l.peak[i], v)
	}
}

// samples is a duration sampled at instants (a transfer's, at its end): per bucket, its sum, count and
// max, and every value for the distribution (one per request, as the collector keeps).
type samples struct {
	sum, count counts
	peak       peaks
	all        []float64 // ms
}

func newSamples(n int) samples { return samples{make(counts, n), make(counts, n), make(peaks, n), nil} }

func (s samples) merge() { s.sum.merge(); s.count.merge(); s.peak.merge() }

// workerSeries is one worker's buckets, and its last pass, held until the next one starts.
type workerSeries struct {
	serial                   uint64
	pool                     string
	waiting, running, kvUsed level // requests, requests, blocks
	total                    int64 // KV blocks over all ranks

	// The prefix counters are cumulative per rank; a pass adds what changed since the rank's last.
	lastQueries, lastHits []int64

	held                              bool
	start, end                        time.Duration
	waitingN, runningN, doneN, active int64
}

// fit widens the buckets until instant t falls in one.
func (s *Series) fit(t time.Duration) {
	for t >= time.Duration(s.n)*s.width {
		s.width *= 2
		s.throughput.merge()
		for _, w := range s.workers {
			w.waiting.merge()
			w.running.merge()
			w.kvUsed.merge()
		}
		for pool := range s.preempt {
			s.preempt[pool].merge()
			s.prefixHits[pool].merge()
			s.prefixLook[pool].merge()
		}
		s.transfers.merge()
	}
}

func (s *Series) bucket(t time.Duration) int { return int(max(t, 0) / s.width) }

// Pass buckets a pass (sim.Observer).
func (s *Series) Pass(p *sim.ObservedPass) {
	var sampled, finished, preempted int64
	for _, rp := range p.Ranks {
		preempted += int64(len(rp.Preempted))
		for _, out := range rp.Outputs {
			sampled += int64(len(out.Tokens))
			if out.Done {
				finished++
			}
		}
	}
	s.passes(p.Pool, p.Worker, p.Start, p.End, p.Metrics, preempted, finished)
	s.throughput[s.bucket(p.End)] += sampled
}

// Coasted buckets plain decode passes (sim.RunObserver). The worker's state is the same after each, so
// the run is one pass from the first's start to the last's end as far as levels go, at a cost of one
// addition a pass.
func (s *Series) Coasted(c *sim.ObservedRun) {
	s.passes(c.Pool, c.Worker, c.Start, c.Ends[len(c.Ends)-1], c.Metrics, 0, 0)
	for _, end := range c.Ends {
		s.throughput[s.bucket(end)] += int64(c.Tokens)
	}
}

// passes buckets all but the output tokens of passes of a worker over [start, end) that leave it in
// the state metrics tell, preempted requests at the start and finished ones at the end; it fits end in
// the grid.
func (s *Series) passes(pool string, serial uint64, start, end time.Duration, metrics []sched.Metrics, preempted, finished int64) {
	w := s.workers[serial]
	if w == nil {
		w = &workerSeries{serial: serial, pool: pool, waiting: newLevel(s.n), running: newLevel(s.n), kvUsed: newLevel(s.n),
			lastQueries: make([]int64, len(metrics)), lastHits: make([]int64, len(metrics))}
		s.workers[serial] = w
		if s.preempt[pool] == nil {
			s.preempt[pool], s.prefixHits[pool], s.prefixLook[pool] = make(counts, s.n), make(counts, s.n), make(counts, s.n)
		}
	}
	var waiting, running, active, total, queries, hits int64
	for k := range metrics {
		m := &metrics[k]
		waiting += int64(m.Waiting)
		running += int64(m.Running)
		active += int64(m.ActiveBlocks)
		total += int64(m.TotalBlocks)
		if k < len(w.lastQueries) {
			if m.PrefixQueries < w.lastQueries[k] { // a failed worker's new engine counts from 0
				w.lastQueries[k], w.lastHits[k] = 0, 0
			}
			queries += m.PrefixQueries - w.lastQueries[k]
			hits += m.PrefixHits - w.lastHits[k]
			w.lastQueries[k], w.lastHits[k] = m.PrefixQueries, m.PrefixHits
		}
	}
	s.fit(end)
	s.preempt[pool][s.bucket(start)] += preempted
	s.prefixHits[pool][s.bucket(start)] += hits
	s.prefixLook[pool][s.bucket(start)] += queries
	s.release(w, start)
	w.held, w.start, w.end = true, start, end
	w.waitingN, w.runningN, w.doneN, w.active, w.total = waiting, running, finished, active, total
}

// release draws w's last pass, whose state holds until next.
//
// The engine applies a pass's completions as it plans it, so the state it reports is the one after the
// pass: held from the pass's end to the next pass, as a worker idle between passes may still hold a queue
// and KV (a prefill worker waiting for room on the decode side). During the pass, the requests that
// finished at its end were running too.
func (s *Series) release(w *workerSeries, next time.Duration) {
	if !w.held {
		return
	}
	w.held = false
	if next > w.start {
		s.fit(next - 1)
	}
	w.waiting.hold(s.width, w.start, next, w.waitingN)
	w.running.hold(s.width, w.start, w.end, w.runningN+w.doneN)
	w.running.hold(s.width, w.end, next, w.runningN)
	w.kvUsed.hold(s.width, w.start, next, w.active)
}

// Routed implements sim.Observer; the page does not draw routes.
func (s *Series) Routed(time.Duration, uint64, string, uint64, int) {}

// Transferred buckets a KV transfer by its end (sim.Observer).
func (s *Series) Transferred(_ uint64, start, end time.Duration) {
	s.fit(end)
	i, d := s.bucket(end), int64(end-start)
	s.transfers.sum[i] += d
	s.transfers.count[i]++
	s.transfers.peak[i] = max(s.transfers.peak[i], d)
	s.transfers.all = append(s.transfers.all, float64(end-start)/float64(time.Millisecond))
}

// drawn is what the time charts plot: the buckets of [0, end), as values.
type drawn struct {
	width      time.Duration
	x          []float64 // the buckets' middles, in seconds
	throughput []float64 // tokens/s
	workers    []drawnWorker
	pools      []string             // in first-seen order of the workers, by serial
	preempt    map[string][]float64 // per second
	prefix     map[string][]float64 // hit rate, NaN where nothing was looked up
	transfers  struct {
		mean, max []float64 // ms, NaN where none ended
		all       []float64
	}
}

type drawnWorker struct {
	name                     string
	waiting, running, kvUsed meanPeak
}

// meanPeak is a level's time-weighted mean and max per bucket.
type meanPeak struct{ mean, peak []float64 }

// draw ends the run at end: each worker's last pass holds to its end, and the buckets are cut to
// [0, end). Something at or past end counts in the last bucket. Nothing can be observed after.
func (s *Series) draw(end time.Duration) *drawn {
	ws := make([]*workerSeries, 0, len(s.workers))
	for _, w := range s.workers {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *workerSeries) int { return cmp.Compare(a.serial, b.serial) })
	for _, w := range ws {
		s.release(w, w.end) // after its last pass, a worker has nothing more to show
	}
	if end > 0 {
		s.fit(end - 1)
	}
	m := min(max(int((end+s.width-1)/s.width), 1), s.n)
	sec := s.width.Seconds()
	d := &drawn{width: s.width, x: make([]float64, m), preempt: map[string][]float64{}, prefix: map[string][]float64{}}
	for i := range d.x {
		d.x[i] = (time.Duration(i)*s.width + s.width/2).Seconds()
	}
	perSecond := func(c counts) []float64 {
		c = fold(c, m)
		out := make([]float64, m)
		for i, v := range c {
			out[i] = float64(v) / sec
		}
		return out
	}
	ratio := func(num, den counts) []float64 {
		num, den = fold(num, m), fold(den, m)
		out := make([]float64, m)
		for i := range out {
			out[i] = math.NaN()
			if den[i] > 0 {
				out[i] = float64(num[i]) / float64(den[i])
			}
		}
		return out
	}
	d.throughput = perSecond(s.throughput)
	for _, w := range ws {
		if _, ok := d.preempt[w.pool]; !ok {
			d.pools = append(d.pools, w.pool)
			d.preempt[w.pool] = perSecond(s.preempt[w.pool])
			d.prefix[w.pool] = ratio(s.prefixHits[w.pool], s.prefixLook[w.pool])
		}
	}
	// A level in units of unit: KV usage is blocks over the worker's capacity, which is fixed.
	drawLevel := func(l level, unit int64) meanPeak {
		v := meanPeak{make([]float64, m), make([]float64, m)}
		for i := range m {
			v.mean[i] = float64(l.area[i]) / (float64(unit) * float64(s.width))
			v.peak[i] = float64(l.peak[i]) / float64(unit)
		}
		return v
	}
	for _, w := range ws {
		dw := drawnWorker{name: workerName(w.pool, w.serial, len(d.pools) > 1),
			waiting: drawLevel(w.waiting, 1), running: drawLevel(w.running, 1), kvUsed: drawLevel(w.kvUsed, max(w.total, 1))}
		d.workers = append(d.workers, dw)
	}
	t := s.transfers
	count, sum, peak := fold(t.count, m), fold(t.sum, m), t.peak.fold(m)
	d.transfers.mean, d.transfers.max = make([]float64, m), make([]float64, m)
	for i := range m {
		d.transfers.mean[i], d.transfers.max[i] = math.NaN(), math.NaN()
		if count[i] > 0 {
			d.transfers.mean[i] = float64(sum[i]) / float64(count[i]) / float64(time.Millisecond)
			d.transfers.max[i] = float64(peak[i]) / float64(time.Millisecond)
		}
	}
	d.transfers.all = t.all
	return d
}

// fold is c's first m buckets, the rest added into the last.
func fold(c counts, m int) counts {
	out := slices.Clone(c[:m])
	for _, v := range c[m:] {
		out[m-1] += v
	}
	return out
}

// fold is p's first m buckets, the rest's max taken into the last.
func (p peaks) fold(m int) peaks {
	out := slices.Clone(p[:m])
	for _, v := range p[m:] {
		out[m-1] = max(out[m-1], v)
	}
	return out
}

// quantiles returns xs (sorted in place) at q = i/points, i = 0..points, by the report's nearest-rank
// rule (report.Collector.Quantiles); nil when xs is empty.
func quantiles(xs []float64, points int) []float64 {
	if len(xs) == 0 {
		return nil
	}
	slices.Sort(xs)
	out := make([]float64, points+1)
	for i := range out {
		out[i] = xs[((len(xs)-1)*i*2+points)/(2*points)]
	}
	return out
}

// workerName labels a worker in a legend; with several pools, by its pool too.
func workerName(pool string, serial uint64, pools bool) string {
	if pools {
		return pool + " " + strconv.FormatUint(serial, 10)
	}
	return "worker " + strconv.FormatUint(serial, 10)
}
