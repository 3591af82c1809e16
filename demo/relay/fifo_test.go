package relay

import (
	"sync"
	"testing"
)

var intSegments = sync.Pool{New: func() any { return new([fifoSegment]int) }}

// A fifo gives back what it was given, in order, across segment boundaries
// and however it is taken; it holds no segment once empty, and reset drops
// everything.
func TestFifoOrder(t *testing.T) {
	q := fifo[int]{pool: &intSegments}
	next, want := 0, 0
	for _, step := range []struct{ push, take int }{
		{1, 1}, {fifoSegment, 5}, {3 * fifoSegment, fifoSegment + 7}, {0, 1000}, {fifoSegment + 1, fifoSegment + 1},
	} {
		for range step.push {
			q.push(next)
			next++
		}
		got := q.take(nil, step.take)
		if len(got) != min(step.take, next-want) {
			t.Fatalf("took %d, want %d", len(got), min(step.take, next-want))
		}
		for _, v := range got {
			if v != want {
				t.Fatalf("took %d, want %d", v, want)
			}
			want++
		}
		if q.len() != next-want {
			t.Fatalf("len %d, want %d", q.len(), next-want)
		}
		var each []int
		for v := range q.all() {
			each = append(each, v)
		}
		if len(each) != q.len() || (len(each) > 0 && each[0] != want) {
			t.Fatalf("each saw %v, want %d from %d", each, q.len(), want)
		}
		if q.len() == 0 && q.segs != nil {
			t.Fatal("an empty fifo holds segments")
		}
	}
	q.push(1)
	q.push(2)
	q.reset()
	if q.len() != 0 || q.segs != nil || len(q.take(nil, 10)) != 0 {
		t.Fatal("reset left messages behind")
	}
}
