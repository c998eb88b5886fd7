// Package live runs simulated engines on the wall clock behind an OpenAI-compatible HTTP API: the
// live face of mocker (mocker serve, worker and frontend), where package sim is the offline one.
//
// A Server is built by New from Options (engines, routers, the HTTP limits, sinks, and optionally a
// decode pool or a fleet) and runs from Start until Close; New starts nothing, and Close stops every
// goroutine Start started. The pieces:
//
//   - A Worker owns one engine (its data-parallel ranks) and one goroutine: it calls engine.Step under
//     its lock, publishes what is visible when the pass starts, sleeps until the pass would end on the
//     GPU, then publishes the outputs, the remaining KV events and the metrics (Hooks). An idle worker
//     blocks on a channel.
//   - The Server holds the router (package router) under its own lock, routes each request to a worker
//     and rank or queues it, and feeds the router the workers' KV events, at once or after
//     Options.RouterEventDelay. The lock order is always server, then worker.
//   - A request's output travels through a Stream: the worker appends without blocking and the HTTP
//     handler (openai.go, render.go) drains it, one SSE chunk per pass.
//   - Disaggregated (Options.Disagg), the workers prefill; a decode router places each computed prompt on
//     a decode worker, and the KV transfer meets through a bootstrap rendezvous (package disagg) before it
//     takes its modelled time.
//   - As a fleet frontend (Options.Fleet), the Server also routes over remote workers it discovers on
//     NATS; ServeFleet makes a Server's worker one of them (fleet.go).
//   - Sinks publish every prompt, KV event and output token outside the process: Dynamo's event plane
//     on NATS or ZMQ (nats.go, natsevents), vLLM's KV events on ZMQ (zmq.go, vllmevents). Recorders
//     (live/metrics) count requests into Prometheus series with the engines' names.
//
// docs/DESIGN.md ("The live driver", "Live deployment shape") has the details and the reasons.
package live
