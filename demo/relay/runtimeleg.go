package relay

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// runtimeConn is one runtime's connection: NDJSON both ways over the raw
// stream left by the HTTP upgrade.
type runtimeConn struct {
	r        *Relay
	nc       net.Conn
	bw       *bufio.Writer // owned by whichever drain goroutine runs
	q        sendQueue[librelay.Frame]
	live     liveness
	cred     credHash
	addr     string
	instance string // set by the hello, read-only afterwards
	once     sync.Once
	closing  atomic.Bool
	welcomed atomic.Bool // instance is set; published by this flag
	contest  challenge   // takeover.go
}

// serveConnect authenticates the runtime leg's upgrade and switches the
// connection to NDJSON. A bad credential is HTTP 401 before anything else:
// the runtime leg can read a status, and nothing unauthenticated gets a frame.
func (r *Relay) serveConnect(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet || !headerHasToken(req.Header, "Connection", "upgrade") ||
		!strings.EqualFold(req.Header.Get("Upgrade"), relayleg.UpgradeToken) {
		w.Header().Set("Upgrade", relayleg.UpgradeToken)
		http.Error(w, "expected GET with Upgrade: "+relayleg.UpgradeToken, http.StatusUpgradeRequired)
		return
	}
	cred, ok := bearer(req.Header.Get("Authorization"))
	h := hashCredential(cred)
	if !ok || !r.runtime.known(h) {
		r.log.Info("runtime refused: bad credential", "remote", req.RemoteAddr)
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.isClosed() {
		http.Error(w, "relay is shutting down", http.StatusServiceUnavailable)
		return
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot upgrade", http.StatusInternalServerError)
		return
	}
	c := r.newRuntimeConn(nc, h, req.RemoteAddr)
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + relayleg.UpgradeToken + "\r\n\r\n")
	if err := brw.Flush(); err != nil || !r.track(c) {
		nc.Close()
		return
	}
	go c.run(brw.Reader)
}

func (r *Relay) newRuntimeConn(nc net.Conn, h credHash, addr string) *runtimeConn {
	c := &runtimeConn{r: r, nc: nc, cred: h, addr: addr, bw: bufio.NewWriterSize(nc, 32<<10)}
	l := r.cfg.Limits
	c.q = sendQueue[librelay.Frame]{maxMsgs: l.RuntimeQueueFrames, maxBytes: l.RuntimeQueueBytes,
		maxBatch: runtimeBatch, maxBatchBytes: runtimeBatchBytes,
		size: wireSize, flush: c.flush, finish: c.finish,
		batches: &frameBatches, msgs: fifo[librelay.Frame]{pool: &frameSegments},
		ctl: fifo[librelay.Frame]{pool: &frameSegments}}
	return c
}

// bearer extracts the credential of an "Authorization: Bearer" header.
func bearer(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(h), " ")
	cred = strings.TrimSpace(cred)
	return cred, ok && strings.EqualFold(scheme, "Bearer") && cred != ""
}

// headerHasToken reports whether a comma-separated header lists token.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// run is the connection's reader: hello, then frames until it ends.
func (c *runtimeConn) run(src *bufio.Reader) {
	defer c.r.untrack(c)
	defer c.nc.Close()
	lim := &helloLimiter{r: src, n: int64(c.r.cfg.Limits.HelloBytes)}
	rd := librelay.NewReader(lim)
	if c.handshake(rd, lim) {
		lim.n = -1
		c.r.addPeer(c)
		c.readLoop(rd)
		c.r.removePeer(c)
		c.leave()
		c.contest.end()
	}
	if c.closing.Load() {
		// The relay ended the connection: let its last frame go out and the
		// half-close reach the peer, reading (and discarding) until the peer
		// closes too, or CloseTimeout cuts it. Closing with unread input
		// would reset the connection and could destroy that last frame.
		io.Copy(io.Discard, c.nc)
	}
	c.q.kill() // wakes browsers waiting for room in this runtime's queue
}

