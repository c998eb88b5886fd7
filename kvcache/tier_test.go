package kvcache

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// newTieredPool has 2 GPU blocks over the given tiers; a block is 1e6 bytes, so a block crosses a
// 1 GB/s link in 1 ms.
func newTieredPool(t *testing.T, cpu, disk int, cpuGBps, diskGBps float64) *Pool {
	t.Helper()
	p, err := New(Options{Capacity: 2, PrefixCaching: true, Events: true, Tiers: TierOptions{
		CPUBlocks: cpu, DiskBlocks: disk, CPUBandwidth: cpuGBps, DiskBandwidth: diskGBps, BlockBytes: 1e6}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// describe renders events as "medium kind hashes" lines, hashes named by their index in names.
func describe(evs []Event, names map[uint64]string) string {
	var b strings.Builder
	for _, ev := range evs {
		var hs []string
		for _, blk := range ev.Blocks {
			hs = append(hs, names[blk.Hash])
		}
		for _, h := range ev.Hashes {
			hs = append(hs, names[h])
		}
		fmt.Fprintf(&b, "%s %s %s; ", ev.Medium, ev.Kind, strings.Join(hs, ","))
	}
	return b.String()
}

// TestOffloadThenOnboardChargesBandwidth evicts a two-block prefix to the CPU tier (its write-back takes the
// 1 GB/s link for 1 ms a block) and onboards it: the copy back takes 2 ms from its start, and waits for the
// write-back when the link is still busy with it.
func TestOffloadThenOnboardChargesBandwidth(t *testing.T) {
	p := newTieredPool(t, 4, 0, 1, 0)
	a := seqBlocks(4, 1, 1, 1, 1, 2, 2, 2, 2)
	names := map[uint64]string{a[0].Hash: "a0", a[1].Hash: "a1"}
	p.Release(admit(t, p, a, 2))
	p.TakeEvents(nil)

	p.SetNow(10 * time.Millisecond)
	p.Release(p.Allocate(nil, 2)) // evicts a1 (the suffix first), then a0
	if got, want := describe(p.TakeEvents(nil), names), "GPU removed a1,a0; CPU stored a1,a0; "; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	check(t, p, 2, 0, 0)
	if p.TierLen(CPU) != 2 || p.MatchLower(a) != 2 {
		t.Fatalf("CPU tier holds %d blocks, matches %d of a, want 2 and 2", p.TierLen(CPU), p.MatchLower(a))
	}

	// The write-back holds the link until 12 ms: an onboarding at 11 ms queues behind it.
	p.SetNow(11 * time.Millisecond)
	if got, want := p.Onboard(a), 14*time.Millisecond; got != want {
		t.Fatalf("onboarding at 11 ms behind the write-back ends at %v, want %v", got, want)
	}
	// On an idle link it takes 2 blocks × 1 ms.
	p.SetNow(20 * time.Millisecond)
	if got, want := p.Onboard(a), 22*time.Millisecond; got != want {
		t.Fatalf("onboarding at 20 ms ends at %v, want %v", got, want)
	}
	want := TierStats{CPUHits: 4, Offloaded: 2, OnboardTime: 3*time.Millisecond + 2*time.Millisecond, CPUUsed: 2}
	if got := p.TierStats(); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	// An onboarded block stays in the CPU tier: evicting it from the GPU again writes nothing.
	p.SetNow(30 * time.Millisecond)
	table := p.Allocate(nil, 2)
	p.Commit(table, a, 0, 2)
	p.Release(table)
	p.TakeEvents(nil)
	p.Release(p.Allocate(nil, 2))
	if got, want := describe(p.TakeEvents(nil), names), "GPU removed a1,a0; "; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if got := p.TierStats().Offloaded; got != 2 {
		t.Fatalf("offloaded %d blocks, want 2", got)
	}
	check(t, p, 2, 0, 0)
}

// TestCPUEvictionsGoToDisk fills a one-block CPU tier: its LRU block moves to the disk, whose blocks are
// onboarded through the disk link, then the GPU link.
func TestCPUEvictionsGoToDisk(t *testing.T) {
	p := newTieredPool(t, 1, 2, 1, 0.2) // disk: 5 ms a block
	a := seqBlocks(4, 1, 1, 1, 1, 2, 2, 2, 2)
	names := map[uint64]string{a[0].Hash: "a0", a[1].Hash: "a1"}
	p.Release(admit(t, p, a, 2))
	p.TakeEvents(nil)
	p.Release(p.Allocate(nil, 2))
	if got, want := describe(p.TakeEvents(nil), names), "GPU removed a1,a0; CPU stored a1,a0; CPU removed a1; DISK stored a1; "; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if p.TierLen(CPU) != 1 || p.TierLen(Disk) != 1 || p.MatchLower(a) != 2 {
		t.Fatalf("CPU %d, disk %d blocks, %d of a below the GPU; want 1, 1, 2", p.TierLen(CPU), p.TierLen(Disk), p.MatchLower(a))
	}
	check(t, p, 2, 0, 0)
	// At 100 ms both links are idle: a1 takes 5 ms to reach host memory, a0 and a1 2 ms to cross PCIe.
	p.SetNow(100 * time.Millisecond)
	if got, want := p.Onboard(a), 105*time.Millisecond; got != want {
		t.Fatalf("onboarding ends at %v, want %v", got, want)
	}
	if st := p.TierStats(); st.CPUHits != 1 || st.DiskHits != 1 || st.OnboardTime != 5*time.Millisecond {
		t.Fatalf("stats %+v, want 1 CPU hit, 1 disk hit, 5 ms", st)
	}
	// Disk evictions leave the hierarchy: b's write-backs spill a0 and b1 from the CPU tier, and the disk's
	// LRU block, a1, goes.
	b := seqBlocks(4, 3, 3, 3, 3, 4, 4, 4, 4)
	p.Release(admit(t, p, b, 2)) // evicts nothing: a's GPU copies were freed
	p.TakeEvents(nil)
	p.Release(p.Allocate(nil, 2))
	evs := describe(p.TakeEvents(nil), map[uint64]string{a[0].Hash: "a0", a[1].Hash: "a1", b[0].Hash: "b0", b[1].Hash: "b1"})
	if want := "GPU removed b1,b0; CPU stored b1,b0; CPU removed a0,b1; DISK stored a0,b1; DISK removed a1; "; evs != want {
		t.Fatalf("events %q, want %q", evs, want)
	}
	check(t, p, 2, 0, 0)
}

func TestTierOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    TierOptions
		want string
	}{
		{TierOptions{CPUBlocks: -1}, "num-cpu-blocks -1"},
		{TierOptions{DiskBlocks: 4}, "num-disk-blocks 4: needs a CPU tier"},
		{TierOptions{CPUBlocks: 4, BlockBytes: 1}, "cpu-bandwidth-gbps 0"},
		{TierOptions{CPUBlocks: 4, DiskBlocks: 4, CPUBandwidth: 1, BlockBytes: 1}, "disk-bandwidth-gbps 0"},
		{TierOptions{CPUBlocks: 4, CPUBandwidth: 1}, "0 KV bytes per block"},
	} {
		err := c.o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.o, err, c.want)
		}
	}
	if err := (TierOptions{}).Validate(); err != nil {
		t.Errorf("no tiers: %v", err)
	}
}

// TestEventStringOmitsGPU: a GPU event prints as its fields did before lower tiers existed.
func TestEventStringOmitsGPU(t *testing.T) {
	ev := Event{ID: 3, Kind: Removed, Hashes: []uint64{7}}
	if got, want := fmt.Sprintf("%+v", []Event{ev}), "[{ID:3 Kind:removed Parent:0 HasParent:false Blocks:[] Hashes:[7]}]"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	ev.Medium = CPU
	if got, want := fmt.Sprint(ev), "{ID:3 Kind:removed Parent:0 HasParent:false Blocks:[] Hashes:[7] Medium:CPU}"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
