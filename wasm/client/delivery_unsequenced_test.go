//go:build !js

package client_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// refusing wraps a Collector's OnMessage with a handler that refuses the
// chunks named in once the first time it sees them, and every message while
// all is set, as an application whose handler throws would.
type refusing struct {
	mu   sync.Mutex
	once map[string]bool
	all  bool
	c    *clienttest.Collector
}

var errRefused = errors.New("the application refuses this message")

func (h *refusing) OnMessage(m client.Message) error {
	h.mu.Lock()
	all := h.all
	var rpc relaytest.RPC
	_ = json.Unmarshal(m.Payload, &rpc)
	text, _ := relaytest.ChunkText(rpc)
	refuse := all || h.once[text]
	delete(h.once, text)
	h.mu.Unlock()
	if refuse {
		return errRefused
	}
	return h.c.OnMessage(m)
}

func (h *refusing) setAll(v bool) {
	h.mu.Lock()
	h.all = v
	h.mu.Unlock()
}

// An unsequenced message (all a runtime that does not number its messages
// sends: contenox as it ships) whose handler fails is delivered again, with
// those after it, in order and before anything newer: no resume can bring
// it back, so the engine keeps it. Nothing is lost and nothing is doubled,
// and no loss is reported.
func TestUnsequencedRefusedDeliveredAgain(t *testing.T) {
	s := newStack(t, nil, nonResuming)
	c := clienttest.NewCollector()
	h := &refusing{c: c, once: map[string]bool{"10\n": true, "11\n": true, "40\n": true}}
	o := s.options(client.NewMemoryStore(), c)
	o.ResumeTimeout = resumeWait
	o.OnMessage = h.OnMessage
	a := s.attach(o)
	session := startChat(t, c, a)
	promptCount(t, c, a, 3, session, 60)
	h.mu.Lock()
	left := len(h.once)
	h.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d of the refusals never happened", left)
	}
	c.Lock()
	defer c.Unlock()
	if len(c.Evicted) != 0 {
		t.Fatalf("evictions %+v: nothing was lost", c.Evicted)
	}
}

// A handler that keeps failing while unsequenced messages keep coming does
// not have the engine keep them without bound: past the bound what arrives
// is dropped, and OnEvicted reports the loss (reason evicted) in its place,
// after the messages kept, which are delivered in order once the handler
// takes them again; what comes after the loss is delivered after it.
func TestUnsequencedHeldBounded(t *testing.T) {
	const kept = 4096 // the engine's bound (maxHeld)
	h := &refusing{all: true}
	s := newScriptedWith(t, func(o *client.Options) {
		o.OnMessage = h.OnMessage
		o.ResumeTimeout = resumeWait
		o.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	})
	h.c = s.c
	s.expectResume(t) // left unanswered, as contenox does
	for n := 1; n <= kept+100; n++ {
		s.msg(t, 0, n)
	}
	// The client answers a request it does not handle as it reads it: once
	// the answer is in, it has read every message before it.
	s.send(t, librelay.Frame{Type: "x.query", ID: "q1"})
	for f := s.next(t); f.ReplyTo != "q1"; f = s.next(t) {
	}
	h.setAll(false)
	s.c.Wait(t, "the kept messages and the loss", func(c *clienttest.Collector) bool { return len(c.Msgs) == kept && len(c.Evicted) == 1 })
	s.msg(t, 0, kept+101)
	s.c.Wait(t, "the message after the loss", func(c *clienttest.Collector) bool { return len(c.Msgs) == kept+1 })

	for i, m := range s.c.Snapshot() {
		want := i + 1
		if i == kept {
			want = kept + 101
		}
		if string(m.RPC.Params) != strconv.Itoa(want) {
			t.Fatalf("message %d carries %s, want %d", i, m.RPC.Params, want)
		}
	}
	s.c.Lock()
	defer s.c.Unlock()
	want := client.Eviction{Reason: client.EvictedRetention}
	if len(s.c.Evicted) != 1 || s.c.Evicted[0] != want {
		t.Fatalf("evictions %+v, want [%+v]", s.c.Evicted, want)
	}
}

// A held message comes again when the redelivery backoff ends, by itself:
// it waited for whatever the relay sent next, and from an idle runtime that
// does not resume that was the answer to the probe ending the resume's wait
// (ResumeTimeout; here longer than the test waits, as are both sides'
// heartbeats).
func TestUnsequencedRefusedComesAgainUnprompted(t *testing.T) {
	var mu sync.Mutex
	refused := false
	var s *scripted
	quiet := func(c *relay.Config) { c.Limits.HeartbeatInterval = 10 * time.Minute }
	s = newScriptedOn(t, quiet, func(o *client.Options) {
		o.ResumeTimeout = 10 * time.Minute
		o.Heartbeat = client.Heartbeat{Interval: 10 * time.Minute, Timeout: 10 * time.Minute}
		o.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
		o.OnMessage = func(m client.Message) error {
			mu.Lock()
			first := !refused
			refused = true
			mu.Unlock()
			if first {
				return errRefused
			}
			return s.c.OnMessage(m)
		}
	})
	s.expectResume(t) // left unanswered, as contenox does
	s.msg(t, 0, 1)
	s.msg(t, 0, 2)
	s.c.Wait(t, "both messages, the refused one again first", func(c *clienttest.Collector) bool { return len(c.Msgs) == 2 })
	for i, m := range s.c.Snapshot() {
		if string(m.RPC.Params) != strconv.Itoa(i+1) {
			t.Fatalf("message %d carries %s", i, m.RPC.Params)
		}
	}
}
