//go:build !js

package client_test

import (
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// tooLarge sends what a relay sends in place of frame seq when it is over
// the browser leg's limit: relay.error frame_too_large on the attachment's
// session, with the dropped frame's seq in the envelope. The runtime
// stand-in sends it through the real relay, which routes a runtime's
// relay.error to the attachment it names, exactly as the relay's own would
// arrive.
func (s *scripted) tooLarge(t *testing.T, seq uint64) {
	t.Helper()
	payload, _ := librelay.Error{Code: relayleg.CodeFrameTooLarge, Message: "over the browser leg's limit"}.MarshalJSON()
	s.send(t, librelay.Frame{Type: librelay.TypeError, Seq: seq, Payload: payload})
}

// A frame the relay could not carry is seq N arrived and lost: OnEvicted
// reports it in its place (after N-1, delivery goes on at N+1) with its own
// reason, no resume chases it, and the stream goes on after it. A second
// word about a seq already passed changes nothing.
func TestFrameTooLargeReported(t *testing.T) {
	s := newScripted(t)
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	s.msg(t, 1, 1)
	s.tooLarge(t, 2)
	s.msg(t, 3, 3)
	s.tooLarge(t, 2) // already passed
	s.msg(t, 4, 4)
	s.c.Wait(t, "seq 4", func(c *clienttest.Collector) bool { return len(c.Msgs) == 3 })
	waitCursor(t, s.a, 4)

	if got := s.delivered(); fmt.Sprint(got) != "[1@1 3@3 4@4]" {
		t.Fatalf("delivered %v", got)
	}
	s.c.Lock()
	ev := append([]client.Eviction(nil), s.c.Evicted...)
	s.c.Unlock()
	want := client.Eviction{AfterSeq: 1, FromSeq: 3, Reason: relayleg.CodeFrameTooLarge}
	if len(ev) != 1 || ev[0] != want {
		t.Fatalf("evictions %+v, want [%+v]", ev, want)
	}
	// Nothing was resumed for it: the next thing the client sends the
	// runtime is what the test asks it to.
	send(t, s.a, `{"jsonrpc":"2.0","method":"marker"}`)
	if f := s.next(t); f.Type != librelay.TypeACPMessage {
		t.Fatalf("after the lost frame the client sent %s %s", f.Type, f.Payload)
	}
}

// gapWindow is how long TestRepeatedGapBacksOff watches a gap that never
// fills; RELAYWASM_GAP_WINDOW=60s measures the resumes of a whole minute.
func gapWindow(t *testing.T) time.Duration {
	if v := os.Getenv("RELAYWASM_GAP_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return 8 * time.Second
}

// A gap that comes back identical after every resume (a runtime whose
// replay never fills it) is not chased in a hot loop: with the default
// Backoff, each repeat waits at least half of 0.5 s·2ⁿ⁻¹ (capped at 15 s),
// so a window holds no more resumes than that floor allows (a loaded
// machine only makes them fewer). The figure, resumes per minute, is logged.
func TestRepeatedGapBacksOff(t *testing.T) {
	t.Parallel()
	s := newScripted(t) // default Backoff: 500ms, 30s
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	s.msg(t, 1, 1)
	s.msg(t, 3, 3) // seq 2 never comes

	var resumes atomic.Int64
	go func() {
		for {
			f, err := s.rt.ReadCargo()
			if err != nil {
				return
			}
			if f.Type != librelay.TypeResume {
				continue
			}
			resumes.Add(1)
			payload, _ := librelay.Resumed{FromSeq: 2}.MarshalJSON()
			// The replay carries the same gap again.
			if s.rt.Send(librelay.Frame{Type: librelay.TypeResumed, ReplyTo: f.ID, Instance: s.env.Instance, Session: s.a.Session(), Payload: payload}) != nil {
				return
			}
			if s.rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Seq: 3, Instance: s.env.Instance, Session: s.a.Session(),
				Payload: []byte(`{"jsonrpc":"2.0","method":"n","params":3}`)}) != nil {
				return
			}
		}
	}()
	window := gapWindow(t)
	start := time.Now()
	relaytest.WaitFor(t, "the first resumes", func() bool { return resumes.Load() >= 2 })
	time.Sleep(window - time.Since(start))
	n := resumes.Load()
	elapsed := time.Since(start)

	bound := gapBound(elapsed)
	t.Logf("a gap that never fills: %d resumes in %v (%.1f per minute; at most %d allowed)", n, elapsed.Round(time.Millisecond), float64(n)*float64(time.Minute)/float64(elapsed), bound)
	if n > int64(bound) {
		t.Fatalf("%d resumes in %v; the backoff allows at most %d", n, elapsed, bound)
	}
	if got := s.delivered(); fmt.Sprint(got) != "[1@1]" {
		t.Fatalf("delivered %v across the gap", got)
	}
}

// gapBound is how many resumes the default Backoff's floor allows within d
// of the first: the first, then one per elapsed floor of 0.25 s·2ⁿ⁻¹,
// capped at 15 s.
func gapBound(d time.Duration) int {
	n, at := 1, time.Duration(0)
	for k := 1; ; k++ {
		floor := time.Duration(math.Min(float64(250*time.Millisecond)*math.Pow(2, float64(k-1)), float64(15*time.Second)))
		at += floor
		if at > d {
			return n
		}
		n++
	}
}

// The relay's stand-in for an unsequenced frame it could not carry
// (relay.error frame_too_large with seq 0, on the attachment's session) is
// a message lost as much as a sequenced one: OnEvicted reports it in its
// place, between the messages around it, and delivery goes on.
func TestUnsequencedFrameTooLargeReported(t *testing.T) {
	s := newScripted(t)
	s.expectResume(t) // left unanswered, as contenox does
	s.msg(t, 0, 1)
	s.tooLarge(t, 0)
	s.msg(t, 0, 2)
	s.c.Wait(t, "the message after the lost one", func(c *clienttest.Collector) bool { return len(c.Msgs) == 2 })
	if got := s.delivered(); fmt.Sprint(got) != "[1@0 2@0]" {
		t.Fatalf("delivered %v", got)
	}
	s.c.Lock()
	defer s.c.Unlock()
	want := client.Eviction{Reason: relayleg.CodeFrameTooLarge}
	if len(s.c.Evicted) != 1 || s.c.Evicted[0] != want {
		t.Fatalf("evictions %+v, want [%+v]", s.c.Evicted, want)
	}
}
