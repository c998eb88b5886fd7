//go:build unix

package live

import "syscall"

// peekClosed waits until rc's socket is readable and reports whether its peer has closed it (end of
// stream, or an error such as a reset) rather than sent a byte. The peek leaves any byte where it is.
// It returns false as well when the wait ends on the read deadline (stopWatch).
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
	return err == nil && closed
}
