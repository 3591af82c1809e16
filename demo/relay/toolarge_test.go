package relay_test

import (
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// readSkippingHeartbeats reads the browser's next frame that is not a heartbeat.
func readSkippingHeartbeats(t *testing.T, b *relaytest.Browser) librelay.Frame {
	t.Helper()
	for {
		f, err := b.Read()
		if err != nil {
			t.Fatalf("browser read: %v (close %d)", err, relaytest.CloseCode(err))
		}
		if f.Type != librelay.TypeHeartbeat {
			return f
		}
	}
}

// A runtime frame the browser leg cannot carry never vanishes: the browser
// gets relay.error frame_too_large in its place, on its session and with the
// dropped frame's seq, and the socket stays open. The same frame sent again
// (a replay after a resume) gets the same stand-in; an unsequenced one gets
// seq 0.
func TestOversizedRuntimeFrameHasAStandIn(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) { c.Limits.BrowserFrameBytes = 64 << 10 })
	rt := env.Connect(t)
	b := env.Attach(t, "")
	big := `"` + strings.Repeat("x", 64<<10) + `"`
	send := func(seq uint64, payload string) {
		t.Helper()
		if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: seq, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	wantStandIn := func(seq uint64) {
		t.Helper()
		f := readSkippingHeartbeats(t, b)
		var e librelay.Error
		if f.Type != librelay.TypeError || e.UnmarshalJSON(f.Payload) != nil || e.Code != relayleg.CodeFrameTooLarge ||
			f.Seq != seq || f.Session != b.Session || f.Instance != b.Instance || f.ReplyTo != "" {
			t.Fatalf("want relay.error frame_too_large with seq %d on %s, got %s seq %d session %q re %q: %s",
				seq, b.Session, f.Type, f.Seq, f.Session, f.ReplyTo, f.Payload)
		}
		if !strings.Contains(e.Message, "bytes, limit") {
			t.Fatalf("the stand-in's message %q does not give the sizes", e.Message)
		}
	}
	send(1, `"small"`)
	send(2, big)
	send(3, `"after"`)
	if f := readSkippingHeartbeats(t, b); f.Seq != 1 {
		t.Fatalf("first frame seq %d, want 1", f.Seq)
	}
	wantStandIn(2)
	if f := readSkippingHeartbeats(t, b); f.Seq != 3 || string(f.Payload) != `"after"` {
		t.Fatalf("after the stand-in: %s seq %d, want seq 3", f.Type, f.Seq)
	}
	send(2, big) // the replay after the client's resume
	wantStandIn(2)
	send(0, big)
	wantStandIn(0)
	send(4, `"still open"`)
	if f := readSkippingHeartbeats(t, b); f.Seq != 4 {
		t.Fatalf("the socket after three stand-ins: %s seq %d", f.Type, f.Seq)
	}
}

// A runtime request too large for the browser leg gets its one reply:
// relay.error frame_too_large answering its id, while the browser gets the
// usual stand-in with its seq (answering nothing).
func TestOversizedRuntimeRequestAnswered(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) { c.Limits.BrowserFrameBytes = 64 << 10 })
	rt := env.Connect(t)
	b := env.Attach(t, "")
	big := []byte(`"` + strings.Repeat("x", 64<<10) + `"`)
	if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, ID: "big", Instance: b.Instance, Session: b.Session, Seq: 2, Payload: big}); err != nil {
		t.Fatal(err)
	}
	f, err := rt.ReadCargo()
	var e librelay.Error
	if err != nil || f.Type != librelay.TypeError || e.UnmarshalJSON(f.Payload) != nil || e.Code != relayleg.CodeFrameTooLarge || f.ReplyTo != "big" {
		t.Fatalf("runtime: want relay.error frame_too_large re big, got %s re %q %s (%v)", f.Type, f.ReplyTo, f.Payload, err)
	}
	if f := readSkippingHeartbeats(t, b); f.Type != librelay.TypeError || f.Seq != 2 || f.ReplyTo != "" || f.ID != "" {
		t.Fatalf("browser: want the stand-in with seq 2, got %s seq %d re %q id %q", f.Type, f.Seq, f.ReplyTo, f.ID)
	}
}

// A sequenced request too large for the browser leg is answered once: a
// resume replays it, the browser gets its stand-in again, and the runtime
// no second reply (a request gets exactly one).
func TestOversizedRuntimeRequestAnsweredOnce(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) { c.Limits.BrowserFrameBytes = 64 << 10 })
	rt := env.Connect(t)
	b := env.Attach(t, "")
	big := librelay.Frame{Type: librelay.TypeACPMessage, ID: "big", Instance: b.Instance, Session: b.Session, Seq: 1,
		Payload: []byte(`"` + strings.Repeat("x", 64<<10) + `"`)}
	for round := 1; round <= 2; round++ { // the frame, then its replay
		if err := rt.Send(big); err != nil {
			t.Fatal(err)
		}
		if f := readSkippingHeartbeats(t, b); f.Type != librelay.TypeError || f.Seq != 1 {
			t.Fatalf("round %d: browser got %s seq %d, want the stand-in", round, f.Type, f.Seq)
		}
	}
	if err := rt.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "sync"}); err != nil {
		t.Fatal(err)
	}
	replies := 0
	for {
		f, err := rt.ReadCargo()
		if err != nil {
			t.Fatal(err)
		}
		if f.ReplyTo == "big" {
			replies++
		}
		if f.Type == librelay.TypeAck && f.ReplyTo == "sync" {
			break
		}
	}
	if replies != 1 {
		t.Fatalf("the runtime got %d replies to its request, want 1", replies)
	}
}
