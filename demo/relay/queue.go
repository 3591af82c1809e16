package relay

import (
	"sync"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
)

// controlSlack is how many frames past its frame bound a queue takes for the
// relay's own replies (acks, errors). They must not wait — the goroutine
// answering may be the one that drains the other way — and a peer that
// floods requests without reading cannot grow the queue by more than this.
// Nor do they wait behind the cargo queued before them: the writer takes
// them first, at its next batch (pushControl).
const controlSlack = 64

// Batch bounds: how many frames a writer takes at once. Room is made when a
// batch is written. Towards a browser the waiting sender is the runtime
// leg, which should not wait for a whole queue's worth of writes, so batches
// are small; 64 still amortises the lock and the corked write. Towards a
// runtime the waiters are browsers' readers, all woken when room is made, so
// batches are larger to wake them less often.
//
// A batch is also bounded in bytes (one larger frame makes a batch of its
// own), because the relay's own replies wait for the batch being written:
// an ack behind a whole batch of large frames on a slow link would reach
// the peer after its heartbeat timeout. Towards a browser the bound is what
// the cork writes at once anyway (corkFlushAt), so it costs no syscall;
// towards a runtime, on a fast link, it is larger.
const (
	browserBatch = 64
	runtimeBatch = 512

	browserBatchBytes = corkFlushAt
	runtimeBatchBytes = 256 << 10
)

// frameSegments is the pool both legs' queues keep their frames in, and
// frameBatches the one their writers take batches into.
var (
	frameSegments = sync.Pool{New: func() any { return new([fifoSegment]librelay.Frame) }}
	frameBatches  = sync.Pool{New: func() any { return new([]librelay.Frame) }}
)

