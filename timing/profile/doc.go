// Package profile holds timing models that interpolate measured tables (dynamo-mocker.md §6,
// "Interpolated"). Both implement timing.Model.
//
//   - Planner reads a Dynamo SLA-planner profile (LoadPlanner): TTFT by prompt length and ITL by
//     (active KV tokens, context length). It is the reference's interpolated model: prefill priced by the
//     pass's new tokens, decode by KV occupancy and mean context, with the reference's 1 ms decode floor.
//   - Steps reads a step-component profile (Builtin for our own H200 measurements, embedded from data/;
//     ReadSteps for a CSV in the same format, which may hold several models' rows): non-attention work
//     by tokens, causal prefill attention by length, decode attention by (batch, context). It prices a
//     mixed pass additively, so it sees what the Planner cannot: chunked prefill over a cached prefix,
//     and decode batches of any shape.
//
// Start with Steps.Cost or Planner.Cost. Curve and Grid (interp.go) are the interpolation helpers both are
// built from: piecewise linear with linear extrapolation, and rows of curves that are bilinear on a
// complete grid. Tables are read and validated once; Cost only interpolates and does not allocate.
package profile
