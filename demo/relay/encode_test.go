package relay

import (
	"bufio"
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
)

// wireSize is the exact encoded length of a frame with nothing to escape
// and a compact payload, and maxWireSize bounds any frame's encoding, escapes
// and whitespace included: the queues' byte bounds and the browser-leg frame
// limit rely on both.
func TestWireSize(t *testing.T) {
	sid := strings.Repeat("s", 43)
	plain := []librelay.Frame{
		{Type: librelay.TypeACPMessage},
		{Type: librelay.TypeACPMessage, Instance: "demo", Session: sid, Seq: 1, Payload: []byte(`{"a":1}`)},
		{Type: librelay.TypeACPMessage, Instance: "demo", Session: sid, Seq: 18446744073709551615, Trace: "00-abc-01", Payload: []byte(`[1,"x"]`)},
		{Type: librelay.TypeHeartbeat, ID: "hb-1"},
		{Type: librelay.TypeAck, ReplyTo: "hb-1"},
		{Type: librelay.TypeACPMessage, Instance: "démo", Session: sid, ID: "r1", Payload: []byte(`"é"`)},
	}
	for _, f := range plain {
		b, err := librelay.AppendFrame(nil, &f)
		if err != nil {
			t.Fatal(err)
		}
		if wireSize(f) != len(b) {
			t.Errorf("wireSize %d, encoding %d bytes: %s", wireSize(f), len(b), b)
		}
	}
	escaped := []librelay.Frame{
		{Type: "x\"\\", Instance: "a\u2028\u2029\"", Session: `\"\"`, ID: "\u2028"},
		{Type: librelay.TypeACPMessage, Instance: "demo", Session: sid, Payload: []byte("{ \"a\" :\n 1 }")},
	}
	for _, f := range escaped {
		b, err := librelay.AppendFrame(nil, &f)
		if err != nil {
			t.Fatal(err)
		}
		if maxWireSize(&f) < len(b) {
			t.Errorf("maxWireSize %d below the encoding's %d bytes: %s", maxWireSize(&f), len(b), b)
		}
	}
}

// The runtime leg's writer validates as it encodes: a frame that does not
// encode is not written, and the frames around it are, each on its line.
func TestRuntimeWriterDropsInvalidFrames(t *testing.T) {
	var out bytes.Buffer
	c := &runtimeConn{r: &Relay{log: slog.New(slog.DiscardHandler)}, bw: bufio.NewWriterSize(&out, 64)}
	big := strings.Repeat("x", 100) // larger than the buffer: written through
	batch := []librelay.Frame{
		{Type: librelay.TypeACPMessage, Instance: "demo", Session: "s1", Payload: []byte(`"` + big + `"`)},
		{Type: librelay.TypeACPMessage, Instance: "demo", Session: "s1\x00", Payload: []byte(`1`)},    // control character
		{Type: librelay.TypeACPMessage, Instance: "demo", Session: "s1", Payload: []byte(`{"open":`)}, // not JSON
		{Type: librelay.TypeACPMessage, Instance: "demo", Session: "s1", Payload: []byte(`2`)},
	}
	if err := c.flush(batch); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"acp.message","instance":"demo","session":"s1","payload":"` + big + `"}` + "\n" +
		`{"type":"acp.message","instance":"demo","session":"s1","payload":2}` + "\n"
	if out.String() != want {
		t.Fatalf("written:\n%s\nwant:\n%s", out.String(), want)
	}
}
