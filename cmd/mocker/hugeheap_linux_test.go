package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const (
	touchSize   = 64 << 20
	smallPages  = touchSize / 4096
	hugeHeapEnv = "MOCKER_TEST_HUGEHEAP_CHILD" // set: TestHugeHeapChild reports its page faults
)

// TestHugeHeapFaultsLess: after hugeHeap, touching a fresh 64 MiB of heap takes far fewer page faults
// than its 16,384 small pages (one per 2 MiB page, plus slack for ranges already touched), where the
// kernel gives huge pages on request; under GODEBUG=disablethp=1 it takes one per small page. Each case
// runs in a fresh process, whose heap nothing has advised yet.
func TestHugeHeapFaultsLess(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		t.Skipf("transparent huge pages not available on request (%q, %v)", mode, err)
	}
	if faults := childFaults(t, ""); faults > smallPages/8 {
		t.Errorf("touching %d MiB took %d page faults, want at most %d (small pages: %d)", touchSize>>20, faults, smallPages/8, smallPages)
	}
	if faults := childFaults(t, "disablethp=1"); faults < smallPages {
		t.Errorf("under GODEBUG=disablethp=1, touching %d MiB took %d page faults, want one per small page (%d)", touchSize>>20, faults, smallPages)
	}
}

// childFaults runs TestHugeHeapChild in a new process with GODEBUG set to godebug and returns the page
// faults it reports.
func childFaults(t *testing.T, godebug string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHugeHeapChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), hugeHeapEnv+"=1", "GODEBUG="+godebug)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child (GODEBUG=%q): %v\n%s", godebug, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, "faults "); ok {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("child (GODEBUG=%q) reported no faults:\n%s", godebug, out)
	return 0
}

// TestHugeHeapChild is TestHugeHeapFaultsLess's other process: hugeHeap, then the page faults of writing
// each page of a fresh allocation.
func TestHugeHeapChild(t *testing.T) {
	if os.Getenv(hugeHeapEnv) == "" {
		t.Skip("run by TestHugeHeapFaultsLess")
	}
	hugeHeap(offlineHeap)
	before := minorFaults(t)
	b := make([]byte, touchSize)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	os.Stdout.WriteString("faults " + strconv.FormatInt(minorFaults(t)-before, 10) + "\n")
}

func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}
