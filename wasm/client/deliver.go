package client

import (
	"math/rand/v2"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// handleBatch acts on one batch of frames, then hands the application every
// message the batch made deliverable in one call, and the Store one commit.
func (r *runner) handleBatch(frames []RefFrame) error {
	for i := range frames {
		if err := r.handleFrame(&frames[i]); err != nil {
			return err
		}
	}
	return r.flush()
}

// handleFrame makes the one decision per frame the protocol asks for:
// control (relay.*) is for this client, everything else is the stream.
func (r *runner) handleFrame(f *RefFrame) error {
	l := r.l
	switch {
	case f.Type == librelay.TypeWelcome && !l.welcomed && f.ReplyTo == l.helloID:
		r.carryHeld()
		r.keepLossPlace(f.Session)
		return r.welcome(&f.Frame)
	case f.Type == librelay.TypeError:
		return r.relayError(&f.Frame)
	case r.answerControl(&f.Frame):
	case librelay.IsControl(f.Type):
		if reply, owed := librelay.Unsupported(f.Frame); owed {
			return r.writeFrame(&reply)
		}
	case !l.welcomed:
		// Nothing is routed to a socket before its welcome.
	case f.Type == librelay.TypeResumed:
		return r.resumed(&f.Frame)
	default:
		return r.cargo(f)
	}
	return l.broken
}

// answerControl answers the relay's heartbeats and takes the acks of the
// client's own (one of which may end a resume's wait: probeAcked), and
// reports whether f was one of those. They keep the connection alive, so
// they are answered even while a delivery is awaited.
func (r *runner) answerControl(f *librelay.Frame) bool {
	l := r.l
	switch f.Type {
	case librelay.TypeHeartbeat:
		if f.IsRequest() {
			if err := r.writeFrame(&librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID}); err != nil && l.broken == nil {
				l.broken = err
			}
		}
	case librelay.TypeAck:
		if f.ReplyTo != "" && f.ReplyTo == l.hbID {
			l.hbID = ""
			l.hbDue.stop()
			r.probeAcked()
		}
	default:
		return false
	}
	return true
}

// cargo takes a stream frame in order: a sequenced frame only when it is the
// next one, so the application never sees a gap, a duplicate or a reordering.
// A request of a type this client does not handle gets its one reply (spec
// 000: the id obliges it, whatever the type): at once when unsequenced, and
// when the cursor moves over it when sequenced (flush).
// An acp.message with an envelope id is delivered and not answered: no
// spec names the answer to a handled message, and ACP correlates by the
// JSON-RPC id inside (README, "The relay's browser leg").
func (r *runner) cargo(f *RefFrame) error {
	isACP := f.Type == librelay.TypeACPMessage
	if f.Seq == 0 {
		if isACP {
			r.unsequenced(pendingMsg{deliver: true, msg: Message{Payload: f.Payload, Session: f.Session, Trace: f.Trace, Ref: f.Ref}})
		} else if reply := unhandled(&f.Frame); reply != nil {
			return r.writeFrame(reply)
		}
		return nil
	}
	r.setResumable(true) // a runtime that stamps seq keeps what it stamped
	switch {
	case f.Seq <= r.pos.taken:
		return nil // a duplicate: delivered before, or replayed twice
	case !r.pos.follows(f.Seq):
		return r.gap()
	}
	r.pos.take(f.Seq)
	p := pendingMsg{deliver: isACP, msg: Message{
		Payload: f.Payload, Seq: f.Seq, Session: f.Session, Trace: f.Trace, Replay: r.pos.replay(f.Seq), Ref: f.Ref,
	}}
	if !isACP {
		p.owed = unhandled(&f.Frame)
	}
	r.pending = append(r.pending, p)
	return nil
}

// unhandled is the reply owed to a cargo frame this client does not handle,
// nil when it is no request.
func unhandled(f *librelay.Frame) *librelay.Frame {
	if !f.IsRequest() || f.IsResponse() {
		return nil
	}
	reply := librelay.NewError(*f, librelay.CodeUnsupportedType, "this client handles only "+librelay.TypeACPMessage)
	return &reply
}

