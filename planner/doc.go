// Package planner is the autoscaling policy: at each tick it reads what happened in the last window
// (completed requests, their mean lengths, the router's prefix hit rate, every worker's forward-pass
// metrics) and says how many workers each pool should have (reference dynamo-mocker.md §11, after Dynamo's
// SLA planner).
//
// Start with Planner.Tick (planner.go): it combines
//
//   - a throughput floor (capacity.go, predict.go): predict the next window's request rate and lengths,
//     price what one worker sustains under the TTFT and ITL targets with a timing.Model, and ask for
//     ceil(rate / capacity) workers;
//   - a load step (load.go): fit each engine's pass wall time against its load from the window's
//     forward passes, estimate its TTFT and ITL, and move by one worker when every engine agrees.
//
// The decision is the larger of the two, within the pool's [min, max]. Config (config.go) is read
// strictly from YAML. Usage (usage.go) integrates GPU-hours from the worker counts over time.
//
// The package is pure: no clock, goroutines, I/O or randomness. The caller passes "now" (virtual in the
// simulator, wall-clock in a live planner), which only times pending actions; the same observations give
// the same decisions.
package planner
