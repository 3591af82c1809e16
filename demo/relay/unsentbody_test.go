package relay_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// A request body announced and never sent holds its connection for
// HeaderTimeout at most, so such requests, from anyone, cannot fill
// PendingConns for good and get every upgrade after them HTTP 503: a POST to
// a path no leg serves, a chunked POST to the runtime leg, an Expect:
// 100-continue POST to the browser leg. Once they are let go, a runtime and
// a browser get in.
func TestUnsentBodiesDoNotLockOut(t *testing.T) {
	// Long enough for the held connections to be seen filling the bound on
	// a busy machine; the test waits this long once.
	const bound = 3 * time.Second
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Limits.PendingConns = 3
		c.Limits.HeaderTimeout = bound
	})
	host := env.Server.Listener.Addr().String()
	var held []net.Conn
	for _, req := range []string{
		"POST /nowhere HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 100\r\n\r\n",
		"POST " + relayleg.ConnectPath + " HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST " + relayleg.AttachPath + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n",
	} {
		c := rawConn(t, env)
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		held = append(held, c) // and the body never comes
	}
	if got := status(t, env, "GET /nowhere HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); got != http.StatusServiceUnavailable {
		t.Fatalf("with %d connections awaiting their body: HTTP %d, want 503 (they do not fill the bound?)", len(held), got)
	}

	rt := waitAdmitted(t, "the runtime's upgrade", func() (*relaytest.Runtime, int, error) {
		return relaytest.DialRuntime(context.Background(), env.HTTPURL, env.RuntimeToken)
	})
	t.Cleanup(func() { rt.Conn.Close() })
	if f, _, err := rt.Hello(env.Instance, librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeWelcome {
		t.Fatalf("runtime hello: %s %s %v", f.Type, f.Payload, err)
	}
	b := waitAdmitted(t, "a browser's upgrade", func() (*relaytest.Browser, int, error) {
		b, resp, err := relaytest.DialBrowser(context.Background(), env.AttachURL, env.ClientToken, relaytest.DialOptions{Origin: env.Origin})
		if resp == nil {
			return b, 0, err
		}
		return b, resp.StatusCode, err
	})
	t.Cleanup(func() { b.WS.CloseNow() })
	if f, _, err := b.Hello(env.Instance, "", librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeWelcome {
		t.Fatalf("browser hello: %s %s %v", f.Type, f.Payload, err)
	}

	// The relay closed each held connection (rawConn's deadline bounds the
	// wait), whatever it answered first.
	for i, c := range held {
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("held connection %d: %v, want it closed by the relay", i, err)
		}
	}
}

// waitAdmitted dials until the relay lets the dial in: it answers 503 while
// the connections not yet upgraded are at their bound. Any other refusal
// fails t, and so does a 503 past relaytest.WaitLimit.
func waitAdmitted[C any](t *testing.T, what string, dial func() (C, int, error)) C {
	t.Helper()
	for deadline := time.Now().Add(relaytest.WaitLimit); ; time.Sleep(10 * time.Millisecond) {
		c, code, err := dial()
		if err == nil {
			return c
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("%s: %v (HTTP %d)", what, err, code)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still HTTP 503 after %v: the connections that filled the bound are still counted", what, relaytest.WaitLimit)
		}
	}
}

// The bounds on a request that is not upgraded never reach an upgraded
// connection: a runtime and a browser that got in before a request whose
// body never came still carry frames both ways once that request has been
// let go (so its bound has passed), the relay's writes included.
func TestUpgradedOutlastRequestBounds(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) { c.Limits.HeaderTimeout = time.Second })
	rt := env.Connect(t)
	b := env.Attach(t, "")
	c := rawConn(t, env)
	host := env.Server.Listener.Addr().String()
	if _, err := c.Write([]byte("POST /nowhere HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 100\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the request whose body never came: %v, want it closed by the relay", err)
	}

	if err := b.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Payload: []byte(`"up"`)}); err != nil {
		t.Fatal(err)
	}
	if f, err := rt.ReadCargo(); err != nil || string(f.Payload) != `"up"` {
		t.Fatalf("the runtime got %s %s (%v), want the browser's frame", f.Type, f.Payload, err)
	}
	if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Payload: []byte(`"down"`)}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := b.Read()
		if err != nil {
			t.Fatalf("the browser: %v, want the runtime's frame", err)
		}
		if f.Type == librelay.TypeACPMessage {
			if string(f.Payload) != `"down"` {
				t.Fatalf("the browser got %s", f.Payload)
			}
			return
		}
	}
}
