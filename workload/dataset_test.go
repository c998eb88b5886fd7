package workload

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// pooled returns the requests of o in Key order with their tokens, and the pool entry each repeats,
// named by the index of the first request (in Key order) that carries the same tokens.
func pooled(t *testing.T, o SyntheticOptions) (reqs []Request, entries []int) {
	t.Helper()
	reqs, toks := tokensOf(t, o)
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(reqs[a].Key) - int(reqs[b].Key) })
	sorted := make([]Request, len(reqs))
	entries = make([]int, len(reqs))
	for i, j := range order {
		sorted[i] = reqs[j]
		entries[i] = i
		for k := range i {
			if slices.Equal(toks[order[k]], toks[j]) {
				entries[i] = entries[k]
				break
			}
		}
	}
	return sorted, entries
}

// Sequential sampling walks the pool in order: request i repeats entry i mod N — its lengths and its
// tokens, shared prefix included — whether the requests come as sessions or as closed-loop clients.
func TestDatasetSequential(t *testing.T) {
	o := SyntheticOptions{NumRequests: 7, Input: Length{Mean: 40, Stddev: 10}, Output: Length{Mean: 5, Stddev: 2},
		RequestRate: 10, SharedPrefixRatio: 0.25, NumPrefixGroups: 2, DatasetEntries: 3,
		DatasetSampling: SampleSequential, Seed: 5}
	for _, clients := range []int{0, 2} {
		o.Clients = clients
		if clients > 0 {
			o.RequestRate = math.Inf(1)
		}
		reqs, entries := pooled(t, o)
		if want := []int{0, 1, 2, 0, 1, 2, 0}; !slices.Equal(entries, want) {
			t.Fatalf("clients %d: requests repeat the prompts of %v, want %v", clients, entries, want)
		}
		for i, r := range reqs {
			first := reqs[i%3]
			if r.InputLen != first.InputLen || r.OutputLen != first.OutputLen {
				t.Errorf("clients %d: request %d is %d/%d tokens, its entry %d/%d", clients, i, r.InputLen, r.OutputLen, first.InputLen, first.OutputLen)
			}
		}
		if reqs[0].InputLen == reqs[1].InputLen && reqs[1].InputLen == reqs[2].InputLen {
			t.Errorf("clients %d: the three entries have one length %d; the draws did not vary", clients, reqs[0].InputLen)
		}
	}
}

// Shuffle sampling takes every entry once per pass over the pool, each pass in an order of its own.
func TestDatasetShuffle(t *testing.T) {
	const n, passes = 6, 5
	o := SyntheticOptions{NumRequests: n * passes, Input: Length{Mean: 16}, Output: Length{Mean: 1},
		RequestRate: math.Inf(1), DatasetEntries: n, Seed: 9}
	_, entries := pooled(t, o)
	first := entries[:n]
	differ := false
	for p := range passes {
		pass := entries[p*n : (p+1)*n]
		if got := slices.Sorted(slices.Values(pass)); !slices.Equal(got, slices.Sorted(slices.Values(first))) {
			t.Errorf("pass %d takes entries %v, want each of %v once", p, pass, first)
		}
		differ = differ || !slices.Equal(pass, first)
	}
	if !differ {
		t.Errorf("all %d passes take the entries in one order %v", passes, first)
	}
	if _, again := pooled(t, o); !slices.Equal(again, entries) {
		t.Errorf("same seed, orders %v then %v", entries, again)
	}
}

// Random sampling draws entries with replacement, each about equally often.
func TestDatasetRandom(t *testing.T) {
	o := SyntheticOptions{NumRequests: 800, Input: Length{Mean: 8}, Output: Length{Mean: 1},
		RequestRate: math.Inf(1), DatasetEntries: 4, DatasetSampling: SampleRandom, Seed: 2}
	_, entries := pooled(t, o)
	count := map[int]int{}
	for _, e := range entries {
		count[e]++
	}
	if len(count) != 4 {
		t.Fatalf("%d distinct prompts, want 4", len(count))
	}
	for e, c := range count {
		if c < 150 || c > 250 {
			t.Errorf("entry of request %d taken %d times of 800, want about 200", e, c)
		}
	}
}

// A pool's prompts are never a plain request's: the entries' tokens have a salt of their own.
func TestDatasetTokensOwnSpace(t *testing.T) {
	o := SyntheticOptions{NumRequests: 2, Input: Length{Mean: 32}, Output: Length{Mean: 1}, RequestRate: math.Inf(1), Seed: 4}
	_, plain := tokensOf(t, o)
	o.DatasetEntries = 2
	_, pool := tokensOf(t, o)
	for i := range plain {
		for j := range pool {
			if slices.Equal(plain[i], pool[j]) {
				t.Errorf("plain request %d and pooled request %d have the same tokens", i, j)
			}
		}
	}
}

// permute is a bijection of [0, n) for every n and key, the cycle walk included.
func TestPermute(t *testing.T) {
	for n := uint64(1); n <= 70; n++ {
		for key := uint64(0); key < 5; key++ {
			seen := make([]bool, n)
			for x := range n {
				y := permute(x, n, key)
				if y >= n || seen[y] {
					t.Fatalf("permute(%d, %d, %d) = %d: out of range or taken twice", x, n, key, y)
				}
				seen[y] = true
			}
		}
	}
}

func TestDatasetInvalid(t *testing.T) {
	base := SyntheticOptions{NumRequests: 4, Input: Length{Mean: 8}, RequestRate: math.Inf(1)}
	for _, c := range []struct {
		edit func(*SyntheticOptions)
		want string
	}{
		{func(o *SyntheticOptions) { o.DatasetEntries = -1 }, "synthetic: num-dataset-entries: must be >= 0, got -1"},
		{func(o *SyntheticOptions) { o.DatasetEntries = maxDatasetEntries + 1 }, "synthetic: num-dataset-entries: at most 4194304"},
		{func(o *SyntheticOptions) { o.DatasetEntries, o.TurnsPerSession = 3, 2 }, "synthetic: num-dataset-entries: a pool of prompts does not combine with multi-turn sessions (2 turns)"},
		{func(o *SyntheticOptions) { o.DatasetSampling = "lifo" }, `synthetic: dataset-sampling-strategy: unknown strategy "lifo"`},
	} {
		o := base
		c.edit(&o)
		if _, err := NewSynthetic(o); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("NewSynthetic(%+v) = %v, want an error starting %q", o, err, c.want)
		}
	}
	// A pool of one entry is every request the same prompt.
	o := base
	o.DatasetEntries, o.Input.Stddev, o.Clients, o.Desync = 1, 3, 2, time.Millisecond
	if _, entries := pooled(t, o); !slices.Equal(entries, []int{0, 0, 0, 0}) {
		t.Errorf("pool of one: entries %v", entries)
	}
}
