package librelay

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
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

func randomControl(rng *rand.Rand) controlCase {
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
}

// controlPairs make a fresh target of each control payload type and of its
// reflection-only twin.
var controlPairs = []func() (any, any){
	func() (any, any) { return new(Hello), new(plainHello) },
	func() (any, any) { return new(Welcome), new(plainWelcome) },
	func() (any, any) { return new(Resume), new(plainResume) },
	func() (any, any) { return new(Resumed), new(plainResumed) },
	func() (any, any) { return new(Error), new(plainError) },
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
