package conformance

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// bigFrame is an acp.message on b's route of about n bytes.
func bigFrame(b *relaytest.Browser, n int) []byte {
	f := msg(b, `"`+strings.Repeat("x", n)+`"`)
	out, _ := librelay.AppendFrame(nil, &f)
	return out
}

// lastBeforeClose reads a runtime connection until it ends and returns the
// last frame the relay sent on it.
func lastBeforeClose(rt *relaytest.Runtime) librelay.Frame {
	var last librelay.Frame
	for {
		f, err := rt.Read()
		if err != nil {
			return last
		}
		last = f
	}
}

// A browser frame over the relay's limit gets relay.error frame_too_large
// and close 4413, and both reach a client that, like a browser, sends all of
// the message before it reads the answer, over a slow uplink. The relay must
// read the rest of the message first: one that closed with part of it unread
// would reset the connection, and a browser then reports 1006 and shows none
// of what the relay sent (here: the write fails).
func TestOversizeBrowserFrame(t *testing.T) {
	s := newSuite(t, func(c *relay.Config) {
		// A relay that answered at once and then waited only its close
		// timeout for the client's close would cut this client mid-message.
		c.Limits.CloseTimeout = 100 * time.Millisecond
	})
	s.Connect(t)
	b := s.AttachWith(t, "", relaytest.DialOptions{Uplink: 1 << 20})
	if err := b.SendRaw(bigFrame(b, s.frameLimit+512<<10)); err != nil {
		t.Fatalf("the relay cut the connection while the oversized message was being sent: %v", err)
	}
	wantClosedWith(t, b, relayleg.CodeFrameTooLarge)
}

// A frame just under the limit is fine.
func TestFrameAtLimitRouted(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	big := bigFrame(b, s.frameLimit-512)
	if err := b.SendRaw(big); err != nil {
		t.Fatal(err)
	}
	if f := mustCargo(t, rt); len(f.Payload) < s.frameLimit-512 {
		t.Fatalf("runtime got a %d-byte payload", len(f.Payload))
	}
}

// A hello over the hello limit is refused with frame_too_large and 4413
// before the relay has parsed it.
func TestOversizeHello(t *testing.T) {
	s := newSuite(t, nil)
	s.Connect(t)
	b := dial(t, s, s.ClientToken)
	payload, _ := librelay.Hello{ProtocolVersion: 1, Instance: s.Instance, Agent: strings.Repeat("a", s.helloLimit)}.MarshalJSON()
	hello := librelay.Frame{Type: librelay.TypeHello, ID: "hello", Instance: s.Instance, Payload: payload}
	if err := b.Send(hello); err != nil {
		t.Fatal(err)
	}
	wantClosedWith(t, b, relayleg.CodeFrameTooLarge)
}

// A runtime-leg line over librelay.MaxFrameBytes gets frame_too_large and
// the connection is closed.
func TestOversizeRuntimeFrame(t *testing.T) {
	s := newSuite(t, nil)
	rt, _ := s.pair(t)
	line := append(bytes.Repeat([]byte("x"), librelay.MaxFrameBytes+16), '\n')
	go rt.SendRaw(line)
	wantError(t, lastBeforeClose(rt), relayleg.CodeFrameTooLarge, "")
}

// A socket that stops reading while its runtime keeps sending is a slow
// consumer: its queue stays bounded, and once it reads again it finds
// slow_consumer and close 4429. Another attachment of the same instance is
// not held up for good.
func TestSlowConsumer(t *testing.T) {
	s := newSuite(t, func(c *relay.Config) {
		c.Limits.QueueFrames, c.Limits.QueueBytes = 64, 256<<10
		c.Limits.CloseTimeout = time.Minute // the test reads only after the whole flood
	})
	rt := s.Connect(t)
	slow := s.AttachWith(t, "", relaytest.DialOptions{ReadBuf: 16 << 10})
	fast := s.Attach(t, "")
	chunk := `"` + strings.Repeat("s", 64<<10) + `"`
	for sent := 0; sent < s.floodBytes; sent += len(chunk) {
		f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: slow.Instance, Session: slow.Session, Payload: []byte(chunk)}
		if err := rt.Send(f); err != nil {
			t.Fatalf("runtime held up by a slow consumer: %v", err)
		}
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: fast.Instance, Session: fast.Session, Payload: []byte(`"marker"`)})
	if f := mustRead(t, fast); string(f.Payload) != `"marker"` {
		t.Fatalf("other attachment got %s", f.Payload)
	}
	wantClosedWith(t, slow, relayleg.CodeSlowConsumer)
}

// heartbeatSuite is a relay with a short heartbeat interval in-process, or
// the external relay when -heartbeat allows waiting for its own. The
// timeout is 2 s: probes come quickly, and an answer the loaded machine
// delivers late is still in time, so only a probe left unanswered ends a
// peer.
func heartbeatSuite(t *testing.T) *suite {
	need(t, inProcess() || *flagHeartbeat, "needs -heartbeat to wait for the relay's heartbeat period")
	return newSuite(t, func(c *relay.Config) {
		c.Limits.HeartbeatInterval, c.Limits.HeartbeatTimeout = 100*time.Millisecond, 2*time.Second
	})
}

// A silent browser is probed with relay.heartbeat; answering keeps it, and
// leaving a probe unanswered ends it with heartbeat_timeout and close 4408.
func TestBrowserHeartbeatProbe(t *testing.T) {
	s := heartbeatSuite(t)
	rt, b := s.pair(t)
	keepAlive(rt)
	for range 3 {
		f, err := b.Read()
		if err != nil || f.Type != librelay.TypeHeartbeat || !f.IsRequest() {
			t.Fatalf("want a relay.heartbeat request, got %s (%v)", f.Type, err)
		}
		b.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
	}
	wantClosedWith(t, b, relayleg.CodeHeartbeatTimeout)
}

