package relay

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

// gate is a flush that blocks until released, recording what it wrote.
type gate struct {
	mu      sync.Mutex
	written []string
	open    chan struct{}
	fail    bool
	ended   chan bool
}

func newGate() *gate { return &gate{open: make(chan struct{}), ended: make(chan bool, 1)} }

func (g *gate) flush(batch [][]byte) error {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail {
		return errors.New("write failed")
	}
	for _, m := range batch {
		g.written = append(g.written, string(m))
	}
	return nil
}

func (g *gate) finish(clean bool) { g.ended <- clean }

func (g *gate) got() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.written...)
}

func newQueue(g *gate, frames, bytes int) *sendQueue[[]byte] {
	return &sendQueue[[]byte]{maxMsgs: frames, maxBytes: bytes, maxBatch: browserBatch, maxBatchBytes: browserBatchBytes,
		size: func(m []byte) int { return len(m) }, flush: g.flush, finish: g.finish,
		batches: &byteBatches, msgs: fifo[[]byte]{pool: &byteSegments}, ctl: fifo[[]byte]{pool: &byteSegments}}
}

var (
	byteSegments = sync.Pool{New: func() any { return new([fifoSegment][]byte) }}
	byteBatches  = sync.Pool{New: func() any { return new([][]byte) }}
)

// last is a message to close a queue with.
func last(m string) *[]byte {
	b := []byte(m)
	return &b
}

// The frame bound and the byte bound both hold, counting what is being
// written, and a full queue answers at once when asked not to wait.
func TestQueueBounds(t *testing.T) {
	g := newGate()
	q := newQueue(g, 3, 10)
	for _, m := range []string{"aaaa", "bbbb"} {
		if q.push([]byte(m), 0) != pushed {
			t.Fatalf("push %s refused", m)
		}
	}
	if q.push([]byte("ccc"), 0) != pushFull {
		t.Fatal("byte bound not enforced")
	}
	if q.push([]byte("cc"), 0) != pushed || q.push([]byte("d"), 0) != pushFull {
		t.Fatal("frame bound not enforced")
	}
	if !q.pushControl([]byte("ctl")) {
		t.Fatal("a control reply was refused within the slack")
	}
	close(g.open)
	if q.push([]byte("e"), -1) != pushed {
		t.Fatal("a waiting push did not get in once the queue drained")
	}
	q.close(nil, true)
	<-g.ended
	if got := g.got(); len(got) != 5 || !slices.Contains(got, "ctl") || got[4] != "e" {
		t.Fatalf("written %q", got)
	}
}

// The relay's own replies go ahead of the cargo queued before them, in
// their own order, and a batch of cargo is bounded in bytes (a larger
// message is a batch alone), so a reply waits for one small batch at most.
func TestQueueControlOvertakesCargo(t *testing.T) {
	var batches [][]string
	ended := make(chan bool, 1)
	q := &sendQueue[[]byte]{maxMsgs: 100, maxBytes: 1000, maxBatch: browserBatch, maxBatchBytes: 10,
		size: func(m []byte) int { return len(m) }, finish: func(clean bool) { ended <- clean },
		flush: func(batch [][]byte) error {
			var b []string
			for _, m := range batch {
				b = append(b, string(m))
			}
			batches = append(batches, b)
			return nil
		},
		batches: &byteBatches, msgs: fifo[[]byte]{pool: &byteSegments}, ctl: fifo[[]byte]{pool: &byteSegments}}
	q.hold() // the writer is busy: everything below is queued before it looks
	for _, m := range []string{"aaaa", "bbbb", "cccc", "a-frame-larger-than-a-batch", "dd"} {
		q.push([]byte(m), 0)
	}
	q.pushControl([]byte("ack1"))
	q.pushControl([]byte("ack2"))
	q.unhold()
	q.close(nil, true)
	<-ended
	want := [][]string{{"ack1", "ack2", "aaaa", "bbbb"}, {"cccc"}, {"a-frame-larger-than-a-batch"}, {"dd"}}
	if !reflect.DeepEqual(batches, want) {
		t.Fatalf("batches %q, want %q", batches, want)
	}
}

// A push that waits gives up after its bound; one waiting forever is woken
// by room or by the queue closing.
func TestQueueWait(t *testing.T) {
	g := newGate()
	q := newQueue(g, 1, 100)
	q.push([]byte("a"), 0)
	if q.push([]byte("b"), time.Millisecond) != pushFull {
		t.Fatal("a bounded wait on a stuck queue did not give up")
	}
	res := make(chan pushResult)
	go func() { res <- q.push([]byte("c"), -1) }()
	q.kill()
	if r := <-res; r != pushClosed {
		t.Fatalf("a waiter on a killed queue got %v", r)
	}
	close(g.open)
}

// Closing without keepPending drops what is queued; the last frame is
// written and finish reports a clean end, once.
func TestQueueCloseDropsPending(t *testing.T) {
	g := newGate()
	q := newQueue(g, 10, 100)
	q.hold() // nothing is in flight when close comes
	q.push([]byte("dropped"), 0)
	q.push([]byte("dropped too"), 0)
	if !q.close(last("last"), false) || q.close(last("again"), false) {
		t.Fatal("close must succeed once")
	}
	if q.push([]byte("late"), 0) != pushClosed || q.pushControl([]byte("late")) {
		t.Fatal("a closed queue took a frame")
	}
	close(g.open)
	if !<-g.ended {
		t.Fatal("finish reported a failed write")
	}
	if got := g.got(); len(got) != 1 || got[0] != "last" {
		t.Fatalf("written %q, want only the last frame", got)
	}
}

// A failed write ends the queue unclean, whether it was closing or not, and
// nothing more is taken.
func TestQueueWriteFailure(t *testing.T) {
	for _, closing := range []bool{false, true} {
		g := newGate()
		g.fail = true
		q := newQueue(g, 10, 100)
		q.push([]byte("a"), 0)
		if closing {
			q.close(last("last"), true)
		}
		close(g.open)
		if <-g.ended {
			t.Fatal("finish reported a clean end after a failed write")
		}
		if q.push([]byte("b"), 0) != pushClosed {
			t.Fatal("a failed queue took a frame")
		}
	}
}

// A held queue writes nothing until unheld, then in order.
func TestQueueHold(t *testing.T) {
	g := newGate()
	close(g.open)
	q := newQueue(g, 10, 100)
	q.hold()
	q.push([]byte("welcome"), 0)
	q.push([]byte("routed"), 0)
	if got := g.got(); len(got) != 0 {
		t.Fatalf("a held queue wrote %q", got)
	}
	q.unhold()
	q.close(nil, true)
	<-g.ended
	if got := g.got(); len(got) != 2 || got[0] != "welcome" {
		t.Fatalf("written %q", got)
	}
}

// An idle queue holds no slice and no writer.
func TestQueueIdleHoldsNothing(t *testing.T) {
	g := newGate()
	close(g.open)
	q := newQueue(g, 10, 100)
	q.push([]byte("a"), 0)
	for {
		q.mu.Lock()
		idle := !q.writing
		q.mu.Unlock()
		if idle {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if q.msgs.segs != nil || q.msgs.len() != 0 || q.n != 0 || q.bytes != 0 {
		t.Fatalf("idle queue holds %d msgs (%d bytes), %d segments", q.n, q.bytes, len(q.msgs.segs))
	}
}