// gap answers a frame from beyond the next seq by resuming from the cursor
// instead of delivering out of order. A resume already on its way, or one
// scheduled after a handler refusal, will fill the gap.
//
// A gap at the cursor the last one was resumed from, with nothing taken in
// between, is the same gap again: the runtime's replay did not fill it (a
// frame the relay could not carry, say). Chasing it at once would resume as
// fast as the round trip allows, for as long as the page is open, so each
// repeat waits longer (gapDelay); any progress starts the count again.
func (r *runner) gap() error {
	l := r.l
	if l.resumeID != "" || l.redeliver.C() != nil {
		return nil
	}
	if err := r.flush(); err != nil {
		return err
	}
	if l.redeliver.C() != nil {
		return nil // the handler refused; the scheduled resume covers it
	}
	if r.gapAt == r.pos.taken {
		r.gapRepeats++
		l.redeliver.set(gapDelay(r.o.Backoff, r.gapRepeats))
		return nil
	}
	r.gapAt, r.gapRepeats = r.pos.taken, 0
	return r.resume()
}

// noGap is gapAt before any gap was seen.
const noGap = ^uint64(0)

// gapDelay is the wait before the n-th resume (n ≥ 1) after the first for
// the same unfilled gap: half of min(Max, Initial·2ⁿ⁻¹) plus a random part
// of the other half. The floor is what bounds the rate: with the default
// Backoff (500ms, 30s) the waits are at least 0.25, 0.5, 1, 2, 4, 8 and
// then 15 s, so a gap that never fills costs at most 9 resumes in its first
// minute and 4 a minute after that.
func gapDelay(b Backoff, n int) time.Duration {
	ceiling := b.Initial
	for i := 1; i < n && ceiling < b.Max; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, b.Max)
	half := ceiling / 2
	return half + time.Duration(rand.Int64N(int64(ceiling-half)+1))
}

// resumed takes the runtime's answer to the current resume.
func (r *runner) resumed(f *librelay.Frame) error {
	l := r.l
	if f.ReplyTo == "" || f.ReplyTo != l.resumeID {
		return nil // the answer to a resume since superseded
	}
	// An absent payload is the zero Resumed, as Frame.DecodePayload makes it
	// (spec 001): it goes on after the cursor. DecodePayload itself would
	// link encoding/json into relay.wasm; UnmarshalJSON refuses empty input.
	var rs librelay.Resumed
	if len(f.Payload) > 0 {
		if err := rs.UnmarshalJSON(f.Payload); err != nil {
			return wrap(ErrProtocol, "session.resumed", err)
		}
	}
	l.resumeID = ""
	l.resumeDue.stop()
	r.resumeAnswered() // a runtime that resumes tells its losses itself
	r.setResumable(true)
	from := rs.FromSeq
	if from == 0 {
		from = r.pos.taken + 1
	}
	if rs.Evicted || from > r.pos.taken+1 {
		if err := r.flush(); err != nil {
			return err
		}
		r.evicted(Eviction{AfterSeq: r.pos.taken, FromSeq: from, Reason: EvictedRetention})
		if from > r.pos.taken+1 {
			r.pos.skipTo(from - 1)
		}
	}
	r.streamReady()
	return nil
}

// streamReady lets queued sends out once the first resume is answered (or
// given up on), so what the application sends follows what it missed; on a
// connection that starts its stream, at the welcome (see welcome).
func (r *runner) streamReady() {
	if !r.l.ready {
		r.l.ready = true
		r.drain()
	}
}

func (r *runner) relayError(f *librelay.Frame) error {
	l := r.l
	var e librelay.Error
	_ = e.UnmarshalJSON(f.Payload) // an unreadable error is still an error
	switch {
	case f.ReplyTo == "" && f.Seq > 0 && e.Code == relayleg.CodeFrameTooLarge:
		return r.tooLarge(f.Seq)
	case f.ReplyTo == "" && f.Session != "" && e.Code == relayleg.CodeFrameTooLarge:
		// The stand-in for an unsequenced frame: it names the session it
		// was for, where the notice before a close 4413 names none.
		return r.tooLargeUnsequenced()
	case f.ReplyTo == "":
		l.relayErr = relayError(e.Code, e.Message) // a close follows; this says why
	case f.ReplyTo == l.helloID && !l.welcomed:
		if err := relayError(e.Code, e.Message); err != nil {
			return err
		}
		return wrap(ErrProtocol, "the relay refused the hello: "+e.Code+" "+e.Message, nil)
	case f.ReplyTo == l.resumeID:
		return r.resumeRefused(e)
	}
	return nil
}

// tooLarge handles the relay's word that it could not carry frame seq to
// this client (frame_too_large on the browser leg): seq arrived, and is
// lost. It is reported in its place in the stream and the stream goes on
// after it, instead of a gap that every resume would bring back.
func (r *runner) tooLarge(seq uint64) error {
	if !r.l.welcomed || seq <= r.pos.taken {
		return nil // before the stream began here, or already passed
	}
	r.setResumable(true)
	if !r.pos.follows(seq) {
		return r.gap()
	}
	if err := r.flush(); err != nil {
		return err
	}
	if !r.pos.follows(seq) {
		return nil // the handler refused what came before; it comes again, and so will this
	}
	r.evicted(Eviction{AfterSeq: seq - 1, FromSeq: seq + 1, Reason: EvictedFrameTooLarge})
	r.pos.skipTo(seq)
	return nil
}

