package client

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// runner is the attachment's goroutine and owns everything mutable about it:
// the connection, the cursor, the send queue. One owner means no locks on the
// delivery path and one order of events to reason about. The application's
// handler runs on a goroutine of its own (deliverer), so a slow handler
// holds up the cursor, as it must, and nothing else.
type runner struct {
	a      *Attachment
	o      *Options
	ctx    context.Context // lives as long as the attachment
	opened chan<- error    // Attach's wait; nil once answered
	first  <-chan dialed   // the first connection's dial, started by Attach; nil once taken

	pos     position // the cursors and the attachment id: their one owner
	pending []pendingMsg
	batch   []Message
	entries []Entry // transcript lines not yet committed

	queue   sendQueue
	ids     uint64
	attempt int

	d        deliverer
	later    []command // Resume calls made while a delivery was awaited
	quit     error     // Close or Detach came while a delivery was awaited
	failures int       // consecutive handler refusals

	// What the runtime has shown: resumable until a resume goes unanswered
	// or is refused, and the cursor a gap was last resumed from, with how
	// often in a row.
	resumable  bool
	gapAt      uint64
	gapRepeats int

	// placesOpen: this attachment, or a page before it (Saved.PlaceOpen),
	// committed a place (keepLossPlace) that neither an answer nor a
	// not_resumed loss followed since. An answered resume says so in the
	// transcript then (resumeAnswered).
	placesOpen bool

	l *link // the current connection; nil between connections
}

type pendingMsg struct {
	msg     Message
	deliver bool            // an acp.message; other sequenced cargo only moves the cursor
	owed    *librelay.Frame // the reply other sequenced cargo is owed, when a request
	loss    *mark           // not a message: messages gone at its place (lossMark, keepLossPlace)
}

// mark is a pending entry's loss: the Eviction told when delivery reaches
// it (AfterSeq is where the cursor is then), or, for record, an entry
// recorded, not told, when delivery reaches it: the transcript's place for
// a loss that may yet be told (keepLossPlace), or what follows such a
// place, the not_resumed loss told already or an answer (recordAfterHeld).
type mark struct {
	e      Eviction
	record bool
}

func newRunner(a *Attachment, saved Saved, opened chan<- error, first <-chan dialed) *runner {
	a.resumable.Store(true)
	return &runner{
		a:          a,
		o:          &a.o,
		ctx:        context.Background(),
		opened:     opened,
		first:      first,
		pos:        newPosition(a, saved),
		queue:      sendQueue{maxItems: a.o.SendQueue, maxBytes: a.o.SendQueueBytes},
		d:          startDeliverer(a.o.OnMessages),
		resumable:  true,
		gapAt:      noGap,
		placesOpen: saved.PlaceOpen, // a page before this one went away before its resume was answered
	}
}

// run connects, serves and redials until the attachment ends.
func (r *runner) run() {
	defer close(r.a.done)
	r.setState(StateChange{State: Connecting})
	for {
		l, err := r.connection()
		if l == nil && r.a.closing.Err() != nil {
			err = r.closed() // the dial gave up for Close; it is no failure
		}
		if fatal(err) {
			r.end(err)
			return
		}
		if l != nil && l.welcomed && time.Since(l.welcomedAt) >= r.o.Backoff.Stable {
			r.attempt = 0
		}
		delay := r.o.Backoff.delay(r.attempt)
		if l != nil && l.retryAfter > 0 {
			delay = r.o.Backoff.spread(l.retryAfter)
		}
		r.attempt++
		if err := r.wait(delay, err); err != nil {
			r.end(err)
			return
		}
	}
}

// end finishes the attachment with err.
func (r *runner) end(err error) {
	r.d.stop()
	r.queue.fail(err)
	r.a.queued.Store(0)
	for _, c := range r.later {
		c.(*resumeCmd).done <- err
	}
	r.later = nil
	if errors.Is(err, ErrDetached) {
		_ = r.o.Store.Clear(r.ctx, r.a.key)
	} else {
		r.commit()
	}
	if r.opened != nil {
		r.opened <- err
		r.opened = nil
	}
	r.a.err = err
	change := StateChange{State: Closed, Err: err}
	if err == ErrClosed {
		change.Err = nil
	}
	r.setState(change)
}

