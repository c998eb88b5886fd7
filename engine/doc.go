// Package engine is one inference engine (one worker): a scheduler per data-parallel rank, each with its
// own KV pool, priced by a timing model. It is a pure state machine in the manner of etcd's raft.RawNode:
//
//	Enqueue(req) error   a new request (rejected at once if it can never be served)
//	Step(now) *Pass      plan and apply one forward pass starting at now
//	Cancel(id) bool      drop a request (a client went away)
//
// Step never sleeps, reads no clock and does no I/O. The Pass it returns says when the pass ends and,
// per rank, what happened; drivers act on it: the simulator schedules the pass end on its virtual clock,
// the live driver sleeps until it. All ranks step together and the pass ends when the slowest rank does,
// so an idle rank waits at the barrier. Every rank plans its share of a pass before any is priced, so that
// each rank's batch carries its group (timing.Group) for models whose ranks share layers (attention data
// parallelism's MoE). Start at Engine.Step.
package engine
