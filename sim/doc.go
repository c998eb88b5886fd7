// Package sim replays a workload against a fleet of engines on a virtual clock, as a discrete-event
// simulation: it never sleeps, and the same inputs give the same report, byte for byte.
//
// Start with Run. The loop keeps one min-heap of events keyed (time, phase, stable key). At each instant
// it applies everything due — first pass completions, then arrivals, the reference's equal-time phase
// order (dynamo-mocker.md §9) — and then starts a pass on every idle worker that has work. Arrivals are
// pulled from the workload lazily, one session ahead, so a trace of any length streams through in
// constant memory; a session's next turn is scheduled only when its previous turn completes (closed
// loop), and in concurrency mode a new session starts whenever one ends.
//
// Requests are routed over (worker, data-parallel rank) by each pool's router (package router: KV-aware by
// default, fed by the workers' KV events; or round-robin, random, least-loaded). Disaggregated runs route
// arrivals over the prefill pool and, once a prompt is computed, over the decode pool, and time the KV
// transfer between them (package disagg). While no request can be routed, workers run ahead of the heap
// (lookahead; see runner.lookahead), with the results of strict time order.
package sim
