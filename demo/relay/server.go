package relay

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"time"
)

// ConfigureServer sets up srv, the http.Server that serves this relay on
// listenAddr, for what the relay's handler cannot bound itself, since it
// sees a request only once its headers are read:
//
//   - MaxHeaderBytes (Limits.HeaderBytes) and ReadHeaderTimeout
//     (Limits.HeaderTimeout), so a peer trickling headers holds at most that
//     much for at most that long (net/http answers 431 past the size);
//   - IdleTimeout (the header timeout again), so a kept-alive connection
//     between requests is not held for ever;
//   - deadlines on a request that is not upgraded (bounded), the header
//     timeout again: for its body from when its headers are read, and for
//     each 32 KiB of its response. Neither leg reads a body, and before
//     net/http answers a request whose handler left its body unread, it
//     reads up to 256 KiB of it to drain it, bounded in time only by
//     ReadTimeout; it writes a response bounded only by WriteTimeout. Both
//     would apply to every request, a whole download included. Without
//     these deadlines a body announced and never sent (Content-Length,
//     chunked, Expect: 100-continue), or a large response never read, held
//     its connection, counted below, for good, and PendingConns of them,
//     from anyone, got every upgrade after them HTTP 503. srv.Handler is
//     wrapped for this, so ConfigureServer comes once it is set. An
//     upgrade's hijack clears the deadlines (corkingWriter; the runtime leg
//     sets its own);
//   - a bound on connections not yet upgraded (Limits.PendingConns), and
//     on those from one client address (PendingConnsPerAddress): past
//     either, a new connection is answered 503 with Retry-After: 1 and
//     closed before a byte of it is read. They count every connection from
//     accept until it is upgraded (hijacked) or closed, whatever it asks
//     for. Without the second, one peer redialling what the first lets go
//     held every place, and every browser and runtime got 503.
//
// It adds listenAddr's names to those the browser leg serves (Config.Hosts).
// Fields already set on srv are kept, and an existing Handler and ConnState
// hook are still called.
func (r *Relay) ConfigureServer(srv *http.Server, listenAddr string) {
	l := r.cfg.Limits
	if srv.MaxHeaderBytes == 0 {
		srv.MaxHeaderBytes = l.HeaderBytes
	}
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = l.HeaderTimeout
	}
	if srv.IdleTimeout == 0 {
		srv.IdleTimeout = l.HeaderTimeout
	}
	handler := srv.Handler
	if handler == nil {
		handler = http.DefaultServeMux // what the server would serve
	}
	srv.Handler = bounded{next: handler, timeout: l.HeaderTimeout}
	next := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		r.connState(c, s)
		if next != nil {
			next(c, s)
		}
	}
	h := r.hosts.Load().with(listenAddr)
	r.hosts.Store(&h)
}

// bounded bounds how long a request that is not upgraded may hold its
// connection (ConfigureServer), reading it and writing its response:
//
//   - a request with a body gets timeout, from when its headers are read,
//     for the body to come in, whoever reads it (the handler, or net/http
//     draining it). A request without one gets no read deadline: nothing is
//     left to drain, and one would only cancel its context (net/http's
//     background read) partway through a long download.
//   - its response gets timeout for each 32 KiB to go out (progressWriter),
//     and again for what net/http writes once the handler has returned, so
//     a client that stops reading holds its connection that long past its
//     last progress, while one reading slowly is never cut. Without it a
//     large file served beside the relay (the demo's relay.wasm), asked for
//     and never read, held its connection for good.
type bounded struct {
	next    http.Handler
	timeout time.Duration
}

func (b bounded) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rc := http.NewResponseController(w)
	if req.ContentLength != 0 { // -1: chunked, length unknown
		rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	pw := &progressWriter{ResponseWriter: w, rc: rc, timeout: b.timeout}
	b.next.ServeHTTP(pw, req)
	if !pw.hijacked {
		// What is still buffered, and a chunked response's end.
		rc.SetWriteDeadline(time.Now().Add(b.timeout))
	}
}

// progressChunk is how much of a response must go out within the timeout
// each time: io.Copy's buffer, what http.FileServer writes at a time.
const progressChunk = 32 << 10

// progressWriter gives each progressChunk of a response its own write
// deadline. It hides net/http's io.ReaderFrom (sendfile), which would write
// a whole file under one deadline. It clears the deadline after each write,
// so a handler that works between writes is not cut for it, and it goes
// through Hijack, so that an upgraded connection never gets one.
type progressWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	hijacked bool // a hijack was tried: the connection may be the handler's
}

func (w *progressWriter) Write(p []byte) (n int, err error) {
	defer w.rc.SetWriteDeadline(time.Time{})
	for len(p) > 0 && err == nil {
		w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
		var m int
		m, err = w.ResponseWriter.Write(p[:min(len(p), progressChunk)])
		n, p = n+m, p[m:]
	}
	return n, err
}

// FlushError and Flush flush under the same deadline as a write.
func (w *progressWriter) FlushError() error {
	defer w.rc.SetWriteDeadline(time.Time{})
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.rc.Flush()
}

func (w *progressWriter) Flush() { w.FlushError() }

func (w *progressWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return w.rc.Hijack()
}

// Unwrap lets http.ResponseController reach net/http's writer.
func (w *progressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// connState counts connections not yet upgraded (pendingConns). Every
// connection starts in StateNew and ends in exactly one of StateHijacked
// and StateClosed.
func (r *Relay) connState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		if busy := r.preUpgrade.admit(c, r.cfg.Limits); busy != nil {
			// This runs in the accept loop: a plain connection takes the
			// few bytes of a 503 at once, while a TLS one would first
			// need a handshake, so it is only closed.
			if _, isTLS := c.(*tls.Conn); !isTLS {
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write(busy)
			}
			c.Close()
		}
	case http.StateHijacked, http.StateClosed:
		r.preUpgrade.release(c)
	}
}

// Subprotocol bounds: a browser offers two (the relay's and the
// credential's); a credential of up to a few KiB is a large JWT.
const (
	maxOfferedProtocols = 8
	maxProtocolBytes    = 8 << 10
)

// protocolsTooLarge reports whether a request's Sec-WebSocket-Protocol
// offers more than the relay will look at.
func protocolsTooLarge(req *http.Request) bool {
	n, size := 0, 0
	for _, v := range req.Header.Values("Sec-WebSocket-Protocol") {
		size += len(v)
		n += strings.Count(v, ",") + 1
	}
	return n > maxOfferedProtocols || size > maxProtocolBytes
}
