//go:build !js

package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// A session.resumed without a payload is a resumed whose members are all
// zero (spec 001, DecodePayload: an absent payload decodes to nothing and is
// not an error): the stream goes on after the cursor on the same
// connection, instead of the connection being dropped as unreadable and
// redialled on every resume.
func TestResumedWithoutPayload(t *testing.T) {
	s := newScripted(t)
	_, id := s.expectResume(t)
	s.send(t, librelay.Frame{Type: librelay.TypeResumed, ReplyTo: id})
	s.msg(t, 1, 1)
	s.c.Wait(t, "seq 1 delivered", func(c *clienttest.Collector) bool { return len(c.Msgs) == 1 })
	s.c.Lock()
	defer s.c.Unlock()
	if n := countState(s.c, client.Reconnecting); n != 0 || len(s.c.Evicted) != 0 {
		t.Fatalf("after a payload-less session.resumed: %d reconnects, evictions %+v, want none (states %+v)", n, s.c.Evicted, s.c.States)
	}
	if got := s.c.Msgs[0].Seq; got != 1 {
		t.Fatalf("delivered seq %d, want 1", got)
	}
}

// welcomeRelay is a minimal relay of the test's own that answers every
// hello with the welcome payload makes from the hello (payload may sign
// with the relay's key), and counts the dials.
func welcomeRelay(t *testing.T, payload func(h librelay.Hello, instance string, priv ed25519.PrivateKey) []byte) (url string, pub ed25519.PublicKey, dials *atomic.Int32) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	dials = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dials.Add(1)
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{relayleg.Subprotocol}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		_, msg, err := ws.Read(r.Context())
		if err != nil {
			return
		}
		hello, _ := librelay.ParseFrame(msg)
		var h librelay.Hello
		h.UnmarshalJSON(hello.Payload)
		out, _ := librelay.AppendFrame(nil, &librelay.Frame{Type: librelay.TypeWelcome, ReplyTo: hello.ID, Instance: hello.Instance, Session: "a1",
			Payload: payload(h, hello.Instance, priv)})
		ws.Write(r.Context(), websocket.MessageText, out)
		ws.Read(r.Context()) // until the client hangs up
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), pub, dials
}

// attachOnce attaches to url, pinning key when it is not nil, and returns
// Attach's error.
func attachOnce(t *testing.T, url string, key ed25519.PublicKey) error {
	t.Helper()
	o := client.Options{
		URL: url, Instance: "i",
		Credential: func(context.Context) (string, error) { return "t", nil },
		RelayKey:   key,
		OnMessage:  func(client.Message) error { return nil },
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	a, err := client.Attach(ctx, o)
	if a != nil {
		a.Close()
	}
	return err
}

// With a relay key pinned, a welcome whose payload cannot be read is a
// relay that did not prove it holds the key: bad_relay_signature, saying
// what could not be read, after one dial. The case is a signature spelled
// as unpadded base64url (which spec 001's SigningInput prose suggests),
// where Welcome.Signature is a []byte, padded standard base64 on the wire;
// it used to be a protocol error, redialled for ever.
func TestPinnedKeyUnreadableWelcome(t *testing.T) {
	url, pub, dials := welcomeRelay(t, func(h librelay.Hello, instance string, priv ed25519.PrivateKey) []byte {
		sig, _ := librelay.SignWelcome(priv, h.Nonce, librelay.ProtocolVersion, instance)
		return []byte(`{"protocol_version":` + strconv.Itoa(librelay.ProtocolVersion) + `,"sig":"` + base64.RawURLEncoding.EncodeToString(sig) + `"}`)
	})
	err := attachOnce(t, url, pub)
	if !errors.Is(err, client.ErrBadRelaySignature) || client.Code(err) != "bad_relay_signature" {
		t.Fatalf("Attach: %v (code %q), want bad_relay_signature", err, client.Code(err))
	}
	if !strings.Contains(err.Error(), "relay.welcome could not be read") || !strings.Contains(err.Error(), "sig") {
		t.Fatalf("Attach: %v, want it to say the welcome's sig could not be read", err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
}

// A welcome without a payload is a welcome whose members are all zero
// (spec 001, DecodePayload), judged as such: it selected version 0, which
// this client does not speak, with a key pinned or not. It used to be an
// unreadable welcome, a protocol error redialled for ever.
func TestWelcomeWithoutPayload(t *testing.T) {
	url, pub, dials := welcomeRelay(t, func(librelay.Hello, string, ed25519.PrivateKey) []byte { return nil })
	for i, key := range []ed25519.PublicKey{pub, nil} {
		err := attachOnce(t, url, key)
		if !errors.Is(err, client.ErrUnsupportedVersion) {
			t.Fatalf("pinned %v: Attach: %v, want unsupported_version as for version 0", key != nil, err)
		}
		if n := dials.Load(); n != int32(i+1) {
			t.Fatalf("pinned %v: %d dials in all, want %d", key != nil, n, i+1)
		}
	}
}
