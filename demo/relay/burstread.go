package relay

import (
	"io"
	"net"
	"sync"
	"syscall"
)

// burstReadBuffer is the size of the pooled buffer a browser socket reads
// through while it has data waiting: one read syscall takes up to this much,
// about 14 frames of 1 KiB, where reading straight into coder/websocket's
// small reader took one syscall per frame.
const burstReadBuffer = 16 << 10

// burstPool holds burst buffers; a socket holds one only while bytes it read
// wait in it to be consumed.
var burstPool = sync.Pool{New: func() any { b := make([]byte, burstReadBuffer); return &b }}

// burstReader reads a connection through a pooled buffer without holding
// one while the connection is idle. It waits for data with no buffer (the
// runtime's poller waits for the socket to be readable), and only once the
// socket has data does it take a buffer and read as much as the kernel has,
// in one non-blocking syscall. The buffer goes back to the pool as soon as
// its bytes are consumed. A connection that cannot read without blocking
// (no syscall.RawConn: TLS) is read directly.
//
// One goroutine reads at a time (coder/websocket reads under its own lock),
// as with the bufio.Reader above it.
type burstReader struct {
	raw    syscall.RawConn // nil: read the connection directly
	buf    *[]byte         // nil while nothing read is waiting
	lo, hi int             // (*buf)[lo:hi] is read and not yet consumed

	// readFn is r.readOnce, made once, since a closure made per fill would
	// be an allocation per fill; n and err are its result.
	readFn func(fd uintptr) bool
	n      int
	err    error
}

func newBurstReader(nc net.Conn) burstReader {
	sc, ok := nc.(syscall.Conn)
	if !ok || !nonBlockingReads {
		return burstReader{}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return burstReader{}
	}
	return burstReader{raw: raw}
}

// ok reports whether reads go through burst buffers.
func (r *burstReader) ok() bool { return r.raw != nil }

func (r *burstReader) read(nc net.Conn, p []byte) (int, error) {
	if r.raw == nil {
		return nc.Read(p)
	}
	if r.buf == nil {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*r.buf)[r.lo:r.hi])
	if r.lo += n; r.lo == r.hi {
		burstPool.Put(r.buf)
		r.buf = nil
	}
	return n, nil
}

// fill waits until the connection is readable and reads what it has into a
// pooled buffer. A buffer is held only across the syscall: when the socket
// turns out to have nothing yet, it goes back before waiting again.
func (r *burstReader) fill() error {
	if r.readFn == nil {
		r.readFn = r.readOnce
	}
	err := r.raw.Read(r.readFn)
	n, rerr := r.n, r.err
	r.err = nil
	switch {
	case err != nil:
		return err
	case rerr != nil:
		return &net.OpError{Op: "read", Net: "tcp", Err: rerr}
	case n == 0:
		return io.EOF
	}
	return nil
}

// readOnce is fill's callback: one non-blocking read into a pooled buffer;
// false (wait for the poller, holding nothing) when the socket has no data.
func (r *burstReader) readOnce(fd uintptr) bool {
	buf := burstPool.Get().(*[]byte)
	r.n, r.err = readNonBlocking(fd, *buf)
	if r.err == errWouldBlock {
		burstPool.Put(buf)
		return false
	}
	if r.n > 0 {
		r.buf, r.lo, r.hi = buf, 0, r.n
	} else {
		burstPool.Put(buf)
	}
	return true
}
