package relayleg

import (
	"strings"
	"testing"
)

// A credential survives the trip through a subprotocol, whatever bytes it
// holds, and the spelling uses only characters a subprotocol token allows.
func TestBearerRoundTrip(t *testing.T) {
	for _, cred := range []string{"dev-token", "a b/c+d=", "ünïcödé", strings.Repeat("x", 500)} {
		p := BearerSubprotocol(cred)
		if strings.ContainsAny(p[len(BearerPrefix):], "+/= ") {
			t.Errorf("%q spelled %q: not a token", cred, p)
		}
		got, ok := ParseBearer([]string{Subprotocol, p})
		if !ok || got != cred {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q", p, got, ok, cred)
		}
	}
}

// No credential, an empty one, or one that is not base64url is refused.
func TestParseBearerRefuses(t *testing.T) {
	for _, protocols := range [][]string{
		nil,
		{Subprotocol},
		{BearerPrefix},
		{BearerPrefix + "not*base64"},
		{"Bearer.ZGV2"}, // the prefix is case-sensitive, like every subprotocol
	} {
		if got, ok := ParseBearer(protocols); ok {
			t.Errorf("ParseBearer(%q) = %q, true; want refusal", protocols, got)
		}
	}
}

// Every close code but CloseNormal names one reason and back, in the
// application range, and String spells each as its constant.
func TestCloseCodesPairWithReasons(t *testing.T) {
	if len(closeCodes) != 12 {
		t.Fatalf("%d close codes; update this test with the README when adding one", len(closeCodes))
	}
	seen := map[CloseCode]bool{}
	for _, e := range closeCodes {
		code := e.code
		if seen[code] {
			t.Errorf("close code %d listed twice", code)
		}
		seen[code] = true
		if code == CloseNormal {
			continue
		}
		if code < 4000 || code > 4999 {
			t.Errorf("close code %d outside 4000–4999", code)
		}
		if code.Reason() != e.reason || CloseFor(e.reason) != code {
			t.Errorf("close code %d and reason %q do not pair", code, e.reason)
		}
	}
	if CloseNormal.Reason() != "" || CloseFor("no_such_reason") != 0 || CloseFor("") != 0 {
		t.Error("undefined codes must map to nothing")
	}
	if CloseUnauthorized.String() != "CloseUnauthorized" || CloseCode(4999).String() != "CloseCode(4999)" {
		t.Errorf("String: %s, %s", CloseUnauthorized, CloseCode(4999))
	}
}
