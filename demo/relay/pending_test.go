package relay_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// dialWait bounds the wait for a place among the pending hellos to free up;
// the relay frees it just after the client sees its answer. A deadline
// against hangs, not a claim about speed.
const dialWait = 10 * time.Second

// Sockets that have not said hello are bounded: past PendingHellos an
// upgrade is HTTP 503 with Retry-After, and a place frees up when a pending
// socket is welcomed or refused. Welcomed sockets do not count.
func TestPendingHellosBounded(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) { c.Limits.PendingHellos = 2 })
	env.Connect(t)
	dial := func() (*relaytest.Browser, *http.Response, error) {
		b, resp, err := relaytest.DialBrowser(t.Context(), env.AttachURL, env.ClientToken, relaytest.DialOptions{Origin: env.Origin})
		if err == nil {
			t.Cleanup(func() { b.WS.CloseNow() })
		}
		return b, resp, err
	}
	// Once welcomed a socket does not count; its place frees just after the
	// client saw the welcome, so the next dials may have to wait for it.
	welcomed := env.Attach(t, "")
	silent1 := dialUntilAdmitted(t, dial)
	silent2 := dialUntilAdmitted(t, dial)
	_, resp, err := dial()
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a dial past the bound: %v, %+v; want HTTP 503 with Retry-After", err, resp)
	}

	// A welcome frees a place.
	if f, _, err := silent1.Hello(env.Instance, "", librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeWelcome {
		t.Fatalf("hello: %s %v", f.Payload, err)
	}
	third := dialUntilAdmitted(t, dial)

	// A refusal frees its place once the socket has closed.
	silent2.Send(librelay.Frame{Type: "not.a.hello"})
	silent2.ReadUntilClosed()
	third.Send(librelay.Frame{Type: "not.a.hello"})
	third.ReadUntilClosed()
	dialUntilAdmitted(t, dial)
	dialUntilAdmitted(t, dial)
	if _, resp, err := dial(); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("with two pending again, a dial: %v; want HTTP 503 (a place counted free twice?)", err)
	}

	welcomed.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "still-here"})
	if f, err := welcomed.Read(); err != nil || f.Type != librelay.TypeAck {
		t.Fatalf("the welcomed socket: %s %v", f.Type, err)
	}
}

// dialUntilAdmitted dials until the relay takes the socket: the place it
// waits for is freed just after the client has seen the answer that frees it.
func dialUntilAdmitted(t *testing.T, dial func() (*relaytest.Browser, *http.Response, error)) *relaytest.Browser {
	t.Helper()
	for deadline := time.Now().Add(dialWait); ; time.Sleep(5 * time.Millisecond) {
		b, resp, err := dial()
		if err == nil {
			return b
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("dial: %v (%+v)", err, resp)
		}
	}
}
