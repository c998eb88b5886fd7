// Package recommend searches a space of deployments for the ones that meet latency targets on a
// workload, simulating each candidate in full with sim.Run, exactly as `mocker predict` would run it.
//
// Start with Search: it takes the user's configuration (the workload, model, system and every setting
// the space does not vary), a Space (backends, TP, EP, aggregated or disaggregated with prefill:decode
// ratios and per-role TP, worker counts, batch limits, router policies) and Options (the targets, the
// objective), and returns a Report: every candidate it simulated, with its figures and why it passed or
// failed, ranked, and the Pareto frontier. A Report is a plain value; WriteTable and WriteJSON render it,
// and other renderers can take it as it is.
//
// The search is pruned three ways, each safe under an assumption stated where it is made:
//   - monotonicity in worker count: for one engine shape, more workers are taken never to hurt (the
//     same requests spread wider; assumed, not proved), so the fewest that pass are found by bisection;
//   - early stop: a run ends as soon as enough requests have finished late that the target percentile
//     is already above its target whatever the rest do (stopRule);
//   - lower bounds per shape: the TTFT a request would have on an idle worker with a perfect prefix
//     cache (ttftBound), and a decode step alone at the shortest context (itlBound); when one already
//     exceeds its target, no worker count can pass.
//
// Candidates are simulated in parallel, one engine shape per goroutine; each shape's sequence of runs
// depends only on its own results, so the report is byte-identical whatever the number of threads.
package recommend
