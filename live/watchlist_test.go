package live

import (
	"testing"
	"time"
)

// TestWatchListSweeps drives a watchList's sweeps by hand (its timer runs a no-op): an exchange is due
// once watchDelay/watchSweep sweeps have passed since the one it was listed after, removal keeps the
// others' places, and a removed or swept exchange is listed again only by add.
func TestWatchListSweeps(t *testing.T) {
	if want := uint64(watchDelay / watchSweep); want != 2 {
		t.Fatalf("watchDelay/watchSweep = %d: the sweeps below assume 2", want)
	}
	l := &watchList{timer: time.AfterFunc(time.Hour, func() {})}
	defer l.timer.Stop()
	xs := make([]*fastExchange, 4)
	for i := range xs {
		xs[i] = &fastExchange{}
	}
	listed := func(want ...int) {
		t.Helper()
		if len(l.xs) != len(want) {
			t.Fatalf("sweep %d: %d listed, want %v", l.sweep, len(l.xs), want)
		}
		for _, i := range want {
			if x := xs[i]; x.slot == 0 || l.xs[x.slot-1] != x {
				t.Fatalf("sweep %d: exchange %d not in its place (slot %d)", l.sweep, i, x.slot)
			}
		}
	}
	l.add(xs[0]) // after sweep 0
	l.add(xs[0]) // listed once
	l.sweepNow()
	l.add(xs[1]) // after sweep 1
	l.add(xs[2])
	l.add(xs[3])
	listed(0, 1, 2, 3)
	l.remove(xs[1]) // the last takes its place
	listed(0, 2, 3)
	l.sweepNow() // 2: xs[0] has waited 2 sweeps, not yet more than 2
	listed(0, 2, 3)
	l.sweepNow() // 3: xs[0] is due
	listed(2, 3)
	if xs[0].slot != 0 {
		t.Fatalf("a swept exchange keeps slot %d", xs[0].slot)
	}
	l.remove(xs[0]) // no longer listed: nothing happens
	listed(2, 3)
	l.sweepNow() // 4: the rest are due
	listed()
}