// leave removes the connection from the table if it is still the
// instance's runtime, and tells the browsers attached to it that it is
// gone: those attached before the removal (removeRuntime), not one that
// attached since to a runtime that took the instance meanwhile.
func (c *runtimeConn) leave() {
	if !c.welcomed.Load() {
		return
	}
	c.r.step("remove")
	removed, attached := c.r.removeRuntime(c.instance, c) // attach.go
	c.r.step("removed")
	if removed {
		c.r.log.Info("runtime disconnected", "instance", c.instance, "remote", c.addr)
		tellGone(attached, goneMessage)
	}
}

// helloLimiter caps what the Reader may read before the welcome; -1 lifts it.
type helloLimiter struct {
	r io.Reader
	n int64
}

func (l *helloLimiter) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), l.n)]
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// handshake reads the hello within HelloTimeout and HelloBytes and answers
// it; false means refused (the refusal is queued).
func (c *runtimeConn) handshake(rd *librelay.Reader, lim *helloLimiter) bool {
	c.nc.SetReadDeadline(time.Now().Add(c.r.cfg.Limits.HelloTimeout))
	f, err := rd.ReadFrame()
	c.nc.SetReadDeadline(time.Time{})
	switch {
	case err != nil && lim.n == 0:
		c.refuse(librelay.Frame{}, relayleg.CodeFrameTooLarge, "hello exceeds the hello limit")
		return false
	case err != nil:
		c.refuse(librelay.Frame{}, librelay.CodeMalformedFrame, "no valid hello")
		return false
	}
	h, v, code, msg := judge(f, c.r.runtime.allows(c.cred, f.Instance), true)
	if code != "" {
		c.refuse(f, code, msg)
		return false
	}
	sig, err := signIfAsked(c.r, h.Nonce, v, f.Instance)
	if err != nil {
		c.refuse(f, librelay.CodeMalformedFrame, "cannot sign over this nonce and instance")
		return false
	}
	c.instance = f.Instance
	return c.claim(f, v, sig) // takeover.go
}

// welcome queues the welcome and installs this connection as the
// instance's runtime, replacing (and closing) replaced, the one claim let
// go; claim calls it holding the relay's takeover lock. The queue is held
// meanwhile: when the runtime reads its welcome the route exists, and
// nothing routed to it can come before the welcome.
//
// The sockets attached to the runtime it replaces are told runtime_gone,
// as when a runtime leaves (the replaced connection's own leave finds
// itself no longer the instance's runtime, and tells nobody). The new
// connection is typically the same runtime restarted behind a connection
// that died unseen: it numbers its streams afresh and knows none of their
// attachments, and a client left attached would drop its frames as already
// seen, for ever. Told, each redials and resumes, or learns it cannot.
// Sockets that attach once the new runtime is installed are left alone.
// Which is which is decided under the lock an attach registers under
// (installRuntime): a socket that attached just before the install, its
// resume perhaps gone to the replaced connection, is told too.
func (c *runtimeConn) welcome(hello librelay.Frame, v int, sig []byte, replaced Endpoint) {
	payload, _ := librelay.Welcome{
		ProtocolVersion: v, Relay: c.r.cfg.Name, Signature: sig, RetryAfterSeconds: c.r.cfg.RetryAfter,
	}.MarshalJSON()
	c.q.hold()
	defer c.q.unhold()
	c.sendControl(&librelay.Frame{Type: librelay.TypeWelcome, ReplyTo: hello.ID, Instance: c.instance, Payload: payload})
	c.welcomed.Store(true)
	c.r.step("install")
	old, attached := c.r.installRuntime(c.instance, c) // attach.go
	c.r.step("installed")
	if old != nil {
		if oc, ok := old.(*runtimeConn); ok {
			code, msg := relayleg.CodeSuperseded, "another connection took over this instance"
			if old == replaced {
				code, msg = relayleg.CodeHeartbeatTimeout, "no answer to a probe while another connection claimed this instance"
			}
			oc.closeWith(code, msg)
		}
		tellGone(attached, "a new connection of the instance's runtime replaced the one this socket was attached to")
	}
	c.r.log.Info("runtime connected", "instance", c.instance, "remote", c.addr, "took_over", replaced != nil)
	c.payOwed()
}

