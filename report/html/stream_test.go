package html

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timeline"
)

// randomRun is a run of a few workers' passes (each worker's in time order, with gaps, empty passes and
// restarts) and transfers, shown to o as lookahead would: the workers interleaved out of time order.
func randomRun(rng *rand.Rand, o sim.Observer) (end time.Duration) {
	pools := []string{"agg"}
	if rng.IntN(2) == 0 {
		pools = []string{"prefill", "decode"}
	}
	type pending struct{ passes []*sim.ObservedPass }
	var workers []*pending
	for serial := range 2 + rng.IntN(3) {
		ranks := 1 + rng.IntN(2)
		pool := pools[serial%len(pools)]
		w := &pending{}
		now := time.Duration(rng.Int64N(int64(2 * sec)))
		queries, hits := make([]int64, ranks), make([]int64, ranks)
		for range rng.IntN(200) {
			p := &sim.ObservedPass{Pool: pool, Worker: uint64(serial), Start: now, End: now + time.Duration(rng.Int64N(int64(300*time.Millisecond)))}
			if rng.IntN(20) == 0 {
				p.End = p.Start
			}
			for k := range ranks {
				if rng.IntN(50) == 0 {
					queries[k], hits[k] = 0, 0 // a restart
				}
				q := rng.Int64N(100)
				queries[k] += q
				hits[k] += rng.Int64N(q + 1)
				p.Metrics = append(p.Metrics, sched.Metrics{Running: rng.IntN(30), Waiting: rng.IntN(10), ActiveBlocks: rng.IntN(500),
					TotalBlocks: 500, PrefixQueries: queries[k], PrefixHits: hits[k]})
				if rng.IntN(4) > 0 {
					sp := &sched.Pass{Preempted: make([]uint64, rng.IntN(3))}
					for id := range rng.IntN(5) {
						sp.Outputs = append(sp.Outputs, sched.Output{ID: uint64(id), Tokens: make([]uint32, rng.IntN(3)), Done: rng.IntN(3) == 0})
					}
					p.Ranks = append(p.Ranks, engine.RankPass{Pass: sp, Rank: k})
				}
			}
			w.passes = append(w.passes, p)
			end = max(end, p.End)
			now = p.End + time.Duration(rng.Int64N(int64(time.Duration(1+rng.IntN(3))*100*time.Millisecond)))
		}
		workers = append(workers, w)
	}
	for len(workers) > 0 {
		i := rng.IntN(len(workers))
		w := workers[i]
		for n := 1 + rng.IntN(20); n > 0 && len(w.passes) > 0; n-- {
			o.Pass(w.passes[0])
			w.passes = w.passes[1:]
			if rng.IntN(10) == 0 && end > 0 {
				at := time.Duration(rng.Int64N(int64(end)))
				o.Transferred(0, at-time.Duration(rng.Int64N(int64(at)+1)), at)
			}
		}
		if len(w.passes) == 0 {
			workers = slices.Delete(workers, i, i+1)
		}
	}
	return end + time.Duration(rng.Int64N(int64(sec)))
}

