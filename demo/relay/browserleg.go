package relay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// browserConn is one browser WebSocket. Its reader goroutine is the only
// goroutine it owns for its whole life; a writer exists only while its send
// queue is non-empty.
type browserConn struct {
	r      *Relay
	ws     *websocket.Conn
	cc     *corkConn // the connection under ws
	cred   credHash
	credOK bool
	q      sendQueue[librelay.Frame]
	live   liveness
	addr   string

	// Set once by attach, before the route exists; read-only afterwards.
	instance, id string

	// Set once by closeWithFrame, before the queue can finish.
	closeOnce   sync.Once
	closeCode   relayleg.CloseCode
	closeReason string
	cut         atomic.Pointer[time.Timer] // set by closeWithFrame; read by finish, which can race it after a failed write
	closing     atomic.Bool
	ended       chan struct{} // closed when a close the relay started is done

	// resuming is the id of the session.resume this socket sent that
	// nothing has answered yet (nil: none). While one is open, the acks of
	// the browser's heartbeats keep their place behind the cargo queued
	// before them rather than go ahead of it: the client takes such an ack
	// for the end of its wait for the resume's answer (wasm/client
	// resumeOverdue), and one that overtook a session.resumed still queued
	// would have it tell a loss that is not one. Against a runtime that
	// never answers (contenox v1.0.0) it stays open, and the acks keep
	// their place for the connection's life, as all replies did before the
	// control lane.
	resuming atomic.Pointer[string]
}

// serveAttach accepts the browser leg. The Origin check is coder/websocket's
// (HTTP 403 for an origin not in OriginPatterns); the credential is read
// from the offered subprotocols and checked after the hello, so that the
// refusal can be a relay.error the page can read.
func (r *Relay) serveAttach(w http.ResponseWriter, req *http.Request) {
	if r.isClosed() {
		http.Error(w, "relay is shutting down", http.StatusServiceUnavailable)
		return
	}
	if !r.hosts.Load().allows(req.Host) {
		r.log.Info("browser upgrade refused: a Host the relay does not serve", "host", clampHost(req.Host), "remote", req.RemoteAddr)
		http.Error(w, "this relay does not serve that host", http.StatusForbidden)
		return
	}
	if protocolsTooLarge(req) {
		http.Error(w, "too many or too large subprotocols offered", http.StatusBadRequest)
		return
	}
	if !r.enterHello() {
		r.log.Debug("browser upgrade refused: too many pending hellos", "remote", req.RemoteAddr)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many connections awaiting their hello", http.StatusServiceUnavailable)
		return
	}
	cred, ok := relayleg.ParseBearer(offeredProtocols(req))
	cw := &corkingWriter{ResponseWriter: w}
	ws, err := websocket.Accept(cw, req, r.acceptOptions(req, []string{relayleg.Subprotocol}))
	if err != nil {
		r.leaveHello()
		r.log.Info("browser upgrade refused", "remote", req.RemoteAddr, "err", err)
		return
	}
	s := &browserConn{r: r, ws: ws, cc: cw.conn, cred: hashCredential(cred), credOK: ok, addr: req.RemoteAddr, ended: make(chan struct{})}
	l := r.cfg.Limits
	s.q = sendQueue[librelay.Frame]{maxMsgs: l.QueueFrames, maxBytes: l.QueueBytes,
		maxBatch: browserBatch, maxBatchBytes: browserBatchBytes,
		size: wireSize, flush: s.flush, finish: s.finish,
		batches: &frameBatches, msgs: fifo[librelay.Frame]{pool: &frameSegments},
		ctl: fifo[librelay.Frame]{pool: &frameSegments}}
	ws.SetReadLimit(-1) // the relay enforces its own limit, to close with 4413
	if !r.track(s) {
		ws.Close(websocket.StatusCode(relayleg.CloseShuttingDown), relayleg.CodeShuttingDown)
		r.leaveHello()
		return
	}
	// The hello is awaited on a goroutine of the socket's own: returning
	// lets net/http drop the request, its headers and its buffers, which a
	// socket that never says hello would otherwise hold for HelloTimeout.
	go s.run()
}

// clampHost bounds an untrusted Host before it is logged.
func clampHost(h string) string { return h[:min(len(h), 64)] }

// offeredProtocols lists the subprotocols of a WebSocket upgrade request.
func offeredProtocols(req *http.Request) []string {
	var out []string
	for _, v := range req.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}

// run answers the hello, then hands the socket to serve. The socket leaves the pending hellos once welcomed, or,
// when refused, once its close has ended.
func (s *browserConn) run() {
	if s.handshake() {
		s.r.leaveHello()
		go s.serve()
		return
	}
	s.end()
	s.r.leaveHello()
}

// serve is the attached socket's reader. It is a goroutine of its own,
// started after the handshake, so that the stack it keeps while the socket
// idles has not grown for signing the welcome.
func (s *browserConn) serve() {
	s.r.addPeer(s)
	detached := s.readLoop()
	s.r.removePeer(s)
	s.r.release(s, detached)
	s.end()
}

// end waits for a close the relay started to finish (its last frames and
// close handshake, bounded by CloseTimeout) and releases the socket.
func (s *browserConn) end() {
	if s.closing.Load() {
		<-s.ended
	}
	s.ws.CloseNow()
	s.r.untrack(s)
}

