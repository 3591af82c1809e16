package relay

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Buffer sizes of a browser socket under coder/websocket. net/http would hand
// it 4 KiB each way, held for the socket's whole life; most sockets are idle
// most of the time, so the relay hands it less. Writes need almost no buffer
// because they are corked (below). Reads need almost none either where the
// connection offers non-blocking reads (burstread.go): a socket with data
// waiting reads it through a pooled burst buffer, and coder/websocket's own
// reader is left the smallest bufio allows. Elsewhere (a TLS connection)
// reads keep enough to take a frame header and a typical small message in
// one syscall.
const (
	socketReadBuffer      = 2 << 10
	socketReadBufferBurst = 16 // bufio's minimum
	socketWriteBuffer     = 256
	corkFlushAt           = 64 << 10
)

// corkPool holds the buffers writes accumulate in while corked; a socket
// holds one only while its writer is writing a batch.
var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, corkFlushAt); return &b }}

// corkConn is the net.Conn under a browser socket. Between cork and uncork,
// writes accumulate in a pooled buffer and reach the kernel in one write, so
// a batch of frames costs one syscall instead of one per frame. Outside a
// batch (control frames coder/websocket writes on its own) writes go
// straight through. Reads go through a pooled burst buffer (burstread.go).
type corkConn struct {
	net.Conn
	pending []byte // read past the upgrade request; returned before the socket's own bytes
	burst   burstReader

	mu     sync.Mutex
	corked bool
	buf    *[]byte
}

func (c *corkConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		if c.pending = c.pending[n:]; len(c.pending) == 0 {
			c.pending = nil
		}
		return n, nil
	}
	return c.burst.read(c.Conn, p)
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = corkPool.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	if len(*c.buf) >= corkFlushAt {
		return len(p), c.flushLocked()
	}
	return len(p), nil
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what accumulated and gives the buffer back. A failed write
// closes the connection, since the writes it held were already reported as
// done to coder/websocket.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	err := c.flushLocked()
	if c.buf != nil {
		if cap(*c.buf) <= 4*corkFlushAt {
			*c.buf = (*c.buf)[:0]
			corkPool.Put(c.buf)
		}
		c.buf = nil
	}
	if err != nil {
		c.Conn.Close()
	}
	return err
}

func (c *corkConn) flushLocked() error {
	if c.buf == nil || len(*c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	return err
}

// corkingWriter wraps the upgrade's ResponseWriter so that the connection
// coder/websocket hijacks is a corkConn with the relay's buffer sizes. Its
// Hijack clears the connection's deadlines: http.Hijacker leaves that to the
// caller (net/http clears them today, undocumented), coder/websocket never
// sets or clears one, and a deadline left from the request (bounded)
// would cut the socket that many seconds in.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkConn // set by Hijack
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := errors.Join(nc.SetDeadline(time.Time{}), brw.Writer.Flush()); err != nil {
		nc.Close()
		return nil, nil, err
	}
	pending, _ := brw.Reader.Peek(brw.Reader.Buffered())
	w.conn = &corkConn{Conn: nc, pending: bytes.Clone(pending), burst: newBurstReader(nc)}
	readBuffer := socketReadBuffer
	if w.conn.burst.ok() {
		readBuffer = socketReadBufferBurst
	}
	rw := bufio.NewReadWriter(bufio.NewReaderSize(w.conn, readBuffer), bufio.NewWriterSize(w.conn, socketWriteBuffer))
	return w.conn, rw, nil
}
