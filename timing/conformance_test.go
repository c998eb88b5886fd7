package timing_test

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/timing/timingtest"
)

// TestConformance: the analytic models and the wrappers pass the timing models' conformance suite.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    timing.Model
	}{
		{"fixed", timing.Fixed{PrefillMs: 10, DecodeMs: 5}},
		{"polynomial", timing.Polynomial{}},
		{"host-overhead", timing.HostOverhead{Model: timing.Polynomial{}, PerRequest: 16 * time.Microsecond}},
		{"scaled", timing.Scaled{Model: timing.Polynomial{}, Speedup: 2, DecodeSpeedup: 1.5}},
		// Fixed prices plain passes from their counts; through both wrappers, so do they.
		{"scaled-host-fixed", timing.Scaled{Model: timing.HostOverhead{Model: timing.Fixed{PrefillMs: 10, DecodeMs: 5}, PerRequest: 16 * time.Microsecond}, Speedup: 2, DecodeSpeedup: 1.5}},
	} {
		t.Run(tc.name, func(t *testing.T) { timingtest.Run(t, tc.m, timingtest.Options{}) })
	}
}