// tooLargeUnsequenced handles the relay's word that it could not carry an
// unsequenced frame to this client: it is reported in its place, after
// what arrived before it (held messages included) has been handled.
func (r *runner) tooLargeUnsequenced() error {
	if !r.l.welcomed {
		return nil
	}
	if err := r.flush(); err != nil {
		return err
	}
	if len(r.pending) == 0 {
		r.evicted(Eviction{AfterSeq: r.pos.handled, Reason: EvictedFrameTooLarge})
		return nil
	}
	r.pending = append(r.pending, lossMark(EvictedFrameTooLarge))
	return nil
}

// resumeRefused handles an error answer to a resume. cursor_evicted means the
// runtime no longer knows the stream at all (it restarted): what followed the
// cursor is gone, the stream starts again at seq 1, and the attachment stays.
// A code the client acts on wherever it comes (the relay's
// unknown_instance, say) ends the connection as it would elsewhere. Any
// other is the runtime's word that it does not resume: unsupported_type
// from one that does not handle session.resume (librelay.Unsupported), or
// a code this client does not know, which spec 000 says is never fatal. That is no broken connection:
// every redial would be refused the same way, with the sends held for
// ever, so it is taken as a resume left unanswered is (notResuming).
func (r *runner) resumeRefused(e librelay.Error) error {
	r.l.resumeID = ""
	r.l.resumeDue.stop()
	if err := relayError(e.Code, e.Message); err != nil {
		return err
	}
	if e.Code != librelay.CodeCursorEvicted {
		r.notResuming()
		return nil
	}
	r.setResumable(true)
	r.resumeAnswered() // the runtime answered: the loss it tells is all there is
	if err := r.flush(); err != nil {
		return err
	}
	r.evicted(Eviction{AfterSeq: r.pos.taken, Reason: EvictedCursor})
	r.pos.restart()
	r.streamReady()
	return nil
}

// flush delivers what is pending and advances the cursor over what the
// handler accepted. If it refused a message, delivery stops there and, after
// a backoff, the rest comes again, so a failing handler neither loses
// messages nor spins: a sequenced message is fetched again by a resume from
// the cursor; an unsequenced one, which no resume brings back (a runtime
// that does not number its messages keeps none), is held, with the
// unsequenced ones after it, and delivered again before anything newer
// (holding). It fails when Close or Detach came while the handler was
// running, or the connection failed meanwhile.
func (r *runner) flush() error {
	if r.quit != nil {
		return r.quit
	}
	if len(r.pending) == 0 || r.holding() {
		return nil
	}
	for r.flushOnce() && len(r.pending) > 0 && !r.holding() {
	}
	if r.quit != nil {
		return r.quit
	}
	return r.l.broken
}

// flushOnce delivers the pending messages up to the first loss mark and
// reports the loss there, and reports whether delivery goes on with what
// follows the mark.
func (r *runner) flushOnce() bool {
	handled, refused := r.deliver()
	var last uint64
	rest, marked := len(r.pending), false // rest: the first entry not passed
	for i := range r.pending {
		p := &r.pending[i]
		if isLoss(p) {
			rest, marked = i, !refused
			break
		}
		if p.deliver {
			if handled == 0 {
				rest = i
				break
			}
			handled--
			r.record(p)
		}
		r.answer(p)
		if p.msg.Seq > 0 {
			last = p.msg.Seq
		}
	}
	if last > 0 {
		r.pos.handle(last)
	}
	if marked {
		r.passMark(r.pending[rest].loss)
		rest++
	}
	kept := 0
	for _, p := range r.pending[rest:] {
		// After a refusal only the unsequenced entries stay (held messages
		// and loss marks): a resume brings the sequenced ones again.
		if !refused || p.msg.Seq == 0 {
			r.pending[kept] = p
			kept++
		}
	}
	clear(r.pending[kept:])
	r.pending = r.pending[:kept]
	if refused {
		l := r.l
		r.pos.refused()
		l.resumeID = ""
		l.resumeDue.stop()
		l.redeliver.set(r.o.Backoff.delay(r.failures))
		r.failures++
		return false
	}
	r.failures = 0
	return marked && r.quit == nil && r.l.broken == nil
}

