package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/pflag"
)

// liveThreads is the --threads of the live commands (serve, worker, frontend): how many goroutines the
// Go runtime runs at once (GOMAXPROCS). A server that shares a small machine with its clients spends
// less CPU a request on fewer: each extra thread wakes, spins and is switched out as requests hand over
// between goroutines, which on a 2-core VM cost a fifth to a third of a short completion (docs/performance.md).
type liveThreads int

func (t *liveThreads) bind(fs *pflag.FlagSet) {
	fs.IntVar((*int)(t), "threads", 0, "threads running the server's Go code at once (GOMAXPROCS; 0: every core); on a machine it shares with its clients, fewer spend less CPU a request")
}

// apply sets GOMAXPROCS, or leaves the runtime's default for 0.
func (t liveThreads) apply() error {
	if t < 0 {
		return fmt.Errorf("--threads %d: must not be negative (0: every core)", int(t))
	}
	if t > 0 {
		runtime.GOMAXPROCS(int(t))
	}
	return nil
}
