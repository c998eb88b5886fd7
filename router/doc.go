// Package router chooses the engine rank that serves each request: Dynamo's KV-aware router (reference
// §10) and the plain round-robin, random and least-loaded policies, with its optional request queue.
//
// The same Router serves the offline simulator and the live frontend, so it is a pure, deterministic state
// machine: it reads no clock, starts no goroutine and does no I/O. Callers drive it:
//
//   - AddTarget and RemoveTarget as workers (each data-parallel rank a Target) come and go;
//   - Apply with each target's KV events, when the caller decides they are visible;
//   - Route for each arriving request, which returns a Decision or queues the request;
//   - PrefillDone when a request's first token is out, Finished when it ends (or is cancelled); both
//     ignore unknown ids, so they may be called from every path;
//   - Ready after PrefillDone, Finished or AddTarget, to collect the queued requests that can now go.
//
// The same calls in the same order give the same decisions: targets are always visited in the order they
// were added and every random choice comes from one generator seeded by Options.Seed.
//
// Start with router.go (the API and the request lifecycle), then policy.go (the cost and how a target is
// picked), indexer.go (the cached blocks of every target, fed by KV events), active.go (the blocks of the
// requests in flight) and queue.go.
//
// The indexer. Dynamo's router keeps a radix tree of cached blocks per worker. Since a block's sequence
// hash already names its whole prefix (see package tokens), such a tree is equivalent to the set of its
// blocks' sequence hashes: finding a request's cached prefix on a target is a walk down its blocks that
// stops at the target's first missing block. Each target's set is an open-addressing table of hashes, so
// a KV event touches only its own target's table, and a walk allocates nothing.
//
// Active sequences. For each target the router counts, like Dynamo's ActiveSequences, the uncached prompt
// tokens of its requests still in prefill and the distinct blocks its active requests hold (requests that
// share a prefix share its blocks; each partial last block is private). The blocks are a compressed radix
// tree with reference counts per edge, so routing and finishing a 750-block request cost a few steps per
// tree node rather than one hash-table update per block.
//
// Ownership: the router keeps a routed or queued request's Blocks slice until Finished; the caller must
// not modify it before then. Slices the router returns (Overlap) are reused by its next call.
package router
