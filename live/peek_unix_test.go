//go:build unix

package live

import "testing"

// needsPeek lets a test that relies on the watch's peek run: unix sockets have it.
func needsPeek(testing.TB) {}
