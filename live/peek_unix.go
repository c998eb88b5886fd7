//go:build unix

package live

import (
	"errors"
	"os"
	"syscall"
)

// peekClosed waits until rc's socket is readable and reports whether its peer has closed it (end of
// stream, or an error such as a reset) rather than sent a byte. The peek leaves any byte where it is.
// It returns false when the wait ends on the read deadline (stopWatch), and true when the wait fails
// otherwise: the connection was closed here (APIServer.Close), and its request must end too.
func peekClosed(rc syscall.RawConn) bool {
	var b [1]byte
	closed := false
	err := rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return false // nothing yet: wait in the poller
		case err != nil:
			closed = true
		default:
			closed = n == 0
		}
		return true
	})
	if err != nil {
		return !errors.Is(err, os.ErrDeadlineExceeded)
	}
	return closed
}
