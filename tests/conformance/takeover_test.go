package conformance

import (
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// A runtime that comes back behind a connection the relay has not seen die
// (its machine lost power or slept, or a NAT lost the mapping) takes the
// instance over once the incumbent misses the relay's probe. The browsers
// attached to the instance are then told exactly as when a runtime leaves:
// relay.error runtime_gone and close 4502, so that each redials and resumes
// against the new runtime (or learns it cannot). The new runtime numbers
// its streams afresh; a client left attached would drop its frames as
// already seen, and wait for ever for answers it has in fact been sent.
func TestRuntimeTakeoverTellsBrowsers(t *testing.T) {
	s := newSuite(t, nil)
	_, b := s.pair(t) // that runtime never reads again: it misses its probe
	rt := s.Connect(t)
	rt.Timeout = time.Minute // past the relay's heartbeat period: keepAlive answers every probe
	keepAlive(rt)
	// The browser answers no probe: left attached, it is ended with
	// heartbeat_timeout (4408) within the relay's heartbeat period, which
	// is not what it needs to be told.
	wantClosedWith(t, b, relayleg.CodeRuntimeGone)
	again := s.Attach(t, b.Session)
	if again.Session != b.Session {
		t.Fatalf("the redial after runtime_gone got id %q, want %q", again.Session, b.Session)
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: again.Instance, Session: again.Session, Seq: 1, Payload: []byte(`"from the new runtime"`)})
	if f := mustRead(t, again); string(f.Payload) != `"from the new runtime"` {
		t.Fatalf("the redialled socket got %s %s", f.Type, f.Payload)
	}
}

// A page whose runtime is away for longer than the grace period keeps its
// attachment when it kept knocking the whole time: each hello naming the
// id, refused unknown_instance for want of a runtime, restarts the id's
// grace, since its client is demonstrably still there. When the runtime is
// back it gets no acp.detach for the id (which would make it drop the
// session's agent and retention), and the page reclaims it and carries on.
// The knocks here come every tenth of a grace (a client's backoff, 30 s at
// most, is well inside the default 2 minutes), for over twice the grace.
func TestKnockingKeepsGrace(t *testing.T) {
	needInProcess(t, "sets the grace period")
	const grace = 4 * time.Second
	s := newSuite(t, func(c *relay.Config) { c.Limits.Grace = grace })
	old, b := s.pair(t)
	old.Conn.Close()
	wantClosedWith(t, b, relayleg.CodeRuntimeGone)
	for start := time.Now(); time.Since(start) < 2*grace+grace/2; time.Sleep(grace / 10) {
		k := dial(t, s, s.ClientToken)
		f, _, err := k.Hello(s.Instance, b.Session, librelay.ProtocolVersion)
		if err != nil {
			t.Fatalf("knock: %v", err)
		}
		wantError(t, f, librelay.CodeUnknownInstance, "hello")
		k.WS.CloseNow()
	}
	rt := s.Connect(t)
	again := s.Attach(t, b.Session)
	if again.Session != b.Session {
		t.Fatalf("after knocking all along the page was granted %q, want %q back", again.Session, b.Session)
	}
	again.Send(msg(again, `"still here"`))
	if f := mustCargo(t, rt); f.Type != librelay.TypeACPMessage || f.Session != b.Session {
		t.Fatalf("the runtime got %s for %s first, want the page's message", f.Type, f.Session)
	}
}
