package devruntime

import (
	"bytes"
	"strconv"
	"testing"
)

func line(i int) []byte { return []byte("frame-" + strconv.Itoa(i) + "\n") }

// add n frames numbered 1..n and return the retention.
func filled(maxFrames, maxBytes, n int) *retention {
	r := &retention{maxFrames: maxFrames, maxBytes: maxBytes}
	for i := 1; i <= n; i++ {
		r.add(line(i))
	}
	return r
}

func wantLines(t *testing.T, got [][]byte, from, to int) {
	t.Helper()
	if len(got) != to-from+1 {
		t.Fatalf("got %d lines, want %d..%d", len(got), from, to)
	}
	for i, l := range got {
		if !bytes.Equal(l, line(from+i)) {
			t.Fatalf("line %d is %q, want %q", i, l, line(from+i))
		}
	}
}

func TestRetentionCountBound(t *testing.T) {
	r := filled(3, 1<<20, 10)
	if r.len() != 3 || r.oldest(10) != 8 {
		t.Fatalf("kept %d frames from %d, want 3 from 8", r.len(), r.oldest(10))
	}
	wantLines(t, r.since(1, 10), 8, 10)
	wantLines(t, r.since(9, 10), 9, 10)
	if got := r.since(11, 10); got != nil {
		t.Fatalf("since past the end gave %d lines", len(got))
	}
}

func TestRetentionByteBound(t *testing.T) {
	n := len(line(1)) // every line below 10 has the same length
	r := filled(100, 2*n+1, 9)
	if r.len() != 2 || r.bytes != 2*n {
		t.Fatalf("kept %d frames, %d bytes; want 2, %d", r.len(), r.bytes, 2*n)
	}
	wantLines(t, r.since(0, 9), 8, 9)
}

// A frame larger than the byte bound is still kept, alone.
func TestRetentionKeepsNewestFrame(t *testing.T) {
	r := filled(100, 3, 5)
	if r.len() != 1 || r.oldest(5) != 5 {
		t.Fatalf("kept %d frames from %d, want only frame 5", r.len(), r.oldest(5))
	}
}

// Long runs compact the backing array without losing order.
func TestRetentionLongRun(t *testing.T) {
	r := filled(50, 1<<20, 10_000)
	wantLines(t, r.since(0, 10_000), 9951, 10_000)
	if cap(r.lines) > 1000 {
		t.Fatalf("backing array grew to %d for 50 retained frames", cap(r.lines))
	}
}

func TestRetentionEmpty(t *testing.T) {
	r := &retention{maxFrames: 4, maxBytes: 100}
	if r.oldest(0) != 1 || r.since(0, 0) != nil {
		t.Fatal("an empty retention must start at seq 1 and hold nothing")
	}
}