// handshake reads and answers the hello; false means the socket was refused
// (the refusal is already queued).
func (s *browserConn) handshake() bool {
	l := s.r.cfg.Limits
	timer := time.AfterFunc(l.HelloTimeout, func() {
		s.refuse(librelay.Frame{}, librelay.CodeMalformedFrame, "no hello within the hello timeout")
	})
	defer timer.Stop()
	msg, err := s.readMessage(l.HelloBytes, false)
	switch {
	case errors.Is(err, errTooLarge):
		s.refuse(librelay.Frame{}, relayleg.CodeFrameTooLarge, "hello exceeds the hello limit")
		return false
	case errors.Is(err, errBinary):
		s.refuse(librelay.Frame{}, librelay.CodeMalformedFrame, "hello is not a text message")
		return false
	case err != nil:
		return false
	}
	f, err := librelay.ParseFrame(msg.b)
	msg.free()
	if err != nil {
		s.refuse(librelay.Frame{}, librelay.CodeMalformedFrame, "hello is not a valid frame")
		return false
	}
	return s.hello(f)
}

// hello welcomes the socket, or refuses it with the first failure judge
// finds.
func (s *browserConn) hello(f librelay.Frame) bool {
	h, v, code, msg := judge(f, s.credOK && s.r.client.allows(s.cred, f.Instance), s.r.table.Runtime(f.Instance) != nil)
	if code != "" {
		if code == librelay.CodeUnknownInstance {
			s.r.knocked(s.cred, f.Instance, f.Session)
		}
		s.refuse(f, code, msg)
		return false
	}
	sig, err := signIfAsked(s.r, h.Nonce, v, f.Instance)
	if err != nil {
		s.refuse(f, librelay.CodeMalformedFrame, "cannot sign over this nonce and instance")
		return false
	}
	if code := s.r.attach(s, f.Instance, f.Session, func(id string) bool {
		return s.welcome(f, id, v, sig)
	}); code != "" {
		s.refuse(f, code, "attachment refused")
		return false
	}
	s.r.log.Info("browser attached", "instance", s.instance, "attachment", digest(s.id), "remote", s.addr,
		"reclaimed", f.Session != "" && f.Session == s.id)
	return true
}

// welcome queues the welcome; attach calls it with the granted id before the
// route exists.
func (s *browserConn) welcome(hello librelay.Frame, id string, v int, sig []byte) bool {
	payload, _ := librelay.Welcome{
		ProtocolVersion: v, Relay: s.r.cfg.Name, Signature: sig, RetryAfterSeconds: s.r.cfg.RetryAfter,
	}.MarshalJSON()
	f := librelay.Frame{Type: librelay.TypeWelcome, ReplyTo: hello.ID, Instance: hello.Instance, Session: id, Payload: payload}
	return s.sendControl(&f)
}

// refuse sends relay.error (answering req when it is a request) and closes
// with the code's close code.
func (s *browserConn) refuse(req librelay.Frame, code, message string) {
	s.r.log.Info("browser refused", "code", code, "remote", s.addr, "instance", req.Instance)
	s.closeWithFrame(librelay.NewError(req, code, message), relayleg.CloseFor(code), code, false)
}

// message is one read message in a pooled buffer.
type message struct {
	b   []byte
	buf *[]byte
}

func (m message) free() {
	if cap(*m.buf) <= maxPooledBuffer {
		*m.buf = m.b[:0]
		msgPool.Put(m.buf)
	}
}

const maxPooledBuffer = 64 << 10

// msgPool holds read buffers: a socket holds one only while a message is
// being read and handled, never while idle.
var msgPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

var errTooLarge = errors.New("relay: message exceeds the limit")

// errBinary reports a binary message: the browser leg carries text only.
var errBinary = errors.New("relay: binary message")

// errDrainFailed reports an oversized message whose rest could not be
// drained within the limits; the socket has been cut.
var errDrainFailed = errors.New("relay: oversized message not drained")

// drainRest reads and discards the rest of an oversized message, at most
// Limits.DrainBytes of it for at most Limits.DrainTimeout, and reports
// whether it reached the message's end. It exists for browsers: a browser
// reports the relay's close code only after it has sent all of the message
// and answered the close, and a relay that closes with part of a message
// unread resets the TCP connection, which makes the browser discard what the
// relay sent (relay.error frame_too_large and close 4413) and report 1006.
// Past either bound the socket is cut: the relay does not read without
// limit for a client that keeps sending.
func (s *browserConn) drainRest(rd io.Reader) bool {
	l := s.r.cfg.Limits
	cut := time.AfterFunc(l.DrainTimeout, s.cutNow)
	n, err := io.CopyN(io.Discard, rd, int64(l.DrainBytes)+1)
	if cut.Stop() && err == io.EOF && n <= int64(l.DrainBytes) {
		return true
	}
	s.r.log.Info("browser frame too large to drain; cutting the socket", "instance", s.instance,
		"attachment", digest(s.id), "remote", s.addr, "drained", n)
	s.cutNow()
	return false
}

// readMessage reads one whole message of at most limit bytes. A larger one
// is errTooLarge; with drain, the rest of it is read and discarded first
// (drainRest), and when that fails the socket is cut and the error is the
// read's.
func (s *browserConn) readMessage(limit int, drain bool) (message, error) {
	typ, rd, err := s.ws.Reader(context.Background())
	if err != nil {
		return message{}, err
	}
	buf := msgPool.Get().(*[]byte)
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			if len(b) > limit {
				break
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := rd.Read(b[len(b):min(cap(b), limit+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return message{}, err
		}
		if len(b) > limit {
			break
		}
	}
	m := message{b: b, buf: buf}
	if len(b) > limit {
		m.free()
		if drain && !s.drainRest(rd) {
			return message{}, errDrainFailed
		}
		return message{}, errTooLarge
	}
	if typ != websocket.MessageText {
		m.free()
		return message{}, errBinary
	}
	return m, nil
}
