package conformance

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// The runtime leg: 101 with the same Upgrade token, then a welcome that
// answers the hello and is signed over the runtime's own nonce, the selected
// version and the instance.
func TestRuntimeHandshakeSigned(t *testing.T) {
	s := newSuite(t, nil)
	rt, status, err := relaytest.DialRuntimeTLS(context.Background(), s.HTTPURL, s.RuntimeToken, s.TLS)
	if err != nil || status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: status %d, %v", status, err)
	}
	defer rt.Conn.Close()
	f, nonce, err := rt.Hello(s.Instance, librelay.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	checkSignedWelcome(t, f, s.Env, nonce, s.Instance, librelay.ProtocolVersion)
	if f.Instance != s.Instance {
		t.Fatalf("welcome names instance %q, want %q", f.Instance, s.Instance)
	}
}

// The browser leg: the relay selects the relay subprotocol and never echoes
// the credential; the welcome grants an attachment id and is signed as for
// a runtime.
func TestBrowserHandshakeSigned(t *testing.T) {
	s := newSuite(t, nil)
	s.Connect(t)
	b, _, err := relaytest.DialBrowser(context.Background(), s.AttachURL, s.ClientToken, relaytest.DialOptions{Origin: s.Origin, TLS: s.TLS})
	if err != nil {
		t.Fatal(err)
	}
	defer b.WS.CloseNow()
	if got := b.WS.Subprotocol(); got != relayleg.Subprotocol {
		t.Fatalf("selected subprotocol %q, want %q", got, relayleg.Subprotocol)
	}
	f, nonce, err := b.Hello(s.Instance, "", librelay.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	checkSignedWelcome(t, f, s.Env, nonce, s.Instance, librelay.ProtocolVersion)
	// 128 bits at least: 22 base64url characters.
	if len(f.Session) < 22 {
		t.Fatalf("attachment id %q is too short to be unguessable", f.Session)
	}
	other := s.Attach(t, "")
	if other.Session == f.Session {
		t.Fatal("two attachments got the same id")
	}
}

// checkSignedWelcome verifies f answers the hello at version v and that the
// signature covers this nonce and nothing else.
func checkSignedWelcome(t *testing.T, f librelay.Frame, env *relaytest.Env, nonce []byte, instance string, v int) {
	t.Helper()
	if f.Type != librelay.TypeWelcome || f.ReplyTo != "hello" {
		t.Fatalf("want relay.welcome re hello, got %s re %q %s", f.Type, f.ReplyTo, f.Payload)
	}
	var w librelay.Welcome
	if err := w.UnmarshalJSON(f.Payload); err != nil {
		t.Fatal(err)
	}
	if w.ProtocolVersion != v {
		t.Fatalf("welcome selected version %d, want %d", w.ProtocolVersion, v)
	}
	if err := librelay.VerifyWelcome(env.Key, nonce, w.ProtocolVersion, instance, w.Signature); err != nil {
		t.Fatalf("welcome signature: %v", err)
	}
	other, _ := librelay.NewNonce()
	if librelay.VerifyWelcome(env.Key, other, w.ProtocolVersion, instance, w.Signature) == nil {
		t.Fatal("welcome signature does not depend on the nonce")
	}
}

// The welcome selects min(peer, self) and signs that version, on both legs;
// a peer with no version in common is refused with unsupported_version.
func TestVersionNegotiation(t *testing.T) {
	s := newSuite(t, nil)
	f, nonce := runtimeHello(t, s, s.RuntimeToken, s.Instance, librelay.ProtocolVersion+6)
	checkSignedWelcome(t, f, s.Env, nonce, s.Instance, librelay.ProtocolVersion)

	b := dial(t, s, s.ClientToken)
	f, nonce, err := b.Hello(s.Instance, "", librelay.ProtocolVersion+6)
	if err != nil {
		t.Fatal(err)
	}
	checkSignedWelcome(t, f, s.Env, nonce, s.Instance, librelay.ProtocolVersion)

	b = dial(t, s, s.ClientToken)
	f, _, err = b.Hello(s.Instance, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, f, librelay.CodeVersion, "hello")
	wantClose(t, b, librelay.CodeVersion)

	f, _ = runtimeHello(t, s, s.RuntimeToken, s.Instance, 0)
	wantError(t, f, librelay.CodeVersion, "hello")
}

// runtimeHello dials the runtime leg with token and sends a hello for
// instance at version, returning the answer and the nonce.
func runtimeHello(t *testing.T, s *suite, token, instance string, version int) (librelay.Frame, []byte) {
	t.Helper()
	rt, _, err := relaytest.DialRuntimeTLS(t.Context(), s.HTTPURL, token, s.TLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Conn.Close() })
	f, nonce, err := rt.Hello(instance, version)
	if err != nil {
		t.Fatal(err)
	}
	return f, nonce
}

// dial opens a browser socket with token, not yet attached.
func dial(t *testing.T, s *suite, token string) *relaytest.Browser {
	t.Helper()
	b, _, err := relaytest.DialBrowser(context.Background(), s.AttachURL, token, relaytest.DialOptions{Origin: s.Origin, TLS: s.TLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.WS.CloseNow() })
	return b
}

// A first frame that is not a relay.hello request is refused with
// malformed_frame and close 4400.
func TestBadHello(t *testing.T) {
	s := newSuite(t, nil)
	s.Connect(t)
	cases := map[string][]byte{
		"not json":     []byte(`hello?`),
		"not a hello":  []byte(`{"type":"acp.message","instance":"` + s.Instance + `","payload":{}}`),
		"notification": []byte(`{"type":"relay.hello","instance":"` + s.Instance + `","payload":{"protocol_version":1,"instance":"` + s.Instance + `"}}`),
		"no instance":  []byte(`{"type":"relay.hello","id":"h","payload":{"protocol_version":1}}`),
	}
	for name, first := range cases {
		t.Run(name, func(t *testing.T) {
			b := dial(t, s, s.ClientToken)
			if err := b.SendRaw(first); err != nil {
				t.Fatal(err)
			}
			wantClosedWith(t, b, librelay.CodeMalformedFrame)
		})
	}
}