// wait sits out a redial delay. Sends queue meanwhile; coming online, a
// probe, Detach and Close cut it short.
func (r *runner) wait(delay time.Duration, cause error) error {
	state := Reconnecting
	if r.a.offline.Load() {
		state, delay = Offline, max(delay, r.o.Backoff.Max)
	}
	r.setState(StateChange{State: state, Err: cause, Attempt: r.attempt, RetryIn: delay})
	t := time.NewTimer(delay)
	defer t.Stop()
	for len(r.later) > 0 {
		c := r.later[0]
		r.later = r.later[1:]
		if err := r.idleCommand(c); err != nil {
			return err
		}
	}
	for {
		select {
		case <-t.C:
			return nil
		case <-r.a.wake:
			wasOffline := state == Offline
			if r.a.probe.Swap(false) || (wasOffline && !r.a.offline.Load()) {
				return nil
			}
			if !wasOffline && r.a.offline.Load() {
				state = Offline
				r.setState(StateChange{State: Offline, Err: ErrOffline, Attempt: r.attempt})
			}
		case c := <-r.a.cmds:
			if err := r.idleCommand(c); err != nil {
				return err
			}
		}
	}
}

// closed takes the commands that wait while there is no connection up to
// the Close or Abandon that ended the dial, and returns what ended the
// attachment: the close's cause, or ErrDetached if a Detach came first.
func (r *runner) closed() error {
	for c := range r.a.cmds {
		if err := r.idleCommand(c); err != nil {
			return err
		}
	}
	return ErrClosed // not reached: cmds is never closed
}

// idleCommand handles a command while there is no connection.
func (r *runner) idleCommand(c command) error {
	switch c := c.(type) {
	case *sendCmd:
		r.enqueue(c)
	case *resumeCmd:
		c.done <- r.rewind(c.after)
	case detachCmd:
		return ErrDetached
	case closeCmd:
		return c.cause
	}
	return nil
}

func (r *runner) setState(c StateChange) {
	c.Resumable = r.resumable
	r.a.state.Store(int32(c.State))
	if r.o.OnState != nil {
		r.o.OnState(c)
	}
}

func (r *runner) newID(prefix string) string {
	r.ids++
	return prefix + uitoa(r.ids)
}

// rewind moves the cursor back so a resume delivers again what follows.
func (r *runner) rewind(after uint64) error {
	if err := r.flush(); fatal(err) {
		return err
	}
	return r.pos.rewind(after)
}

// enqueue sends s now when the connection has resumed and is not being
// checked, or queues it.
func (r *runner) enqueue(s *sendCmd) {
	if r.l != nil && r.l.ready && r.l.broken == nil && !r.checking() && len(r.queue.items) == 0 {
		r.writeSend(s)
		return
	}
	if !r.queue.push(s) {
		if s.take() {
			s.finish(ErrSendQueueFull)
		}
	}
	r.a.queued.Store(int32(len(r.queue.items)))
}

// checking reports whether the socket's liveness is in doubt: a Probe came
// (the page is back from being hidden, frozen or cached) and the relay has
// not yet acked the heartbeat it sent, or the probe is still to be acted on.
// A phone's socket may be dead then and still look open (iOS keeps
// readyState OPEN): a message written to it would count as sent and be lost
// when the check fails and the client redials, since sends are never
// replayed. So sends wait for the ack, or for the next connection.
func (r *runner) checking() bool {
	l := r.l
	return l != nil && l.welcomed && (r.a.probe.Load() || (l.checkID != "" && l.checkID == l.hbID))
}

// drain writes the queued messages in order, stopping if the socket fails.
// While the socket is being checked they wait for the check's ack.
func (r *runner) drain() {
	if r.checking() {
		return
	}
	defer func() { r.a.queued.Store(int32(len(r.queue.items))) }()
	for s := r.queue.pop(); s != nil; s = r.queue.pop() {
		if !r.writeSend(s) {
			return
		}
	}
}

// writeSend writes one message and reports whether the socket is still good.
func (r *runner) writeSend(s *sendCmd) bool {
	if !s.take() {
		return true // withdrawn by its caller
	}
	if s.session != r.pos.session {
		s.session = r.pos.session
		if err := s.encode(r.o); err != nil {
			s.finish(err)
			return true
		}
	}
	err := r.l.conn.Write(r.ctx, s.frame)
	switch {
	case errors.Is(err, ErrNotSent):
		s.release()
		r.queue.pushFront(s)
		return false
	case err != nil:
		s.finish(wrap(ErrSendFailed, "", err))
		return false
	}
	if r.o.History > 0 {
		r.entries = append(r.entries, Entry{Out: true, Payload: append([]byte(nil), s.payload...)})
		// Stored before its caller hears it went, even during an awaited
		// delivery, which would otherwise hold the commit until it ends:
		// a page that goes away meanwhile (in worker mode, before a later
		// commit could reach its store) keeps what it sent.
		r.commit()
	}
	s.finish(nil)
	return true
}

