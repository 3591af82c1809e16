package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// hello dials and says hello asking for a fresh id; it returns the socket
// and the relay's answer.
func hello(t *testing.T, env *relaytest.Env) (*relaytest.Browser, librelay.Frame) {
	t.Helper()
	b, _, err := relaytest.DialBrowser(context.Background(), env.AttachURL, env.ClientToken, relaytest.DialOptions{Origin: env.Origin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.WS.CloseNow() })
	f, _, err := b.Hello(env.Instance, "", librelay.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	return b, f
}

// At the per-instance limit an attachment id nobody holds (its socket
// dropped, its grace running) yields to a live newcomer, and the runtime is
// told acp.detach for it; ids held by live sockets never yield, so a
// newcomer past them is still refused with too_many_attachments.
func TestAbandonedIDsYield(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Limits.AttachmentsPerInstance = 3
		c.Limits.Grace = time.Hour // the grace never ends by itself here
	})
	rt := env.Connect(t)
	live := env.Attach(t, "")
	abandoned := map[string]bool{}
	for range 2 {
		b := env.Attach(t, "")
		abandoned[b.Session] = true
		b.WS.CloseNow() // dropped without a detach
	}
	// The relay sees each drop a moment after it; until then the id is held.
	for range 2 {
		for deadline := time.Now().Add(relaytest.IOTimeout); ; time.Sleep(5 * time.Millisecond) {
			_, f := hello(t, env)
			if f.Type == librelay.TypeWelcome {
				break
			}
			var e librelay.Error
			if e.UnmarshalJSON(f.Payload) != nil || e.Code != relayleg.CodeTooManyAttachments || time.Now().After(deadline) {
				t.Fatalf("a newcomer beside abandoned ids: %s %s", f.Type, f.Payload)
			}
		}
		f, err := rt.ReadCargo()
		if err != nil || f.Type != librelay.TypeACPDetach || !abandoned[f.Session] {
			t.Fatalf("the runtime got %s for %q (%v), want acp.detach for an abandoned id", f.Type, f.Session, err)
		}
		delete(abandoned, f.Session)
	}
	// Three live sockets now: nobody yields.
	if _, f := hello(t, env); f.Type != librelay.TypeError {
		t.Fatalf("a fourth live attachment: %s, want too_many_attachments", f.Type)
	}
	if err := live.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: live.Instance, Session: live.Session, Payload: []byte(`"here"`)}); err != nil {
		t.Fatal(err)
	}
	if f, err := rt.ReadCargo(); err != nil || f.Session != live.Session {
		t.Fatalf("the first live attachment: %s %v", f.Session, err)
	}
}

// With both at their defaults, the relay never grants more attachments than
// the dev runtime keeps sessions, so fresh attachments cannot make the
// runtime evict a live attachment's retained stream: once the relay is full
// it refuses the newcomer (4430), and the victim still resumes.
func TestDefaultLimitsAgree(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) { c.Limits.HeartbeatInterval = time.Hour })
	env.StartRuntime(t, nil)
	victim := env.Attach(t, "")
	if _, _, err := victim.Call(1, "initialize", `{"protocolVersion":1}`); err != nil {
		t.Fatal(err)
	}
	// Fresh attachments, each with a session at the runtime, until the
	// relay refuses one; 300 would be past the runtime's limit.
	for i := 0; ; i++ {
		if i == 300 {
			break
		}
		b, f := hello(t, env)
		if f.Type != librelay.TypeWelcome {
			break
		}
		if _, _, err := b.Call(1, "initialize", `{"protocolVersion":1}`); err != nil {
			t.Fatal(err)
		}
	}
	// After seq 1 (the initialize answer): a runtime that evicted the
	// stream knows no seq 1 and answers cursor_evicted.
	payload, _ := librelay.Resume{AfterSeq: 1}.MarshalJSON()
	victim.Send(librelay.Frame{Type: librelay.TypeResume, ID: "r", Instance: victim.Instance, Session: victim.Session, Payload: payload})
	for {
		f, err := victim.Read()
		if err != nil {
			t.Fatal(err)
		}
		if f.ReplyTo != "r" {
			continue
		}
		if f.Type != librelay.TypeResumed {
			t.Fatalf("the victim's resume got %s %s: its stream was evicted", f.Type, f.Payload)
		}
		return
	}
}
