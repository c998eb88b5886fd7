// Package sglang is SGLang's scheduler over a radix prefix cache, as Dynamo's mocker models it (reference
// dynamo-mocker.md §5; SGLang internals in peers.md §9).
//
// One Step is one iteration of SGLang's event loop:
//
//  1. order the waiting queue by the policy: fcfs keeps arrival order; lpm (only while at most 128 wait)
//     puts the longest cached prefix first, and pushes back a request with a short match whose first 32
//     tokens duplicate a request ahead of it, so the first computes them and the others hit the cache;
//  2. build a prefill ("extend") batch: the one chunked request first, then waiting requests in order,
//     while three budgets last — rem_total (free + evictable tokens, minus each running request's
//     remaining output, clipped at clip-max-new-tokens, times new_token_ratio), max-prefill-tokens and
//     chunked-prefill-size — and the running set is below its cap. A prompt longer than what is left of
//     the chunk budget is cut at a page boundary and becomes the one chunked request;
//  3. prefill has priority: if the extend batch is not empty, the pass runs it, and only the requests
//     whose prompt it completes sample their first token; the running requests wait (unless mixed chunk
//     is on, which decodes them in the same pass). Otherwise the pass is one decode step of every running
//     request: if the pool cannot hold the new tokens' pages, the request with the fewest output tokens
//     is retracted — its KV released (its full pages stay in the tree), its output kept, and it goes back
//     to the front of the queue;
//  4. new_token_ratio starts at 0.7 × schedule-conservativeness, decays to 0.14 × that over 600 decode
//     steps, and jumps back up on an out-of-memory admission or a retraction.
//
// With Options.Overlap (SGLang's default overlap scheduler, not in the reference) a pass is formed when
// the previous one starts, so a request enqueued during a pass is first seen by the second Step after it.
//
// Pages are allocated when a request's tokens cross a page boundary; complete pages go into the radix tree
// as soon as they are computed, so they outlive the request. KV events are taken at the end of the pass:
// SGLang publishes them after the forward pass.
//
// With Options.Tiers (SGLang's HiCache) the pages the tree evicts are written back to lower tiers, and a
// prompt that continues there is loaded back before its prefill (tier.go).
//
// The request bookkeeping (live, held and reserved requests, checks, recycling, the Pass, token emission)
// is sched/internal/book's, shared with the other scheduler. Start reading at Scheduler.Step.
package sglang
