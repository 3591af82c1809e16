package librelay

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
)

// The plain* types have the same fields and tags as the control payloads but
// none of their methods, so encoding/json handles them by reflection: the
// reference the hand-written methods are held to.
type (
	plainHello   Hello
	plainWelcome Welcome
	plainResume  Resume
	plainResumed Resumed
	plainError   Error

	plainChainTrigger       ChainTrigger
	plainChainTriggerResult ChainTriggerResult
	plainAskPublished       AskPublished
	plainAskResolved        AskResolved
	plainAskVerdict         AskVerdict
)

// encodeNoHTML is encoding/json's Encoder with SetEscapeHTML(false), without
// the trailing newline.
func encodeNoHTML(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// trickyStrings exercise every escaping rule.
var trickyStrings = []string{
	"", "plain", `q"uote`, `back\slash`, "nl\ncr\rtab\tbs\bff\f", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "\u2028\u2029", "é日本😀", "bad\xffutf8\xc3", "\xed\xa0\x80", "/slash/",
	"\u0085\u00a0", "\ufffd", "a\u2027b\u202ac",
}

func randomString(rng *rand.Rand) string {
	if rng.IntN(3) == 0 {
		return trickyStrings[rng.IntN(len(trickyStrings))]
	}
	var b strings.Builder
	for range rng.IntN(12) {
		switch rng.IntN(6) {
		case 0:
			b.WriteByte(byte(rng.IntN(256)))
		case 1:
			b.WriteRune(rune(rng.IntN(0x3000)))
		case 2:
			b.WriteString(trickyStrings[rng.IntN(len(trickyStrings))])
		default:
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
	}
	return b.String()
}

func randomBytes(rng *rand.Rand) []byte {
	switch rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rng.IntN(70))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

func randomInt(rng *rand.Rand) int {
	switch rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return math.MaxInt
	case 2:
		return math.MinInt
	}
	return rng.IntN(2000) - 1000
}

func randomUint(rng *rand.Rand) uint64 {
	if rng.IntN(4) == 0 {
		return math.MaxUint64 - uint64(rng.IntN(3))
	}
	return uint64(rng.IntN(100000))
}

// controlCase pairs a payload value with its reflection-only twin and fresh
// targets for decoding.
type controlCase struct {
	value, plain any
	fresh        func() (ours, ref any)
}

// randomTime is zero, or a time in the years encoding/json can write, with
// or without nanoseconds, in UTC or at an offset.
func randomTime(rng *rand.Rand) time.Time {
	if rng.IntN(3) == 0 {
		return time.Time{}
	}
	t := time.Unix(rng.Int64N(253402300799+62135596800)-62135596800, 0)
	if rng.IntN(2) == 0 {
		t = t.Add(time.Duration(rng.IntN(1e9)))
	}
	if rng.IntN(2) == 0 {
		return t.In(time.FixedZone("", (rng.IntN(48)-24)*1800))
	}
	return t.UTC()
}

// randomRaw is a json.RawMessage encoding/json can write: nil, or one JSON
// value with or without insignificant whitespace.
func randomRaw(rng *rand.Rand) json.RawMessage {
	raws := []string{"", "null", `{}`, `{"nid":7,"hop":2}`, "{ \"a\" :\n[1, 2,\t\"<\u2028>\"] }", `"x"`, `12.5e3`, "  true  "}
	if r := raws[rng.IntN(len(raws))]; r != "" {
		return json.RawMessage(r)
	}
	return nil
}

func randomRule(rng *rand.Rand) *int {
	if rng.IntN(2) == 0 {
		return nil
	}
	n := randomInt(rng)
	return &n
}

func randomControl(rng *rand.Rand) controlCase {
	switch rng.IntN(10) {
	case 5:
		c := ChainTrigger{RequestID: randomString(rng), Chain: randomString(rng), AgentName: randomString(rng),
			SessionMode: randomString(rng), SessionName: randomString(rng), Input: randomRaw(rng), Policy: randomString(rng)}
		return controlCase{c, plainChainTrigger(c), func() (any, any) { return new(ChainTrigger), new(plainChainTrigger) }}
	case 6:
		r := ChainTriggerResult{RequestID: randomString(rng), Status: randomString(rng), Error: randomString(rng)}
		return controlCase{r, plainChainTriggerResult(r), func() (any, any) { return new(ChainTriggerResult), new(plainChainTriggerResult) }}
	case 7:
		a := AskPublished{AskID: randomString(rng), SessionID: randomString(rng), MissionID: randomString(rng),
			AgentName: randomString(rng), ToolsName: randomString(rng), ToolName: randomString(rng),
			PolicyName: randomString(rng), MatchedRule: randomRule(rng), ArgsSummary: randomString(rng), ExpiresAt: randomTime(rng)}
		return controlCase{a, plainAskPublished(a), func() (any, any) { return new(AskPublished), new(plainAskPublished) }}
	case 8:
		a := AskResolved{AskID: randomString(rng), Reason: randomString(rng)}
		return controlCase{a, plainAskResolved(a), func() (any, any) { return new(AskResolved), new(plainAskResolved) }}
	case 9:
		v := AskVerdict{AskID: randomString(rng), Decision: randomString(rng), Answer: randomString(rng),
			Guidance: randomString(rng), DecidedBy: randomString(rng), DecidedAt: randomTime(rng)}
		return controlCase{v, plainAskVerdict(v), func() (any, any) { return new(AskVerdict), new(plainAskVerdict) }}
	}
	switch rng.IntN(5) {
	case 0:
		h := Hello{ProtocolVersion: randomInt(rng), Instance: randomString(rng), Agent: randomString(rng), Nonce: randomBytes(rng)}
		return controlCase{h, plainHello(h), func() (any, any) { return new(Hello), new(plainHello) }}
	case 1:
		w := Welcome{ProtocolVersion: randomInt(rng), Relay: randomString(rng), Signature: randomBytes(rng), RetryAfterSeconds: randomInt(rng)}
		return controlCase{w, plainWelcome(w), func() (any, any) { return new(Welcome), new(plainWelcome) }}
	case 2:
		r := Resume{AfterSeq: randomUint(rng)}
		return controlCase{r, plainResume(r), func() (any, any) { return new(Resume), new(plainResume) }}
	case 3:
		r := Resumed{FromSeq: randomUint(rng), Evicted: rng.IntN(2) == 0}
		return controlCase{r, plainResumed(r), func() (any, any) { return new(Resumed), new(plainResumed) }}
	}
	e := Error{Code: randomString(rng), Message: randomString(rng)}
	return controlCase{e, plainError(e), func() (any, any) { return new(Error), new(plainError) }}
}

// sameAs converts a decoded plain value to its method-carrying type for
// comparison.
func sameAs(ours, ref any) bool {
	rv := reflect.ValueOf(ref).Elem()
	return reflect.DeepEqual(reflect.ValueOf(ours).Elem().Interface(), rv.Convert(reflect.TypeOf(ours).Elem()).Interface())
}

func TestControlMarshalMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		c := randomControl(rng)
		ours, err := c.value.(json.Marshaler).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeNoHTML(t, c.plain); !bytes.Equal(ours, want) {
			t.Fatalf("MarshalJSON(%#v):\n got %s\nwant %s", c.value, ours, want)
		}
		// Through encoding/json (HTML escaping on) the result is identical
		// to reflection's.
		viaJSON, err1 := json.Marshal(c.value)
		ref, err2 := json.Marshal(c.plain)
		if err1 != nil || err2 != nil || !bytes.Equal(viaJSON, ref) {
			t.Fatalf("json.Marshal(%#v):\n got %s %v\nwant %s %v", c.value, viaJSON, err1, ref, err2)
		}
		// And it decodes back to what encoding/json decodes, from both
		// spellings.
		for _, data := range [][]byte{ours, ref} {
			compareUnmarshal(t, data, c.fresh)
		}
	}
}

