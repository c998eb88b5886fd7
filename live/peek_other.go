//go:build !unix

package live

import "syscall"

// peekClosed ends the watch at once: without a peek on the socket, a client's end is seen by a stream's
// failed write alone. (Waiting on rc.Read would spin: a readable socket wakes it again at once.)
func peekClosed(syscall.RawConn) bool { return false }
