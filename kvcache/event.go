package kvcache

import "github.com/mocker-sim/mocker/tokens"

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
}
