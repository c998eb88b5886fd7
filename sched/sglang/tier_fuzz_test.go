package sglang

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// FuzzTierScheduler drives a small tiered scheduler through arrivals of prompts sharing prefixes (every
// other one given by its source, which waits unmade), cancellations and time, and checks after each pass
// the accounting (CheckInvariants, the tiers' included) and that a consumer of the KV events holds
// exactly the tree's pages on the GPU and as many pages per lower tier as it holds.
func FuzzTierScheduler(f *testing.F) {
	f.Add([]byte{3, 2, 4, 0, 4, 8, 1, 1, 1, 12, 0, 2, 5})
	f.Add([]byte{7, 0, 9, 0, 1, 4, 5, 8, 9, 13, 2, 0, 4, 1, 1, 1, 1, 0, 0, 3, 3})
	f.Add([]byte{1, 5, 1, 0, 4, 8, 12, 0, 4, 8, 12, 3, 3, 3, 1, 1, 1, 1, 6, 6, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		o := opts(2, 6+int(data[2]%8))
		o.ChunkedPrefillSize = 4
		o.Overlap = data[2]&8 != 0
		o.Tiers = kvcache.TierOptions{CPUBlocks: 1 + int(data[0]%8), CPUBandwidth: 1, DiskBandwidth: 0.5, BlockBytes: 1e6}
		if data[1]%3 > 0 {
			o.Tiers.DiskBlocks = int(data[1] % 8)
		}
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		seen := [3]map[uint64]bool{{}, {}, {}} // what the events say each medium holds
		var now time.Duration
		var id uint64
		for _, b := range data[3:] {
			switch b % 4 {
			case 0: // four prompts of 3 to 9 tokens, sharing prefixes two by two
				i := int(b>>2) % 4
				id++
				p := slices.Concat(schedtest.Prompt(100*(i%2), 3+2*i), schedtest.Prompt(1000+int(id), int(b>>4)%2))
				r := &sched.Request{ID: id, Prompt: p, MaxTokens: 1 + int(b>>5)}
				if id%2 == 1 { // it waits as its source
					r.Prompt, r.Source = nil, &schedtest.CountingSource{Toks: p}
				}
				var rej *sched.RejectError
				if err := s.Enqueue(r); err != nil && !errors.As(err, &rej) {
					t.Fatal(err) // a request the pool cannot hold is rejected, as it should be
				}
			case 1:
				s.Cancel(uint64(b>>2) % (id + 1))
			case 2:
				now += time.Duration(b>>2) * time.Millisecond
			case 3: // a pass and nothing else
			}
			s.SetNow(now)
			p := s.Step()
			now = max(now, p.Until)
			if err := s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			for _, ev := range p.Events {
				for _, blk := range ev.Blocks {
					seen[ev.Medium][blk.Hash] = true
				}
				for _, h := range ev.Hashes {
					delete(seen[ev.Medium], h)
				}
			}
			gpu := slices.Sorted(slices.Values(s.cache.AppendCached(nil)))
			if got := slices.Sorted(maps.Keys(seen[kvcache.GPU])); !slices.Equal(got, gpu) {
				t.Fatalf("GPU: the events say %x, the tree holds %x", got, gpu)
			}
			for _, m := range []kvcache.Medium{kvcache.CPU, kvcache.Disk} {
				if got, want := len(seen[m]), s.cache.Tiers().Len(m); got != want {
					t.Fatalf("%s: the events say %d pages, it holds %d", m, got, want)
				}
			}
		}
	})
}