// keepAlive answers the runtime's heartbeats in the background until its
// connection ends.
func keepAlive(rt *relaytest.Runtime) {
	go func() {
		for {
			if _, err := rt.ReadCargo(); err != nil {
				return
			}
		}
	}()
}

// A silent runtime is probed too; one that does not answer is let go with
// heartbeat_timeout, and its browsers get runtime_gone.
func TestRuntimeHeartbeatProbe(t *testing.T) {
	s := heartbeatSuite(t)
	rt, b := s.pair(t)
	rt.Timeout = time.Minute
	closed := make(chan relayleg.CloseCode, 1)
	b.AnswerHeartbeats = true
	go func() { // the browser answers its own probes and reports how it ended
		frames, code := b.ReadUntilClosed()
		gone := relayleg.CloseCode(0)
		for _, f := range frames {
			var e librelay.Error
			if f.Type == librelay.TypeError && e.UnmarshalJSON(f.Payload) == nil && e.Code == relayleg.CodeRuntimeGone {
				gone = code
			}
		}
		closed <- gone
	}()
	f, err := rt.Read()
	if err != nil || f.Type != librelay.TypeHeartbeat || !f.IsRequest() {
		t.Fatalf("want a relay.heartbeat request, got %s (%v)", f.Type, err)
	}
	wantError(t, lastBeforeClose(rt), relayleg.CodeHeartbeatTimeout, "")
	if code := <-closed; code != relayleg.CloseRuntimeGone {
		t.Fatalf("browser of a timed-out runtime: runtime_gone close %d, want %d", code, relayleg.CloseRuntimeGone)
	}
}

// stalledAttachments is how many sockets stop reading at once in
// TestStalledConsumersShedAtOnce: enough that a relay waiting any fixed time
// for each (2 s, say) would hold the instance up for longer than a peer's
// I/O guard.
const stalledAttachments = 16

// Sockets that stop reading never hold up their instance: each is shed
// (slow_consumer, close 4429) as soon as its queue is full, without the
// runtime leg waiting for it, so the runtime's frames keep flowing and a
// healthy attachment of the same instance gets its marker.
func TestStalledConsumersShedAtOnce(t *testing.T) {
	// 128 MiB of flood through TLS under -race takes this machine a minute,
	// and the stalled sockets' last frames then outlast the raw client's
	// 20 s read guard; the shedding does not depend on the transport, and
	// the rule runs over TLS without -race and over plain HTTP with it.
	need(t, !(overTLS && raceEnabled), "too slow over TLS under -race")
	s := newSuite(t, func(c *relay.Config) {
		c.Limits.QueueFrames, c.Limits.QueueBytes = 64, 256<<10
		c.Limits.CloseTimeout = 10 * time.Minute // a hang guard: the test reads only after all 16 floods
		c.Limits.HeartbeatInterval = time.Hour   // the raw runtime answers no probe
	})
	rt := s.Connect(t)
	var stalled []*relaytest.Browser
	for range stalledAttachments {
		stalled = append(stalled, s.AttachWith(t, "", relaytest.DialOptions{ReadBuf: 16 << 10}))
	}
	healthy := s.Attach(t, "")
	chunk := `"` + strings.Repeat("s", 64<<10) + `"`
	for _, slow := range stalled {
		for sent := 0; sent < s.floodBytes; sent += len(chunk) {
			f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: slow.Instance, Session: slow.Session, Payload: []byte(chunk)}
			if err := rt.Send(f); err != nil {
				t.Fatalf("runtime held up by stalled consumers: %v", err)
			}
		}
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: healthy.Instance, Session: healthy.Session, Payload: []byte(`"marker"`)})
	if f := mustRead(t, healthy); string(f.Payload) != `"marker"` {
		t.Fatalf("the healthy attachment got %s", f.Payload)
	}
	// All at once: a socket left waiting while the test read the others
	// could see its close handshake time out.
	codes := make(chan relayleg.CloseCode, len(stalled))
	for _, slow := range stalled {
		go func() {
			frames, code := readUntilClosedWithin(slow, 2*time.Minute)
			if !hasError(frames, relayleg.CodeSlowConsumer) {
				code = -code // no relay.error slow_consumer before the close
			}
			codes <- code
		}()
	}
	for range stalled {
		if code := <-codes; code != relayleg.CloseSlowConsumer {
			t.Fatalf("a stalled socket ended with %d (negative: without relay.error slow_consumer), want 4429", code)
		}
	}
}

// hasError reports whether frames hold a relay.error with code.
func hasError(frames []librelay.Frame, code string) bool {
	for _, f := range frames {
		var e librelay.Error
		if f.Type == librelay.TypeError && e.UnmarshalJSON(f.Payload) == nil && e.Code == code {
			return true
		}
	}
	return false
}

// readUntilClosedWithin is Browser.ReadUntilClosed with a longer guard on
// each read than relaytest.IOTimeout: sixteen sockets drained at once, under
// -race on a loaded machine, can take longer than that (a hang guard, not a
// claim about speed).
func readUntilClosedWithin(b *relaytest.Browser, guard time.Duration) ([]librelay.Frame, relayleg.CloseCode) {
	var frames []librelay.Frame
	for {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		_, msg, err := b.WS.Read(ctx)
		cancel()
		if err != nil {
			return frames, relaytest.CloseCode(err)
		}
		if f, err := librelay.ParseFrame(msg); err == nil && f.Type != librelay.TypeHeartbeat {
			frames = append(frames, f)
		}
	}
}
