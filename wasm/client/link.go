package client

import (
	"time"

	"github.com/relaywasm/relaywasm/librelay"
)

// link is the state of one connection, made fresh for each dial and
// dropped with it, so nothing of one connection leaks into the next.
type link struct {
	conn   Conn
	frames <-chan inbound // the socket's batches; nil once it ended

	nonce      []byte
	helloID    string
	welcomed   bool
	welcomedAt time.Time
	retryAfter time.Duration // the welcome's hint, for the redial after this link
	reclaimed  bool          // the relay gave back the attachment id asked for: a stream was under way
	lossTold   bool          // the loss of what this stream missed while away was reported
	ready      bool          // sends may go out: the first resume was answered or given up on
	resumeID   string        // the resume awaiting its answer
	hbID       string        // the heartbeat awaiting its ack
	checkID    string        // the heartbeat of a Probe's liveness check: sends wait while it is hbID (checking)
	probed     string        // the resume whose wait ran out, given up on at hbID's ack unless answered
	relayErr   error         // the last relay.error notification, which explains a close

	// backlog holds frames that arrived while a delivery was awaited, to be
	// handled in order once it returns; broken is why the connection failed
	// meanwhile.
	backlog []RefFrame
	broken  error

	answer    alarm // welcome overdue
	resumeDue alarm // resume unanswered: the runtime may not resume at all
	hbEvery   alarm // next heartbeat
	hbDue     alarm // heartbeat ack overdue
	redeliver alarm // resume again, after a handler refusal or a repeated gap
}

func (l *link) stopAlarms() {
	l.answer.stop()
	l.resumeDue.stop()
	l.hbEvery.stop()
	l.hbDue.stop()
	l.redeliver.stop()
}

// answerWaiting reports whether the answer to the current resume is among
// the frames that wait in the backlog.
func (l *link) answerWaiting() bool {
	for i := range l.backlog {
		f := &l.backlog[i]
		if (f.Type == librelay.TypeResumed || f.Type == librelay.TypeError) && f.ReplyTo != "" && f.ReplyTo == l.resumeID {
			return true
		}
	}
	return false
}
