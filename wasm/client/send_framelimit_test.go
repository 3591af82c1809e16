//go:build !js

package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// framed returns a payload whose acp.message frame, as the client encodes
// it on s's attachment, is exactly n bytes.
func framed(t *testing.T, s *scripted, n int) []byte {
	t.Helper()
	size := func(p []byte) int {
		b, err := librelay.AppendFrame(nil, &librelay.Frame{Type: librelay.TypeACPMessage, Instance: s.env.Instance, Session: s.a.Session(), Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	p := []byte(`""`)
	p = []byte(`"` + strings.Repeat("x", n-size(p)) + `"`)
	if got := size(p); got != n {
		t.Fatalf("framed %d bytes, want %d", got, n)
	}
	return p
}

// A message whose frame is over the browser leg's limit (the dev relay's
// default, relayleg.BrowserFrameBytes) is refused at once with
// frame_too_large, and nothing is sent: the relay would discard it and
// close the connection, and the message would be lost with the send
// reported done. One exactly at the limit goes through the relay and
// arrives whole, and the connection stays.
func TestSendOverTheFrameLimitRefused(t *testing.T) {
	s := newScripted(t)
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()

	err := s.a.SendACP(ctx, framed(t, s, relayleg.BrowserFrameBytes+1))
	if !errors.Is(err, client.ErrFrameTooLarge) || client.Code(err) != relayleg.CodeFrameTooLarge {
		t.Fatalf("a frame one byte over the limit: SendACP returned %v (code %q), want frame_too_large", err, client.Code(err))
	}
	at := framed(t, s, relayleg.BrowserFrameBytes)
	if err := s.a.SendACP(ctx, at); err != nil {
		t.Fatalf("a frame at the limit: %v", err)
	}
	f := s.next(t)
	if f.Type != librelay.TypeACPMessage || string(f.Payload) != string(at) {
		t.Fatalf("the runtime got %s with %d bytes of payload, want the %d sent", f.Type, len(f.Payload), len(at))
	}
	send(t, s.a, `{"jsonrpc":"2.0","method":"after"}`)
	if f := s.next(t); string(f.Payload) != `{"jsonrpc":"2.0","method":"after"}` {
		t.Fatalf("after the large message the runtime got %s %s", f.Type, f.Payload)
	}
	if s.a.State() != client.Open {
		t.Fatalf("state %v after the sends", s.a.State())
	}
}

// MaxSendBytes raises the limit for a relay that takes larger frames: a
// message over the default goes through such a relay and arrives whole,
// and one over the raised limit is refused. A limit past
// librelay.MaxFrameBytes, or negative, is a bad option.
func TestMaxSendBytesRaisesTheLimit(t *testing.T) {
	const limit = 2 * relayleg.BrowserFrameBytes
	s := newScriptedOn(t, func(c *relay.Config) { c.Limits.BrowserFrameBytes = limit }, func(o *client.Options) { o.MaxSendBytes = limit })
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := s.a.SendACP(ctx, framed(t, s, limit+1)); !errors.Is(err, client.ErrFrameTooLarge) {
		t.Fatalf("a frame over the raised limit: SendACP returned %v, want ErrFrameTooLarge", err)
	}
	big := framed(t, s, relayleg.BrowserFrameBytes+1)
	if err := s.a.SendACP(ctx, big); err != nil {
		t.Fatalf("a frame over the default limit, within the raised one: %v", err)
	}
	if f := s.next(t); f.Type != librelay.TypeACPMessage || string(f.Payload) != string(big) {
		t.Fatalf("the runtime got %s with %d bytes of payload, want the %d sent", f.Type, len(f.Payload), len(big))
	}

	for _, bad := range []int{-1, librelay.MaxFrameBytes + 1} {
		o := client.Options{URL: "ws://127.0.0.1:1/v1/attach", Instance: "x", MaxSendBytes: bad,
			Credential: func(context.Context) (string, error) { return "", nil }, OnMessage: func(client.Message) error { return nil }}
		if _, err := client.Attach(ctx, o); !errors.Is(err, client.ErrBadOptions) {
			t.Fatalf("MaxSendBytes %d: Attach returned %v, want ErrBadOptions", bad, err)
		}
	}
}
