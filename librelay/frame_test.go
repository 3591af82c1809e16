package librelay

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

func TestValidate(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		f    Frame
		want error
	}{
		{"minimal", Frame{Type: "x"}, nil},
		{"full", Frame{Type: TypeACPMessage, Instance: "i", Session: "s", ID: "1", Seq: 9, Trace: "tr-x"}, nil},
		{"response", Frame{Type: TypeAck, ReplyTo: "1"}, nil},
		{"unknown control type is valid", Frame{Type: "relay.future", ID: "1"}, nil},
		{"non-ASCII identifiers", Frame{Type: "ü", Instance: "日本", Session: "é"}, nil},
		{"DEL neighbour U+00A0 is fine", Frame{Type: "x", Instance: "a\u00a0b"}, nil},
		{"empty type", Frame{Instance: "i"}, ErrEmptyType},
		{"type at limit", Frame{Type: long(MaxTypeBytes)}, nil},
		{"type over limit", Frame{Type: long(MaxTypeBytes + 1)}, ErrTypeTooLong},
		{"instance at limit", Frame{Type: "x", Instance: long(MaxIDBytes)}, nil},
		{"instance over limit", Frame{Type: "x", Instance: long(MaxIDBytes + 1)}, ErrIDTooLong},
		{"session over limit", Frame{Type: "x", Instance: "i", Session: long(MaxIDBytes + 1)}, ErrIDTooLong},
		{"id over limit", Frame{Type: "x", ID: long(MaxIDBytes + 1)}, ErrIDTooLong},
		{"re over limit", Frame{Type: "x", ReplyTo: long(MaxIDBytes + 1)}, ErrIDTooLong},
		{"NUL in type", Frame{Type: "a\x00"}, ErrControlChar},
		{"newline in instance", Frame{Type: "x", Instance: "a\nb"}, ErrControlChar},
		{"tab in session", Frame{Type: "x", Instance: "i", Session: "\t"}, ErrControlChar},
		{"DEL in id", Frame{Type: "x", ID: "a\x7f"}, ErrControlChar},
		// The reference refuses C0 and DEL only; C1 controls are carried.
		{"C1 U+0080 in instance", Frame{Type: "x", Instance: "\u0080"}, nil},
		{"C1 U+0085 in re", Frame{Type: "x", ReplyTo: "a\u0085"}, nil},
		{"C1 U+009F in type", Frame{Type: "\u009f"}, nil},
		{"invalid UTF-8 in type", Frame{Type: "a\xff"}, ErrNotUTF8},
		{"invalid UTF-8 in instance", Frame{Type: "x", Instance: "\xc3"}, ErrNotUTF8},
		{"surrogate half encoded in UTF-8", Frame{Type: "x", ID: "\xed\xa0\x80"}, ErrNotUTF8},
		{"both id and re", Frame{Type: "x", ID: "1", ReplyTo: "2"}, ErrBothIDs},
		{"session without instance", Frame{Type: "x", Session: "s"}, ErrSessionAlone},
		{"trace at limit", Frame{Type: "x", Trace: long(MaxTraceBytes)}, nil},
		{"trace over limit", Frame{Type: "x", Trace: long(MaxTraceBytes + 1)}, ErrTraceTooLong},
		{"trace with space", Frame{Type: "x", Trace: "tr abc"}, ErrTraceCharset},
		{"trace with dot", Frame{Type: "x", Trace: "tr.abc"}, ErrTraceCharset},
		{"trace non-ASCII", Frame{Type: "x", Trace: "tré"}, ErrTraceCharset},
		// The documented order, the reference's: structure, then trace, then
		// identifiers (in wire order here; in no fixed order there).
		{"order: empty type before both ids", Frame{ID: "1", ReplyTo: "2"}, ErrEmptyType},
		{"order: both ids before session alone", Frame{Type: "x", Session: "s", ID: "1", ReplyTo: "2"}, ErrBothIDs},
		{"order: session alone before control char", Frame{Type: "\x01", Session: "s"}, ErrSessionAlone},
		{"order: length before content", Frame{Type: "x", Instance: long(MaxIDBytes) + "\x00"}, ErrIDTooLong},
		{"order: instance before id", Frame{Type: "x", Instance: "\xff", ID: "\x00"}, ErrNotUTF8},
		{"order: control char before invalid UTF-8", Frame{Type: "x", Instance: "\x00\xff"}, ErrControlChar},
		{"order: control char after invalid UTF-8 still first", Frame{Type: "x", Instance: "\xff\x00"}, ErrControlChar},
		{"order: trace before identifiers", Frame{Type: "x", ID: "\x00", Trace: "!"}, ErrTraceCharset},
		{"order: trace length before identifiers", Frame{Type: "x", Instance: "\xff", Trace: long(MaxTraceBytes + 1)}, ErrTraceTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.Validate()
			if tt.want == nil && err != nil || !errors.Is(err, tt.want) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestValidateControlIsC0AndDEL pins the control-character rule to the
// reference's (a rune below U+0020, or U+007F) for every rune it could
// disagree on, C1 and the other Unicode controls included.
func TestValidateControlIsC0AndDEL(t *testing.T) {
	for r := rune(0); r < 0x3000; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		err := Frame{Type: "x", Instance: "a" + string(r)}.Validate()
		if got, want := errors.Is(err, ErrControlChar), r < 0x20 || r == 0x7f; got != want || !want && err != nil {
			t.Fatalf("U+%04X: ErrControlChar=%v, want %v (err %v; unicode.IsControl=%v)", r, got, want, err, unicode.IsControl(r))
		}
	}
}

func TestIsControl(t *testing.T) {
	for typ, want := range map[string]bool{
		TypeHello: true, TypeWelcome: true, TypeHeartbeat: true, TypeAck: true, TypeError: true,
		"relay.unknown": true, "relay.": true,
		TypeACPMessage: false, TypeACPDetach: false, TypeResume: false, TypeResumed: false,
		TypeChainTrigger: false, TypeChainTriggerResult: false,
		"": false, "relay": false, "Relay.hello": false, "xrelay.hello": false,
	} {
		if got := IsControl(typ); got != want {
			t.Errorf("IsControl(%q) = %v, want %v", typ, got, want)
		}
	}
}

func TestRequestResponse(t *testing.T) {
	tests := []struct {
		f             Frame
		request, resp bool
	}{
		{Frame{Type: "x"}, false, false},
		{Frame{Type: "x", ID: "1"}, true, false},
		{Frame{Type: "x", ReplyTo: "1"}, false, true},
		{Frame{Type: "never.heard.of", ID: "1"}, true, false},
		{Frame{Type: TypeWelcome, ReplyTo: "1"}, false, true},
	}
	for _, tt := range tests {
		if got := tt.f.IsRequest(); got != tt.request {
			t.Errorf("%+v IsRequest = %v", tt.f, got)
		}
		if got := tt.f.IsResponse(); got != tt.resp {
			t.Errorf("%+v IsResponse = %v", tt.f, got)
		}
	}
}

func TestUnsupported(t *testing.T) {
	req := Frame{Type: "relay.future", Instance: "i", Session: "s", ID: "r1"}
	reply, ok := Unsupported(req)
	if !ok {
		t.Fatal("a request with an unknown control type is owed a reply")
	}
	if reply.Type != TypeError || reply.ReplyTo != "r1" || reply.ID != "" ||
		reply.Instance != "i" || reply.Session != "s" || !reply.IsResponse() {
		t.Fatalf("reply = %+v", reply)
	}
	if err := reply.Validate(); err != nil {
		t.Fatalf("reply does not validate: %v", err)
	}
	var e Error
	if err := reply.DecodePayload(&e); err != nil || e.Code != CodeUnsupportedType || !strings.Contains(e.Message, "relay.future") {
		t.Fatalf("payload = %+v, %v", e, err)
	}
	for _, f := range []Frame{
		{Type: "relay.future"},                        // notification
		{Type: "relay.future", ReplyTo: "r1"},         // response
		{Type: TypeError, ReplyTo: "r1"},              // an error response is never answered
		{Type: "relay.future", ID: "a", ReplyTo: "b"}, // invalid, but a response: never answered
	} {
		if reply, ok := Unsupported(f); ok || !reflect.DeepEqual(reply, Frame{}) {
			t.Errorf("Unsupported(%+v) = %+v, %v; want no reply", f, reply, ok)
		}
	}
}

func TestUnsupportedClampsEchoedType(t *testing.T) {
	typ := strings.Repeat("é", MaxTypeBytes) // 2 bytes a rune: over the limit
	reply, ok := Unsupported(Frame{Type: typ, ID: "1"})
	if !ok {
		t.Fatal("no reply")
	}
	var e Error
	if err := reply.DecodePayload(&e); err != nil {
		t.Fatal(err)
	}
	if len(e.Message) > len("unsupported message type ")+MaxTypeBytes+len("…") || strings.ContainsRune(e.Message, '\ufffd') {
		t.Fatalf("message not clamped on a rune boundary: %q", e.Message)
	}
}

func TestNewError(t *testing.T) {
	req := Frame{Type: TypeHello, Instance: "i", ID: "h1"}
	f := NewError(req, CodeVersion, "too old <&>")
	want := Frame{Type: TypeError, Instance: "i", ReplyTo: "h1",
		Payload: json.RawMessage(`{"code":"unsupported_version","message":"too old <&>"}`)}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("NewError = %+v\nwant %+v", f, want)
	}
	// Not a request: an uncorrelated (notification) error.
	n := NewError(Frame{Type: "x", Instance: "i", Session: "s"}, CodeMalformedFrame, "")
	if n.ReplyTo != "" || n.IsRequest() || n.IsResponse() || string(n.Payload) != `{"code":"malformed_frame"}` {
		t.Fatalf("NewError(notification) = %+v", n)
	}
}

