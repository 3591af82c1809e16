package client

import "github.com/relaywasm/relaywasm/librelay"

// handleBatch acts on one batch of frames, then hands the application every
// message the batch made deliverable in one call, and the Store one commit.
func (r *runner) handleBatch(frames []RefFrame) error {
	for i := range frames {
		if err := r.handleFrame(&frames[i]); err != nil {
			return err
		}
	}
	r.flush()
	return nil
}

// handleFrame makes the one decision per frame the protocol asks for:
// control (relay.*) is for this client, everything else is the stream.
func (r *runner) handleFrame(f *RefFrame) error {
	switch {
	case f.Type == librelay.TypeWelcome && !r.welcomed && f.ReplyTo == r.helloID:
		return r.welcome(&f.Frame)
	case f.Type == librelay.TypeError:
		return r.relayError(&f.Frame)
	case f.Type == librelay.TypeHeartbeat:
		if f.IsRequest() {
			return r.writeFrame(&librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
		}
	case f.Type == librelay.TypeAck:
		if f.ReplyTo != "" && f.ReplyTo == r.hbID {
			r.hbID = ""
			r.hbDue.stop()
		}
	case librelay.IsControl(f.Type):
		if reply, owed := librelay.Unsupported(f.Frame); owed {
			return r.writeFrame(&reply)
		}
	case !r.welcomed:
		// Nothing is routed to a socket before its welcome.
	case f.Type == librelay.TypeResumed:
		return r.resumed(&f.Frame)
	default:
		return r.cargo(f)
	}
	return nil
}

// cargo takes a stream frame in order: a sequenced frame only when it is the
// next one, so the application never sees a gap, a duplicate or a reordering.
func (r *runner) cargo(f *RefFrame) error {
	isACP := f.Type == librelay.TypeACPMessage
	if f.Seq == 0 {
		if isACP {
			r.pending = append(r.pending, pendingMsg{deliver: true, msg: Message{Payload: f.Payload, Session: f.Session, Ref: f.Ref}})
		} else if f.IsRequest() {
			reply := librelay.NewError(f.Frame, librelay.CodeUnsupportedType, "this client handles only "+librelay.TypeACPMessage)
			return r.writeFrame(&reply)
		}
		return nil
	}
	switch {
	case f.Seq <= r.accepted:
		return nil // a duplicate: delivered before, or replayed twice
	case f.Seq > r.accepted+1:
		return r.gap()
	}
	r.accepted = f.Seq
	r.pending = append(r.pending, pendingMsg{deliver: isACP, msg: Message{Payload: f.Payload, Seq: f.Seq, Session: f.Session, Replay: f.Seq <= r.saved.Cursor, Ref: f.Ref}})
	return nil
}

// gap answers a frame from beyond the next seq by resuming from the cursor
// instead of delivering out of order. A resume already on its way, or one
// scheduled after a handler refusal, will fill the gap.
func (r *runner) gap() error {
	if r.resumeID != "" || r.redeliver.C() != nil {
		return nil
	}
	r.flush()
	if r.redeliver.C() != nil {
		return nil // the handler refused; the scheduled resume covers it
	}
	return r.resume()
}

// resumed takes the runtime's answer to the current resume.
func (r *runner) resumed(f *librelay.Frame) error {
	if f.ReplyTo == "" || f.ReplyTo != r.resumeID {
		return nil // the answer to a resume since superseded
	}
	var rs librelay.Resumed
	if err := rs.UnmarshalJSON(f.Payload); err != nil {
		return wrap(ErrProtocol, "session.resumed", err)
	}
	r.resumeID = ""
	r.answer.stop()
	from := rs.FromSeq
	if from == 0 {
		from = r.accepted + 1
	}
	if rs.Evicted || from > r.accepted+1 {
		r.flush()
		r.evicted(Eviction{AfterSeq: r.accepted, FromSeq: from, Reason: EvictedRetention})
		if from > r.accepted+1 {
			r.skipTo(from - 1)
		}
	}
	r.streamReady()
	return nil
}

// skipTo moves the cursor over frames that are gone.
func (r *runner) skipTo(seq uint64) {
	r.cursor, r.accepted = seq, seq
	r.saved.Cursor = max(r.saved.Cursor, seq)
	r.a.cursor.Store(seq)
	r.dirty = true
}

// streamReady lets queued sends out once the first resume is answered, so
// what the application sends follows what it missed.
func (r *runner) streamReady() {
	if !r.ready {
		r.ready = true
		r.drain()
	}
}

func (r *runner) relayError(f *librelay.Frame) error {
	var e librelay.Error
	_ = e.UnmarshalJSON(f.Payload) // an unreadable error is still an error
	switch {
	case f.ReplyTo == "":
		r.relayErr = relayError(e.Code, e.Message) // a close follows; this says why
	case f.ReplyTo == r.helloID && !r.welcomed:
		if err := relayError(e.Code, e.Message); err != nil {
			return err
		}
		return wrap(ErrProtocol, "the relay refused the hello: "+e.Code+" "+e.Message, nil)
	case f.ReplyTo == r.resumeID:
		return r.resumeRefused(e)
	}
	return nil
}

// resumeRefused handles an error answer to a resume. cursor_evicted means the
// runtime no longer knows the stream at all (it restarted): what followed the
// cursor is gone, the stream starts again at seq 1, and the attachment stays.
func (r *runner) resumeRefused(e librelay.Error) error {
	r.resumeID = ""
	r.answer.stop()
	if e.Code != librelay.CodeCursorEvicted {
		if err := relayError(e.Code, e.Message); err != nil {
			return err
		}
		return wrap(ErrProtocol, "the runtime refused the resume: "+e.Code+" "+e.Message, nil)
	}
	r.flush()
	r.evicted(Eviction{AfterSeq: r.accepted, Reason: EvictedCursor})
	r.cursor, r.accepted, r.saved.Cursor = 0, 0, 0
	r.a.cursor.Store(0)
	r.dirty = true
	r.streamReady()
	return nil
}

// flush delivers what is pending and advances the cursor over what the
// handler accepted. If it refused a message, delivery stops there and a
// resume fetches the rest again after a backoff, so a failing handler neither
// loses messages nor spins.
func (r *runner) flush() {
	if len(r.pending) == 0 {
		return
	}
	handled, refused := r.deliver()
	for i := range r.pending {
		p := &r.pending[i]
		if p.deliver {
			if handled == 0 {
				break
			}
			handled--
			r.record(p)
		}
		if p.msg.Seq > 0 {
			r.cursor = p.msg.Seq
		}
	}
	clear(r.pending)
	r.pending = r.pending[:0]
	if r.cursor > r.saved.Cursor {
		r.saved.Cursor = r.cursor
		r.dirty = true // only what the Store holds makes a commit
	}
	r.a.cursor.Store(r.cursor)
	if refused {
		r.accepted = r.cursor
		r.resumeID = ""
		r.answer.stop()
		r.redeliver.set(r.o.Backoff.delay(r.failures))
		r.failures++
	} else {
		r.failures = 0
	}
}

// deliver hands the pending ACP messages to the application in one call.
func (r *runner) deliver() (handled int, refused bool) {
	batch := r.batch[:0]
	for _, p := range r.pending {
		if p.deliver {
			batch = append(batch, p.msg)
		}
	}
	if len(batch) > 0 {
		n, err := r.o.OnMessages(batch)
		handled = min(max(n, 0), len(batch))
		refused = err != nil || handled < len(batch)
	}
	clear(batch)
	r.batch = batch[:0]
	return handled, refused
}

// record adds a delivered message to the transcript, once: a message
// redelivered after a Resume to an earlier cursor is already there.
func (r *runner) record(p *pendingMsg) {
	if r.o.History > 0 && (p.msg.Seq == 0 || p.msg.Seq > r.saved.Cursor) {
		r.entries = append(r.entries, Entry{Seq: p.msg.Seq, Payload: p.msg.Payload})
		r.dirty = true
	}
}
