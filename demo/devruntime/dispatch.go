package devruntime

import (
	"errors"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// readLoop reads frames from the relay until the connection ends. A frame
// that fails validation is skipped: it says nothing about the next one.
func (r *Runtime) readLoop(c *conn, rd *librelay.Reader) error {
	for {
		f, err := rd.ReadFrame()
		if err != nil {
			if isPerFrame(err) {
				r.log.Debug("skipping a bad frame from the relay", "err", err)
				continue
			}
			return err
		}
		c.active.Store(true)
		if err := r.dispatch(c, f); err != nil {
			return err
		}
	}
}

// isPerFrame reports whether a read error concerns only the frame read, not
// the stream: librelay's Reader carries on after anything but a framing error.
func isPerFrame(err error) bool {
	return !errors.Is(err, librelay.ErrFrameTooLarge) && !errors.Is(err, librelay.ErrReaderClosed) &&
		(errors.Is(err, librelay.ErrMalformedFrame) || errors.Is(err, librelay.ErrEmptyType) ||
			errors.Is(err, librelay.ErrTypeTooLong) || errors.Is(err, librelay.ErrIDTooLong) ||
			errors.Is(err, librelay.ErrControlChar) || errors.Is(err, librelay.ErrBothIDs) ||
			errors.Is(err, librelay.ErrSessionAlone) || errors.Is(err, librelay.ErrNotUTF8) ||
			errors.Is(err, librelay.ErrTraceTooLong) || errors.Is(err, librelay.ErrTraceCharset))
}

// dispatch acts on one frame from the relay. Control frames are for this
// connection; everything else belongs to the attachment named by session.
func (r *Runtime) dispatch(c *conn, f librelay.Frame) error {
	if librelay.IsControl(f.Type) {
		return r.control(c, f)
	}
	if f.Session == "" || f.Instance != r.cfg.Instance {
		r.log.Debug("dropping a frame with no route here", "type", f.Type)
		return nil
	}
	switch f.Type {
	case librelay.TypeACPMessage:
		r.session(f.Session, true).feed(f.Payload)
	case librelay.TypeResume:
		if !r.cfg.NoResume { // contenox as it ships does not answer at all
			r.resume(f)
		}
	case librelay.TypeACPDetach:
		r.dropSession(f.Session)
	default:
		if f.IsRequest() {
			r.sendOn(c, librelay.NewError(f, librelay.CodeUnsupportedType, "the dev runtime does not handle "+f.Type))
		}
	}
	return nil
}

// control answers heartbeats, ends the connection on a relay.error that
// ends it, and answers any other control request as unsupported.
func (r *Runtime) control(c *conn, f librelay.Frame) error {
	switch f.Type {
	case librelay.TypeHeartbeat:
		if f.IsRequest() {
			r.sendOn(c, librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
		}
	case librelay.TypeAck:
	case librelay.TypeError:
		var e librelay.Error
		_ = e.UnmarshalJSON(f.Payload)
		r.log.Warn("relay error", "code", e.Code, "message", e.Message)
		if f.Session == "" && e.Code == relayleg.CodeSuperseded {
			return refusal(e) // fatal: another runtime holds the instance now
		}
	default:
		if reply, ok := librelay.Unsupported(f); ok {
			r.sendOn(c, reply)
		}
	}
	return nil
}

// resume answers session.resume. An attachment this runtime holds no state
// for can only start from nothing: a cursor of 0 starts a new stream, any
// other cursor belongs to a stream this runtime no longer has.
func (r *Runtime) resume(f librelay.Frame) {
	var req librelay.Resume
	if err := req.UnmarshalJSON(f.Payload); err != nil && len(f.Payload) > 0 {
		if f.IsRequest() {
			r.sendFrame(librelay.NewError(f, librelay.CodeMalformedFrame, "session.resume payload is not a Resume"))
		}
		return
	}
	s := r.session(f.Session, req.AfterSeq == 0)
	if s == nil {
		r.sendFrame(librelay.NewError(f, librelay.CodeCursorEvicted, "no stream is retained for this session"))
		return
	}
	s.resume(f, req.AfterSeq)
}
