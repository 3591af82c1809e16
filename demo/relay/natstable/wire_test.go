package natstable

import (
	"bytes"
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
)

// A frame crosses the bus as the Frame it was: every member and the
// payload byte for byte (whitespace and all: compacting is the writer's),
// empty members empty, no payload nil.
func TestFrameRoundTrip(t *testing.T) {
	for _, f := range []librelay.Frame{
		{Type: librelay.TypeACPMessage, Instance: "test", Session: "c2Vzc2lvbg", Seq: 1<<53 + 7, Payload: []byte(`{"a": [1, 2]}`)},
		{Type: librelay.TypeResume, Instance: "~w6k", Session: "s", ID: "id-1", ReplyTo: "re-2", Trace: "0123456789abcdef0123456789abcdef", Payload: []byte(`{"afterSeq":3}`)},
		{Type: "relay.error", Instance: "é", Payload: []byte("null")},
		{Type: librelay.TypeHeartbeat},
	} {
		b := appendFrame(appendHeader(nil, header{1, 2, 3}), &f)
		h, body, ok := parseHeader(b)
		if !ok || h != (header{1, 2, 3}) {
			t.Fatalf("header: %+v %v", h, ok)
		}
		got, ok := parseFrame(body)
		if !ok {
			t.Fatalf("%+v did not parse back", f)
		}
		if got.Type != f.Type || got.Instance != f.Instance || got.Session != f.Session || got.ID != f.ID ||
			got.ReplyTo != f.ReplyTo || got.Trace != f.Trace || got.Seq != f.Seq ||
			!bytes.Equal(got.Payload, f.Payload) || (got.Payload == nil) != (f.Payload == nil) {
			t.Fatalf("got %+v (payload %q), want %+v (payload %q)", got, got.Payload, f, f.Payload)
		}
	}
}

// Bytes that are not a frame in the bus's form are refused: cut short
// before the payload, a length past the end, another version's header.
func TestFrameRefusesWhatIsNotOne(t *testing.T) {
	f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: "test", Session: "s", Payload: []byte(`{}`)}
	b := appendFrame(nil, &f)
	for n := range len(b) - len(f.Payload) {
		if _, ok := parseFrame(b[:n]); ok {
			t.Errorf("the first %d of %d bytes parsed as a frame", n, len(b))
		}
	}
	long := append(append([]byte(nil), b[:8]...), 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, ok := parseFrame(long); ok {
		t.Error("a length past the end parsed")
	}
	old := appendHeader(nil, header{1, 2, 3})
	old[0] = wireVersion - 1
	if _, _, ok := parseHeader(append(old, b...)); ok {
		t.Error("a header of another version parsed")
	}
}

// A subscription's subject names its runtime or attachment again, whatever
// the names (the error handler learns of a subscription's drops by it),
// and neither kind is taken for the other.
func TestSubjectsParseBack(t *testing.T) {
	s := subjects{"relay.a"}
	for _, k := range []route{{"test", "c2Vzc2lvbg"}, {"é.x", "*"}, {"", ">"}, {"~w6k", "a-b_c"}} {
		if got, ok := s.parseAttachment(s.attachment(k.instance, k.session)); !ok || got != k {
			t.Errorf("attachment %+v parsed back as %+v (%v)", k, got, ok)
		}
		if got, ok := s.parseRuntime(s.runtime(k.instance)); !ok || got != k.instance {
			t.Errorf("runtime %q parsed back as %q (%v)", k.instance, got, ok)
		}
		if _, ok := s.parseRuntime(s.attachment(k.instance, k.session)); ok {
			t.Errorf("attachment %+v parsed as a runtime", k)
		}
		if _, ok := s.parseAttachment(s.runtime(k.instance)); ok {
			t.Errorf("runtime %q parsed as an attachment", k.instance)
		}
	}
}
