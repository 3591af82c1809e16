package conformance

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// wantReply checks f is a relay.error answering re (any code: spec 001 asks
// for exactly one reply, and says nothing of which).
func wantReply(t *testing.T, f librelay.Frame, re string) {
	t.Helper()
	var e librelay.Error
	if f.Type != librelay.TypeError || e.UnmarshalJSON(f.Payload) != nil || e.Code == "" || f.ReplyTo != re {
		t.Fatalf("want a relay.error answering %q, got %s re %q: %s", re, f.Type, f.ReplyTo, f.Payload)
	}
}

// A request a browser socket may not send on (another attachment's
// session, a session nobody holds, no session) still gets its one reply: a
// relay.error answering it. Nothing reaches the runtime or the other
// attachment.
func TestBrowserRequestOffRouteAnswered(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	other := s.Attach(t, "")
	reqs := []librelay.Frame{
		{Type: librelay.TypeACPMessage, ID: "other", Instance: b.Instance, Session: other.Session, Payload: []byte(`{}`)},
		{Type: librelay.TypeACPMessage, ID: "unheld", Instance: b.Instance, Session: "nobody-holds-this", Payload: []byte(`{}`)},
		{Type: librelay.TypeACPMessage, ID: "none", Instance: b.Instance, Payload: []byte(`{}`)},
		{Type: "x.unknown", ID: "bare", Payload: []byte(`{}`)},
	}
	for _, f := range reqs {
		if err := b.Send(f); err != nil {
			t.Fatal(err)
		}
		wantReply(t, mustRead(t, b), f.ID)
	}
	b.Send(msg(b, `"marker"`))
	if f := mustCargo(t, rt); string(f.Payload) != `"marker"` {
		t.Fatalf("runtime got %s %s, want only the marker", f.Type, f.Payload)
	}
}

// A request from the runtime that no socket can be given (no session,
// another instance, a session no attachment holds, unsequenced) gets a
// relay.error answering it.
func TestRuntimeRequestOffRouteAnswered(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	reqs := []librelay.Frame{
		{Type: librelay.TypeACPMessage, ID: "none", Instance: b.Instance, Payload: []byte(`{}`)},
		{Type: librelay.TypeACPMessage, ID: "unheld", Instance: b.Instance, Session: "nobody-holds-this", Payload: []byte(`{}`)},
		{Type: librelay.TypeACPMessage, ID: "other-instance", Instance: b.Instance + "-other", Session: b.Session, Payload: []byte(`{}`)},
	}
	for _, f := range reqs {
		if err := rt.Send(f); err != nil {
			t.Fatal(err)
		}
		wantReply(t, mustCargo(t, rt), f.ID)
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Payload: []byte(`"marker"`)})
	if f := mustRead(t, b); string(f.Payload) != `"marker"` {
		t.Fatalf("browser got %s %s, want only the marker", f.Type, f.Payload)
	}
}

// heartbeatFlood is how many heartbeats a peer sends before it reads.
const heartbeatFlood = 20_000

// A browser that sends 20,000 heartbeats before reading gets 20,000 acks,
// or is shed with relay.error slow_consumer and close 4429 once its queue is
// full: the relay never drops one of its own replies and carries on.
func TestBrowserHeartbeatFloodAnswered(t *testing.T) {
	s := newSuite(t, func(c *relay.Config) { c.Limits.CloseTimeout = time.Minute })
	_, b := s.pair(t)
	for i := range heartbeatFlood {
		if err := b.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "h" + strconv.Itoa(i)}); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	acks, shed := 0, false
	for acks < heartbeatFlood && !shed {
		f, err := b.Read()
		switch {
		case err != nil:
			t.Fatalf("after %d acks: %v (close %d), without relay.error slow_consumer", acks, err, relaytest.CloseCode(err))
		case f.Type == librelay.TypeAck:
			if f.ReplyTo != "h"+strconv.Itoa(acks) {
				t.Fatalf("ack %d answers %q: an ack was dropped", acks, f.ReplyTo)
			}
			acks++
		case f.Type == librelay.TypeError:
			wantError(t, f, relayleg.CodeSlowConsumer, "")
			shed = true
		}
	}
	if shed {
		if _, code := b.ReadUntilClosed(); code != relayleg.CloseSlowConsumer {
			t.Fatalf("shed after %d acks with close %d, want 4429", acks, code)
		}
		return
	}
	b.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "last"})
	if f := mustRead(t, b); f.Type != librelay.TypeAck || f.ReplyTo != "last" {
		t.Fatalf("after the flood: %s re %q", f.Type, f.ReplyTo)
	}
}

// The same on the runtime leg: 20,000 heartbeats get 20,000 acks, or
// relay.error slow_consumer and the end of the connection.
func TestRuntimeHeartbeatFloodAnswered(t *testing.T) {
	s := newSuite(t, nil)
	rt := s.Connect(t)
	var line []byte
	var batch strings.Builder
	for i := range heartbeatFlood {
		f := librelay.Frame{Type: librelay.TypeHeartbeat, ID: "h" + strconv.Itoa(i)}
		line, _ = librelay.AppendFrame(line[:0], &f)
		batch.Write(line)
		batch.WriteByte('\n')
	}
	if err := rt.SendRaw([]byte(batch.String())); err != nil {
		t.Fatal(err)
	}
	for acks := 0; acks < heartbeatFlood; {
		f, err := rt.Read()
		switch {
		case err != nil:
			t.Fatalf("after %d acks: %v, without relay.error slow_consumer", acks, err)
		case f.Type == librelay.TypeAck:
			if f.ReplyTo != "h"+strconv.Itoa(acks) {
				t.Fatalf("ack %d answers %q: an ack was dropped", acks, f.ReplyTo)
			}
			acks++
		case f.Type == librelay.TypeError:
			wantError(t, f, relayleg.CodeSlowConsumer, "")
			if _, err := rt.ReadCargo(); err == nil {
				t.Fatal("the connection stays open after slow_consumer")
			}
			return
		}
	}
}

// A request from the runtime too large for the browser leg still gets its
// one reply, a relay.error answering it, sequenced or not: the browser never
// sees it, so cannot answer it. The relay sends exactly one (a heartbeat
// sent after it is answered next), and the route goes on working.
func TestRuntimeRequestTooLargeForBrowserAnswered(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	big := []byte(`"` + strings.Repeat("x", s.frameLimit+1<<10) + `"`)
	for i, seq := range []uint64{0, 7} {
		id := "big-" + strconv.Itoa(i)
		if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, ID: id, Instance: b.Instance, Session: b.Session, Seq: seq, Payload: big}); err != nil {
			t.Fatal(err)
		}
		wantReply(t, mustCargo(t, rt), id)
		if err := rt.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "after-" + id}); err != nil {
			t.Fatal(err)
		}
		if f := mustCargo(t, rt); f.Type != librelay.TypeAck || f.ReplyTo != "after-"+id {
			t.Fatalf("after the reply to %s: %s re %q %.200s, want only the ack", id, f.Type, f.ReplyTo, f.Payload)
		}
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: 8, Payload: []byte(`"marker"`)})
	for {
		f := mustRead(t, b)
		if f.ID != "" {
			t.Fatalf("the browser got a request it cannot have: %s id %q", f.Type, f.ID)
		}
		if string(f.Payload) == `"marker"` {
			break
		}
	}
}
