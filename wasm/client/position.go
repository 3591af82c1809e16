package client

// position is where the attachment stands in its stream, and the one owner
// of its cursors: every move goes through a method here, which also keeps
// the Attachment's published cursor and session, and notes when the Store's
// copy has fallen behind.
//
// Three seqs are kept because three questions are asked of them:
//
//   - handled: the last seq the handler accepted, the cursor the API reports
//     and what a refused message is fetched again after;
//   - taken: the last seq taken for delivery, what the next frame must
//     follow (it runs ahead of handled while a batch is being delivered);
//   - high: the highest seq ever handled, what the Store keeps and what
//     tells a message delivered again after Resume (a replay) from a new one.
type position struct {
	a       *Attachment // publishes the cursor and session
	session string
	handled uint64
	taken   uint64
	high    uint64
	dirty   bool // session or high changed since the Store last had them

	// restarted: the cursor went back to the stream's start (restart)
	// since the Store last had it; the runner commits that before it
	// delivers what follows (commitFirst).
	restarted bool
}

func newPosition(a *Attachment, s Saved) position {
	a.publish(s.Session, s.Cursor)
	return position{a: a, session: s.Session, handled: s.Cursor, taken: s.Cursor, high: s.Cursor}
}

// saved is what the Store keeps of the position.
func (p *position) saved() Saved { return Saved{Session: p.session, Cursor: p.high} }

// follows reports whether seq is the next one to take.
func (p *position) follows(seq uint64) bool { return seq == p.taken+1 }

// replay reports whether seq was handled before (and is delivered again
// because of a Resume to an earlier cursor).
func (p *position) replay(seq uint64) bool { return seq <= p.high }

// take marks seq taken for delivery.
func (p *position) take(seq uint64) { p.taken = seq }

// handle moves the cursor over seq, which the handler accepted.
func (p *position) handle(seq uint64) {
	p.handled = seq
	if seq > p.high {
		p.high = seq
		p.dirty = true
	}
	p.a.cursor.Store(seq)
}

// refused puts what was taken back to what was handled: the rest is fetched
// again.
func (p *position) refused() { p.taken = p.handled }

// rewind moves the cursor back to after, so a resume delivers again what
// follows it; a cursor beyond what was ever handled is ErrBadCursor.
func (p *position) rewind(after uint64) error {
	if after > p.high {
		return ErrBadCursor
	}
	p.handled, p.taken = after, after
	p.a.cursor.Store(after)
	return nil
}

// skipTo moves the cursor over frames that are gone.
func (p *position) skipTo(seq uint64) {
	p.handled, p.taken = seq, seq
	p.high = max(p.high, seq)
	p.dirty = true
	p.a.cursor.Store(seq)
}

// restart starts the stream over at seq 1: the runtime no longer knows it.
func (p *position) restart() {
	p.handled, p.taken, p.high = 0, 0, 0
	p.dirty, p.restarted = true, true
	p.a.cursor.Store(0)
}

// adopt takes a new attachment id, on which the stream starts at seq 1.
func (p *position) adopt(session string) {
	p.session = session
	p.handled, p.taken, p.high = 0, 0, 0
	p.dirty = true
	p.a.publish(session, 0)
}