// maxHeld bounds the unsequenced messages held for delivery again while a
// handler keeps refusing. Past it what arrives is dropped and the loss is
// reported in its place (OnEvicted, reason evicted), instead of memory
// growing for as long as the handler fails.
const maxHeld = maxBacklog

// holding reports whether the pending messages are held after a handler
// refusal, waiting for the redelivery backoff: then they, and what arrives
// after them, wait. There is no delivery without a connection either.
func (r *runner) holding() bool {
	return r.l == nil || (r.l.redeliver.C() != nil && r.pending[0].msg.Seq == 0)
}

// unsequenced takes an unsequenced message for delivery: at the end of this
// batch, or after the held ones. While messages are held (the last delivery
// was refused), one past maxHeld is dropped; the first of a run of those
// leaves a loss mark in its place.
func (r *runner) unsequenced(p pendingMsg) {
	n := len(r.pending)
	if n < maxHeld || r.failures == 0 || r.pending[0].msg.Seq != 0 {
		r.pending = append(r.pending, p)
		return
	}
	if !isTold(&r.pending[n-1]) {
		r.pending = append(r.pending, lossMark(EvictedRetention))
	}
}

// lossMark is a pending entry that stands for messages gone at its place,
// reported as an Eviction with reason when delivery reaches it.
func lossMark(reason string) pendingMsg { return pendingMsg{loss: &mark{e: Eviction{Reason: reason}}} }

func isLoss(p *pendingMsg) bool { return p.loss != nil }

// isTold reports whether p is a loss told when delivery reaches it, which
// the messages dropped right after it join; a mark only recorded (a place,
// keepLossPlace) is none, and a loss after it is told on its own.
func isTold(p *pendingMsg) bool { return p.loss != nil && !p.loss.record }

// passMark acts on a loss mark delivery has reached: a loss is told there;
// a mark only recorded (a place kept for one, keepLossPlace) goes into the
// transcript.
func (r *runner) passMark(m *mark) {
	if m.record {
		r.entries = append(r.entries, Entry{Lost: &m.e})
		return
	}
	r.evicted(Eviction{AfterSeq: r.pos.handled, Reason: m.e.Reason})
}

// carryHeld readies held messages for a new connection, at its welcome. A
// message of the transport's own (Ref) belonged to the socket it came on,
// now closed: one whose payload the engine has is delivered by its payload
// instead; one whose payload only the transport had (jsbridge without a
// transcript kept in Go) is lost, and reported in its place.
func (r *runner) carryHeld() {
	kept := r.pending[:0]
	for _, p := range r.pending {
		switch {
		case p.msg.Ref == 0 || !p.deliver:
		case len(p.msg.Payload) > 0:
			p.msg.Ref = 0
		default:
			if len(kept) == 0 || !isTold(&kept[len(kept)-1]) {
				kept = append(kept, lossMark(EvictedRetention))
			}
			continue
		}
		kept = append(kept, p)
	}
	clear(r.pending[len(kept):])
	r.pending = kept
}

// deliver hands the pending ACP messages to the application in one call.
func (r *runner) deliver() (handled int, refused bool) {
	batch := r.batch[:0]
	for i := range r.pending {
		p := &r.pending[i]
		if isLoss(p) {
			break // the loss is reported before what follows it is delivered
		}
		if p.deliver {
			batch = append(batch, p.msg)
		}
	}
	if len(batch) > 0 {
		r.commitFirst()
		res := r.await(batch)
		handled = min(max(res.handled, 0), len(batch))
		refused = res.err != nil || handled < len(batch)
	}
	clear(batch)
	r.batch = batch[:0]
	return handled, refused
}

// answer sends the reply a sequenced request is owed as the cursor moves
// over it, once: one fetched again after a handler refusal before it is
// answered when it is finally passed, and a replay after a Resume to an
// earlier cursor not at all, since the runtime has its one reply already.
// A failed write ends the connection once the delivery is done.
func (r *runner) answer(p *pendingMsg) {
	l := r.l
	if p.owed == nil || p.msg.Replay || l == nil || l.broken != nil {
		return
	}
	if err := r.writeFrame(p.owed); err != nil {
		l.broken = err
	}
}

// record adds a delivered message to the transcript, once: a message
// redelivered after a Resume to an earlier cursor is already there.
func (r *runner) record(p *pendingMsg) {
	if r.o.History > 0 && (p.msg.Seq == 0 || !r.pos.replay(p.msg.Seq)) {
		r.entries = append(r.entries, Entry{Seq: p.msg.Seq, Payload: p.msg.Payload, Ref: p.msg.Ref})
	}
}
