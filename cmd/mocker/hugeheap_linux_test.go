package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestHugeHeapFaultsLess: after hugeHeap, touching a fresh 64 MiB of heap takes far fewer page faults
// than its 16,384 small pages (at most one per 2 MiB page, plus slack for ranges already touched), where
// the kernel gives huge pages on request. Without hugeHeap it takes one per 4 KiB page.
func TestHugeHeapFaultsLess(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		t.Skipf("transparent huge pages not available on request (%q, %v)", mode, err)
	}
	hugeHeap(512 << 20)
	const size = 64 << 20
	before := minorFaults(t)
	b := make([]byte, size)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	faults := minorFaults(t) - before
	if small := int64(size / 4096); faults > small/8 {
		t.Fatalf("touching %d MiB took %d page faults, want at most %d (small pages: %d)", size>>20, faults, small/8, small)
	}
}

func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}
