//go:build !unix

package relay

import "errors"

// nonBlockingReads is false where the relay has no non-blocking read of its
// own: browser sockets are read directly.
const nonBlockingReads = false

var errWouldBlock = errors.New("relay: would block")

func readNonBlocking(uintptr, []byte) (int, error) { return 0, errWouldBlock }
