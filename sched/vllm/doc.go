// Package vllm is vLLM v1's scheduler over a paged KV block pool, as Dynamo's mocker models it
// (reference dynamo-mocker.md §4; vLLM internals in peers.md §8).
//
// One Step plans one forward pass with one token budget (max_num_batched_tokens):
//
//  1. running requests first, in order: a decode takes 1 token, a partial prefill continues with as many
//     prompt tokens as the budget allows. When the pool cannot hold a request's next tokens the newest
//     running request (LIFO, the default) or the oldest (FIFO) is preempted: its KV is released, it keeps
//     its generated tokens, goes to the front of the waiting queue, and later recomputes everything;
//  2. then, only if nothing was preempted, waiting requests strictly in FIFO order while the running set is
//     below max_num_seqs: a head that does not fit waits, and nobody overtakes it. A request is admitted
//     only if its whole prompt fits beside the active blocks (blocks already active in its cached prefix
//     are free to share) — or, with ChunkFit, as vLLM v1 itself does, if the chunk it is scheduled
//     fits; its prefix-cache hit is capped so that at least the last block is recomputed;
//  3. every request whose computed tokens reach its length samples a token in the same pass, so a prompt's
//     first token comes out of the pass that completes it. Finished requests release their blocks.
//
// Full blocks become cached as soon as they are scheduled, so a later request of the same pass can hit
// them (vLLM's allocate_slots).
//
// The request bookkeeping (live, held and reserved requests, checks, recycling, the Pass, token emission)
// is sched/internal/book's, shared with the other scheduler. Start reading at Scheduler.Step.
package vllm