// bucketKept buckets a recorded run's passes and transfers directly into n buckets of width w: the
// page's series as computed from every pass kept.
func bucketKept(rec *timeline.Recorder, end, w time.Duration) *drawn {
	n := min(max(int((end+w-1)/w), 1), 1<<20)
	at := func(t time.Duration) int { return min(int(t/w), n-1) }
	d := &drawn{width: w, x: make([]float64, n), throughput: make([]float64, n), preempt: map[string][]float64{}, prefix: map[string][]float64{}}
	for i := range d.x {
		d.x[i] = (time.Duration(i)*w + w/2).Seconds()
	}
	hits, looks, preempt, tokens := map[string][]int64{}, map[string][]int64{}, map[string][]int64{}, make([]int64, n)
	for _, wk := range rec.Workers() {
		if hits[wk.Pool] == nil {
			d.pools = append(d.pools, wk.Pool)
			hits[wk.Pool], looks[wk.Pool], preempt[wk.Pool] = make([]int64, n), make([]int64, n), make([]int64, n)
		}
	}
	hold := func(area, peak []int64, start, end time.Duration, v int64) {
		for t := start; t < end; t++ { // nanosecond by nanosecond would be slow: by bucket pieces
			i := int(t / w)
			if i >= n {
				return
			}
			next := min(end, time.Duration(i+1)*w)
			area[i] += v * int64(next-t)
			peak[i] = max(peak[i], v)
			t = next - 1
		}
	}
	for _, wk := range rec.Workers() {
		var area, peak [3][]int64
		for k := range area {
			area[k], peak[k] = make([]int64, n), make([]int64, n)
		}
		last := [2][]int64{make([]int64, wk.Ranks), make([]int64, wk.Ranks)}
		var total int64
		for i, p := range wk.Passes {
			var waiting, running, finished, active, q, h int64
			total = 0
			for k, r := range p.Ranks {
				waiting += int64(r.Waiting)
				running += int64(r.Running)
				finished += int64(r.Finished)
				active += int64(r.ActiveBlocks)
				total += int64(r.TotalBlocks)
				tokens[at(p.End)] += int64(r.Sampled)
				preempt[wk.Pool][at(p.Start)] += int64(r.Preempted)
				if r.PrefixQueries < last[0][k] {
					last[0][k], last[1][k] = 0, 0
				}
				q += r.PrefixQueries - last[0][k]
				h += r.PrefixHits - last[1][k]
				last[0][k], last[1][k] = r.PrefixQueries, r.PrefixHits
			}
			hits[wk.Pool][at(p.Start)] += h
			looks[wk.Pool][at(p.Start)] += q
			next := p.End
			if i+1 < len(wk.Passes) {
				next = wk.Passes[i+1].Start
			}
			hold(area[0], peak[0], p.Start, next, waiting)
			hold(area[1], peak[1], p.Start, p.End, running+finished)
			hold(area[1], peak[1], p.End, next, running)
			hold(area[2], peak[2], p.Start, next, active)
		}
		dw := drawnWorker{name: workerName(wk.Pool, wk.Serial, len(d.pools) > 1)}
		for k, l := range []*meanPeak{&dw.waiting, &dw.running, &dw.kvUsed} {
			unit := 1.0
			if k == 2 {
				unit = float64(total)
			}
			l.mean, l.peak = make([]float64, n), make([]float64, n)
			for i := range n {
				l.mean[i] = float64(area[k][i]) / (unit * float64(w))
				l.peak[i] = float64(peak[k][i]) / unit
			}
		}
		d.workers = append(d.workers, dw)
	}
	for i, v := range tokens {
		d.throughput[i] = float64(v) / w.Seconds()
	}
	for _, pool := range d.pools {
		d.preempt[pool], d.prefix[pool] = make([]float64, n), make([]float64, n)
		for i := range n {
			d.preempt[pool][i] = float64(preempt[pool][i]) / w.Seconds()
			d.prefix[pool][i] = math.NaN()
			if looks[pool][i] > 0 {
				d.prefix[pool][i] = float64(hits[pool][i]) / float64(looks[pool][i])
			}
		}
	}
	sum, count, peak := make([]int64, n), make([]int64, n), make([]int64, n)
	for _, tr := range rec.Transfers {
		i, dt := at(tr.End), int64(tr.End-tr.Start)
		sum[i] += dt
		count[i]++
		peak[i] = max(peak[i], dt)
		d.transfers.all = append(d.transfers.all, float64(dt)/float64(time.Millisecond))
	}
	d.transfers.mean, d.transfers.max = make([]float64, n), make([]float64, n)
	for i := range n {
		d.transfers.mean[i], d.transfers.max[i] = math.NaN(), math.NaN()
		if count[i] > 0 {
			d.transfers.mean[i] = float64(sum[i]) / float64(count[i]) / float64(time.Millisecond)
			d.transfers.max[i] = float64(peak[i]) / float64(time.Millisecond)
		}
	}
	return d
}

// TestSeriesMatchesKeptPasses: on random runs shown out of time order across workers, the streaming
// buckets are exactly those computed from every pass kept, at the width they end with: the narrowest
// start·2ᵏ whose n buckets hold everything that happened and the run's end.
func TestSeriesMatchesKeptPasses(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		matchesKept(t, rng.Uint64(), []int{1, 3, 8, 240}[rng.IntN(4)], time.Duration(1+rng.IntN(5))*time.Millisecond)
	}
}

// FuzzSeriesMatchesKeptPasses is TestSeriesMatchesKeptPasses over any seed, bucket count and narrowest width.
func FuzzSeriesMatchesKeptPasses(f *testing.F) {
	f.Add(uint64(1), uint16(240), uint32(1_000_000))
	f.Add(uint64(2), uint16(1), uint32(1))
	f.Add(uint64(3), uint16(7), uint32(333_333))
	f.Fuzz(func(t *testing.T, seed uint64, n uint16, start uint32) {
		matchesKept(t, seed, 1+int(n%512), time.Duration(1+start%1_000_000_000))
	})
}

