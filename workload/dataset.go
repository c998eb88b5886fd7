package workload

import (
	"fmt"
	"math/bits"
)

// Dataset sampling strategies: the order in which requests take the prompts of a dataset pool
// (SyntheticOptions.DatasetEntries), as AIPerf names them (--dataset-sampling-strategy).
const (
	SampleShuffle    = "shuffle"    // each pass over the pool a fresh permutation of it (AIPerf's synthetic default)
	SampleSequential = "sequential" // entries 0, 1, ..., N-1, 0, 1, ... (genai-perf: perf_analyzer walks its input data in order)
	SampleRandom     = "random"     // each request an entry drawn uniformly, with replacement
)

// maxDatasetEntries bounds the pool, whose entries are drawn when the workload is made.
const maxDatasetEntries = 1 << 22

// datasetEntry is one prompt of the pool: its lengths and its shared-prefix group.
type datasetEntry struct {
	in, out   int
	prefix    uint64
	prefixLen int
}

// dataset is a pool of prompts that a benchmark client reuses until its run is done: genai-perf and
// AIPerf send --num-dataset-entries distinct payloads (100 unless told otherwise) however many requests
// they make, so an engine with prefix caching sees every prompt again once the pool is spent.
type dataset struct {
	entries  []datasetEntry
	strategy string
	order    uint64 // seed of the shuffle and random orders
	salt     uint64 // of the entries' own tokens (never a request key's)
}

// newDataset draws the pool's n entries from g's length and group streams.
func newDataset(g *synthetic, n int, strategy string, seed uint64) *dataset {
	d := &dataset{
		entries:  make([]datasetEntry, n),
		strategy: strategy,
		order:    streamSeed(seed, streamDatasetOrder),
		salt:     streamSeed(seed, streamDatasetTokens),
	}
	for e := range d.entries {
		x := &d.entries[e]
		x.in = g.o.Input.draw(g.inputs, 1)
		x.out = g.o.Output.draw(g.outputs, 0)
		x.prefix, x.prefixLen = g.group(x.in)
	}
	return d
}

// checkDataset validates the pool options, named as the command line names them.
func (o *SyntheticOptions) checkDataset() error {
	switch {
	case o.DatasetEntries < 0:
		return fmt.Errorf("num-dataset-entries: must be >= 0, got %d", o.DatasetEntries)
	case o.DatasetEntries > maxDatasetEntries:
		return fmt.Errorf("num-dataset-entries: at most %d, got %d", maxDatasetEntries, o.DatasetEntries)
	case o.DatasetEntries > 0 && o.TurnsPerSession > 1:
		return fmt.Errorf("num-dataset-entries: a pool of prompts does not combine with multi-turn sessions (%d turns)", o.TurnsPerSession)
	}
	switch o.DatasetSampling {
	case "":
		o.DatasetSampling = SampleShuffle
	case SampleShuffle, SampleSequential, SampleRandom:
	default:
		return fmt.Errorf("dataset-sampling-strategy: unknown strategy %q (want shuffle, sequential or random)", o.DatasetSampling)
	}
	return nil
}

// entry returns the pool entry request i (its Key) repeats.
func (d *dataset) entry(i uint64) int {
	n := uint64(len(d.entries))
	switch d.strategy {
	case SampleSequential:
		return int(i % n)
	case SampleRandom:
		hi, _ := bits.Mul64(mix64(d.order+(i+1)*golden), n)
		return int(hi)
	}
	return int(permute(i%n, n, mix64(d.order^(i/n+1)*golden)))
}

// apply makes r repeat the prompt of its entry: the entry's lengths, group prefix and tokens.
func (d *dataset) apply(r *Request) {
	e := d.entry(r.Key)
	x := &d.entries[e]
	r.InputLen, r.OutputLen = x.in, x.out
	r.prefix, r.prefixLen = x.prefix, int32(x.prefixLen)
	r.entry, r.salt = uint64(e)+1, d.salt
}

// permute maps x in [0, n) to its image under a pseudo-random permutation of [0, n) chosen by key: a
// four-round Feistel network on the smallest even number of bits that holds n, walking the cycle
// until it lands inside [0, n) again. It needs no table, so a request's entry is found in O(1) memory
// whatever the order the requests are made in.
func permute(x, n, key uint64) uint64 {
	if n <= 1 {
		return 0
	}
	half := (bits.Len64(n-1) + 1) / 2
	mask := uint64(1)<<half - 1
	for {
		l, r := x>>half, x&mask
		for round := uint64(0); round < 4; round++ {
			l, r = r, l^(mix64(key+r*golden+round)&mask)
		}
		x = l<<half | r
		if x < n {
			return x
		}
	}
}
