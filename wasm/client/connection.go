package client

import (
	"context"
	"errors"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// inbound is one batch read from the socket, already parsed, or the error
// that ended the socket.
type inbound struct {
	frames []RefFrame
	err    error
}

// connection dials once, serves the connection until it ends, and says why.
// The link it returns (nil when the dial failed) tells run how it went.
func (r *runner) connection() (*link, error) {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	conn, err := r.connect()
	if err != nil {
		return nil, err
	}
	frames := make(chan inbound, 1)
	l := &link{conn: conn, frames: frames}
	r.l = l
	go readLoop(ctx, conn, frames)
	err = r.serve()
	if ferr := r.flush(); fatal(ferr) {
		err = ferr // Close or Detach while the last batch was being delivered
	}
	r.commit()
	code, reason := closeCodeFor(err)
	_ = conn.Close(code, reason)
	l.stopAlarms()
	r.l = nil
	return l, err
}

// connect is the connection's socket: the first connection's was dialed
// while Attach loaded the stream's state (startDial), later ones are dialed
// here. Either dial ends when Close or Abandon is called: its context is
// closing (the connection's, which lives longer, has nothing to add).
func (r *runner) connect() (Conn, error) {
	if first := r.first; first != nil {
		r.first = nil
		d := <-first
		return d.conn, d.err
	}
	return dial(r.a.closing, r.o)
}

// dialed is a dial's outcome.
type dialed struct {
	conn Conn
	err  error
}

// startDial dials in the background. Attach dials the first connection while
// the Store loads the stream's state: the dial does not need that state
// (only the hello after it does), and on a reloaded page both are waits on
// the browser (the socket's open, an IndexedDB read) that overlap. A Store
// slower than the relay's wait for a hello (the dev relay's HelloTimeout,
// 10 s) costs that socket: the relay closes it, and the runner redials as
// after any transient failure.
func startDial(ctx context.Context, o *Options) <-chan dialed {
	out := make(chan dialed, 1)
	go func() {
		conn, err := dial(ctx, o)
		out <- dialed{conn, err}
	}()
	return out
}

// closeDialed closes the socket a dial started by startDial opens, once it
// has; Attach calls it when it fails before the runner takes the socket.
func closeDialed(first <-chan dialed) {
	go func() {
		if d := <-first; d.conn != nil {
			_ = d.conn.Close(int(relayleg.CloseNormal), "")
		}
	}()
}

// dial opens one socket to the relay within HandshakeTimeout, with the
// credential asked for now: a credential may expire, so none is kept from
// an earlier dial.
func dial(ctx context.Context, o *Options) (Conn, error) {
	ctx, cancel := handshakeContext(ctx, o.HandshakeTimeout)
	defer cancel()
	credential, err := o.Credential(ctx)
	switch {
	case errors.Is(err, ErrSuperseded):
		return nil, err // fatal: the attachment ends without dialling
	case err != nil:
		return nil, wrap(ErrUnreachable, "the Credential function failed", timedOut(ctx, err))
	}
	protocols := []string{relayleg.Subprotocol, relayleg.BearerSubprotocol(credential)}
	conn, err := o.Transport.Dial(ctx, o.URL, protocols)
	if err != nil {
		if ce, ok := errors.AsType[*CloseError](err); ok {
			return nil, closeError(ce)
		}
		if errors.Is(err, ErrBadOptions) {
			return nil, err // fatal: the Transport will never dial this URL
		}
		return nil, wrap(ErrUnreachable, o.URL, timedOut(ctx, err))
	}
	return conn, nil
}

// handshakeContext is ctx canceled after d with context.DeadlineExceeded
// as its cause. It is a timer of its own rather than context.WithTimeout:
// a deadline context links time's formatting into relay.wasm (the
// deadline's String), which costs more of the module than this does.
func handshakeContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// timedOut is err, or context.DeadlineExceeded when the handshake's time
// ran out (ctx says canceled then, and its cause says why).
func timedOut(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(err, context.Canceled) && errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return err
}

// readLoop parses what the socket delivers and hands it over a batch at a
// time. A frame that does not parse is dropped, as librelay's Reader would:
// one garbled frame does not prove the connection is unusable. A Conn that
// parses frames itself (RefFrameReader, FrameReader) hands them over as
// they are.
func readLoop(ctx context.Context, conn Conn, out chan<- inbound) {
	rr, refs := conn.(RefFrameReader)
	fr, parses := conn.(FrameReader)
	for {
		var in inbound
		switch {
		case refs:
			in.frames, in.err = rr.ReadRefFrames(ctx)
		case parses:
			var frames []librelay.Frame
			frames, in.err = fr.ReadFrames(ctx)
			in.frames = withoutRefs(frames)
		default:
			in = readMessages(ctx, conn)
		}
		err := in.err
		select {
		case out <- in:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// readMessages reads one batch of messages and parses them.
func readMessages(ctx context.Context, conn Conn) inbound {
	msgs, err := conn.Read(ctx)
	in := inbound{err: err}
	if len(msgs) > 0 {
		in.frames = make([]RefFrame, 0, len(msgs))
	}
	for _, m := range msgs {
		if f, perr := librelay.ParseFrame(m); perr == nil {
			in.frames = append(in.frames, RefFrame{Frame: f})
		}
	}
	return in
}

func withoutRefs(frames []librelay.Frame) []RefFrame {
	out := make([]RefFrame, len(frames))
	for i, f := range frames {
		out[i].Frame = f
	}
	return out
}

// serve runs one connection: hello, welcome, resume, then frames both ways
// until something ends it.
func (r *runner) serve() error {
	l := r.l
	if err := r.hello(); err != nil {
		return err
	}
	l.answer.set(r.o.HandshakeTimeout)
	for {
		var err error
		select {
		case in := <-l.frames:
			if in.err != nil {
				return r.readError(in.err)
			}
			err = r.handleBatch(in.frames)
		case c := <-r.a.cmds:
			err = r.command(c)
		case <-r.a.wake:
			err = r.wake()
		case <-l.answer.C():
			if !l.answer.overslept() {
				err = wrap(ErrUnreachable, "the relay did not answer in time", context.DeadlineExceeded)
			}
		case <-l.resumeDue.C():
			err = r.resumeOverdue()
		case <-l.hbEvery.C():
			err = r.heartbeat()
		case <-l.hbDue.C():
			if !l.hbDue.overslept() {
				err = ErrHeartbeatTimeout
			}
		case <-l.redeliver.C():
			l.redeliver.stop()
			err = r.resume()
			if err == nil {
				err = r.flush() // the unsequenced messages held: no resume brings them
			}
		}
		if err == nil {
			err = r.catchUp()
		}
		if err != nil {
			return err
		}
		r.commit()
	}
}

// catchUp handles what waited while a delivery was awaited: the frames that
// arrived meanwhile, in order, and the Resume calls made meanwhile.
func (r *runner) catchUp() error {
	l := r.l
	for len(l.backlog) > 0 || len(r.later) > 0 {
		if l.broken != nil {
			return l.broken
		}
		if len(l.backlog) > 0 {
			// What the last delivery moved is stored before the next one
			// is awaited: a handler that answers later (a Promise, worker
			// mode's page) would otherwise hold every commit of a stream
			// that keeps arriving until the stream pauses.
			r.commit()
			b := l.backlog
			l.backlog = nil
			if err := r.handleBatch(b); err != nil {
				return err
			}
			continue
		}
		c := r.later[0]
		r.later = r.later[1:]
		if err := r.command(c); err != nil {
			return err
		}
	}
	return l.broken
}

// readError explains why the socket ended. A close code the client acts on
// wins; otherwise the relay.error that preceded the close says more than the
// close itself.
func (r *runner) readError(err error) error {
	ce, ok := errors.AsType[*CloseError](err)
	if !ok {
		return wrap(ErrUnreachable, "connection lost", err)
	}
	if mapped := closeError(ce); mapped != error(ce) {
		return mapped
	}
	if r.l.relayErr != nil {
		return r.l.relayErr
	}
	return ce
}

// command handles an API call while connected.
func (r *runner) command(c command) error {
	switch c := c.(type) {
	case *sendCmd:
		r.enqueue(c)
	case *resumeCmd:
		err := r.rewind(c.after)
		if fatal(err) {
			return err // Close or Detach while the rewind waited for a delivery
		}
		if err == nil && r.l.welcomed {
			err = r.resume()
		}
		c.done <- err
	case detachCmd:
		if r.l.welcomed {
			_ = r.writeFrame(&librelay.Frame{Type: librelay.TypeACPDetach, Instance: r.o.Instance, Session: r.pos.session})
		}
		return ErrDetached
	case closeCmd:
		return c.cause
	}
	return nil
}

// wake acts on the platform's signals: offline drops the connection at once,
// a probe checks the socket now (check).
func (r *runner) wake() error {
	if r.a.offline.Load() {
		return ErrOffline
	}
	if r.a.probe.Swap(false) {
		return r.check()
	}
	return nil
}

// check sends a heartbeat now, to learn whether the socket still works
// after the page was away, and holds sends until the relay acks it
// (checking); an ack missing past the heartbeat timeout ends the
// connection, and the held sends go out on the next one. A heartbeat
// already in flight does not do: it was sent before the page went away, and
// its ack may have been received before the socket died. One check at a
// time: a second probe while one runs (visibility and pageshow together)
// waits for the same ack.
func (r *runner) check() error {
	l := r.l
	if !l.welcomed {
		return nil // the handshake's own deadline is running, and sends wait for the resume
	}
	if l.checkID != "" && l.checkID == l.hbID {
		return nil
	}
	l.hbEvery.set(r.o.Heartbeat.Interval)
	l.hbID = r.newID("hb-")
	l.checkID = l.hbID
	l.hbDue.set(r.o.Heartbeat.Timeout)
	return r.writeFrame(&librelay.Frame{Type: librelay.TypeHeartbeat, ID: l.hbID})
}

func (r *runner) hello() error {
	nonce, err := newNonce()
	if err != nil {
		return wrap(ErrProtocol, "no randomness for a nonce", err)
	}
	r.l.nonce, r.l.helloID = nonce, r.newID("hello-")
	f, err := helloFrame(r.o, r.l.helloID, r.pos.session, nonce)
	if err != nil {
		return wrap(ErrProtocol, "encoding hello", err)
	}
	return r.writeFrame(&f)
}

// helloFrame is the hello this client sends; Options.check measures the
// largest one it can become.
func helloFrame(o *Options, id, session string, nonce []byte) (librelay.Frame, error) {
	payload, err := librelay.Hello{
		ProtocolVersion: librelay.ProtocolVersion,
		Instance:        o.Instance,
		Agent:           o.Agent,
		Nonce:           nonce,
	}.MarshalJSON()
	return librelay.Frame{
		Type: librelay.TypeHello, ID: id,
		Instance: o.Instance, Session: session, Payload: payload,
	}, err
}

// welcome checks the relay's answer to hello and takes the attachment id it
// grants. Only a welcome that verifies makes the connection usable.
//
// An absent payload is the zero Welcome, as Frame.DecodePayload makes it
// (spec 001), and is judged as that: version 0, which this client does not
// speak. A welcome this client cannot read, when a relay key is pinned, is
// a relay that did not prove it holds the key, which no redial cures (spec
// 000: a fatal error, not a transient one): a signature spelled other than
// as padded standard base64 (librelay.Welcome) would otherwise be
// redialled for ever. Without a pinned key nothing had to be proved, and an
// unreadable welcome stays a protocol error, retried.
func (r *runner) welcome(f *librelay.Frame) error {
	l := r.l
	var w librelay.Welcome
	if len(f.Payload) > 0 {
		if err := w.UnmarshalJSON(f.Payload); err != nil {
			why := ErrProtocol
			if r.o.RelayKey != nil {
				why = ErrBadRelaySignature
			}
			return wrap(why, "relay.welcome could not be read", err)
		}
	}
	if w.ProtocolVersion != librelay.ProtocolVersion {
		return wrap(ErrUnsupportedVersion, "relay selected version "+uitoa(uint64(max(w.ProtocolVersion, 0))), nil)
	}
	if r.o.RelayKey != nil {
		if err := verifyWelcome(r.o.RelayKey, l.nonce, w.ProtocolVersion, r.o.Instance, w.Signature); err != nil {
			return wrap(ErrBadRelaySignature, "", err)
		}
	}
	if f.Session == "" {
		return wrap(ErrProtocol, "relay.welcome grants no attachment id", nil)
	}
	l.retryAfter = r.o.Backoff.retryAfter(w.RetryAfterSeconds)
	l.reclaimed = r.pos.session != "" && f.Session == r.pos.session
	r.adopt(f.Session)
	r.gapAt, r.gapRepeats = noGap, 0 // this connection resumes anyway; its gaps are its own
	l.welcomed, l.welcomedAt = true, time.Now()
	l.answer.stop()
	l.hbEvery.set(r.o.Heartbeat.Interval)
	r.setState(StateChange{State: Open, Attempt: r.attempt})
	if r.opened != nil {
		r.opened <- nil
		r.opened = nil
	}
	if err := r.resume(); err != nil {
		return err
	}
	if !r.resumable || !l.reclaimed {
		// Sends wait for the resume's answer only so that they follow what
		// the application missed. A stream this connection starts (the
		// first, or a new id granted) has missed nothing, and a runtime
		// that did not resume the last time may never answer: either way
		// the runtime is asked, but what the application sends does not
		// wait. Against contenox as it ships, a page's first ACP request
		// would otherwise wait out ResumeTimeout on every first load.
		r.streamReady()
	}
	return nil
}

// adopt takes the granted attachment id. A different id than the one asked
// for means the old stream cannot be reclaimed: its cursor means nothing on
// the new one, and whatever followed it is lost. That is told whether or
// not the stream was sequenced: the runtime's ACP sessions belonged to the
// old id (contenox drops them when the relay detaches it, after its
// grace), so an application that goes on with them is answered "unknown
// session" until it hears it must start a new one.
func (r *runner) adopt(session string) {
	if session == r.pos.session {
		return
	}
	if r.pos.session != "" {
		r.evicted(Eviction{AfterSeq: r.pos.high, Reason: EvictedSessionReplaced})
	}
	r.pos.adopt(session)
}

// resume asks the runtime to continue after the taken cursor.
func (r *runner) resume() error {
	payload, err := librelay.Resume{AfterSeq: r.pos.taken}.MarshalJSON()
	if err != nil {
		return wrap(ErrProtocol, "encoding session.resume", err)
	}
	r.l.resumeID = r.newID("resume-")
	r.l.resumeDue.set(r.o.ResumeTimeout)
	return r.writeFrame(&librelay.Frame{
		Type: librelay.TypeResume, ID: r.l.resumeID,
		Instance: r.o.Instance, Session: r.pos.session, Payload: payload,
	})
}

// resumeOverdue ends the resume's wait. The answer may be in already,
// received by the browser but not yet read: a page that stalled (a phone, a
// long redraw) has its timers and its socket's messages come due together,
// and the timer may reach Go first. So the relay ends the wait instead: a
// heartbeat goes out now, and its ack comes after everything the relay sent
// before it. If the answer was not among that, the resume is given up on
// (notResuming, at the ack); a relay that does not ack in time ends the
// connection as any unanswered heartbeat does.
func (r *runner) resumeOverdue() error {
	l := r.l
	l.resumeDue.stop()
	if l.answerWaiting() {
		return nil // it came during a delivery; catchUp takes it
	}
	l.probed = l.resumeID
	checked := l.checkID != "" && l.checkID == l.hbID
	l.hbID = r.newID("hb-") // replaces one in flight: its ack would come too soon
	if checked {
		l.checkID = l.hbID // a later ack answers the liveness check too
	}
	l.hbDue.set(r.o.Heartbeat.Timeout)
	return r.writeFrame(&librelay.Frame{Type: librelay.TypeHeartbeat, ID: l.hbID})
}

// probeAcked is the ack of the heartbeat in flight. For resumeOverdue's,
// whatever the relay sent before it has been read, so a resume still
// unanswered is given up on. For a liveness check's (check), the socket
// works: the sends it held go out, once the stream is ready.
func (r *runner) probeAcked() {
	l := r.l
	id := l.probed
	l.probed = ""
	if id != "" && id == l.resumeID && !l.answerWaiting() {
		r.notResuming()
	}
	if l.checkID != "" {
		l.checkID = ""
		if l.ready && l.broken == nil {
			r.drain()
		}
	}
}

// notResuming gives up on the current resume, left unanswered or refused
// (resumeRefused). A runtime without retention (contenox as it ships) never
// answers one; that is a fact about the runtime, not a broken connection,
// so the connection stays, sends are released, and the attachment says it
// cannot resume until the runtime shows otherwise (an answer on a later
// connection, or a sequenced frame).
// On a connection that took up a stream already under way (a redial, a
// reload), whatever the runtime sent while the client was away is gone,
// and OnEvicted says so (reason "not_resumed") instead of the loss passing
// unseen.
func (r *runner) notResuming() {
	l := r.l
	l.resumeDue.stop()
	l.resumeID = ""
	r.setResumable(false)
	if l.reclaimed && !l.lossTold {
		l.lossTold = true
		r.evicted(Eviction{AfterSeq: r.pos.taken, Reason: EvictedNotResumed})
	}
	r.streamReady()
}

// setResumable records what the runtime has shown about resuming, and tells
// the application when it changed.
func (r *runner) setResumable(v bool) {
	if r.resumable == v {
		return
	}
	r.resumable = v
	r.a.resumable.Store(v)
	r.setState(StateChange{State: r.a.State(), Attempt: r.attempt})
}

func (r *runner) heartbeat() error {
	l := r.l
	if !l.welcomed {
		return nil
	}
	l.hbEvery.set(r.o.Heartbeat.Interval)
	if l.hbID != "" {
		return nil // one probe at a time; its own deadline is running
	}
	l.hbID = r.newID("hb-")
	l.hbDue.set(r.o.Heartbeat.Timeout)
	return r.writeFrame(&librelay.Frame{Type: librelay.TypeHeartbeat, ID: l.hbID})
}
