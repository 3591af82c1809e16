package relay

import (
	"sync"
	"time"
)

// controlSlack is how many frames past its frame bound a queue takes for the
// relay's own replies (acks, errors). They must not wait — the goroutine
// answering may be the one that drains the other way — and a peer that
// floods requests without reading cannot grow the queue by more than this.
const controlSlack = 64

// Batch bounds: how many frames a writer takes at once. Room is made when a
// batch is written. Towards a browser the waiting sender is the runtime
// leg, which should not wait for a whole queue's worth of writes, so batches
// are small; 64 still amortises the lock and the corked write. Towards a
// runtime the waiters are browsers' readers, all woken when room is made, so
// batches are larger to wake them less often.
const (
	browserBatch = 64
	runtimeBatch = 512
)

// sendQueue is one connection's bounded outbox. Frames are queued already
// encoded; a writer goroutine exists only while there is something to write
// (an idle socket holds neither a goroutine nor a buffer for it), and it
// takes up to maxBatch frames at once, so a burst is written in batches (one
// flush each on the runtime leg).
//
// The bounds count what is queued and what is being written, so a socket
// never holds more than maxBytes (plus one oversized frame when empty, plus
// controlSlack replies).
type sendQueue struct {
	maxMsgs, maxBytes int
	maxBatch          int
	// flush writes a batch in order; one goroutine at a time calls it.
	flush func(batch [][]byte) error
	// finish runs once when the queue ends: clean after the last frame of a
	// closed queue was written (it then sends the close frame or
	// half-closes); not clean when a write failed, closing or not.
	finish func(clean bool)

	mu      sync.Mutex
	msgs    [][]byte
	n       int // frames queued or being written
	bytes   int // bytes queued or being written
	writing bool
	closing bool          // nothing more is accepted
	dead    bool          // the connection failed; nothing more is written
	ended   bool          // finish has been called
	held    bool          // queued frames wait for unhold before any is written
	space   chan struct{} // closed when room is made; nil when nobody waits
}

type pushResult int

const (
	pushed pushResult = iota
	pushFull
	pushClosed
)

// push queues msg. When the queue is full it waits for room: not at all when
// wait is 0, until room or close when wait < 0, and up to wait otherwise.
func (q *sendQueue) push(msg []byte, wait time.Duration) pushResult {
	var timer *time.Timer
	for {
		q.mu.Lock()
		if q.closing {
			q.mu.Unlock()
			return pushClosed
		}
		if q.n == 0 || (q.n < q.maxMsgs && q.bytes+len(msg) <= q.maxBytes) {
			q.appendLocked(msg)
			q.mu.Unlock()
			return pushed
		}
		if wait == 0 {
			q.mu.Unlock()
			return pushFull
		}
		if q.space == nil {
			q.space = make(chan struct{})
		}
		room := q.space
		q.mu.Unlock()
		if wait < 0 {
			<-room
			continue
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-room:
		case <-timer.C:
			return pushFull
		}
	}
}

// pushControl queues one of the relay's own replies without waiting; it
// drops the reply only when the peer is controlSlack frames past the bound.
func (q *sendQueue) pushControl(msg []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing || q.n >= q.maxMsgs+controlSlack {
		return false
	}
	q.appendLocked(msg)
	return true
}

func (q *sendQueue) appendLocked(msg []byte) {
	q.msgs = append(q.msgs, msg)
	q.n++
	q.bytes += len(msg)
	q.startLocked()
}

// startLocked starts a writer if none runs and nothing holds the queue.
func (q *sendQueue) startLocked() {
	if !q.writing && !q.held && len(q.msgs) > 0 {
		q.writing = true
		go q.drain()
	}
}

// hold keeps what is queued from being written until unhold. A handshake
// uses it to queue its welcome and install the route before the peer can
// see the welcome, with the welcome still first on the wire.
func (q *sendQueue) hold() {
	q.mu.Lock()
	q.held = true
	q.mu.Unlock()
}

func (q *sendQueue) unhold() {
	q.mu.Lock()
	q.held = false
	q.startLocked()
	q.mu.Unlock()
}

// close stops the queue taking frames, queues last (if any) behind what is
// pending — or instead of it, unless keepPending — and has finish run once
// it is written. It reports false when the queue was already closing.
func (q *sendQueue) close(last []byte, keepPending bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return false
	}
	q.closing = true
	q.wakeLocked()
	if !keepPending {
		for _, m := range q.msgs {
			q.bytes -= len(m)
		}
		q.n -= len(q.msgs)
		q.msgs = nil
	}
	if last != nil {
		q.msgs = append(q.msgs, last)
		q.n++
		q.bytes += len(last)
	}
	q.held = false
	if !q.writing {
		q.writing = true
		go q.drain() // even with nothing queued: finish must run
	}
	return true
}

// kill drops everything: the connection is gone and nothing more will be
// written or accepted. Waiting pushers return pushClosed.
func (q *sendQueue) kill() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closing, q.dead = true, true
	q.msgs, q.n, q.bytes = nil, 0, 0
	q.wakeLocked()
}

func (q *sendQueue) wakeLocked() {
	if q.space != nil {
		close(q.space)
		q.space = nil
	}
}

// drain writes batches until the queue is empty, then exits, releasing the
// slices so an idle queue holds nothing; a closing queue then finishes.
func (q *sendQueue) drain() {
	var batch [][]byte
	for {
		q.mu.Lock()
		if !q.dead {
			q.releaseLocked(batch)
		}
		if q.dead || len(q.msgs) == 0 {
			q.writing, q.msgs = false, nil
			finish, clean := q.closing && !q.ended, !q.dead
			q.ended = q.ended || finish
			q.mu.Unlock()
			if finish {
				q.finish(clean)
			}
			return
		}
		k := min(len(q.msgs), q.maxBatch)
		batch = append(batch[:0], q.msgs[:k]...)
		clear(q.msgs[:k])
		q.msgs = q.msgs[k:]
		q.mu.Unlock()
		if err := q.flush(batch); err != nil {
			q.kill()
		}
	}
}

// releaseLocked accounts a written batch and wakes anyone waiting for room.
func (q *sendQueue) releaseLocked(batch [][]byte) {
	if len(batch) == 0 {
		return
	}
	for i, m := range batch {
		q.bytes -= len(m)
		batch[i] = nil
	}
	q.n -= len(batch)
	q.wakeLocked()
}
