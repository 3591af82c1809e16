package conformance

import (
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
)

// Spec 001 gives chain_trigger (and contenox v1.0.0 ask.verdict) one
// direction: relay→machine. A browser that sends one on its own route gets
// relay.error unsupported_type when it is a request (its one reply) and
// nothing when it is a notification, and the runtime never sees it: a
// client credential must not start the machine's chains or answer its asks.
func TestRelayToMachineRefusedFromBrowser(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	for _, typ := range []string{librelay.TypeChainTrigger, librelay.TypeAskVerdict} {
		notify := librelay.Frame{Type: typ, Instance: b.Instance, Session: b.Session, Payload: []byte(`{"request_id":"n"}`)}
		request := notify
		request.ID = "d-" + typ
		for _, f := range []librelay.Frame{notify, request, {Type: librelay.TypeHeartbeat, ID: "after-" + typ}} {
			if err := b.Send(f); err != nil {
				t.Fatal(err)
			}
		}
		wantError(t, mustRead(t, b), librelay.CodeUnsupportedType, request.ID)
		if f := mustRead(t, b); f.Type != librelay.TypeAck || f.ReplyTo != "after-"+typ {
			t.Fatalf("%s: after the one reply to the request, want the ack, got %s re %q %s", typ, f.Type, f.ReplyTo, f.Payload)
		}
	}
	b.Send(msg(b, `"marker"`))
	if f := mustCargo(t, rt); f.Type != librelay.TypeACPMessage || string(f.Payload) != `"marker"` {
		t.Fatalf("runtime got %s %s, want only the marker", f.Type, f.Payload)
	}
}

// The machine→relay types (chain_trigger_result, ask.published,
// ask.resolved) are addressed to the relay: a runtime's frame of one never
// reaches a browser, whether it is sessionless (as contenox sends them) or
// names the browser's own session, and whether it is a notification or a
// response. A request among them still gets its one reply from the relay.
func TestMachineToRelayNeverReachesBrowser(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	for _, typ := range []string{librelay.TypeChainTriggerResult, librelay.TypeAskPublished, librelay.TypeAskResolved} {
		for _, session := range []string{"", b.Session} {
			for _, f := range []librelay.Frame{
				{Type: typ, Instance: b.Instance, Session: session, Payload: []byte(`{"request_id":"r","status":"ok"}`)},
				{Type: typ, Instance: b.Instance, Session: session, ReplyTo: "t1", Payload: []byte(`{}`)},
			} {
				if err := rt.Send(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		rt.Send(librelay.Frame{Type: typ, Instance: b.Instance, Session: b.Session, ID: "m-" + typ, Payload: []byte(`{}`)})
		rt.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "after-" + typ})
		wantError(t, mustCargo(t, rt), librelay.CodeUnsupportedType, "m-"+typ)
		if f, err := rt.Read(); err != nil || f.Type != librelay.TypeAck || f.ReplyTo != "after-"+typ {
			t.Fatalf("%s: after the one reply to the request, want the ack, got %s re %q %s (%v)", typ, f.Type, f.ReplyTo, f.Payload, err)
		}
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Payload: []byte(`"marker"`)})
	if f := mustRead(t, b); f.Type != librelay.TypeACPMessage || string(f.Payload) != `"marker"` {
		t.Fatalf("browser got %s %s, want only the marker", f.Type, f.Payload)
	}
}

// Nor does a browser get to send the machine→relay types: they are the
// machine's reports to the relay, and a browser that sends one is refused
// as for the relay→machine types, nothing reaching the runtime.
func TestMachineToRelayRefusedFromBrowser(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	for _, typ := range []string{librelay.TypeChainTriggerResult, librelay.TypeAskPublished, librelay.TypeAskResolved} {
		b.Send(librelay.Frame{Type: typ, Instance: b.Instance, Session: b.Session, Payload: []byte(`{}`)})
		b.Send(librelay.Frame{Type: typ, Instance: b.Instance, Session: b.Session, ID: "b-" + typ, Payload: []byte(`{}`)})
		wantError(t, mustRead(t, b), librelay.CodeUnsupportedType, "b-"+typ)
	}
	b.Send(msg(b, `"marker"`))
	if f := mustCargo(t, rt); f.Type != librelay.TypeACPMessage || string(f.Payload) != `"marker"` {
		t.Fatalf("runtime got %s %s, want only the marker", f.Type, f.Payload)
	}
}
