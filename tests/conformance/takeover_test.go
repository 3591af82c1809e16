package conformance

import (
	"testing"
	"time"

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
