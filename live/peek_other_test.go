//go:build !unix

package live

import "testing"

// needsPeek skips a test that relies on the watch's peek, which only unix sockets have: here the watch
// ends at once (peek_other.go), so a client's leaving is seen by a stream's failed write alone.
func needsPeek(t testing.TB) {
	t.Skip("the watch's peek (recv with MSG_PEEK) needs a unix socket")
}
