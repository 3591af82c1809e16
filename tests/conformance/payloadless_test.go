package conformance

import (
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// A relay.hello without a payload is a Hello whose members are all zero
// (spec 001, DecodePayload: an absent payload decodes to nothing and is not
// an error), judged as such on both legs: it offers version 0, so the
// refusal is unsupported_version, not malformed_frame.
func TestHelloWithoutPayload(t *testing.T) {
	s := newSuite(t, nil)
	s.Connect(t)
	hello := librelay.Frame{Type: librelay.TypeHello, ID: "hello", Instance: s.Instance}

	rt, _, err := relaytest.DialRuntimeTLS(t.Context(), s.HTTPURL, s.RuntimeToken, s.TLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Conn.Close() })
	if err := rt.Send(hello); err != nil {
		t.Fatal(err)
	}
	f, err := rt.Read()
	if err != nil {
		t.Fatalf("runtime leg: no answer to the hello: %v", err)
	}
	wantError(t, f, librelay.CodeVersion, "hello")

	b := dial(t, s, s.ClientToken)
	if err := b.Send(hello); err != nil {
		t.Fatal(err)
	}
	wantError(t, mustRead(t, b), librelay.CodeVersion, "hello")
	wantClose(t, b, librelay.CodeVersion)
}
