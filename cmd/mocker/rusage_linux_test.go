package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestPeakRSSInMiB: the peak RSS line says MiB, and is at least the kernel's VmHWM (KiB) read before it
// (getrusage's maximum also covers the image before an exec, so it may be more).
func TestPeakRSSInMiB(t *testing.T) {
	hwm := func() float64 {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Skip(err)
		}
		for line := range strings.Lines(string(b)) {
			var kib float64
			if _, err := fmt.Sscanf(line, "VmHWM: %f kB", &kib); err == nil {
				return kib / 1024
			}
		}
		t.Skip("no VmHWM in /proc/self/status")
		return 0
	}
	lo := hwm()
	got := peakRSS()
	var mib float64
	if _, err := fmt.Sscanf(got, "%f MiB", &mib); err != nil || !strings.HasSuffix(got, " MiB") {
		t.Fatalf("peakRSS() = %q, want N MiB", got)
	}
	if mib < lo-1 {
		t.Errorf("peakRSS() = %q, want at least %.0f MiB (VmHWM)", got, lo)
	}
}
