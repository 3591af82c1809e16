package librelay

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// jsonLine is what encoding/json's Encoder writes for f with HTML escaping
// off: the reference for Writer's bytes.
func jsonLine(t testing.TB, f Frame) []byte {
	t.Helper()
	return append(encodeNoHTML(t, f), '\n')
}

// wireFrames are valid frames exercising every member, escaping rule and
// payload shape.
func wireFrames() []Frame {
	return []Frame{
		{Type: "relay.heartbeat", ID: "1"},
		{Type: TypeACPMessage, Instance: "inst", Session: "s-1", Seq: 42, Trace: "tr-abc_DEF-9",
			Payload: json.RawMessage(`{"jsonrpc":"2.0","method":"session/update","params":{"x":[1,2.5e3,-0.1,true,false,null]}}`)},
		{Type: "t", Instance: `quo"te\back`, Session: "<html>&amp;", ReplyTo: "r\u2028\u2029x", Payload: json.RawMessage(`null`)},
		{Type: "ünïcødé 日本", Instance: "é", Payload: json.RawMessage("  {\n\t\"a\" : [ 1 ,\r\n 2 ] , \"b\\n\" : \"x y\" }\n")},
		{Type: "x", Seq: 1<<64 - 1, Payload: json.RawMessage(`"str\u0000\n<>&\u2028"`)},
		{Type: "x", Payload: json.RawMessage("\"raw \u2028 and \xff invalid\"")},
		{Type: "x", Payload: json.RawMessage(`[]`)},
		{Type: "x", Payload: json.RawMessage(`0`)},
		{Type: "x", Instance: "i", Session: "s", ID: "😀", Trace: strings.Repeat("a", MaxTraceBytes)},
	}
}

func TestAppendFrameMatchesEncodingJSON(t *testing.T) {
	for _, f := range wireFrames() {
		got, err := AppendFrame(nil, &f)
		if err != nil {
			t.Fatalf("AppendFrame(%+v): %v", f, err)
		}
		want := jsonLine(t, f)
		if string(got)+"\n" != string(want) {
			t.Errorf("AppendFrame:\n got %s\nwant %s", got, want)
		}
	}
}

func TestParseFrameMatchesEncodingJSON(t *testing.T) {
	for _, f := range wireFrames() {
		line := jsonLine(t, f)
		var want Frame
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatal(err)
		}
		got, err := ParseFrame(line)
		if err != nil {
			t.Fatalf("ParseFrame(%s): %v", line, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ParseFrame(%s):\n got %+v\nwant %+v", line, got, want)
		}
	}
}
