package disagg

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Mode chooses how much of a prompt a handoff carries.
type Mode uint8

const (
	// DestinationMissing carries only the prompt blocks the decode worker does not already hold.
	DestinationMissing Mode = iota
	// FullPrompt carries the whole prompt (the reference's default).
	FullPrompt
)

// ParseMode parses "destination_missing" or "full_prompt".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "destination_missing", "":
		return DestinationMissing, nil
	case "full_prompt":
		return FullPrompt, nil
	}
	return 0, fmt.Errorf("kv-transfer-timing-mode %q: want destination_missing or full_prompt", s)
}

// Transfer configures the KV handoff from prefill to decode workers (reference §8).
type Transfer struct {
	GBps          float64 // bandwidth of each worker's link, GB/s; 0: transfers take no time
	BytesPerToken int     // KV bytes per token
	Mode          Mode
}

// Tokens is how many prompt tokens a handoff moves: those the destination lacks (missing), or the whole
// prompt.
func (t Transfer) Tokens(missing, prompt int) int {
	if t.Mode == FullPrompt {
		return prompt
	}
	return missing
}

// Bytes is the size of a handoff.
func (t Transfer) Bytes(missing, prompt int) float64 {
	return float64(t.Tokens(missing, prompt)) * float64(t.BytesPerToken)
}

// Delay is the reference's transfer time of tokens at bytesPerToken over one link of gbps GB/s (10^9
// bytes per second): 0 when gbps <= 0 (no modelled delay).
func Delay(tokens, bytesPerToken int, gbps float64) time.Duration {
	if gbps <= 0 || tokens <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(tokens) * float64(bytesPerToken) / (gbps * 1e9) * 1e9))
}

// Network holds the transfers in flight. Every link has the same bandwidth; a transfer between links src
// and dst moves at min(bandwidth/n(src), bandwidth/n(dst)), n counting the transfers on a link, recomputed
// whenever a transfer starts or ends. It is not safe for concurrent use, and it has no clock: callers pass
// the current time, which must not go backwards.
type Network struct {
	bps       float64 // bytes per second per link; <= 0: transfers are instant
	now       time.Duration
	transfers []*transfer // in start order, for deterministic ties
	load      map[int]int // transfers per link
}

type transfer struct {
	id        uint64
	src, dst  int
	remaining float64 // bytes
	rate      float64 // bytes per second
}

// NewNetwork returns an empty network of links of gbps GB/s each.
func NewNetwork(gbps float64) *Network {
	return &Network{bps: gbps * 1e9, load: make(map[int]int)}
}

// Start begins a transfer of bytes from link src to link dst at now.
func (n *Network) Start(now time.Duration, id uint64, src, dst int, bytes float64) {
	n.advance(now)
	n.transfers = append(n.transfers, &transfer{id: id, src: src, dst: dst, remaining: bytes})
	n.load[src]++
	n.load[dst]++
	n.rerate()
}

// Next returns the earliest time a transfer in flight completes at the current rates, and false when
// none is in flight.
func (n *Network) Next() (time.Duration, bool) {
	if len(n.transfers) == 0 {
		return 0, false
	}
	best := time.Duration(math.MaxInt64)
	for _, t := range n.transfers {
		best = min(best, n.now+n.eta(t))
	}
	return best, true
}

// Done advances the network to now and returns the ids of the transfers complete by then, in start
// order.
func (n *Network) Done(now time.Duration, dst []uint64) []uint64 {
	n.advance(now)
	kept := n.transfers[:0]
	for _, t := range n.transfers {
		// A completion computed by Next lands exactly here; allow for rounding to the nanosecond.
		if t.remaining <= n.bps*1e-9 || n.bps <= 0 {
			dst = append(dst, t.id)
			n.load[t.src]--
			n.load[t.dst]--
			continue
		}
		kept = append(kept, t)
	}
	clear(n.transfers[len(kept):])
	n.transfers = kept
	n.rerate()
	return dst
}

// InFlight is the number of transfers not yet done.
func (n *Network) InFlight() int { return len(n.transfers) }

func (n *Network) eta(t *transfer) time.Duration {
	if n.bps <= 0 || t.remaining <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(t.remaining / t.rate * 1e9))
}

// advance moves every transfer forward to now at its current rate.
func (n *Network) advance(now time.Duration) {
	if now < n.now {
		panic(fmt.Sprintf("disagg: time went back from %v to %v", n.now, now))
	}
	dt := (now - n.now).Seconds()
	n.now = now
	for _, t := range n.transfers {
		t.remaining = max(t.remaining-t.rate*dt, 0)
	}
}

func (n *Network) rerate() {
	for _, t := range n.transfers {
		t.rate = n.bps / float64(max(n.load[t.src], n.load[t.dst]))
	}
}

// Cancel aborts transfer id at now (one of its ends failed); the others share the links from now on. It
// reports whether the transfer was in flight.
func (n *Network) Cancel(now time.Duration, id uint64) bool {
	n.advance(now)
	i := slices.IndexFunc(n.transfers, func(t *transfer) bool { return t.id == id })
	if i < 0 {
		return false
	}
	t := n.transfers[i]
	n.load[t.src]--
	n.load[t.dst]--
	n.transfers = slices.Delete(n.transfers, i, i+1)
	n.rerate()
	return true
}
