// Package sched is the vocabulary the engine's schedulers share: the Request an engine serves, and the Pass
// a scheduler plans — which requests were admitted, preempted or finished, which tokens came out, which KV
// events the cache emitted, and the timing.Batch that describes the pass's work.
//
// The schedulers themselves live in subpackages (sched/vllm, sched/sglang; TensorRT-LLM runs sched/vllm with
// its capacity policy). They share their request bookkeeping (sched/internal/book: requests live, held and
// reserved, checks, recycling, the Pass, token emission) and keep what makes each one its engine: admission,
// eviction, preemption or retraction, and the KV cache. sched/schedtest holds every scheduler to the
// Scheduler interface. A scheduler is a pure state machine: it has no clock and does no I/O. Output token
// ids are the trace's or a hash of the request id and position (OutputToken), and the one random draw,
// speculative decoding's acceptance (Sampler), comes from a seeded generator in a fixed call order, so any
// replay is reproducible.
package sched
