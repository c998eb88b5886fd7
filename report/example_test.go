package report_test

import (
	"os"
	"time"

	"github.com/mocker-sim/mocker/report"
)

func ExampleCollector() {
	const ms = time.Millisecond
	c := report.NewCollector()
	c.Arrived(0, 0, 100, 4)
	c.Routed(0, uint64(0))
	c.Admitted(0, 2*ms, 64)
	c.Tokens(0, 10*ms, 1)
	c.Tokens(0, 11*ms, 1)
	c.Tokens(0, 12*ms, 1)
	c.Tokens(0, 110*ms, 1)
	c.Finished(0, 110*ms)

	s := c.Summary()
	s.Preemptions = 0 // from the engine
	s.WriteTable(os.Stdout, "")
	// Output:
	// ============ Serving Benchmark Result ============
	// Successful requests:                     1
	// Rejected requests:                       0
	// Benchmark duration (s):                  0.11
	// Total input tokens:                      100
	// Total generated tokens:                  4
	// Request throughput (req/s):              9.09
	// Output token throughput (tok/s):         36.36
	// Total Token throughput (tok/s):          945.45
	// Prefix cache reused ratio:               0.64
	// Preemptions:                             0
	// ---------------Time to First Token----------------
	// Mean TTFT (ms):                          10.00
	// Median TTFT (ms):                        10.00
	// P90 TTFT (ms):                           10.00
	// P99 TTFT (ms):                           10.00
	// -----Time per Output Token (excl. 1st token)------
	// Mean TPOT (ms):                          33.33
	// Median TPOT (ms):                        33.33
	// P90 TPOT (ms):                           33.33
	// P99 TPOT (ms):                           33.33
	// ---------------Inter-token Latency----------------
	// Mean ITL (ms):                           33.33
	// Median ITL (ms):                         1.00
	// P90 ITL (ms):                            98.00
	// P99 ITL (ms):                            98.00
	// ----------------End-to-end Latency----------------
	// Mean E2E (ms):                           110.00
	// Median E2E (ms):                         110.00
	// P90 E2E (ms):                            110.00
	// P99 E2E (ms):                            110.00
	// ==================================================
}
