//go:build !unix

package live

import "syscall"

// peekClosed waits for the deadline only: without a peek on the socket, a client's end is seen by a
// stream's failed write alone.
func peekClosed(rc syscall.RawConn) bool {
	rc.Read(func(uintptr) bool { return false })
	return false
}