// matchesKept checks a Series of n buckets from start against the kept passes, on the random run seed
// gives.
func matchesKept(t *testing.T, seed uint64, n int, start time.Duration) {
	t.Helper()
	same := func(a, b []float64) bool {
		return slices.EqualFunc(a, b, func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) })
	}
	s, rec := newSeries(n, start), &timeline.Recorder{}
	end := randomRun(rand.New(rand.NewPCG(seed, 11)), sim.Observers{s, rec})
	last := end - 1
	for _, w := range rec.Workers() {
		for _, p := range w.Passes {
			last = max(last, p.End)
		}
	}
	for _, tr := range rec.Transfers {
		last = max(last, tr.End)
	}
	want := start
	for last >= time.Duration(n)*want {
		want *= 2
	}
	got := s.draw(end)
	if got.width != want {
		t.Fatalf("seed %d: width %v, want %v", seed, got.width, want)
	}
	kept := bucketKept(rec, end, want)
	check := func(name string, a, b []float64) {
		t.Helper()
		if !same(a, b) {
			t.Fatalf("seed %d (%d buckets of %v): %s\n got %v\nwant %v", seed, n, want, name, a, b)
		}
	}
	check("x", got.x, kept.x)
	check("tokens/s", got.throughput, kept.throughput)
	if !slices.Equal(got.pools, kept.pools) || len(got.workers) != len(kept.workers) {
		t.Fatalf("seed %d: pools %v, %d workers; want %v, %d", seed, got.pools, len(got.workers), kept.pools, len(kept.workers))
	}
	for _, pool := range kept.pools {
		check(pool+" preemptions/s", got.preempt[pool], kept.preempt[pool])
		check(pool+" prefix hit rate", got.prefix[pool], kept.prefix[pool])
	}
	for i, w := range kept.workers {
		g := got.workers[i]
		if g.name != w.name {
			t.Fatalf("seed %d: worker %q, want %q", seed, g.name, w.name)
		}
		check(w.name+" waiting", g.waiting.mean, w.waiting.mean)
		check(w.name+" waiting max", g.waiting.peak, w.waiting.peak)
		check(w.name+" running", g.running.mean, w.running.mean)
		check(w.name+" running max", g.running.peak, w.running.peak)
		check(w.name+" kv", g.kvUsed.mean, w.kvUsed.mean)
		check(w.name+" kv max", g.kvUsed.peak, w.kvUsed.peak)
	}
	check("transfer mean", got.transfers.mean, kept.transfers.mean)
	check("transfer max", got.transfers.max, kept.transfers.max)
	check("transfers", got.transfers.all, kept.transfers.all)
}

// TestSeriesMemoryFlat: a Series allocates nothing per pass once its workers are known, and what it
// retains after a run ten times longer is the same.
func TestSeriesMemoryFlat(t *testing.T) {
	metrics := []sched.Metrics{{Running: 8, Waiting: 2, ActiveBlocks: 100, TotalBlocks: 1000, PrefixQueries: 1}, {Running: 3, TotalBlocks: 1000}}
	ranks := []engine.RankPass{{Pass: &sched.Pass{Outputs: []sched.Output{{ID: 1, Tokens: []uint32{7}}}}}}
	run := func(s *Series, passes int) {
		for i := range passes {
			for w := range uint64(8) {
				at := time.Duration(i)*20*time.Millisecond + time.Duration(w)*time.Millisecond
				s.Pass(&sim.ObservedPass{Pool: "agg", Worker: w, Start: at, End: at + 15*time.Millisecond, Ranks: ranks, Metrics: metrics})
			}
		}
	}
	retained := func(passes int) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := NewSeries(0)
		run(s, passes)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		return after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
	}
	retained(1) // warms the runtime up: its first allocations are not the Series'
	short, long := retained(20_000), retained(200_000)
	t.Logf("retained after 8×20k passes: %d B; after 8×200k: %d B", short, long)
	if long > short+short/2 {
		t.Errorf("a run 10× longer retains %d B, against %d B", long, short)
	}
	s := NewSeries(0)
	run(s, 10)
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		i++
		at := time.Duration(i) * 20 * time.Millisecond
		s.Pass(&sim.ObservedPass{Pool: "agg", Worker: uint64(i % 8), Start: at, End: at + 15*time.Millisecond, Ranks: ranks, Metrics: metrics})
	})
	if allocs != 0 {
		t.Errorf("%v allocations per pass, want 0", allocs)
	}
}
