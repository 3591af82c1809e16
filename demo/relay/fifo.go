package relay

import (
	"iter"
	"sync"
)

// fifoSegment is how many messages a fifo segment holds: 4 KiB of frames.
const fifoSegment = 32

// fifo is a sendQueue's storage: messages in fixed-size segments taken
// from a pool. It holds memory in proportion to what it holds, reuses it
// as it drains and fills (a queue that streams does not allocate), and
// holds none when empty. A growing slice would instead be reallocated, and
// its pointers rescanned, every time a queue filled after emptying.
type fifo[T any] struct {
	pool *sync.Pool // of *[fifoSegment]T
	segs []*[fifoSegment]T
	head int // first message, in segs[0]
	tail int // first free slot, in the last segment
	n    int
}

func (q *fifo[T]) len() int { return q.n }

func (q *fifo[T]) push(v T) {
	if len(q.segs) == 0 || q.tail == fifoSegment {
		q.segs = append(q.segs, q.pool.Get().(*[fifoSegment]T))
		q.tail = 0
	}
	q.segs[len(q.segs)-1][q.tail] = v
	q.tail++
	q.n++
}

// take moves up to k of the oldest messages onto dst, oldest first.
func (q *fifo[T]) take(dst []T, k int) []T {
	for k > 0 && q.n > 0 {
		seg, end := q.segs[0], fifoSegment
		if len(q.segs) == 1 {
			end = q.tail
		}
		m := min(k, end-q.head)
		dst = append(dst, seg[q.head:q.head+m]...)
		q.head += m
		q.n -= m
		k -= m
		if q.head == end {
			q.segs[0] = nil
			q.segs, q.head = q.segs[1:], 0
			q.put(seg)
		}
	}
	if q.n == 0 {
		q.reset()
	}
	return dst
}

// within counts how many of the oldest messages, at most k, fit in budget
// as size counts them; the oldest always counts, when k allows one.
func (q *fifo[T]) within(k, budget int, size func(T) int) int {
	n := 0
	for v := range q.all() {
		if n == k {
			break
		}
		if budget -= size(v); budget < 0 && n > 0 {
			break
		}
		n++
	}
	return n
}

// all yields every message, oldest first.
func (q *fifo[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		for i, seg := range q.segs {
			start, end := 0, fifoSegment
			if i == 0 {
				start = q.head
			}
			if i == len(q.segs)-1 {
				end = q.tail
			}
			for _, v := range seg[start:end] {
				if !yield(v) {
					return
				}
			}
		}
	}
}

// reset drops every message and gives the segments back.
func (q *fifo[T]) reset() {
	for _, seg := range q.segs {
		q.put(seg)
	}
	*q = fifo[T]{pool: q.pool}
}

// put clears a segment, so the pool keeps no message alive, and pools it.
func (q *fifo[T]) put(seg *[fifoSegment]T) {
	clear(seg[:])
	q.pool.Put(seg)
}
