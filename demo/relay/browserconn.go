package relay

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/coder/websocket"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// readLoop handles the socket's frames until it ends; it reports whether the
// client detached explicitly.
func (s *browserConn) readLoop() (detached bool) {
	limit := s.r.cfg.Limits.BrowserFrameBytes
	for {
		msg, err := s.readMessage(limit, true)
		switch {
		case errors.Is(err, errTooLarge): // read to its end: the browser gets the code
			s.closeWith(relayleg.CodeFrameTooLarge, "frame exceeds the browser-leg limit", false)
			return false
		case errors.Is(err, errBinary):
			s.sendControl(ptr(librelay.NewError(librelay.Frame{}, librelay.CodeMalformedFrame, "binary messages are not frames")))
			continue
		case err != nil:
			return false
		}
		s.live.active.Store(true)
		f, err := librelay.ParseFrame(msg.b)
		msg.free()
		if err != nil {
			s.sendControl(ptr(librelay.NewError(librelay.Frame{}, librelay.CodeMalformedFrame, "not a valid frame")))
			continue
		}
		if s.handle(&f) {
			return true
		}
	}
}

// handle acts on one frame from the browser and reports whether it was the
// client's detach.
func (s *browserConn) handle(f *librelay.Frame) bool {
	if librelay.IsControl(f.Type) {
		s.control(f)
		return false
	}
	if dir := direction(f.Type); dir != "" { // direction.go: never forwarded
		if reply := notRouted(f, dir, "browser leg"); reply != nil {
			s.sendControl(reply)
		}
		return false
	}
	if f.IsRequest() && f.Instance != "" && s.r.client.allows(s.cred, f.Instance) && s.r.table.Runtime(f.Instance) == nil {
		s.sendControl(ptr(librelay.NewError(*f, librelay.CodeUnknownInstance, "no runtime is connected for this instance")))
		return false
	}
	if f.Instance != s.instance || f.Session != s.id {
		// Never let a socket speak for another attachment; a request still
		// gets its one reply, on the socket's own route.
		if f.IsRequest() {
			e := librelay.NewError(*f, librelay.CodeMalformedFrame, "a socket sends only on its own attachment's session")
			e.Instance, e.Session = s.instance, s.id
			s.sendControl(&e)
		}
		return false
	}
	if f.Type == librelay.TypeACPDetach {
		// End the id before anything the client can observe, so a hello
		// naming it right after the close can only get a fresh one.
		s.r.release(s, true)
		s.toRuntime(f)
		s.r.log.Info("browser detached", "instance", s.instance, "attachment", digest(s.id))
		s.closeWithFrame(librelay.Frame{}, relayleg.CloseNormal, "detached", true)
		return true
	}
	if f.Type == librelay.TypeResume && f.IsRequest() {
		id := f.ID
		s.resuming.Store(&id) // before the answer can come back
	}
	s.toRuntime(f)
	return false
}

// answered notes that the writer takes reply for the browser: an answer to
// the resume the socket waits on ends the wait (resuming). Not when it is
// queued: an ack queued after that, in the control lane, is written after
// the batch that holds the answer.
func (s *browserConn) answered(reply *librelay.Frame) {
	if reply.ReplyTo == "" {
		return
	}
	if p := s.resuming.Load(); p != nil && *p == reply.ReplyTo {
		s.resuming.CompareAndSwap(p, nil)
	}
}

// toRuntime routes f to the instance's runtime, waiting while the runtime's
// queue is full. A request that cannot be delivered is answered, so the
// client never waits for a reply that cannot come.
func (s *browserConn) toRuntime(f *librelay.Frame) {
	rt := s.r.table.Runtime(s.instance)
	if (rt == nil || !rt.Send(*f)) && f.IsRequest() {
		s.sendControl(ptr(librelay.NewError(*f, librelay.CodeUnknownInstance, "no runtime is connected for this instance")))
	}
}

// control answers relay.* frames from the browser, and routes a relay.error
// on this attachment's own route to the runtime.
func (s *browserConn) control(f *librelay.Frame) {
	reply, route := controlReply(f)
	switch {
	case reply == nil:
	case reply.Type == librelay.TypeAck && s.resuming.Load() != nil:
		s.sendInOrder(reply)
	default:
		s.sendControl(reply)
	}
	if route && f.Instance == s.instance && f.Session == s.id {
		s.toRuntime(f)
	}
}