// commit hands the Store what changed since the last commit. A place kept
// for a loss (keepLossPlace) waits for what follows it: if the resume is
// answered first, it is dropped (resumeAnswered) and the Store never has it.
// It waits no longer than until a message after it is delivered
// (commitFirst).
func (r *runner) commit() {
	if !r.pos.dirty && (len(r.entries) == 0 || len(r.entries) == 1 && isPlace(&r.entries[0])) {
		return
	}
	r.commitEntries()
}

// commitFirst commits what the batch about to be delivered follows and the
// messages alone do not say, before the batch is delivered, instead of with
// the batch's messages after the handler took them: a mark or a loss
// recorded before it (a place kept for a loss, keepLossPlace; an answer; a
// loss told, such as a retention loss, cursor_evicted or not_resumed), or
// a cursor gone back to the stream's start (a runtime that restarted,
// cursor_evicted). Where a Store's commits reach it later than the batch
// reaches the application (worker mode: the worker's commits cross to the
// page by postMessage), the page may go away having taken the batch before
// the commit of it comes, and store what it took itself (relay.js
// remote.js commitTail), which knows only the messages: the jump the page
// showed then stayed unmarked (a place, a loss lost), a place closed since
// stayed open, the cursor stayed where the stream was before it started
// again (the next page would resume from there, past what the restarted
// runtime sent since); or, the commit coming after all (a page kept in the
// back/forward cache), the mark landed after those messages. A commit made
// before the batch crosses before it. It costs the transcript no entry:
// delivered before the resume's answer, a place is stored with that
// batch's messages anyway (only a batch the handler refuses whole would
// have left it to be dropped), and the others are stored whatever follows;
// a batch after none of these is committed once, as before.
func (r *runner) commitFirst() {
	if r.pos.restarted {
		r.commitEntries()
		return
	}
	for i := range r.entries {
		if r.entries[i].Lost != nil {
			r.commitEntries()
			return
		}
	}
}

// commitEntries is commit without its wait for what follows a place.
func (r *runner) commitEntries() {
	for i := range r.entries {
		switch e := &r.entries[i]; {
		case isPlace(e):
			r.placesOpen = true
		case isAnswered(e), e.Lost != nil && e.Lost.Reason == EvictedNotResumed:
			r.placesOpen = false // PlaceLosses closes every place before it
		}
	}
	saved := r.pos.saved()
	saved.PlaceOpen = r.placesOpen
	_ = r.o.Store.Commit(r.ctx, r.a.key, saved, r.entries, r.o.History)
	clear(r.entries)
	r.entries = r.entries[:0]
	r.pos.dirty, r.pos.restarted = false, false
}

// evicted tells the application of a loss, and records it in the
// transcript, if one is kept, after what was delivered before it was told.
// A not_resumed loss belongs further back, where its connection opened
// (keepLossPlace): the Store's History puts it there (PlaceLosses). It is
// recorded after that place, and so after the messages held for delivery
// again before it, if they still are (recordAfterHeld).
func (r *runner) evicted(e Eviction) {
	if r.o.History > 0 && !(e.Reason == EvictedNotResumed && r.recordAfterHeld(e)) {
		lost := e
		r.entries = append(r.entries, Entry{Lost: &lost})
	}
	if r.o.OnEvicted != nil {
		r.o.OnEvicted(e)
	}
}

// keepLossPlace records, when a transcript is kept, the place where a
// connection takes the stream up again (session, the id granted, is the
// one asked for): what was sent while the client was away may be lost, and
// a runtime that does not resume says so only when the wait for the
// resume's answer ends (not_resumed), after the messages it delivered
// meanwhile, which came after the loss. The place goes where the connection
// opens, after what is held for delivery again, if anything is. It is no
// loss: the Store's History moves a not_resumed loss into the places open
// before it and leaves places out (PlaceLosses). Recording the place,
// rather than holding the commits that follow it until the loss is known,
// keeps every commit as prompt as without a transcript.
func (r *runner) keepLossPlace(session string) {
	if r.o.History <= 0 || r.pos.session == "" || session != r.pos.session {
		return
	}
	if len(r.pending) > 0 {
		r.pending = append(r.pending, pendingMsg{loss: &mark{e: Eviction{FromSeq: markPlace}, record: true}})
		return
	}
	r.entries = append(r.entries, Entry{Lost: &Eviction{FromSeq: markPlace}})
}

