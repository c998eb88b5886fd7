package main

import (
	"fmt"

	"github.com/mocker-sim/mocker/config"
)

// holdTrace keeps a --trace that can be read only once (a pipe: --trace <(zcat t.jsonl.gz)) in memory
// for a search, which reads its trace for the bounds and for every run (config.Config.HoldTrace);
// --nats's sweep workers read the trace from its path, so there it is refused by name.
func holdTrace(cfg *config.Config, nats string) error {
	if nats == "" {
		return cfg.HoldTrace()
	}
	if cfg.TraceIsStream() {
		return fmt.Errorf("--trace %s: not a regular file, and --nats's sweep workers read the trace from its path: give a file", cfg.Trace)
	}
	return nil
}
