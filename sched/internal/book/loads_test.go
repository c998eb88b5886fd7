package book

import (
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/timing"
)

// TestLoads: loads land in the order they started once the clock reaches their ready time, a pass that
// runs nothing lasts until the earliest one in flight, and a cancelled one is forgotten.
func TestLoads(t *testing.T) {
	var l Loads[int]
	l.Start(1, 30*time.Millisecond)
	l.Start(2, 10*time.Millisecond)
	l.Start(3, 20*time.Millisecond)
	l.Start(4, 10*time.Millisecond)
	var p sched.Pass
	l.Await(&p)
	if p.Until != 10*time.Millisecond {
		t.Fatalf("idle pass until %v, want 10ms", p.Until)
	}
	p = sched.Pass{Batch: timing.Batch{Seqs: []timing.Seq{{New: 1}}}}
	l.Await(&p)
	if p.Until != 0 {
		t.Fatalf("a pass that runs something lasts until %v, want 0 (its own time)", p.Until)
	}
	if got := l.Landed(); len(got) != 0 {
		t.Fatalf("landed %v at 0, want none", got)
	}
	l.SetNow(20 * time.Millisecond)
	if got := l.Landed(); !slices.Equal(got, []int{2, 3, 4}) {
		t.Fatalf("landed %v at 20ms, want [2 3 4]", got)
	}
	if l.Len() != 1 || !slices.Equal(slices.Collect(l.All()), []int{1}) {
		t.Fatalf("loading %v, want [1]", slices.Collect(l.All()))
	}
	l.Start(5, 25*time.Millisecond)
	l.Remove(9) // not loading: nothing happens
	l.Remove(1)
	if !slices.Equal(slices.Collect(l.All()), []int{5}) {
		t.Fatalf("loading %v after removing 1, want [5]", slices.Collect(l.All()))
	}
	p = sched.Pass{}
	l.Await(&p)
	if p.Until != 25*time.Millisecond {
		t.Fatalf("idle pass until %v, want 25ms", p.Until)
	}
	l.Remove(5)
	p = sched.Pass{}
	l.Await(&p)
	if p.Until != 0 || l.Len() != 0 {
		t.Fatalf("nothing loading: pass until %v, %d loading, want 0, 0", p.Until, l.Len())
	}
}

// TestListLoRAs: each adapter once, in the order first met, running and waiting apart, the base model and
// nil waiting requests passed over; nothing while no request names an adapter.
func TestListLoRAs(t *testing.T) {
	f := newFake(t, sched.Aggregated, sched.Spec{})
	var rs []*req
	for i, name := range []string{"a", "", "b", "a", "c", "b"} {
		r := request(uint64(i+1), 4, 1)
		r.LoRA = name
		q, err := f.b.Enqueue(r, false)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, q)
	}
	var m sched.Metrics
	f.b.ListLoRAs(&m, rs[:3], []*req{nil, rs[5]}, nil, rs[3:5])
	if m.RunningLoRAs != "a,b" || m.WaitingLoRAs != "b,a,c" {
		t.Fatalf("running %q waiting %q, want \"a,b\" and \"b,a,c\"", m.RunningLoRAs, m.WaitingLoRAs)
	}
	for _, r := range rs {
		f.b.Cancel(r.ID)
	}
	m = sched.Metrics{RunningLoRAs: "x", WaitingLoRAs: "y"}
	f.b.ListLoRAs(&m, rs[:3], rs[3:])
	if m.RunningLoRAs != "x" || m.WaitingLoRAs != "y" {
		t.Fatalf("no adapter named: running %q waiting %q were set", m.RunningLoRAs, m.WaitingLoRAs)
	}
}
