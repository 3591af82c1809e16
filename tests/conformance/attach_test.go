package conformance

import (
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// A hello naming a live attachment's id, with the same credential and
// instance, gets that id; the socket that held it is told superseded and
// closed 4409, and frames for the id now reach the new socket.
func TestReclaimSupersedes(t *testing.T) {
	s := newSuite(t, nil)
	rt, b1 := s.pair(t)
	b2 := s.Attach(t, b1.Session)
	if b2.Session != b1.Session {
		t.Fatalf("reclaim got id %q, want %q", b2.Session, b1.Session)
	}
	wantClosedWith(t, b1, "superseded")
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b2.Instance, Session: b2.Session, Payload: []byte(`"for the new holder"`)})
	if f := mustRead(t, b2); string(f.Payload) != `"for the new holder"` {
		t.Fatalf("reclaiming socket got %s", f.Payload)
	}
}

// A dropped socket's id is reclaimable: the reclaim gets the same id.
func TestReclaimAfterDrop(t *testing.T) {
	s := newSuite(t, nil)
	rt, b1 := s.pair(t)
	b1.WS.CloseNow()
	b2 := s.Attach(t, b1.Session)
	if b2.Session != b1.Session {
		t.Fatalf("reclaim after a drop got id %q, want %q", b2.Session, b1.Session)
	}
	b2.Send(msg(b2, `"back"`))
	if f := mustCargo(t, rt); string(f.Payload) != `"back"` || f.Session != b1.Session {
		t.Fatalf("runtime got %s on %q", f.Payload, f.Session)
	}
}

// Ids are bound to credential and instance: an id the relay did not issue,
// a tampered id, or a real id presented by another credential gets a fresh
// id, and the holder is not disturbed.
func TestIDBinding(t *testing.T) {
	s := newSuite(t, nil)
	rt, b1 := s.pair(t)
	tampered := []byte(b1.Session)
	tampered[len(tampered)/2] ^= 1
	for _, wanted := range []string{"made-up-attachment-id", string(tampered)} {
		if b := s.Attach(t, wanted); b.Session == wanted || b.Session == b1.Session {
			t.Fatalf("hello naming %q got %q", wanted, b.Session)
		}
	}
	if s.otherClient != "" {
		b := dial(t, s, s.otherClient)
		f, _, err := b.Hello(s.Instance, b1.Session, librelay.ProtocolVersion)
		if err != nil || f.Type != librelay.TypeWelcome || f.Session == b1.Session {
			t.Fatalf("another credential naming the id got %s %q (%v)", f.Type, f.Session, err)
		}
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b1.Instance, Session: b1.Session, Payload: []byte(`"still yours"`)})
	if f := mustRead(t, b1); string(f.Payload) != `"still yours"` {
		t.Fatalf("holder got %s %s", f.Type, f.Payload)
	}
}

// An id issued for one instance does not reclaim on another.
func TestIDBoundToInstance(t *testing.T) {
	s := newSuite(t, nil)
	need(t, s.anyClient != "" && s.anyRuntime != "", "needs -any-client-token and -any-runtime-token for a second instance")
	second := s.Instance + "-second"
	for _, inst := range []string{s.Instance, second} {
		if f, _ := runtimeHello(t, s, s.anyRuntime, inst, librelay.ProtocolVersion); f.Type != librelay.TypeWelcome {
			t.Fatalf("runtime for %s: %s", inst, f.Payload)
		}
	}
	b1 := dial(t, s, s.anyClient)
	f, _, _ := b1.Hello(s.Instance, "", librelay.ProtocolVersion)
	b2 := dial(t, s, s.anyClient)
	g, _, err := b2.Hello(second, f.Session, librelay.ProtocolVersion)
	if err != nil || g.Type != librelay.TypeWelcome || g.Session == f.Session {
		t.Fatalf("id of %s reclaimed on %s: %s %q (%v)", s.Instance, second, g.Type, g.Session, err)
	}
}