// A bad credential: HTTP 401 on the runtime leg (before any frame), and
// relay.error unauthorized then close 4401 on the browser leg, whose page
// cannot read an upgrade's status. A credential for another instance is
// refused the same way.
func TestBadCredential(t *testing.T) {
	s := newSuite(t, nil)
	for _, token := range []string{"", "not-a-credential"} {
		if _, status, err := relaytest.DialRuntimeTLS(context.Background(), s.HTTPURL, token, s.TLS); err == nil || status != http.StatusUnauthorized {
			t.Fatalf("runtime leg with credential %q: status %d, err %v; want 401", token, status, err)
		}
	}
	s.Connect(t)
	b := dial(t, s, "not-a-credential")
	f, _, err := b.Hello(s.Instance, "", librelay.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, f, relayleg.CodeUnauthorized, "hello")
	wantClose(t, b, relayleg.CodeUnauthorized)

	b, _, err = relaytest.DialBrowser(context.Background(), s.AttachURL, "", relaytest.DialOptions{
		Origin: s.Origin, Protocols: []string{relayleg.Subprotocol}, TLS: s.TLS,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.WS.CloseNow()
	f, _, err = b.Hello(s.Instance, "", librelay.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, f, relayleg.CodeUnauthorized, "hello")
	wantClose(t, b, relayleg.CodeUnauthorized)
}

// A runtime credential may only serve its own instance.
func TestRuntimeCredentialBoundToInstance(t *testing.T) {
	s := newSuite(t, nil)
	f, _ := runtimeHello(t, s, s.RuntimeToken, s.Instance+"-other", librelay.ProtocolVersion)
	wantError(t, f, relayleg.CodeUnauthorized, "hello")
}

// A cross-origin upgrade from an origin the relay does not allow is refused
// with HTTP 403 before any WebSocket exists.
func TestCrossOriginRefused(t *testing.T) {
	s := newSuite(t, nil)
	_, resp, err := relaytest.DialBrowser(context.Background(), s.AttachURL, s.ClientToken, relaytest.DialOptions{Origin: *flagBadOrigin, TLS: s.TLS})
	if err == nil {
		t.Fatal("cross-origin upgrade was accepted")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin upgrade: %v, want HTTP 403", err)
	}
}

// A hello for an instance with no runtime connected is refused with
// unknown_instance and close 4404.
func TestHelloUnknownInstance(t *testing.T) {
	s := newSuite(t, nil)
	need(t, s.anyClient != "", "needs -any-client-token to name an instance nobody serves")
	b := dial(t, s, s.anyClient)
	f, _, err := b.Hello("nobody-serves-this", "", librelay.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, f, librelay.CodeUnknownInstance, "hello")
	wantClose(t, b, librelay.CodeUnknownInstance)
}

// A relay served over TLS speaks TLS 1.3 on the runtime leg (the contenox
// connector requires it) and refuses a client that offers no more than 1.2.
func TestRuntimeLegTLS13(t *testing.T) {
	s := newSuite(t, nil)
	need(t, s.TLS != nil, "the relay is not served over TLS")
	rt := s.Connect(t)
	tc, ok := rt.Conn.(*tls.Conn)
	if !ok || tc.ConnectionState().Version != tls.VersionTLS13 {
		t.Fatalf("runtime leg over %T, want TLS 1.3", rt.Conn)
	}
	old := s.TLS.Clone()
	old.MaxVersion = tls.VersionTLS12
	if _, _, err := relaytest.DialRuntimeTLS(t.Context(), s.HTTPURL, s.RuntimeToken, old); err == nil {
		t.Fatal("a TLS 1.2 client got through to the runtime leg")
	}
}

// A hello without a nonce, as a peer that pins no relay key may send (spec
// 001: Hello.Nonce and Welcome.Signature are both omitempty), is welcomed,
// unsigned, on both legs, and the route works.
func TestHelloWithoutNonceWelcomed(t *testing.T) {
	s := newSuite(t, nil)
	payload, _ := librelay.Hello{ProtocolVersion: librelay.ProtocolVersion, Instance: s.Instance, Agent: "conformance"}.MarshalJSON()
	hello := librelay.Frame{Type: librelay.TypeHello, ID: "hello", Instance: s.Instance, Payload: payload}
	wantUnsigned := func(leg string, f librelay.Frame) {
		t.Helper()
		var w librelay.Welcome
		if f.Type != librelay.TypeWelcome || f.ReplyTo != "hello" || w.UnmarshalJSON(f.Payload) != nil {
			t.Fatalf("%s leg: want relay.welcome re hello, got %s re %q %s", leg, f.Type, f.ReplyTo, f.Payload)
		}
		if len(w.Signature) != 0 {
			t.Fatalf("%s leg: a welcome signed over no nonce: %s", leg, f.Payload)
		}
	}

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
	wantUnsigned("runtime", f)

	b := dial(t, s, s.ClientToken)
	if err := b.Send(hello); err != nil {
		t.Fatal(err)
	}
	f = mustRead(t, b)
	wantUnsigned("browser", f)
	b.Instance, b.Session = f.Instance, f.Session
	if err := b.Send(msg(b, `"marker"`)); err != nil {
		t.Fatal(err)
	}
	if f := mustCargo(t, rt); string(f.Payload) != `"marker"` {
		t.Fatalf("runtime got %s %s, want the marker", f.Type, f.Payload)
	}
}
