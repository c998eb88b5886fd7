package disagg

import (
	"testing"
	"time"
)

// TestDelay is the reference's utils test: 128 tokens × 1e6 bytes at 1 GB/s take 128 ms; and the
// prefill-completion case: 8 tokens → 8 ms.
func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		tokens, bytes int
		gbps          float64
		want          time.Duration
	}{
		{128, 1e6, 1, 128 * time.Millisecond},
		{8, 1e6, 1, 8 * time.Millisecond},
		{1000, 131072, 64, 2048 * time.Microsecond},
		{128, 1e6, 0, 0},
		{0, 1e6, 1, 0},
	} {
		if got := Delay(tc.tokens, tc.bytes, tc.gbps); got != tc.want {
			t.Errorf("Delay(%d, %d, %v) = %v, want %v", tc.tokens, tc.bytes, tc.gbps, got, tc.want)
		}
	}
}

// run drives the network to empty and returns each transfer's completion time.
func run(n *Network) map[uint64]time.Duration {
	done := map[uint64]time.Duration{}
	for n.InFlight() > 0 {
		at, _ := n.Next()
		for _, id := range n.Done(at, nil) {
			done[id] = at
		}
	}
	return done
}

func TestAloneMatchesDelay(t *testing.T) {
	n := NewNetwork(1)
	n.Start(0, 1, 0, 100, 128e6)
	if got := run(n)[1]; got != 128*time.Millisecond {
		t.Fatalf("alone: %v, want 128ms", got)
	}
}

// TestSharedLink: two simultaneous equal transfers out of one prefill worker each take twice as long as
// one alone.
func TestSharedLink(t *testing.T) {
	n := NewNetwork(1)
	n.Start(0, 1, 0, 100, 64e6)
	n.Start(0, 2, 0, 101, 64e6)
	done := run(n)
	if done[1] != 128*time.Millisecond || done[2] != 128*time.Millisecond {
		t.Fatalf("done %v, want both at 128ms", done)
	}
}

// TestProcessorSharing: a transfer that starts halfway through another shares the link from then on.
func TestProcessorSharing(t *testing.T) {
	n := NewNetwork(1)
	n.Start(0, 1, 0, 100, 100e6)                  // alone: 100 ms
	n.Start(50*time.Millisecond, 2, 0, 101, 25e6) // 50 MB of #1 left
	done := run(n)
	// Both at 0.5 GB/s: #2 needs 50 ms (done at 100 ms), by then #1 has 25 MB left, alone again: +25 ms.
	if done[2] != 100*time.Millisecond || done[1] != 125*time.Millisecond {
		t.Fatalf("done %v, want #2 at 100ms and #1 at 125ms", done)
	}
}

// TestDisjointLinks: transfers between different pairs of workers do not slow each other.
func TestDisjointLinks(t *testing.T) {
	n := NewNetwork(2)
	n.Start(0, 1, 0, 100, 20e6)
	n.Start(0, 2, 1, 101, 20e6)
	done := run(n)
	if done[1] != 10*time.Millisecond || done[2] != 10*time.Millisecond {
		t.Fatalf("done %v, want both at 10ms", done)
	}
	if n.InFlight() != 0 {
		t.Fatalf("%d in flight", n.InFlight())
	}
}

func TestParseMode(t *testing.T) {
	if m, err := ParseMode("full_prompt"); err != nil || m != FullPrompt {
		t.Fatal(m, err)
	}
	if _, err := ParseMode("half"); err == nil {
		t.Fatal("bad mode accepted")
	}
}
