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
func (r *runner) connection() error {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	r.welcomed = false
	conn, err := r.dial(ctx)
	if err != nil {
		return err
	}
	r.conn = conn
	frames := make(chan inbound, 1)
	go readLoop(ctx, conn, frames)
	err = r.serve(frames)
	r.flush()
	r.commit()
	code, reason := closeCodeFor(err)
	_ = conn.Close(code, reason)
	r.conn = nil
	r.stopAlarms()
	return err
}

func (r *runner) dial(ctx context.Context) (Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.HandshakeTimeout)
	defer cancel()
	credential, err := r.o.Credential(ctx)
	if err != nil {
		return nil, wrap(ErrUnreachable, "the Credential function failed", err)
	}
	protocols := []string{relayleg.Subprotocol, relayleg.BearerSubprotocol(credential)}
	conn, err := r.o.Transport.Dial(ctx, r.o.URL, protocols)
	if err != nil {
		if ce, ok := errors.AsType[*CloseError](err); ok {
			return nil, closeError(ce)
		}
		return nil, wrap(ErrUnreachable, "", err)
	}
	return conn, nil
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
func (r *runner) serve(frames <-chan inbound) error {
	r.welcomed, r.ready, r.resumeID, r.hbID, r.relayErr = false, false, "", "", nil
	if err := r.hello(); err != nil {
		return err
	}
	r.answer.set(r.o.HandshakeTimeout)
	for {
		var err error
		select {
		case in := <-frames:
			if in.err != nil {
				return r.readError(in.err)
			}
			err = r.handleBatch(in.frames)
		case c := <-r.a.cmds:
			err = r.command(c)
		case <-r.a.wake:
			err = r.wake()
		case <-r.answer.C():
			err = wrap(ErrUnreachable, "the relay did not answer in time", context.DeadlineExceeded)
		case <-r.hbEvery.C():
			err = r.heartbeat()
		case <-r.hbDue.C():
			err = ErrHeartbeatTimeout
		case <-r.redeliver.C():
			r.redeliver.stop()
			err = r.resume()
		}
		if err != nil {
			return err
		}
		r.commit()
	}
}

func (r *runner) stopAlarms() {
	r.answer.stop()
	r.hbEvery.stop()
	r.hbDue.stop()
	r.redeliver.stop()
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
	if r.relayErr != nil {
		return r.relayErr
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
		if err == nil && r.welcomed {
			err = r.resume()
		}
		c.done <- err
	case detachCmd:
		if r.welcomed {
			_ = r.writeFrame(&librelay.Frame{Type: librelay.TypeACPDetach, Instance: r.o.Instance, Session: r.saved.Session})
		}
		return ErrDetached
	case closeCmd:
		return ErrClosed
	}
	return nil
}

// wake acts on the platform's signals: offline drops the connection at once,
// a probe sends a heartbeat now.
func (r *runner) wake() error {
	if r.a.offline.Load() {
		return ErrOffline
	}
	if r.a.probe.Swap(false) {
		return r.heartbeat()
	}
	return nil
}

func (r *runner) hello() error {
	nonce, err := librelay.NewNonce()
	if err != nil {
		return wrap(ErrProtocol, "no randomness for a nonce", err)
	}
	payload, err := librelay.Hello{
		ProtocolVersion: librelay.ProtocolVersion,
		Instance:        r.o.Instance,
		Agent:           r.o.Agent,
		Nonce:           nonce,
	}.MarshalJSON()
	if err != nil {
		return wrap(ErrProtocol, "encoding hello", err)
	}
	r.nonce, r.helloID = nonce, r.newID("hello-")
	return r.writeFrame(&librelay.Frame{
		Type: librelay.TypeHello, ID: r.helloID,
		Instance: r.o.Instance, Session: r.saved.Session, Payload: payload,
	})
}

// welcome checks the relay's answer to hello and takes the attachment id it
// grants. Only a welcome that verifies makes the connection usable.
func (r *runner) welcome(f *librelay.Frame) error {
	var w librelay.Welcome
	if err := w.UnmarshalJSON(f.Payload); err != nil {
		return wrap(ErrProtocol, "relay.welcome", err)
	}
	if w.ProtocolVersion != librelay.ProtocolVersion {
		return wrap(ErrUnsupportedVersion, "relay selected version "+uitoa(uint64(max(w.ProtocolVersion, 0))), nil)
	}
	if r.o.RelayKey != nil {
		if err := librelay.VerifyWelcome(r.o.RelayKey, r.nonce, w.ProtocolVersion, r.o.Instance, w.Signature); err != nil {
			return wrap(ErrBadRelaySignature, "", err)
		}
	}
	if f.Session == "" {
		return wrap(ErrProtocol, "relay.welcome grants no attachment id", nil)
	}
	r.retryAfter = r.o.Backoff.retryAfter(w.RetryAfterSeconds)
	r.adopt(f.Session)
	r.welcomed, r.welcomedAt = true, time.Now()
	r.answer.stop()
	r.hbEvery.set(r.o.Heartbeat.Interval)
	r.setState(StateChange{State: Open, Attempt: r.attempt})
	if r.opened != nil {
		r.opened <- nil
		r.opened = nil
	}
	return r.resume()
}

// adopt takes the granted attachment id. A different id than the one asked
// for means the old stream cannot be reclaimed: its cursor means nothing on
// the new one, and whatever followed it is lost.
func (r *runner) adopt(session string) {
	if session == r.saved.Session {
		return
	}
	if r.saved.Session != "" && r.saved.Cursor > 0 {
		r.evicted(Eviction{AfterSeq: r.saved.Cursor, Reason: EvictedSessionReplaced})
	}
	r.saved = Saved{Session: session}
	r.cursor, r.accepted = 0, 0
	r.a.publish(session, 0)
	r.dirty = true
}

// resume asks the runtime to continue after the accepted cursor.
func (r *runner) resume() error {
	payload, err := librelay.Resume{AfterSeq: r.accepted}.MarshalJSON()
	if err != nil {
		return wrap(ErrProtocol, "encoding session.resume", err)
	}
	r.resumeID = r.newID("resume-")
	r.answer.set(r.o.HandshakeTimeout)
	return r.writeFrame(&librelay.Frame{
		Type: librelay.TypeResume, ID: r.resumeID,
		Instance: r.o.Instance, Session: r.saved.Session, Payload: payload,
	})
}

func (r *runner) heartbeat() error {
	if !r.welcomed {
		return nil
	}
	r.hbEvery.set(r.o.Heartbeat.Interval)
	if r.hbID != "" {
		return nil // one probe at a time; its own deadline is running
	}
	r.hbID = r.newID("hb-")
	r.hbDue.set(r.o.Heartbeat.Timeout)
	return r.writeFrame(&librelay.Frame{Type: librelay.TypeHeartbeat, ID: r.hbID})
}