// A client's acp.detach is forwarded to the runtime at once, the socket is
// closed 1000, and the id is ended: naming it again gets a fresh id.
func TestExplicitDetach(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	b.Send(librelay.Frame{Type: librelay.TypeACPDetach, Instance: b.Instance, Session: b.Session})
	f := mustCargo(t, rt)
	if f.Type != librelay.TypeACPDetach || f.Instance != b.Instance || f.Session != b.Session {
		t.Fatalf("runtime got %s %s/%s, want acp.detach for the attachment", f.Type, f.Instance, f.Session)
	}
	if _, code := b.ReadUntilClosed(); code != 1000 {
		t.Fatalf("detached socket closed with %d, want 1000", code)
	}
	if again := s.Attach(t, b.Session); again.Session == b.Session {
		t.Fatal("a detached id was granted again")
	}
}

// A socket that drops without a detach keeps its id for the grace period;
// then the runtime gets acp.detach for it and the id is ended.
func TestGraceExpiryDetaches(t *testing.T) {
	grace := *flagGrace
	s := newSuite(t, func(c *relay.Config) { c.Limits.Grace = 50 * time.Millisecond })
	if inProcess() {
		grace = s.Config.Limits.Grace
	}
	need(t, grace > 0, "needs -grace (the relay's grace period) to wait it out")
	rt, b := s.pair(t)
	rt.Timeout = grace + relaytest.IOTimeout
	b.WS.CloseNow()
	f := mustCargo(t, rt)
	if f.Type != librelay.TypeACPDetach || f.Instance != b.Instance || f.Session != b.Session {
		t.Fatalf("runtime got %s %s/%s, want acp.detach for the dropped attachment", f.Type, f.Instance, f.Session)
	}
	if again := s.Attach(t, b.Session); again.Session == b.Session {
		t.Fatal("an id whose grace expired was granted again")
	}
}

// A reclaim within the grace period cancels the detach. The grace is long
// enough that the reclaim always comes within it; a probe attachment
// dropped after the reclaim has the same grace, and its detach reaching the
// runtime shows the first one's grace would have run out by then.
func TestReclaimCancelsGrace(t *testing.T) {
	needInProcess(t, "sets the grace period")
	const grace = 5 * time.Second
	s := newSuite(t, func(c *relay.Config) { c.Limits.Grace = grace })
	rt, b1 := s.pair(t)
	rt.Timeout = grace + relaytest.IOTimeout
	b1.WS.CloseNow()
	b2 := s.Attach(t, b1.Session)
	if b2.Session != b1.Session {
		t.Fatalf("a reclaim within the %v grace was granted %q, want %q", grace, b2.Session, b1.Session)
	}
	probe := s.Attach(t, "")
	probe.WS.CloseNow()
	for {
		f := mustCargo(t, rt)
		if f.Type == librelay.TypeACPDetach && f.Session == b1.Session {
			t.Fatalf("runtime got acp.detach for %s after a reclaim within the grace period", f.Session)
		}
		if f.Type == librelay.TypeACPDetach && f.Session == probe.Session {
			break
		}
	}
	b2.Send(msg(b2, `"marker"`))
	if f := mustCargo(t, rt); f.Type != librelay.TypeACPMessage || f.Session != b1.Session {
		t.Fatalf("runtime got %s for %s after a reclaim within the grace period", f.Type, f.Session)
	}
}

// An attachment id survives a relay restart with the same key.
func TestIDSurvivesRestart(t *testing.T) {
	needInProcess(t, "restarts the relay")
	s := newSuite(t, nil)
	old, b1 := s.pair(t)
	b1.WS.CloseNow()
	old.Conn.Close()
	s.Restart(t)
	rt := s.Connect(t)
	b2 := s.Attach(t, b1.Session)
	if b2.Session != b1.Session {
		t.Fatalf("after a restart the id became %q, want %q", b2.Session, b1.Session)
	}
	b2.Send(msg(b2, `"after restart"`))
	if f := mustCargo(t, rt); f.Session != b1.Session {
		t.Fatalf("runtime got %s on %q", f.Payload, f.Session)
	}
}