// compareUnmarshal decodes data with the hand-written method and with
// encoding/json's reflection and requires the same outcome.
func compareUnmarshal(t *testing.T, data []byte, fresh func() (any, any)) {
	t.Helper()
	ours, ref := fresh()
	errOurs := ours.(json.Unmarshaler).UnmarshalJSON(data)
	errRef := json.Unmarshal(data, ref)
	if (errOurs == nil) != (errRef == nil) {
		t.Fatalf("%T.UnmarshalJSON(%q): err %v; encoding/json err %v", ours, data, errOurs, errRef)
	}
	if errOurs == nil && !sameAs(ours, ref) {
		t.Fatalf("%T.UnmarshalJSON(%q):\n got %#v\nwant %#v", ours, data, ours, ref)
	}
}

// controlInputs are hand-picked texts for the decoding direction.
var controlInputs = []string{
	`null`, ` null `, `{}`, `[]`, `"x"`, `1`, `true`, ``, ` `, `{`, `{}x`, `{} {}`, `nul`,
	`{"protocol_version":1,"instance":"i","agent":"a","nonce":"AAEC"}`,
	`{"PROTOCOL_VERSION":2,"Instance":"I","AGENT":"x","Nonce":"AAEC"}`,
	`{"protocol_version":null,"instance":null,"agent":null,"nonce":null}`,
	`{"protocol_version":1.0}`, `{"protocol_version":1e2}`, `{"protocol_version":-0}`,
	`{"protocol_version":"1"}`, `{"protocol_version":9223372036854775807}`,
	`{"protocol_version":9223372036854775808}`, `{"protocol_version":-9223372036854775808}`,
	`{"protocol_version":-9223372036854775809}`, `{"protocol_version":true}`,
	`{"nonce":"AAEC\n"}`, `{"nonce":"AA\r\nEC"}`, `{"nonce":"AAE="}`, `{"nonce":"AAE"}`, `{"nonce":"A"}`,
	`{"nonce":"_-8="}`, `{"nonce":""}`, `{"nonce":[]}`, `{"nonce":[1,2,255]}`, `{"nonce":[256]}`,
	`{"nonce":[-1]}`, `{"nonce":[1.5]}`, `{"nonce":[null,3]}`, `{"nonce":["1"]}`, `{"nonce":[[1]]}`,
	`{"nonce":{}}`, `{"nonce":1}`, `{"nonce":true}`, `{"nonce":"AAEC","nonce":null}`,
	`{"instance":"a","instance":null}`, `{"instance":"a","instance":"b"}`,
	`{"instance":"\u00e9\ud83d\ude00\ud800\udc00x\udc00\ud800"}`, `{"instance":"\ud800\ud800\udc00"}`,
	"{\"instance\":\"raw\xffbad\"}", `{"instance":"\/\b\f\n\r\t\"\\"}`, `{"instance":"\x"}`,
	`{"instance":"\u12"}`, "{\"instance\":\"tab\there\"}", `{"\u0069nstance":"esc-key"}`,
	`{"ınstance":"dotless i"}`, `{"inſtance":"long s"}`, `{"protocol_version":1,"unknown":{"a":[1,{"b":null}]}}`,
	`{"unknown":[1,2,}`, `{"unknown":01}`, `{"unknown":-}`, `{"unknown":1.}`, `{"unknown":.5}`,
	`{"unknown":1e}`, `{"unknown":tru}`, `{"unknown":"\u00zz"}`, `{,}`, `{"a":1,}`, `{"a" 1}`, `{"a":1 "b":2}`,
	`{"sig":"AAEC","retry_after":30,"relay":"r"}`, `{"retry_after":-5}`, `{"RETRY_AFTER":1}`,
	`{"after_seq":18446744073709551615}`, `{"after_seq":18446744073709551616}`, `{"after_seq":-1}`,
	`{"after_seq":1.5}`, `{"after_seq":"1"}`, `{"AFTER_SEQ":7}`, `{"after_ſeq":7}`,
	`{"from_seq":3,"evicted":true}`, `{"evicted":false}`, `{"evicted":null}`, `{"evicted":1}`,
	`{"evicted":"true"}`, `{"code":"c","message":"m"}`, `{"code":1}`, `{"code":["x"]}`,
	`{"message":{"nested":true}}`, "\t{ \"code\" :\n\"x\" }\r\n", `{"code":"x"}` + "\x00",
	// chain_trigger and its result
	`{"request_id":"r","chain":"c.json","agent_name":"a","session_mode":"reused","session_name":"s","input":{"hop":0},"policy":"p"}`,
	`{"input":null}`, `{"input": [1, 2] }`, `{"input":"x","input":7}`, `{"input":}`, `{"input":[1,}`, `{"INPUT":{}}`,
	`{"agent_name":null,"session_name":1}`, `{"request_id":"r","status":"awaiting_human","error":""}`, `{"status":false}`,
	// the ask payloads
	`{"ask_id":"ask-1","session_id":"cnx-1","mission_id":"m","agent_name":"a","tools_name":"t","tool_name":"x","policy_name":"p","matched_rule":3,"args_summary":"s","expires_at":"2026-08-16T12:00:00Z"}`,
	`{"matched_rule":null}`, `{"matched_rule":0}`, `{"matched_rule":-1}`, `{"matched_rule":1.5}`, `{"matched_rule":"3"}`,
	`{"matched_rule":9223372036854775808}`, `{"matched_rule":3,"matched_rule":null}`, `{"MATCHED_RULE":4}`,
	`{"expires_at":null}`, `{"expires_at":"2026-08-16T12:00:00.123456789+02:00"}`, `{"expires_at":"2026-08-16T12:00:00"}`,
	`{"expires_at":"2026-08-16 12:00:00Z"}`, `{"expires_at":"\u0032026-08-16T12:00:00Z"}`, `{"expires_at":1}`,
	`{"expires_at":{}}`, `{"expires_at":"0000-01-01T00:00:00Z"}`, `{"expires_at":"2026-02-30T00:00:00Z"}`,
	`{"expires_at":"2026-08-16T24:00:00Z"}`, `{"expires_at":"2026-08-16T12:00:00,5Z"}`, `{"EXPIRES_AT":"2026-08-16T12:00:00Z"}`,
	`{"ask_id":"a","reason":"expired"}`, `{"reason":["x"]}`,
	`{"ask_id":"a","decision":"answer","answer":"yes","guidance":"g","decided_by":"u_9","decided_at":"2026-08-16T11:30:00Z"}`,
	`{"decided_at":"x"}`, `{"decided_at":null,"decision":null}`,
}

