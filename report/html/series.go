package html

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/mocker-sim/mocker/timeline"
)

// grid is [0, n·width) cut into n buckets of equal width: a long run's series become n points each,
// whatever its number of passes.
type grid struct {
	n     int
	width time.Duration
}

// newGrid covers [0, end) with n buckets.
func newGrid(end time.Duration, n int) grid {
	n = max(n, 1)
	w := (end + time.Duration(n) - 1) / time.Duration(n)
	return grid{n, max(w, 1)}
}

// bucket is the bucket holding instant t, the last one for t at or past the end.
func (g grid) bucket(t time.Duration) int { return min(max(int(t/g.width), 0), g.n-1) }

// centers are the buckets' middles in seconds, the x of every bucketed series.
func (g grid) centers() []float64 {
	xs := make([]float64, g.n)
	for i := range xs {
		xs[i] = (time.Duration(i)*g.width + g.width/2).Seconds()
	}
	return xs
}

// level is a quantity held over intervals (a worker's queue or KV usage from one pass's start to its
// end) and zero elsewhere, summarised per bucket by its time-weighted mean and its max.
type level struct {
	g    grid
	area []float64 // ∫ value dt over the bucket, in value·seconds
	peak []float64
}

func newLevel(g grid) *level {
	return &level{g: g, area: make([]float64, g.n), peak: make([]float64, g.n)}
}

// hold records v over [start, end); an empty interval records nothing.
func (l *level) hold(start, end time.Duration, v float64) {
	if end <= start {
		return
	}
	for i := l.g.bucket(start); i < l.g.n; i++ {
		lo, hi := time.Duration(i)*l.g.width, time.Duration(i+1)*l.g.width
		if lo >= end {
			break
		}
		overlap := min(end, hi) - max(start, lo)
		if overlap <= 0 {
			break // past the grid's end
		}
		l.area[i] += v * overlap.Seconds()
		l.peak[i] = max(l.peak[i], v)
	}
}

// mean is the time-weighted mean per bucket.
func (l *level) mean() []float64 {
	out := make([]float64, l.g.n)
	for i, a := range l.area {
		out[i] = a / l.g.width.Seconds()
	}
	return out
}

// rate counts events per bucket and reports them per second.
type rate struct {
	g     grid
	count []float64
}

func newRate(g grid) *rate { return &rate{g: g, count: make([]float64, g.n)} }

func (r *rate) add(t time.Duration, n float64) { r.count[r.g.bucket(t)] += n }

func (r *rate) perSecond() []float64 {
	out := make([]float64, r.g.n)
	for i, c := range r.count {
		out[i] = c / r.g.width.Seconds()
	}
	return out
}

// ratio is Σ num / Σ den per bucket: NaN (no data, a gap in the line) where den is 0.
type ratio struct {
	g        grid
	num, den []float64
}

func newRatio(g grid) *ratio {
	return &ratio{g: g, num: make([]float64, g.n), den: make([]float64, g.n)}
}

func (r *ratio) add(t time.Duration, num, den float64) {
	i := r.g.bucket(t)
	r.num[i] += num
	r.den[i] += den
}

func (r *ratio) values() []float64 {
	out := make([]float64, r.g.n)
	for i := range out {
		out[i] = math.NaN()
		if r.den[i] > 0 {
			out[i] = r.num[i] / r.den[i]
		}
	}
	return out
}

// samples is a value sampled at instants (a transfer's duration at its end), summarised per bucket by its
// mean and max, NaN where a bucket has none.
type samples struct {
	sum   *ratio
	peak  []float64
	all   []float64
	count []int
}

func newSamples(g grid) *samples {
	return &samples{sum: newRatio(g), peak: make([]float64, g.n), count: make([]int, g.n)}
}

func (s *samples) add(t time.Duration, v float64) {
	s.sum.add(t, v, 1)
	i := s.sum.g.bucket(t)
	if s.count[i] == 0 || v > s.peak[i] {
		s.peak[i] = v
	}
	s.count[i]++
	s.all = append(s.all, v)
}