func TestWithPayloadDecodePayload(t *testing.T) {
	in := map[string]any{"b": "x\ny <a&b>", "a": []int{1, 2}}
	f, err := Frame{Type: "x"}.WithPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":[1,2],"b":"x\ny <a&b>"}`; string(f.Payload) != want {
		t.Fatalf("payload %s, want %s (compact, no HTML escaping)", f.Payload, want)
	}
	var out map[string]any
	if err := f.DecodePayload(&out); err != nil || out["b"] != "x\ny <a&b>" {
		t.Fatalf("DecodePayload = %v, %v", out, err)
	}
	if _, err := (Frame{Type: "x"}).WithPayload(func() {}); err == nil {
		t.Fatal("WithPayload(func) succeeded")
	}
	if err := (Frame{Type: "x", Payload: json.RawMessage(`{`)}).DecodePayload(&out); err == nil {
		t.Fatal("DecodePayload of broken JSON succeeded")
	}
}

func TestDecodePayloadAbsent(t *testing.T) {
	h := Hello{Instance: "keep"}
	if err := (Frame{Type: TypeHello}).DecodePayload(&h); err != nil {
		t.Fatalf("absent payload: %v", err)
	}
	if h.Instance != "keep" {
		t.Fatalf("absent payload changed the target: %+v", h)
	}
	// A nil target is fine when there is nothing to decode.
	if err := (Frame{Type: "x"}).DecodePayload(nil); err != nil {
		t.Fatalf("absent payload into nil: %v", err)
	}
}