// controlPairs make a fresh target of each control payload type and of its
// reflection-only twin.
var controlPairs = []func() (any, any){
	func() (any, any) { return new(Hello), new(plainHello) },
	func() (any, any) { return new(Welcome), new(plainWelcome) },
	func() (any, any) { return new(Resume), new(plainResume) },
	func() (any, any) { return new(Resumed), new(plainResumed) },
	func() (any, any) { return new(Error), new(plainError) },
	func() (any, any) { return new(ChainTrigger), new(plainChainTrigger) },
	func() (any, any) { return new(ChainTriggerResult), new(plainChainTriggerResult) },
	func() (any, any) { return new(AskPublished), new(plainAskPublished) },
	func() (any, any) { return new(AskResolved), new(plainAskResolved) },
	func() (any, any) { return new(AskVerdict), new(plainAskVerdict) },
}

func TestControlUnmarshalMatchesEncodingJSON(t *testing.T) {
	for _, in := range controlInputs {
		for _, f := range controlPairs {
			compareUnmarshal(t, []byte(in), f)
		}
	}
}

// TestControlUnmarshalDeep holds the nesting limit to encoding/json's.
func TestControlUnmarshalDeep(t *testing.T) {
	for _, depth := range []int{maxDepth - 2, maxDepth - 1, maxDepth, maxDepth + 1} {
		in := `{"x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		compareUnmarshal(t, []byte(in), func() (any, any) { return new(Error), new(plainError) })
	}
}

// TestControlUnmarshalNullIsNoOp follows the json.Unmarshaler convention.
func TestControlUnmarshalNullIsNoOp(t *testing.T) {
	h := Hello{Instance: "keep", Nonce: []byte{1}}
	if err := h.UnmarshalJSON([]byte("null")); err != nil || h.Instance != "keep" || len(h.Nonce) != 1 {
		t.Fatalf("null changed %+v (%v)", h, err)
	}
}

// TestFoldRunes checks the claim matchKey rests on: only U+017F and U+212A
// fold into ASCII.
func TestFoldRunes(t *testing.T) {
	for r := rune(0x80); r <= 0x10ffff; r++ {
		for f := r; ; {
			f = unicode.SimpleFold(f)
			if f == r {
				break
			}
			if f < 0x80 && r != '\u017f' && r != '\u212a' {
				t.Fatalf("U+%04X folds to ASCII %q", r, f)
			}
		}
	}
}

// TestPayloadMarshalErrorsAsEncodingJSON: where encoding/json cannot encode
// a payload, the hand-written method fails too.
func TestPayloadMarshalErrorsAsEncodingJSON(t *testing.T) {
	late := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct{ value, plain any }{
		{AskPublished{AskID: "a", ExpiresAt: late}, plainAskPublished{AskID: "a", ExpiresAt: late}},
		{AskVerdict{AskID: "a", DecidedAt: late}, plainAskVerdict{AskID: "a", DecidedAt: late}},
		{ChainTrigger{Input: json.RawMessage{}}, plainChainTrigger{Input: json.RawMessage{}}},
		{ChainTrigger{Input: json.RawMessage(`{"a":`)}, plainChainTrigger{Input: json.RawMessage(`{"a":`)}},
		{ChainTrigger{Input: json.RawMessage(`1 2`)}, plainChainTrigger{Input: json.RawMessage(`1 2`)}},
	}
	for _, c := range cases {
		_, err := c.value.(json.Marshaler).MarshalJSON()
		_, refErr := json.Marshal(c.plain)
		if err == nil || refErr == nil {
			t.Errorf("%#v: MarshalJSON err %v, encoding/json err %v; want both to fail", c.value, err, refErr)
		}
	}
}

// TestPayloadWireShape pins the bytes of the payloads v1.0.0 added, as its
// own tests spell them.
func TestPayloadWireShape(t *testing.T) {
	rule := 3
	cases := []struct {
		value json.Marshaler
		want  string
	}{
		{AskPublished{AskID: "ask-1", SessionID: "cnx-sess-1", MissionID: "m-1", AgentName: "refund-desk",
			ToolsName: "billing", ToolName: "issue_refund", PolicyName: "hitl-policy-default.json", MatchedRule: &rule,
			ArgsSummary: "refund 40 EUR to customer 8812", ExpiresAt: time.Date(2026, 8, 16, 12, 0, 0, 0, time.UTC)},
			`{"ask_id":"ask-1","session_id":"cnx-sess-1","mission_id":"m-1","agent_name":"refund-desk","tools_name":"billing","tool_name":"issue_refund","policy_name":"hitl-policy-default.json","matched_rule":3,"args_summary":"refund 40 EUR to customer 8812","expires_at":"2026-08-16T12:00:00Z"}`},
		{AskPublished{AskID: "ask-2"}, `{"ask_id":"ask-2"}`},
		{AskResolved{AskID: "ask-1", Reason: AskResolvedExpired}, `{"ask_id":"ask-1","reason":"expired"}`},
		{AskVerdict{AskID: "ask-1", Decision: AskDecisionAllow}, `{"ask_id":"ask-1","decision":"allow"}`},
		{AskVerdict{AskID: "ask-1", Decision: AskDecisionAnswer, Answer: "yes", DecidedAt: time.Date(2026, 8, 16, 11, 30, 0, 5, time.FixedZone("", 3600))},
			`{"ask_id":"ask-1","decision":"answer","answer":"yes","decided_at":"2026-08-16T11:30:00.000000005+01:00"}`},
		{ChainTrigger{RequestID: "req-2", Chain: "chain-on-report.json", AgentName: "a", SessionMode: ChainSessionReused, SessionName: "refund-desk", Input: json.RawMessage("{ \"hop\": 0 }")},
			`{"request_id":"req-2","chain":"chain-on-report.json","agent_name":"a","session_mode":"reused","session_name":"refund-desk","input":{"hop":0}}`},
		{ChainTrigger{}, `{"request_id":"","chain":"","session_mode":"","input":null}`},
		{ChainTriggerResult{RequestID: "r", Status: ChainTriggerStatusAwaitingHuman}, `{"request_id":"r","status":"awaiting_human"}`},
	}
	for _, c := range cases {
		got, err := c.value.MarshalJSON()
		if err != nil || string(got) != c.want {
			t.Errorf("%#v:\n got %s %v\nwant %s", c.value, got, err, c.want)
		}
	}
}

// TestAskFramesRoundTrip sends each new payload through Writer and Reader as
// a frame of its type, and decodes it back equal.
func TestAskFramesRoundTrip(t *testing.T) {
	rule := 0
	values := []struct {
		typ   string
		value any
		fresh func() any
	}{
		{TypeAskPublished, AskPublished{AskID: "ask-1", MatchedRule: &rule, ExpiresAt: time.Date(2026, 8, 16, 12, 0, 0, 0, time.UTC)}, func() any { return new(AskPublished) }},
		{TypeAskResolved, AskResolved{AskID: "ask-1", Reason: AskResolvedSuperseded}, func() any { return new(AskResolved) }},
		{TypeAskVerdict, AskVerdict{AskID: "ask-1", Decision: AskDecisionDeny, Guidance: "outside the window", DecidedBy: "u_9", DecidedAt: time.Date(2026, 8, 16, 11, 30, 0, 0, time.UTC)}, func() any { return new(AskVerdict) }},
		{TypeChainTrigger, ChainTrigger{RequestID: "req-1", Chain: "c.json", AgentName: "desk", SessionMode: ChainSessionReused, SessionName: "s", Input: json.RawMessage(`{"hop":2}`)}, func() any { return new(ChainTrigger) }},
		{TypeChainTriggerResult, ChainTriggerResult{RequestID: "req-1", Status: ChainTriggerStatusAwaitingHuman}, func() any { return new(ChainTriggerResult) }},
	}
	for _, v := range values {
		payload, err := v.value.(json.Marshaler).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := NewWriter(&buf).WriteFrame(Frame{Type: v.typ, Instance: "inst-1", Payload: payload}); err != nil {
			t.Fatal(err)
		}
		f, err := NewReader(&buf).ReadFrame()
		if err != nil || f.Type != v.typ || f.Session != "" {
			t.Fatalf("%s: %+v, %v", v.typ, f, err)
		}
		got := v.fresh()
		if err := got.(json.Unmarshaler).UnmarshalJSON(f.Payload); err != nil {
			t.Fatalf("%s: %v", v.typ, err)
		}
		if !reflect.DeepEqual(reflect.ValueOf(got).Elem().Interface(), v.value) {
			t.Fatalf("%s: got %#v, want %#v", v.typ, got, v.value)
		}
	}
}

// TestIntPointerWritesThrough: like encoding/json, a number decodes into the
// int MatchedRule already points to, and null sets the pointer to nil.
func TestIntPointerWritesThrough(t *testing.T) {
	n := 1
	a := AskPublished{MatchedRule: &n}
	if err := a.UnmarshalJSON([]byte(`{"matched_rule":7}`)); err != nil || a.MatchedRule != &n || n != 7 {
		t.Fatalf("number: %v, %v, n=%d", a.MatchedRule, err, n)
	}
	if err := a.UnmarshalJSON([]byte(`{"matched_rule":null}`)); err != nil || a.MatchedRule != nil {
		t.Fatalf("null: %v, %v", a.MatchedRule, err)
	}
}

// TestDirectionRules pins the direction of every type this build names: the
// relay→machine-only and machine→relay-only sets of spec 001 and v1.0.0, and
// every other type (cargo both ways, control, unknown) in neither.
func TestDirectionRules(t *testing.T) {
	relayToMachine := []string{TypeChainTrigger, TypeAskVerdict}
	machineToRelay := []string{TypeChainTriggerResult, TypeAskPublished, TypeAskResolved}
	neither := []string{TypeACPMessage, TypeACPDetach, TypeResume, TypeResumed, TypeHello, TypeWelcome,
		TypeHeartbeat, TypeAck, TypeError, "", "ask.", "ask.future", "chain_trigger ", "CHAIN_TRIGGER", "Ask.Verdict"}
	for _, typ := range relayToMachine {
		if !RelayToMachineOnly(typ) || MachineToRelayOnly(typ) {
			t.Errorf("%q: RelayToMachineOnly %v, MachineToRelayOnly %v", typ, RelayToMachineOnly(typ), MachineToRelayOnly(typ))
		}
	}
	for _, typ := range machineToRelay {
		if RelayToMachineOnly(typ) || !MachineToRelayOnly(typ) {
			t.Errorf("%q: RelayToMachineOnly %v, MachineToRelayOnly %v", typ, RelayToMachineOnly(typ), MachineToRelayOnly(typ))
		}
	}
	for _, typ := range neither {
		if RelayToMachineOnly(typ) || MachineToRelayOnly(typ) {
			t.Errorf("%q: RelayToMachineOnly %v, MachineToRelayOnly %v", typ, RelayToMachineOnly(typ), MachineToRelayOnly(typ))
		}
	}
}