func (s *samples) max() []float64 {
	out := slices.Clone(s.peak)
	for i, n := range s.count {
		if n == 0 {
			out[i] = math.NaN()
		}
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

// workerSeries is one worker's bucketed state.
type workerSeries struct {
	name                     string
	waiting, running, kvUsed *level
}

// series is what the time charts plot, bucketed over a run.
type series struct {
	g          grid
	throughput *rate // output tokens
	workers    []workerSeries
	pools      []string          // in first-seen order of the workers, by serial
	preempt    map[string]*rate  // by pool
	prefix     map[string]*ratio // by pool: prompt tokens found cached / looked up
	transfers  *samples          // milliseconds, at the transfer's end
}

// bucketize reduces a recorded timeline to n buckets over [0, end).
func bucketize(rec *timeline.Recorder, end time.Duration, n int) *series {
	g := newGrid(end, n)
	s := &series{g: g, throughput: newRate(g), preempt: map[string]*rate{}, prefix: map[string]*ratio{}, transfers: newSamples(g)}
	workers := rec.Workers()
	pools := map[string]bool{}
	for _, w := range workers {
		if !pools[w.Pool] {
			pools[w.Pool] = true
			s.pools = append(s.pools, w.Pool)
			s.preempt[w.Pool], s.prefix[w.Pool] = newRate(g), newRatio(g)
		}
	}
	for _, w := range workers {
		ws := workerSeries{name: workerName(w, len(s.pools) > 1), waiting: newLevel(g), running: newLevel(g), kvUsed: newLevel(g)}
		// The prefix counters are cumulative per rank; a pass adds what changed since the rank's last.
		lastQueries, lastHits := make([]int64, w.Ranks), make([]int64, w.Ranks)
		for i := range w.Passes {
			p := &w.Passes[i]
			var waiting, running, finished, active, total, preempted, queries, hits int64
			for k := range p.Ranks {
				r := &p.Ranks[k]
				waiting += int64(r.Waiting)
				running += int64(r.Running)
				finished += int64(r.Finished)
				active += int64(r.ActiveBlocks)
				total += int64(r.TotalBlocks)
				preempted += int64(r.Preempted)
				s.throughput.add(p.End, float64(r.Sampled))
				if k < len(lastQueries) {
					if r.PrefixQueries < lastQueries[k] { // a failed worker's new engine counts from 0
						lastQueries[k], lastHits[k] = 0, 0
					}
					queries += r.PrefixQueries - lastQueries[k]
					hits += r.PrefixHits - lastHits[k]
					lastQueries[k], lastHits[k] = r.PrefixQueries, r.PrefixHits
				}
			}
			// The engine applies a pass's completions as it plans it, so the state it reports is the one
			// after the pass: held from the pass's end to the next pass, as a worker idle between passes
			// may still hold a queue and KV (a prefill worker waiting for room on the decode side).
			// During the pass, the requests that finished at its end were running too.
			next := p.End // after its last pass, a worker has nothing more to show
			if i+1 < len(w.Passes) {
				next = w.Passes[i+1].Start
			}
			usage := 0.0
			if total > 0 {
				usage = float64(active) / float64(total)
			}
			ws.waiting.hold(p.Start, next, float64(waiting))
			ws.running.hold(p.Start, p.End, float64(running+finished))
			ws.running.hold(p.End, next, float64(running))
			ws.kvUsed.hold(p.Start, next, usage)
			s.preempt[w.Pool].add(p.Start, float64(preempted))
			s.prefix[w.Pool].add(p.Start, float64(hits), float64(queries))
		}
		s.workers = append(s.workers, ws)
	}
	for _, t := range rec.Transfers {
		s.transfers.add(t.End, float64(t.End-t.Start)/float64(time.Millisecond))
	}
	return s
}

// workerName labels a worker in a legend; with several pools, by its pool too.
func workerName(w *timeline.Worker, pools bool) string {
	name := "worker " + strconv.FormatUint(w.Serial, 10)
	if pools {
		name = w.Pool + " " + strconv.FormatUint(w.Serial, 10)
	}
	return name
}