// payOwed queues, behind the welcome, the detaches of the attachments whose
// grace ran out while the instance had no runtime (attach.go). They never
// wait for room, past the queue's bound if need be: welcome holds the
// queue, so nothing drains it yet, and runs under the takeover lock, so a
// detach waiting for room there (once AttachmentsPerInstance reached
// RuntimeQueueFrames) hung every runtime's handshake for good. r.owed keeps
// at most AttachmentsPerInstance per instance, which bounds what they add.
func (c *runtimeConn) payOwed() {
	for _, session := range c.r.takeOwed(c.instance) {
		c.q.pushPast(detachFrame(c.instance, session))
	}
}

func (c *runtimeConn) refuse(req librelay.Frame, code, message string) {
	c.r.log.Info("runtime refused", "code", code, "remote", c.addr)
	c.closeFrame(librelay.NewError(req, code, message))
}

// readLoop handles the runtime's frames until the connection ends or the
// relay starts closing it.
func (c *runtimeConn) readLoop(rd *librelay.Reader) {
	for !c.closing.Load() {
		f, err := rd.ReadFrame()
		if err != nil {
			if errors.Is(err, librelay.ErrFrameTooLarge) {
				c.closeWith(relayleg.CodeFrameTooLarge, "frame exceeds librelay.MaxFrameBytes")
				return
			}
			if !perFrame(err) {
				return
			}
			c.sendControl(ptr(librelay.NewError(librelay.Frame{}, librelay.CodeMalformedFrame, "not a valid frame")))
			continue
		}
		c.live.active.Store(true)
		c.handle(&f)
	}
}

// perFrame reports whether a read error concerns one frame only: a source
// error (EOF, a closed or reset connection) ends the stream, a bad frame
// does not.
func perFrame(err error) bool {
	var ne net.Error
	return !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.ErrNoProgress) &&
		!errors.Is(err, net.ErrClosed) && !errors.Is(err, librelay.ErrReaderClosed) && !errors.As(err, &ne)
}

// handle routes a frame from the runtime to the attachment its session
// names. Frames for another instance, with no session, or for a session no
// socket holds are dropped: the runtime retains what it sent and the client
// resumes.
func (c *runtimeConn) handle(f *librelay.Frame) {
	if librelay.IsControl(f.Type) && !c.control(f) {
		return
	}
	if dir := direction(f.Type); dir != "" { // direction.go: the relay's, never a browser's
		c.r.log.Debug("dropping a frame addressed to the relay", "instance", c.instance, "type", f.Type)
		if reply := notRouted(f, dir, "runtime leg"); reply != nil {
			c.sendControl(reply)
		}
		return
	}
	if f.Instance != c.instance || f.Session == "" {
		c.undeliverable(f, librelay.CodeMalformedFrame, "a frame for a browser names its instance and session")
		return
	}
	// A sequenced frame that a socket just shed, or an attachment in its
	// grace period, cannot take now reaches the client when it resumes, and
	// the client answers it then.
	if ep := c.r.table.Attachment(c.instance, f.Session); ep != nil {
		if ep.Send(*f) || f.Seq != 0 {
			return
		}
	} else if f.Seq != 0 && c.r.reclaimable(c.instance, f.Session) {
		return
	}
	c.undeliverable(f, CodeUndeliverable, "no socket holds this session")
}

// CodeUndeliverable answers a runtime's request that no browser socket can
// be given: the session has no socket, and the frame will not reach one
// later (it is unsequenced, or no attachment holds the id).
const CodeUndeliverable = "undeliverable"