// Send queues a frame from the runtime; the socket's writer encodes it. It
// never waits: the caller is the runtime leg's one reader, which every
// attachment of the instance shares, so a socket whose queue is full is a
// slow consumer and is shed at once (shed). Its frames stay in the runtime's
// retention, and the client resumes from its cursor after it redials.
//
// A frame too large for the browser leg goes as its stand-in (tooLarge);
// when it was a request, the runtime also gets its one reply, relay.error
// frame_too_large answering it, once the stand-in is queued: the browser
// cannot answer a request it never saw.
func (s *browserConn) Send(f librelay.Frame) bool {
	var answer *librelay.Frame
	if n, ok := s.fits(&f); !ok && n > 0 { // n == 0: it does not encode; flush drops it
		s.r.log.Warn("a runtime frame larger than the browser-leg limit: sending frame_too_large in its place",
			"instance", s.instance, "attachment", digest(s.id), "seq", f.Seq, "bytes", n, "request", f.IsRequest())
		if f.IsRequest() && s.r.firstAnswer(s.instance, s.id, f.Seq) {
			answer = ptr(librelay.NewError(f, relayleg.CodeFrameTooLarge, s.tooLargeMessage(n)))
		}
		f = s.tooLarge(&f, n)
	}
	switch s.q.push(f, 0) {
	case pushed:
		if answer != nil {
			s.answerRuntime(answer)
		}
		return true
	case pushFull:
		s.shed()
	}
	return false
}

// answerRuntime sends one of the relay's replies to the instance's runtime
// without waiting: the caller may be its reader, or, with the runtime on
// another node, the one goroutine that hands the instance's frames to this
// node's sockets (natstable), whose stream to the runtime's node can wait
// for room (StallTimeout). A reply's order among the frames does not
// matter, so that one goes on a goroutine of its own.
func (s *browserConn) answerRuntime(reply *librelay.Frame) {
	switch rt := s.r.table.Runtime(s.instance).(type) {
	case nil:
	case *runtimeConn:
		rt.sendControl(reply)
	default:
		go rt.Send(*reply)
	}
}

// shed lets go of a socket that cannot keep up: what is queued is still
// written, then relay.error slow_consumer and close 4429, all bounded by
// CloseTimeout and none of it waited for by anyone else. Keeping the queue
// means every shed still delivers a queue's worth of frames, so a client
// that resumes into a replay larger than its queue makes progress on each
// redial instead of being shed empty-handed for ever.
func (s *browserConn) shed() {
	s.r.log.Warn("slow consumer: shedding the socket", "instance", s.instance, "attachment", digest(s.id))
	s.closeWith(relayleg.CodeSlowConsumer, "the socket did not drain its send queue", true)
}

// tooLarge is the stand-in for a runtime frame of n bytes that the browser
// leg cannot carry: relay.error frame_too_large on the attachment's session
// with the frame's seq (0 for an unsequenced frame), so the client learns that
// seq arrived and is lost rather than seeing a gap it would resume over, and
// find the same frame again, for ever.
func (s *browserConn) tooLarge(f *librelay.Frame, n int) librelay.Frame {
	e := librelay.NewError(librelay.Frame{}, relayleg.CodeFrameTooLarge, s.tooLargeMessage(n))
	e.Instance, e.Session, e.Seq = s.instance, s.id, f.Seq
	return e
}

func (s *browserConn) tooLargeMessage(n int) string {
	return strconv.Itoa(n) + " bytes, limit " + strconv.Itoa(s.r.cfg.Limits.BrowserFrameBytes)
}

// fits reports whether f's encoding is within the browser-leg limit. Only a
// frame that might not be is encoded to find out, and its size returned.
func (s *browserConn) fits(f *librelay.Frame) (int, bool) {
	limit := s.r.cfg.Limits.BrowserFrameBytes
	if maxWireSize(f) <= limit {
		return 0, true
	}
	msg, err := librelay.AppendFrame(nil, f)
	return len(msg), err == nil && len(msg) <= limit
}

