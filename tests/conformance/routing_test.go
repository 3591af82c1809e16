package conformance

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// payloads are valid JSON values a relay must carry, each with the exact
// bytes that must arrive: the payload unchanged except that insignificant
// whitespace between JSON tokens is removed (librelay's Writer and
// AppendFrame compact it, because a raw newline between tokens would split
// an NDJSON frame). want is empty where the payload is already compact and
// must arrive byte for byte: ACP and not ACP, escapes a re-encoder would
// rewrite, raw non-ASCII, HTML characters a careless encoder escapes,
// numbers a float would round, duplicate keys a map would merge.
var payloads = []struct{ sent, want string }{
	{sent: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`},
	{sent: `{"not":"acp","list":[1,2.5e10,-0.0,1E+2,true,false,null],"nested":{"a":{"b":{}}}}`},
	{sent: `"a string payload"`},
	{sent: `123456789012345678901234567890.123456789`},
	{sent: `null`},
	{sent: `[]`},
	{sent: `{"escapes":"\u00e9\u2028\u2029\/\"\\\b\f\n\r\t\ud83d\ude00","raw":"é😀 <script>&amp;</script>"}`},
	{sent: "{\"raw\":\"\u2028\u2029\x7f\",\"ascii\":\"\\u0041\"}"},
	{sent: `{"z":1,"a":2,"z":3}`},
	{sent: "{ \"spaced\" :\t[ 1 , 2 ] ,\"s\": \" keep  these \" }", want: `{"spaced":[1,2],"s":" keep  these "}`},
	{sent: "{\"a\":\n1,\r\n\"b\" : [\n]}", want: `{"a":1,"b":[]}`},
	{sent: `{"q":"say \"hi\"  there" , "t" : "\\" , "u":"\\\"  x"}`, want: `{"q":"say \"hi\"  there","t":"\\","u":"\\\"  x"}`},
	{sent: " \t[ \"a b\" ]\n", want: `["a b"]`},
}

// Cargo payloads reach the other end exactly as the rule above says, in
// both directions: byte for byte when compact, compacted otherwise.
func TestPayloadByteIdentity(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	for i, p := range payloads {
		want := cmp.Or(p.want, p.sent)
		if err := b.SendRaw(rawMessage(b, p.sent)); err != nil {
			t.Fatal(err)
		}
		got := mustCargo(t, rt)
		if got.Type != librelay.TypeACPMessage || got.Session != b.Session || got.Instance != b.Instance {
			t.Fatalf("payload %d: runtime got %s for %s/%s", i, got.Type, got.Instance, got.Session)
		}
		if string(got.Payload) != want {
			t.Fatalf("browser→runtime payload %d:\nsent %s\ngot  %s\nwant %s", i, p.sent, got.Payload, want)
		}
		if err := rt.SendRaw(rawLine(b, uint64(i+1), p.sent)); err != nil {
			t.Fatal(err)
		}
		back := mustRead(t, b)
		if string(back.Payload) != want || back.Seq != uint64(i+1) {
			t.Fatalf("runtime→browser payload %d (seq %d):\nsent %s\ngot  %s\nwant %s", i, back.Seq, p.sent, back.Payload, want)
		}
	}
}

// rawMessage is an acp.message on b's route with payload spliced in as it
// is: librelay's encoder would compact it before the relay saw it.
func rawMessage(b *relaytest.Browser, payload string) []byte {
	return []byte(`{"type":"acp.message","instance":` + strconv.Quote(b.Instance) + `,"session":` + strconv.Quote(b.Session) + `,"payload":` + payload + `}`)
}

// rawLine is the runtime leg's NDJSON line for rawMessage with seq; a raw
// newline in the payload is replaced by a space (it would end the line), so
// the relay still sees insignificant whitespace to compact.
func rawLine(b *relaytest.Browser, seq uint64, payload string) []byte {
	payload = strings.NewReplacer("\n", " ", "\r", " ").Replace(payload)
	return []byte(`{"type":"acp.message","instance":` + strconv.Quote(b.Instance) + `,"session":` + strconv.Quote(b.Session) +
		`,"seq":` + strconv.FormatUint(seq, 10) + `,"payload":` + payload + "}\n")
}

// A cargo type the relay has never heard of is routed like any other, both
// ways, with its id and seq intact.
func TestUnknownCargoRouted(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	sent := librelay.Frame{Type: "vendor.future-thing", Instance: b.Instance, Session: b.Session, ID: "q1", Payload: []byte(`{"x":1}`)}
	if err := b.Send(sent); err != nil {
		t.Fatal(err)
	}
	got := mustCargo(t, rt)
	if got.Type != sent.Type || got.ID != "q1" || string(got.Payload) != `{"x":1}` {
		t.Fatalf("runtime got %+v", got)
	}
	reply := librelay.Frame{Type: "vendor.future-reply", Instance: b.Instance, Session: b.Session, ReplyTo: "q1", Seq: 9, Payload: []byte(`[2]`)}
	if err := rt.Send(reply); err != nil {
		t.Fatal(err)
	}
	back := mustRead(t, b)
	if back.Type != reply.Type || back.ReplyTo != "q1" || back.Seq != 9 || string(back.Payload) != `[2]` {
		t.Fatalf("browser got %+v", back)
	}
}

// An unknown control request gets unsupported_type; an unknown control
// notification gets nothing — on both legs.
func TestUnknownControl(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)

	b.Send(librelay.Frame{Type: "relay.no-such-thing"})
	b.Send(librelay.Frame{Type: "relay.no-such-thing", ID: "u1"})
	wantError(t, mustRead(t, b), librelay.CodeUnsupportedType, "u1")

	rt.Send(librelay.Frame{Type: "relay.no-such-thing"})
	rt.Send(librelay.Frame{Type: "relay.no-such-thing", ID: "u2"})
	wantError(t, mustCargo(t, rt), librelay.CodeUnsupportedType, "u2")
}

// relay.heartbeat requests are answered with relay.ack on both legs.
func TestHeartbeatAck(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	b.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "hb-b"})
	if f := mustRead(t, b); f.Type != librelay.TypeAck || f.ReplyTo != "hb-b" {
		t.Fatalf("browser leg: want relay.ack re hb-b, got %s re %q", f.Type, f.ReplyTo)
	}
	rt.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "hb-r"})
	f, err := rt.Read()
	if err != nil || f.Type != librelay.TypeAck || f.ReplyTo != "hb-r" {
		t.Fatalf("runtime leg: want relay.ack re hb-r, got %s re %q (%v)", f.Type, f.ReplyTo, err)
	}
}

// Frames from the runtime with no session, for a session no attachment
// holds, or for another instance are dropped; the next routable frame
// arrives next.
func TestRuntimeFramesDropped(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	drops := []librelay.Frame{
		{Type: librelay.TypeACPMessage, Instance: b.Instance, Payload: []byte(`"no session"`)},
		{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: "nobody-holds-this", Payload: []byte(`"unheld"`)},
		{Type: librelay.TypeACPMessage, Instance: b.Instance + "-other", Session: b.Session, Payload: []byte(`"other instance"`)},
	}
	for _, f := range drops {
		if err := rt.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Payload: []byte(`"marker"`)})
	if f := mustRead(t, b); string(f.Payload) != `"marker"` {
		t.Fatalf("browser got %s %s, want only the marker", f.Type, f.Payload)
	}
}

// A browser socket speaks only for its own attachment: frames with no
// session, another attachment's session or an unheld session never reach
// the runtime or the other attachment.
func TestBrowserFramesDropped(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	other := s.Attach(t, "")
	drops := []librelay.Frame{
		{Type: librelay.TypeACPMessage, Instance: b.Instance, Payload: []byte(`"no session"`)},
		{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: other.Session, Payload: []byte(`"impersonation"`)},
		{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: "nobody-holds-this", Payload: []byte(`"unheld"`)},
		{Type: librelay.TypeACPMessage, Payload: []byte(`"no route at all"`)},
	}
	for _, f := range drops {
		if err := b.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	b.Send(msg(b, `"marker"`))
	if f := mustCargo(t, rt); string(f.Payload) != `"marker"` || f.Session != b.Session {
		t.Fatalf("runtime got %s %s on %q, want only the marker", f.Type, f.Payload, f.Session)
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: other.Instance, Session: other.Session, Payload: []byte(`"to other"`)})
	if f := mustRead(t, other); string(f.Payload) != `"to other"` {
		t.Fatalf("the other attachment got %s %s", f.Type, f.Payload)
	}
}

// A cargo request addressed to an instance with no runtime is answered with
// unknown_instance at once, so the client never waits for a reply that
// cannot come; a notification to it is just dropped.
func TestCargoRequestUnknownInstance(t *testing.T) {
	s := newSuite(t, nil)
	need(t, s.anyClient != "", "needs -any-client-token to address an instance nobody serves")
	s.Connect(t)
	b := dial(t, s, s.anyClient)
	if _, _, err := b.Hello(s.Instance, "", librelay.ProtocolVersion); err != nil {
		t.Fatal(err)
	}
	ghost := "nobody-serves-this"
	b.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: ghost, Session: "x", Payload: []byte(`{}`)})
	b.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: ghost, Session: "x", ID: "r1", Payload: []byte(`{}`)})
	wantError(t, mustRead(t, b), librelay.CodeUnknownInstance, "r1")
}

// When the runtime disconnects, each of its browser sockets gets
// runtime_gone and close 4502, and a new hello is refused as unknown_instance
// until a runtime is back.
func TestRuntimeGone(t *testing.T) {
	s := newSuite(t, nil)
	rt, b := s.pair(t)
	rt.Conn.Close()
	wantClosedWith(t, b, "runtime_gone")
	b2 := dial(t, s, s.ClientToken)
	f, _, err := b2.Hello(s.Instance, "", librelay.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, f, librelay.CodeUnknownInstance, "hello")
}

// Two connections for one instance settle: while the connected runtime
// answers heartbeats, every newcomer's hello is refused with relay.error
// instance_taken and its connection closed, and the runtime holding the
// instance is told nothing and keeps serving its browsers. (The contenox
// connector redials after any refusal but these, so a relay that handed the
// instance to each newcomer would have two connectors take it from each
// other for ever.)
func TestSecondRuntimeRefusedWhileFirstAnswers(t *testing.T) {
	s := newSuite(t, nil)
	old, b := s.pair(t)
	cargo := answering(old)
	for i := range 3 {
		rt, _, err := relaytest.DialRuntimeTLS(t.Context(), s.HTTPURL, s.RuntimeToken, s.TLS)
		if err != nil {
			t.Fatal(err)
		}
		f, _, err := rt.Hello(s.Instance, librelay.ProtocolVersion)
		if err != nil {
			t.Fatalf("newcomer %d: %v before any answer to its hello", i, err)
		}
		wantError(t, f, relayleg.CodeInstanceTaken, "hello")
		if _, err := rt.Read(); err == nil {
			t.Fatalf("newcomer %d: the refused connection stays open", i)
		}
		rt.Conn.Close()
		b.Send(msg(b, fmt.Sprintf(`{"n":%d}`, i)))
		if f := next(t, cargo); f.Type != librelay.TypeACPMessage || string(f.Payload) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("the first runtime got %s %s, want the browser's message %d and nothing before it", f.Type, f.Payload, i)
		}
	}
}

// A connected runtime that does not answer the relay's probe when another
// connection claims its instance loses it (the runtime restarted behind a
// connection the relay had not seen die): it is told heartbeat_timeout and
// closed, the newcomer is welcomed, and attached browsers are told
// runtime_gone and, once they redial, reach the new one.
func TestSilentRuntimeTakenOver(t *testing.T) {
	s := newSuite(t, nil)
	old, b := s.pair(t) // old never reads again: it answers no probe
	rt := s.Connect(t)
	f, err := old.Read()
	for err == nil && f.Type == librelay.TypeHeartbeat {
		f, err = old.Read()
	}
	if err != nil {
		t.Fatalf("silent runtime: %v before any relay.error", err)
	}
	wantError(t, f, relayleg.CodeHeartbeatTimeout, "")
	if _, err := old.ReadCargo(); err == nil {
		t.Fatal("the silent runtime's connection stays open")
	}
	// The browser is told as when a runtime leaves (the newcomer numbers
	// its streams afresh: TestRuntimeTakeoverTellsBrowsers), and its
	// redial with its id is routed to the new runtime.
	wantClosedWith(t, b, relayleg.CodeRuntimeGone)
	b = s.Attach(t, b.Session)
	for i := range 3 {
		b.Send(msg(b, fmt.Sprintf(`{"n":%d}`, i)))
		if f := mustCargo(t, rt); string(f.Payload) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("new runtime got %s", f.Payload)
		}
	}
}

// answering reads rt's frames in the background, answering heartbeats (so
// rt is a runtime that answers the relay's probes), and delivers the rest;
// the channel closes when the connection ends.
func answering(rt *relaytest.Runtime) <-chan librelay.Frame {
	ch := make(chan librelay.Frame, 16)
	rt.Timeout = time.Hour // next guards the wait; an idle incumbent must not time out
	go func() {
		defer close(ch)
		for {
			f, err := rt.ReadCargo()
			if err != nil {
				return
			}
			ch <- f
		}
	}()
	return ch
}

// next takes the next frame answering delivered, failing the test when the
// connection ends first or nothing comes within relaytest.IOTimeout (a hang
// guard, not a speed assertion).
func next(t *testing.T, ch <-chan librelay.Frame) librelay.Frame {
	t.Helper()
	select {
	case f, ok := <-ch:
		if !ok {
			t.Fatal("the runtime's connection ended")
		}
		return f
	case <-time.After(relaytest.IOTimeout):
		t.Fatal("nothing reached the runtime")
	}
	return librelay.Frame{}
}