// undeliverable answers a request the relay cannot route, so that it still
// gets its one reply (spec 001); anything else is dropped.
func (c *runtimeConn) undeliverable(f *librelay.Frame, code, message string) {
	if f.IsRequest() {
		c.sendControl(ptr(librelay.NewError(*f, code, message)))
	}
}

// control answers relay.* frames from the runtime; it reports true for a
// relay.error to route to the attachment it names.
func (c *runtimeConn) control(f *librelay.Frame) bool {
	if f.Type == librelay.TypeAck {
		c.contest.answered(f.ReplyTo)
	}
	reply, route := controlReply(f)
	if reply != nil {
		c.sendControl(reply)
	}
	return route
}

// Send queues a frame for the runtime, waiting while its queue is full: the
// browser's socket is not read meanwhile, which is the backpressure. It
// fails only when the runtime connection is gone.
func (c *runtimeConn) Send(f librelay.Frame) bool { return c.q.push(f, -1) == pushed }

// sendControl queues one of the relay's own frames without waiting. A
// runtime with no room even for that (it sends requests and does not read
// the replies) is let go with slow_consumer: a reply is never dropped with
// the connection carrying on.
func (c *runtimeConn) sendControl(f *librelay.Frame) {
	if !c.q.pushControl(*f) && !c.closing.Load() {
		c.r.log.Warn("runtime does not read its replies: closing", "instance", c.instance)
		c.closeWith(relayleg.CodeSlowConsumer, "the connection did not drain its send queue")
	}
}

// flush encodes a batch straight into the write buffer and writes it with
// one syscall (unless it exceeds the buffer).
func (c *runtimeConn) flush(batch []librelay.Frame) error {
	for i := range batch {
		if err := c.writeLine(&batch[i]); err != nil {
			return err
		}
	}
	return c.bw.Flush()
}

// writeLine encodes f, and so validates it, into the write buffer's free
// space (flushing first when f might not fit), then a newline. A frame that
// does not encode is dropped, so nothing invalid is forwarded.
func (c *runtimeConn) writeLine(f *librelay.Frame) error {
	if c.bw.Buffered() > 0 && c.bw.Available() <= maxWireSize(f) {
		if err := c.bw.Flush(); err != nil {
			return err
		}
	}
	line, err := librelay.AppendFrame(c.bw.AvailableBuffer(), f)
	if err != nil {
		c.r.log.Warn("dropping a frame that does not encode", "instance", c.instance, "err", err)
		return nil
	}
	_, err = c.bw.Write(append(line, '\n'))
	return err
}

// finish half-closes the connection once its last frame is written; run
// closes it fully once the peer has closed its side.
func (c *runtimeConn) finish(clean bool) {
	if hc, ok := c.nc.(interface{ CloseWrite() error }); ok && clean {
		hc.CloseWrite()
		return
	}
	c.nc.Close()
}

// closeWith sends relay.error code and closes the connection.
func (c *runtimeConn) closeWith(code, message string) {
	c.closeFrame(librelay.NewError(librelay.Frame{}, code, message))
}

func (c *runtimeConn) closeFrame(last librelay.Frame) {
	c.once.Do(func() {
		time.AfterFunc(c.r.cfg.Limits.CloseTimeout, func() { c.nc.Close() })
		c.closing.Store(true)
		c.q.close(&last, false)
		c.leave()
		c.contest.end()
	})
}

func (c *runtimeConn) alive() *liveness { return &c.live }

func (c *runtimeConn) probe(id string) {
	c.sendControl(&librelay.Frame{Type: librelay.TypeHeartbeat, ID: id})
}

func (c *runtimeConn) timedOut() {
	c.r.log.Info("runtime missed a heartbeat", "instance", c.instance)
	c.closeWith(relayleg.CodeHeartbeatTimeout, "no answer to a heartbeat")
}

func (c *runtimeConn) shutdown() {
	c.closeWith(relayleg.CodeShuttingDown, "the relay is shutting down")
}
