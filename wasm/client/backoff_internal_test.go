package client

import (
	"math"
	"testing"
	"time"
)

// Full jitter: every wait lies in [0, min(Max, Initial·2ⁿ)], the first one
// within Initial, and the waits are spread, not all one value.
func TestBackoffFullJitter(t *testing.T) {
	var b Backoff
	b.setDefaults()
	if b.Initial != 500*time.Millisecond || b.Max != 30*time.Second || b.Stable != time.Minute {
		t.Fatalf("defaults %+v", b)
	}
	for attempt := 0; attempt < 12; attempt++ {
		ceiling := min(b.Initial<<attempt, b.Max)
		seen := map[time.Duration]bool{}
		for i := 0; i < 200; i++ {
			d := b.delay(attempt)
			if d < 0 || d > ceiling {
				t.Fatalf("attempt %d waited %v, outside [0, %v]", attempt, d, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 100 {
			t.Fatalf("attempt %d: only %d distinct waits in 200", attempt, len(seen))
		}
	}
}

// A relay's retry_after is taken, but never beyond the client's own cap.
func TestRetryAfterClamped(t *testing.T) {
	var b Backoff
	b.setDefaults()
	if got := b.retryAfter(3); got != 3*time.Second {
		t.Fatalf("retry_after 3 → %v", got)
	}
	if got := b.retryAfter(86400); got != b.MaxRetryAfter {
		t.Fatalf("retry_after of a day → %v, want the cap %v", got, b.MaxRetryAfter)
	}
	if got := b.retryAfter(0); got != 0 {
		t.Fatalf("retry_after 0 → %v", got)
	}
}

// The heartbeat defaults are the protocol page's.
func TestHeartbeatDefaults(t *testing.T) {
	var h Heartbeat
	h.setDefaults()
	if h.Interval != 15*time.Second || h.Timeout != 10*time.Second {
		t.Fatalf("defaults %+v", h)
	}
}

// A retry_after too large to be a Duration is the cap too, not what its
// overflow happens to be (a moment, or a negative wait taken for none).
func TestRetryAfterOverflowClamped(t *testing.T) {
	var b Backoff
	b.setDefaults()
	for _, s := range []int{1 << 40, 10_000_000_000, 18446744074, math.MaxInt} {
		if got := b.retryAfter(s); got != b.MaxRetryAfter {
			t.Fatalf("retry_after %d → %v, want the cap %v", s, got, b.MaxRetryAfter)
		}
	}
	b.MaxRetryAfter = 1500 * time.Millisecond // not whole seconds
	if got := b.retryAfter(1); got != time.Second {
		t.Fatalf("retry_after 1 under a cap of 1.5s → %v", got)
	}
	if got := b.retryAfter(2); got != b.MaxRetryAfter {
		t.Fatalf("retry_after 2 under a cap of 1.5s → %v", got)
	}
}

// A relay's retry_after is waited out, and up to half of it again at
// random, so that the clients a relay sheds together do not all come back
// at the moment it named.
func TestRetryAfterSpread(t *testing.T) {
	var b Backoff
	b.setDefaults()
	hint := 10 * time.Second
	seen := map[time.Duration]bool{}
	for range 200 {
		d := b.spread(hint)
		if d < hint || d > hint+hint/2 {
			t.Fatalf("a hint of %v became a wait of %v, want from %v to %v", hint, d, hint, hint+hint/2)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("200 waits on one hint took %d values: not spread", len(seen))
	}
}
