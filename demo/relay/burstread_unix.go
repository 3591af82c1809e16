//go:build unix

package relay

import "syscall"

const nonBlockingReads = true

var errWouldBlock error = syscall.EAGAIN

// readNonBlocking is one read(2) on a non-blocking socket, retried on EINTR.
func readNonBlocking(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}
