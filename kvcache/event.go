package kvcache

import (
	"fmt"

	"github.com/mocker-sim/mocker/tokens"
)

// EventKind says what a KV event reports.
type EventKind uint8

const (
	// Stored: blocks became resident (their first copy).
	Stored EventKind = iota + 1
	// Removed: the last resident copy of each listed hash was evicted.
	Removed
	// Cleared: the whole cache was dropped.
	Cleared
)

func (k EventKind) String() string {
	switch k {
	case Stored:
		return "stored"
	case Removed:
		return "removed"
	case Cleared:
		return "cleared"
	}
	return "unknown"
}

// Event is one KV cache event, in Dynamo's KvCacheEvent shape.
type Event struct {
	ID   uint64 // per-pool, increasing from 0 in emission order
	Kind EventKind

	// Stored: the new blocks in sequence order, and the sequence hash of the block before the first
	// (HasParent false for a run that starts at block 0).
	Parent    uint64
	HasParent bool
	Blocks    []tokens.Block

	// Removed: sequence hashes no longer resident.
	Hashes []uint64

	// Count is, on a Stored or Removed event that leaves out its Blocks or Hashes, how many it would list:
	// a radix cache whose only consumer reads it in place (radix.View.Sole) builds no slices no one reads.
	// 0 on an event that lists them (see Size).
	Count int

	// Medium is where the blocks were stored or removed: GPU (the zero value) for the pool itself, CPU or
	// Disk for a lower tier, whose Stored events have no parent.
	Medium Medium
}

// String formats the event as %+v does its fields, leaving out the medium when it is the GPU: a pool
// without lower tiers prints its events as it did before they existed (pinned digests hash them).
func (e Event) String() string {
	type fields struct {
		ID        uint64
		Kind      EventKind
		Parent    uint64
		HasParent bool
		Blocks    []tokens.Block
		Hashes    []uint64
	}
	s := fmt.Sprintf("%+v", fields{e.ID, e.Kind, e.Parent, e.HasParent, e.Blocks, e.Hashes})
	if e.Count != 0 {
		s = s[:len(s)-1] + fmt.Sprintf(" Count:%d}", e.Count)
	}
	if e.Medium != GPU {
		s = s[:len(s)-1] + " Medium:" + e.Medium.String() + "}"
	}
	return s
}

// Size is the number of blocks a Stored or Removed event names, listed or counted.
func (e Event) Size() int { return len(e.Blocks) + len(e.Hashes) + e.Count }
