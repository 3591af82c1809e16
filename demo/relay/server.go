package relay

import (
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
//   - a read deadline, the header timeout again from when the headers are
//     read, on every request that comes with a body (boundBodies). Neither
//     leg reads a body, and before net/http answers a request whose handler
//     left its body unread, it reads up to 256 KiB of it to drain it, bounded
//     in time only by ReadTimeout (which would apply to every request, from
//     before its headers). Without the deadline, a body announced and never
//     sent (Content-Length, chunked, Expect: 100-continue) held its
//     connection, counted below, for good, and PendingConns of them, from
//     anyone, got every upgrade after them HTTP 503. srv.Handler is wrapped
//     for this, so ConfigureServer comes once it is set. An upgrade's
//     hijack clears the deadline (corkingWriter; the runtime leg sets its
//     own);
//   - a bound on connections not yet upgraded (Limits.PendingConns): past
//     it, a new connection is answered 503 with Retry-After: 1 and closed
//     before a byte of it is read. It counts every connection from accept
//     until it is upgraded (hijacked) or closed, whatever it asks for.
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
	srv.Handler = boundBodies{next: handler, timeout: l.HeaderTimeout}
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

// boundBodies bounds how long a request's body may hold its connection
// (ConfigureServer). A request without one is not touched: nothing is left
// to drain, and a deadline would only cancel its context (net/http's
// background read) partway through a long download. The deadline is on the
// connection, so it also bounds a handler that reads the body itself.
type boundBodies struct {
	next    http.Handler
	timeout time.Duration
}

func (b boundBodies) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.ContentLength != 0 { // -1: chunked, length unknown
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(b.timeout))
	}
	b.next.ServeHTTP(w, req)
}

// busyResponse is what a connection past Limits.PendingConns gets.
var busyResponse = []byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")

// connState counts connections not yet upgraded. Every connection starts
// in StateNew and ends in exactly one of StateHijacked and StateClosed, so
// the count is one up at the first and one down at the second.
func (r *Relay) connState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		if r.preUpgrade.Add(1) > int64(r.cfg.Limits.PendingConns) {
			// This runs in the accept loop: a plain connection takes the
			// few bytes of a 503 at once, while a TLS one would first
			// need a handshake, so it is only closed.
			if _, isTLS := c.(*tls.Conn); !isTLS {
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write(busyResponse)
			}
			c.Close()
		}
	case http.StateHijacked, http.StateClosed:
		r.preUpgrade.Add(-1)
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