// sendQueue is one connection's bounded outbox of T: the relay queues
// frames as parsed (librelay.Frame) and its writer encodes them straight
// into the connection's write buffer, so a routed frame costs no encoding
// buffer of its own. A writer goroutine exists only while there is
// something to write (an idle socket holds neither a goroutine nor a buffer
// for it), and it takes up to maxBatch frames (maxBatchBytes) at once, so a
// burst is written in batches (one flush each on the runtime leg).
//
// The relay's own replies (pushControl) have a lane of their own, which the
// writer empties before it takes cargo: a peer's heartbeat is answered once
// the batch being written is out, not after everything queued before it (a
// replay of megabytes, on a phone's link), so a client does not take a
// working connection for a dead one. Only replies whose order with cargo
// does not matter go there; frames that must keep their place among the
// cargo (a stand-in for a frame too large, which carries its seq; the
// detaches owed to a runtime) are queued as cargo.
//
// The bounds count what is queued and what is being written, so a socket
// never holds more than maxBytes as size counts them (plus one oversized
// frame when empty, plus controlSlack replies, plus what pushPast queued).
type sendQueue[T any] struct {
	maxMsgs, maxBytes int
	maxBatch          int
	maxBatchBytes     int // as size counts them; a larger frame is a batch alone
	// size is what a message counts against maxBytes; it must give the same
	// answer for a message every time.
	size func(T) int
	// flush writes a batch in order; one goroutine at a time calls it.
	flush func(batch []T) error
	// batches holds the writers' batch slices (*[]T): a writer holds one
	// only while it runs, and a socket whose writer starts for every few
	// frames does not allocate a batch each time.
	batches *sync.Pool
	// finish runs once when the queue ends: clean after the last frame of a
	// closed queue was written (it then sends the close frame or
	// half-closes); not clean when a write failed, closing or not.
	finish func(clean bool)

	mu      sync.Mutex
	msgs    fifo[T] // queued, not yet taken by the writer
	ctl     fifo[T] // the relay's own replies, taken before msgs
	n       int     // frames queued or being written
	bytes   int     // bytes queued or being written
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
func (q *sendQueue[T]) push(msg T, wait time.Duration) pushResult {
	var timer *time.Timer
	for {
		q.mu.Lock()
		if q.closing {
			q.mu.Unlock()
			return pushClosed
		}
		if q.n == 0 || (q.n < q.maxMsgs && q.bytes+q.size(msg) <= q.maxBytes) {
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

// pushControl queues one of the relay's own replies without waiting, ahead
// of the cargo not yet taken by the writer; it drops the reply only when
// the peer is controlSlack frames past the bound. Replies keep their order
// among themselves.
func (q *sendQueue[T]) pushControl(msg T) bool { return q.pushReply(msg, false) }

// pushInOrder queues one of the relay's own replies as pushControl does,
// but behind the cargo queued before it: for a reply the peer reads as
// coming after everything sent before it (browserConn.resuming).
func (q *sendQueue[T]) pushInOrder(msg T) bool { return q.pushReply(msg, true) }

func (q *sendQueue[T]) pushReply(msg T, inOrder bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing || q.n >= q.maxMsgs+controlSlack {
		return false
	}
	if inOrder {
		q.msgs.push(msg)
	} else {
		q.ctl.push(msg)
	}
	q.countLocked(msg)
	return true
}

// pushPast queues one of the relay's own frames without waiting, past the
// bounds if need be; false only when the queue is closing. It is for frames
// that must neither wait nor fail and whose number the caller bounds: the
// detaches owed to a runtime as it is welcomed (payOwed), queued while
// welcome holds the queue, when nothing drains it.
func (q *sendQueue[T]) pushPast(msg T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return false
	}
	q.appendLocked(msg)
	return true
}

func (q *sendQueue[T]) appendLocked(msg T) {
	q.msgs.push(msg)
	q.countLocked(msg)
}

// countLocked accounts a queued message and has a writer write it.
func (q *sendQueue[T]) countLocked(msg T) {
	q.n++
	q.bytes += q.size(msg)
	q.startLocked()
}

// queuedLocked counts the messages not yet taken by the writer.
func (q *sendQueue[T]) queuedLocked() int { return q.msgs.len() + q.ctl.len() }

// startLocked starts a writer if none runs and nothing holds the queue.
func (q *sendQueue[T]) startLocked() {
	if !q.writing && !q.held && q.queuedLocked() > 0 {
		q.writing = true
		go q.drain()
	}
}

// hold keeps what is queued from being written until unhold. A handshake
// uses it to queue its welcome and install the route before the peer can
// see the welcome, with the welcome still first on the wire.
func (q *sendQueue[T]) hold() {
	q.mu.Lock()
	q.held = true
	q.mu.Unlock()
}

func (q *sendQueue[T]) unhold() {
	q.mu.Lock()
	q.held = false
	q.startLocked()
	q.mu.Unlock()
}

// close stops the queue taking frames, queues *last (if not nil) behind
// what is pending — or instead of it, unless keepPending — and has finish
// run once it is written. It reports false when the queue was already
// closing.
func (q *sendQueue[T]) close(last *T, keepPending bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return false
	}
	q.closing = true
	q.wakeLocked()
	if !keepPending {
		for _, f := range []*fifo[T]{&q.msgs, &q.ctl} {
			for m := range f.all() {
				q.bytes -= q.size(m)
			}
			q.n -= f.len()
			f.reset()
		}
	}
	if last != nil {
		q.msgs.push(*last)
		q.n++
		q.bytes += q.size(*last)
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
func (q *sendQueue[T]) kill() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closing, q.dead = true, true
	q.msgs.reset()
	q.ctl.reset()
	q.n, q.bytes = 0, 0
	q.wakeLocked()
}

func (q *sendQueue[T]) wakeLocked() {
	if q.space != nil {
		close(q.space)
		q.space = nil
	}
}

// drain writes batches until the queue is empty, then exits, releasing the
// slices so an idle queue holds nothing; a closing queue then finishes. A
// batch starts with the replies queued meanwhile, then cargo.
func (q *sendQueue[T]) drain() {
	bp := q.batches.Get().(*[]T)
	batch := (*bp)[:0]
	for {
		q.mu.Lock()
		if !q.dead {
			q.releaseLocked(batch)
		}
		if q.dead || q.queuedLocked() == 0 {
			q.writing = false
			finish, clean := q.closing && !q.ended, !q.dead
			q.ended = q.ended || finish
			q.mu.Unlock()
			clear(batch) // already cleared unless the connection failed
			*bp = batch[:0]
			q.batches.Put(bp)
			if finish {
				q.finish(clean)
			}
			return
		}
		batch = q.ctl.take(batch[:0], q.maxBatch)
		batch = q.msgs.take(batch, q.msgs.within(q.maxBatch-len(batch), q.maxBatchBytes, q.size))
		q.mu.Unlock()
		if err := q.flush(batch); err != nil {
			q.kill()
		}
	}
}

// releaseLocked accounts a written batch and wakes anyone waiting for room.
func (q *sendQueue[T]) releaseLocked(batch []T) {
	if len(batch) == 0 {
		return
	}
	for _, m := range batch {
		q.bytes -= q.size(m)
	}
	clear(batch) // the frames' memory is not kept by the batch's array
	q.n -= len(batch)
	q.wakeLocked()
}
