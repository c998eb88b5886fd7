//go:build !unix

package live

import (
	"testing"
	"time"
)

// cpuTime skips: the process's CPU time is read with getrusage, which only unix systems have.
func cpuTime(b *testing.B) time.Duration {
	b.Skip("no getrusage here")
	return 0
}
