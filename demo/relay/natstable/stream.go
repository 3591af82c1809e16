package natstable

import (
	"sync"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
)

// stream is the Endpoint of a far end: frames sent to it are published on
// its subject, numbered, for whichever node holds the far end. It is also
// the backpressure across the bus: a stream keeps at most Window frames
// unacknowledged by the node consuming it, and Send waits for room, up to
// StallTimeout (doc.go, Order, backpressure and loss). A stream with no
// known consumer (none has acknowledged yet, or it let go, or its node or
// this node's bus connection is gone) does not wait: frames nobody takes
// are dropped by NATS as they are dropped by a single relay.
type stream struct {
	t       *Table
	subject string
	no      uint64
	// instance is the instance the stream's route belongs to.
	instance  string
	toRuntime bool

	mu       sync.Mutex
	room     sync.Cond
	buf      []byte
	sent     uint64 // counter of the last frame published or dropped
	acked    uint64 // highest counter the consumer acknowledged
	consumer uint64 // node id of the consumer, 0 when none is known
	stalled  bool   // the consumer left the window full for StallTimeout
	owed     bool   // a frame was dropped that no frame published since shows: a tail is owed (payTail)
	closed   bool
	used     int64 // the table's coarse clock at the last Send
	// reply is the reply subject a stream to a runtime gives its frames
	// (subjects.unheard: the hold they are sent under); empty for a stream
	// to an attachment.
	reply string
}

func (t *Table) newStream(subject, instance string, toRuntime bool) *stream {
	s := &stream{t: t, subject: subject, no: t.streamNo.Add(1), instance: instance, toRuntime: toRuntime, used: t.clock.Load()}
	s.room.L = &s.mu
	t.streams[s.no] = s
	return s
}

// Send publishes f to the far end. It reports false when the frame was not
// published: the stream is closed, its consumer left the window full past
// StallTimeout, or the bus refused it. A dropped frame still takes its
// counter, so a consumer that is still there sees the gap, at the next
// frame published or at the tail owed meanwhile (payTail), and its client
// resumes.
func (s *stream) Send(f librelay.Frame) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used = s.t.clock.Load()
	if !s.waitRoom() {
		s.sent++
		s.owed = true
		return false
	}
	// Not validated here: the node writing it to a socket does (wire.go).
	b := appendFrame(appendHeader(s.buf[:0], header{s.t.id, s.no, s.sent + 1}), &f)
	s.sent++
	if cap(b) <= maxKeptBuffer {
		s.buf = b
	}
	var err error
	if s.reply != "" {
		err = s.t.nc.PublishRequest(s.subject, s.reply, b)
	} else {
		err = s.t.nc.Publish(s.subject, b)
	}
	s.owed = err != nil // a frame published shows the consumer any skip before it
	return err == nil
}

const maxKeptBuffer = 64 << 10

// tail tells the consumer how far the stream went: a message with the next
// counter and no frame (wire.go). The table sends one on each stream to an
// attachment when this node is back on the bus: what Send published while
// the connection was failing was refused, or lost with the dead
// connection's buffers, and nobody was told, so a client whose last frames
// those were (the end of an answer) waited for ever for a frame that would
// show the gap. A stream that never sent a frame has nothing to tell.
func (s *stream) tail() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tailLocked()
}

func (s *stream) tailLocked() {
	if s.closed || s.sent == 0 {
		return
	}
	s.sent++
	s.buf = appendHeader(s.buf[:0], header{s.t.id, s.no, s.sent})
	s.owed = s.t.nc.Publish(s.subject, s.buf) != nil
}

// owes reports whether a frame was dropped that nothing published since
// shows the consumer.
func (s *stream) owes() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owed
}

// payTail sends the tail a stream owes once its window has room; the
// table's heartbeat calls it for each stream to an attachment that owes
// one (Table.expire). Send drops a frame when the consumer left the window
// full past StallTimeout, or the bus refused it, and a consumer that gets
// no frame after that never sees the skip: a client whose last frames
// those were (the end of an answer) waited for ever. Waiting for room
// sends the tail once the consumer has caught up, or once it is known to
// be gone (then it reaches nobody, or the node the socket moved to, whose
// client redials once more at worst), and never into a window left full.
// So a run of drops costs one tail, and none when a later frame showed the
// skip; a stream to a runtime pays none (what a browser sends is at most
// once, and the relay answers a request it could not send).
func (s *stream) payTail() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owed && s.hasRoom() {
		s.tailLocked()
	}
}

// hasRoom: the window takes another message without waiting; with s.mu
// held.
func (s *stream) hasRoom() bool {
	return s.consumer == 0 || s.sent-s.acked < uint64(s.t.cfg.Window)
}

// waitRoom waits, with s.mu held, until the window has room or waiting is
// pointless; false means drop.
func (s *stream) waitRoom() bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	deadline := time.Now().Add(s.t.cfg.StallTimeout)
	for {
		switch {
		case s.closed:
			return false
		case s.hasRoom():
			return true
		case s.stalled || !time.Now().Before(deadline):
			if !s.stalled {
				s.stalled = true
				s.t.log.Warn("a stream's consumer left its window full; dropping its frames",
					"subject", s.subject, "consumer", nodeToken(s.consumer))
			}
			return false
		}
		if timer == nil {
			timer = time.AfterFunc(time.Until(deadline), func() {
				s.mu.Lock()
				s.room.Broadcast()
				s.mu.Unlock()
			})
		}
		s.room.Wait()
	}
}

// acked records an ack from a consumer. A release counts only from the
// consumer in charge: a node letting go of a stale socket must not make the
// stream forget the node that took over.
func (s *stream) ack(a ack) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case a.released:
		if s.consumer == a.node {
			s.consumer = 0
		}
	case a.n > s.acked || s.consumer != a.node:
		s.acked = max(s.acked, min(a.n, s.sent))
		s.consumer = a.node
		s.stalled = false
	}
	s.room.Broadcast()
}

// forget makes the stream count on no consumer: the consumer's node is
// gone, or this node lost the bus (node 0: whichever it was).
func (s *stream) forget(node uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if node == 0 || s.consumer == node {
		s.noConsumerLocked()
	}
}

// claimedBy: node took the route's socket. The route changed hands, and the
// stream counts on no consumer until node acknowledges, unless node is its
// consumer already and the window has room. A node's claim comes on the
// control subject and its acks on the ack subject, which this node handles
// apart, so the claim can come after the first ack of the socket it
// announces; forgetting the consumer then left the stream without its
// window until the next ack, Window/4 frames later
// (TestLateClaimKeepsTheConsumer). A full or stalled window is forgotten
// all the same: the socket the node's claim announces may have taken over
// from one that stopped reading there (inbound.takenOver, no release), and
// it acknowledges only frames that reach it, which a full window would
// hold back or drop.
func (s *stream) claimedBy(node uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.consumer != node || s.stalled || !s.hasRoom() {
		s.noConsumerLocked()
	}
}

// noConsumerLocked: the stream waits for no consumer until one
// acknowledges; with s.mu held.
func (s *stream) noConsumerLocked() {
	s.consumer, s.stalled = 0, false
	s.room.Broadcast()
}

// heldBy points a stream to a runtime at a new hold: reply names it, and
// the consumer is not known yet.
func (s *stream) heldBy(reply string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply = reply
	s.consumer, s.stalled = 0, false
	s.room.Broadcast()
}

// close ends the stream; waiting and later Sends return false. The table
// removes it from its index.
func (s *stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.room.Broadcast()
}

func (s *stream) idle(now, after int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consumer == 0 && now-s.used > after
}
