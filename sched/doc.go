// Package sched is the vocabulary the engine's schedulers share: the Request an engine serves, and the Pass
// a scheduler plans — which requests were admitted, preempted or finished, which tokens came out, which KV
// events the cache emitted, and the timing.Batch that describes the pass's work.
//
// The schedulers themselves live in subpackages (sched/vllm). A scheduler is a pure state machine: it has
// no clock, does no I/O and draws no random numbers; output token ids are a hash of the request id and
// position (TokenID), so any replay is reproducible.
package sched
