package main

import (
	"math"
	"testing"
)

// TestCheckLoad: a load the benchmark cannot run is refused with the flag named; rates from 0.001 a
// second (so long as the phase starts within a day) to 1e6 run, and 0 is the closed loop.
func TestCheckLoad(t *testing.T) {
	for _, c := range []struct {
		requests, clients, runs int
		rate                    float64
		want                    string
	}{
		{20000, 64, 1, 0, ""},
		{20000, 64, 1, 1e6, ""},
		{87, 64, 1, 0.001, ""}, // the 87th starts at 86,000 s, within a day
		{88, 64, 1, 0.001, "-rate 0.001: 88 requests would take 87000 s to start; at most 24h0m0s"},
		{1, 64, 1, 0.001, ""},
		{20000, 64, 1, 1e-300, "-rate 1e-300: want 0 (closed loop) or 0.001 to 1e6 requests a second"},
		{20000, 64, 1, -1, "-rate -1: want 0 (closed loop) or 0.001 to 1e6 requests a second"},
		{20000, 64, 1, 2e6, "-rate 2e+06: want 0 (closed loop) or 0.001 to 1e6 requests a second"},
		{0, 64, 1, 0, "-requests 0: want 1 to 999999 (six digits number the prompts)"},
		{1_000_000, 64, 1, 0, "-requests 1000000: want 1 to 999999 (six digits number the prompts)"},
		{20000, 0, 1, 0, "-clients 0: want at least 1"},
		{20000, 64, 0, 0, "-runs 0: want at least 1"},
	} {
		err := checkLoad(c.requests, c.clients, c.runs, c.rate)
		if got := errString(err); got != c.want {
			t.Errorf("checkLoad(%d, %d, %d, %v) = %q, want %q", c.requests, c.clients, c.runs, c.rate, got, c.want)
		}
	}
	if err := checkLoad(1, 1, 1, math.NaN()); err == nil {
		t.Error("checkLoad accepts a rate of NaN")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
