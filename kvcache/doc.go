// Package kvcache is a vLLM-style paged KV block pool with prefix caching, and the KV events it emits.
//
// The pool holds a fixed number of blocks (reference §3). A block is free, private (being filled by one
// request, not shareable yet) or cached (full, identified by its sequence hash, shareable). A cached block
// is active while some request references it and inactive otherwise; inactive blocks stay in the cache,
// ordered least-recently-used first, and are evicted only when a fresh block is needed and no free one is
// left. So the accounting invariant is free + active + inactive = capacity, checked by CheckInvariants.
//
// A request's blocks are a table of BlockIDs. Start with Pool: Match finds a request's cached prefix,
// CanAllocate/Acquire/Allocate extend its table, Commit turns newly computed full blocks into cached ones,
// Release gives the table back leaf first (so a request's suffix is evicted before a prefix others share).
//
// Events: Stored when a block hash first becomes resident (consecutive new blocks of one request share one
// event), Removed when the last resident copy of a hash is evicted. Duplicate copies of one hash (two
// requests computing the same block concurrently) each take capacity but announce nothing. With prefix
// caching off nothing is shared and nothing is announced.
package kvcache
