package timingtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/timing/timingtest"
)

// broken is the polynomial model with one deliberate defect.
type broken struct{ defect string }

var sink []int

func (m broken) Cost(b *timing.Batch) timing.Cost {
	c := timing.Polynomial{}.Cost(b)
	switch m.defect {
	case "charges an empty pass":
		c.Decode += time.Millisecond
	case "charges prefill to decode":
		c.Decode += c.Prefill
		c.Prefill = 0
	case "gets cheaper with more requests":
		c.Decode = 100 * time.Millisecond / time.Duration(len(b.Seqs)+1)
	case "allocates":
		sink = make([]int, len(b.Seqs))
	}
	return c
}

// plainOff is Fixed with a pricer of plain passes that charges one more nanosecond from the second pass of
// a run.
type plainOff struct{ timing.Fixed }

func (m plainOff) PlainPricer() func(*timing.PlainPass) timing.Cost {
	f, last := m.Fixed.PlainPricer(), -1
	return func(p *timing.PlainPass) timing.Cost {
		c := f(p)
		if p.Cached == last+p.Requests {
			c.Decode++
		}
		last = p.Cached
		return c
	}
}

// TestBrokenModelsFail: each deliberate defect fails the check that covers it; the sound model passes.
func TestBrokenModelsFail(t *testing.T) {
	o := timingtest.Options{MaxBatch: 256, MaxContext: 32768, MaxChunk: 8192}
	for _, tc := range []struct {
		defect string
		check  func(timing.Model, timingtest.Options) error
		want   string
	}{
		{"charges an empty pass", timingtest.Zero, "an empty pass"},
		{"charges prefill to decode", timingtest.Split, "want only a prefill part"},
		{"gets cheaper with more requests", timingtest.Monotone, "one more decode request"},
		{"allocates", timingtest.NoAllocs, "allocates"},
	} {
		if err := tc.check(broken{tc.defect}, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a model that %s: got %v, want an error with %q", tc.defect, err, tc.want)
		}
	}
	timingtest.Run(t, broken{}, timingtest.Options{})
	if err := timingtest.Plain(plainOff{timing.Fixed{PrefillMs: 10, DecodeMs: 5}}, o); err == nil || !strings.Contains(err.Error(), "its pricer says") {
		t.Errorf("a plain pricer off from the second pass of a run: got %v, want an error with %q", err, "its pricer says")
	}
}
