package sglang

import (
	"testing"
)

// TestLoRAsShareNoPages: the same prompt under another adapter matches nothing in the radix cache; under
// the same adapter, its whole pages but for the last token's.
func TestLoRAsShareNoPages(t *testing.T) {
	newHarness(t, opts(4, 64)).LoRAsShareNothing(12)
}
