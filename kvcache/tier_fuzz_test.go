package kvcache

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/tokens"
)

// FuzzTierPool drives a small pool with lower tiers through admissions (onboarding what a lower tier
// holds), releases, private churn and time, and checks after each step the accounting (CheckInvariants)
// and that a consumer of the events holds exactly what each medium holds.
func FuzzTierPool(f *testing.F) {
	f.Add([]byte{3, 2, 4, 0, 4, 8, 1, 1, 1, 12, 0, 2, 5})
	f.Add([]byte{7, 0, 0, 0, 1, 4, 5, 8, 9, 13, 2, 0, 4, 1, 1, 1, 1})
	f.Add([]byte{1, 1, 1, 0, 4, 8, 12, 0, 4, 8, 12, 3, 3, 3, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		o := TierOptions{CPUBlocks: 1 + int(data[0]%8), CPUBandwidth: 1, DiskBandwidth: 0.5, BlockBytes: 1000}
		if data[1]%3 > 0 {
			o.DiskBlocks = int(data[1] % 8)
		}
		p, err := New(Options{Capacity: 1 + int(data[2]%8), PrefixCaching: true, Events: true, Tiers: o})
		if err != nil {
			t.Fatal(err)
		}
		// Four prompts of 1 to 4 blocks sharing prefixes two by two.
		var prompts [4][]tokens.Block
		for i := range prompts {
			toks := make([]uint32, 4*(1+i))
			for j := range toks {
				toks[j] = uint32(j + 100*(i%2))
			}
			prompts[i] = seqBlocks(4, toks...)
		}
		seen := [3]map[uint64]bool{{}, {}, {}} // what the events say each medium holds
		var held [][]BlockID
		var now time.Duration
		for _, b := range data[3:] {
			switch b % 4 {
			case 0:
				blocks := prompts[(b>>2)%4]
				hits, _ := p.Match(blocks, nil)
				lower := p.MatchLower(blocks[len(hits):])
				fresh := len(blocks) - len(hits)
				if !p.CanAllocate(hits, fresh) {
					break
				}
				if lower > 0 {
					if ready := p.Onboard(blocks[len(hits) : len(hits)+lower]); ready < now {
						t.Fatalf("onboarding started at %v ends at %v", now, ready)
					}
				}
				table := p.Acquire(nil, hits)
				table = p.Allocate(table, fresh)
				p.Commit(table, blocks, len(hits), len(blocks))
				held = append(held, table)
			case 1:
				if len(held) > 0 {
					p.Release(held[0])
					held = held[1:]
				}
			case 2:
				now += time.Duration(b) * time.Millisecond
				p.SetNow(now)
			case 3:
				if p.CanAllocate(nil, 1) {
					p.Release(p.Allocate(nil, 1))
				}
			}
			for _, ev := range p.TakeEvents(nil) {
				for _, blk := range ev.Blocks {
					seen[ev.Medium][blk.Hash] = true
				}
				for _, h := range ev.Hashes {
					delete(seen[ev.Medium], h)
				}
			}
			p.NewPass()
			if err := p.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			gpu := p.AppendCached(nil)
			cpu := slices.Collect(maps.Keys(p.tiers.cpu.slot))
			disk := slices.Collect(maps.Keys(p.tiers.disk.slot))
			for m, want := range [][]uint64{gpu, cpu, disk} {
				got := slices.Sorted(maps.Keys(seen[m]))
				if slices.Sort(want); !slices.Equal(got, want) {
					t.Fatalf("%s: the events say %x, it holds %x", Medium(m), got, want)
				}
			}
		}
	})
}