// sendControl queues one of the relay's own frames without waiting. A socket
// with no room even for that (it sends requests and does not read the
// replies) is shed: a reply is never dropped with the socket carrying on.
func (s *browserConn) sendControl(f *librelay.Frame) bool {
	return s.queued(s.q.pushControl(*f))
}

// sendInOrder is sendControl for a reply that keeps its place behind the
// cargo queued before it (resuming).
func (s *browserConn) sendInOrder(f *librelay.Frame) bool {
	return s.queued(s.q.pushInOrder(*f))
}

// queued sheds the socket when a reply of the relay's found no room.
func (s *browserConn) queued(ok bool) bool {
	if !ok && !s.closing.Load() {
		s.shed()
	}
	return ok
}

// closeWith sends relay.error code (not answering anything) and closes with
// the code's close code.
func (s *browserConn) closeWith(code, message string, keepPending bool) {
	s.closeWithFrame(librelay.NewError(librelay.Frame{}, code, message), relayleg.CloseFor(code), code, keepPending)
}

// closeWithFrame queues last (none when its Type is empty), then the close
// frame; pending frames go first when keepPending. A socket that does not
// drain within CloseTimeout is cut.
func (s *browserConn) closeWithFrame(last librelay.Frame, closeCode relayleg.CloseCode, reason string, keepPending bool) {
	var lastp *librelay.Frame
	if last.Type != "" {
		lastp = &last
	}
	s.closeOnce.Do(func() {
		s.closeCode, s.closeReason = closeCode, reason
		s.cut.Store(time.AfterFunc(s.r.cfg.Limits.CloseTimeout, s.cutNow))
		s.closing.Store(true)
		s.q.close(lastp, keepPending)
	})
}

// flush writes a batch, one WebSocket message per frame, corked so that
// the batch reaches the kernel in one write. Each frame is encoded, and so
// validated, into one pooled buffer just before it is written; one that
// does not encode is dropped, so nothing invalid is forwarded.
func (s *browserConn) flush(batch []librelay.Frame) error {
	buf := encodePool.Get().(*[]byte)
	defer putEncodeBuffer(buf)
	s.cc.cork()
	for i := range batch {
		s.answered(&batch[i])
		msg, err := librelay.AppendFrame((*buf)[:0], &batch[i])
		if err != nil {
			s.r.log.Warn("dropping a frame that does not encode", "instance", s.instance, "attachment", digest(s.id), "err", err)
			continue
		}
		*buf = msg
		if err := s.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
			s.cc.uncork()
			return err
		}
	}
	return s.cc.uncork()
}

// finish ends a closing socket: after its last queued frame, the close
// frame and the handshake's wait for the browser's close (which reads past
// any message left half-read); after a failed write, nothing more.
func (s *browserConn) finish(clean bool) {
	if clean {
		s.ws.Close(websocket.StatusCode(s.closeCode), s.closeReason)
	}
	if cut := s.cut.Load(); cut != nil { // a failed write ends a socket that was never closing
		cut.Stop()
	}
	close(s.ended)
}

// cutNow ends the socket without a close handshake. The TCP connection is
// closed first because coder/websocket's CloseNow does nothing while a Close
// is under way, and Close waits for the peer's close frame reading whatever
// comes before it (up to 5s per frame header, without limit within a frame):
// closing the connection is what bounds a close by CloseTimeout.
func (s *browserConn) cutNow() {
	s.cc.Conn.Close()
	s.ws.CloseNow()
}

func (s *browserConn) alive() *liveness { return &s.live }

func (s *browserConn) probe(id string) {
	s.sendControl(&librelay.Frame{Type: librelay.TypeHeartbeat, ID: id})
}

func (s *browserConn) timedOut() {
	s.r.log.Info("browser missed a heartbeat", "instance", s.instance, "attachment", digest(s.id))
	s.closeWith(relayleg.CodeHeartbeatTimeout, "no answer to a heartbeat", false)
}

func (s *browserConn) shutdown() {
	s.closeWith(relayleg.CodeShuttingDown, "the relay is shutting down", false)
}

func ptr[T any](v T) *T { return &v }
