package librelay

import (
	"encoding/json"
	"math/rand/v2"
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

// randomJSON writes a random JSON value with random insignificant
// whitespace, strings drawn from trickyStrings (already valid JSON text once
// encoded by appendString, whose own equivalence is tested separately).
func randomJSON(rng *rand.Rand, depth int) string {
	ws := func() string { return []string{"", "", " ", "\n", "\t", "\r\n  "}[rng.IntN(6)] }
	switch k := rng.IntN(8); {
	case k == 0 && depth < 4:
		var parts []string
		for range rng.IntN(4) {
			parts = append(parts, ws()+randomJSON(rng, depth+1)+ws())
		}
		return "[" + strings.Join(parts, ",") + "]"
	case k == 1 && depth < 4:
		var parts []string
		for range rng.IntN(4) {
			key := string(appendString(nil, randomString(rng)))
			parts = append(parts, ws()+key+ws()+":"+ws()+randomJSON(rng, depth+1)+ws())
		}
		return "{" + strings.Join(parts, ",") + "}"
	case k == 2:
		return []string{"true", "false", "null", "0", "-0", "1e9", "-1.25E-7", "123456789012345678901234567890"}[rng.IntN(8)]
	default:
		return string(appendString(nil, randomString(rng)))
	}
}

// randomValidFrame builds a frame that passes Validate.
func randomValidFrame(rng *rand.Rand) Frame {
	ident := func() string {
		for {
			s := randomString(rng)
			if checkIdentifier("x", s) == nil && len(s) > 0 {
				return s
			}
		}
	}
	maybe := func() string {
		if rng.IntN(2) == 0 {
			return ""
		}
		return ident()
	}
	f := Frame{Type: ident(), Instance: maybe(), ID: maybe(), Trace: NewTraceID()[:rng.IntN(20)]}
	if f.Instance != "" {
		f.Session = maybe()
	}
	if f.ID == "" {
		f.ReplyTo = maybe()
	}
	if rng.IntN(2) == 0 {
		f.Seq = randomUint(rng)
	}
	if rng.IntN(5) > 0 {
		f.Payload = json.RawMessage(randomJSON(rng, 0))
	}
	return f
}

func TestCodecMatchesEncodingJSONRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		f := randomValidFrame(rng)
		got, err := AppendFrame(nil, &f)
		if err != nil {
			t.Fatalf("AppendFrame(%+v): %v", f, err)
		}
		if want := jsonLine(t, f); string(got)+"\n" != string(want) {
			t.Fatalf("AppendFrame:\n got %s\nwant %s", got, want)
		}
		escaped, err := json.Marshal(f) // HTML escaping on
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range [][]byte{got, escaped, jsonLine(t, f)} {
			var want Frame
			if err := json.Unmarshal(line, &want); err != nil {
				t.Fatal(err)
			}
			back, err := ParseFrame(line)
			if err != nil || !reflect.DeepEqual(back, want) {
				t.Fatalf("ParseFrame(%s) = %+v, %v\nwant %+v", line, back, err, want)
			}
		}
	}
}