// resumeAnswered closes the places kept for a loss (keepLossPlace): the
// runtime answered a resume (session.resumed, or cursor_evicted), and a
// runtime that answers tells its losses itself, where they are. A place
// the Store does not have yet is dropped; one it has is closed by an answer
// recorded after it, or PlaceLosses would take it for one whose resume went
// unanswered and put the next not_resumed loss there too.
//
// A place a page before this one left open (it went away before its
// resume's wait ended) is closed too: the Store says so (Saved.PlaceOpen),
// rather than the runner reading the transcript or recording an answer on
// every reload, in case (History's keep counts each). Left open, a
// not_resumed loss a later page is told would go there too, where the
// resume answered here had lost nothing.
func (r *runner) resumeAnswered() {
	if r.o.History <= 0 || r.recordAfterHeld(Eviction{FromSeq: markAnswered}) {
		return
	}
	kept := r.entries[:0]
	for _, e := range r.entries {
		if !isPlace(&e) {
			kept = append(kept, e)
		}
	}
	clear(r.entries[len(kept):])
	r.entries = kept
	if r.placesOpen {
		r.entries = append(r.entries, Entry{Lost: &Eviction{FromSeq: markAnswered}})
		r.placesOpen = false
	}
}

// recordAfterHeld records e, an entry told or known now, after the marks
// recorded in their place among the messages held for delivery again
// (keepLossPlace), if any is still pending, and reports whether one was:
// the transcript keeps them in the order they happened. An answer right
// after another adds nothing (a handler that keeps refusing has every
// redelivery's resume answered).
func (r *runner) recordAfterHeld(e Eviction) bool {
	var last *mark
	for i := range r.pending {
		if m := r.pending[i].loss; m != nil && m.record {
			last = m
		}
	}
	if last == nil {
		return false
	}
	if e.FromSeq != markAnswered || e.Reason != "" || !isAnswered(&Entry{Lost: &last.e}) {
		r.pending = append(r.pending, pendingMsg{loss: &mark{e: e, record: true}})
	}
	return true
}

// writeFrame encodes and writes a frame of the engine's own.
func (r *runner) writeFrame(f *librelay.Frame) error {
	b, err := librelay.AppendFrame(nil, f)
	if err != nil {
		return wrap(ErrProtocol, "encoding "+f.Type, err)
	}
	return r.l.conn.Write(r.ctx, b)
}

// closeCodeFor picks the close code that tells the relay why this client
// hung up; browsers let script send only 1000 and 3000–4999.
func closeCodeFor(err error) (int, string) {
	switch {
	case errors.Is(err, ErrHeartbeatTimeout):
		return int(relayleg.CloseHeartbeatTimeout), "heartbeat timeout"
	case errors.Is(err, ErrDetached):
		return int(relayleg.CloseNormal), "detached"
	}
	return int(relayleg.CloseNormal), Code(err)
}

func uitoa(v uint64) string { return strconv.FormatUint(v, 10) }

// alarm is a timer that can be off; its channel is nil then, so a select on
// it never fires. due is when it was last set to fire.
type alarm struct {
	t      *time.Timer
	due    time.Time
	graced bool // overslept has drawn this wait out already
}

func (al *alarm) set(d time.Duration) {
	al.due, al.graced = time.Now().Add(d), false
	if al.t == nil {
		al.t = time.NewTimer(d)
		return
	}
	al.t.Reset(d)
}

// A client that did not run for a while (a page that stalled or was
// suspended: a phone, a long redraw) has its timers come due together with
// whatever arrived meanwhile, and a timer may reach Go before the message it
// was waiting for, which is then taken for missing. A deadline that fired
// more than stallSlack late is drawn out once by stallGrace, so that what is
// queued is read first (overslept).
const (
	stallSlack = 250 * time.Millisecond
	stallGrace = 500 * time.Millisecond
)

// overslept is called when the alarm has fired, before acting on it. When it
// fired more than stallSlack after it was due, and was not drawn out yet, it
// is re-armed for stallGrace and overslept reports true: the caller waits on.
func (al *alarm) overslept() bool {
	if al.t == nil || al.graced || time.Since(al.due) < stallSlack {
		return false
	}
	al.graced = true
	al.t.Reset(stallGrace)
	return true
}

func (al *alarm) stop() {
	if al.t != nil {
		al.t.Stop()
		al.t = nil
	}
}

func (al *alarm) C() <-chan time.Time {
	if al.t == nil {
		return nil
	}
	return al.t.C
}
