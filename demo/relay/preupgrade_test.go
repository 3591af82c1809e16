package relay_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// rawConn opens a TCP connection to the relay, closed at the test's end.
func rawConn(t *testing.T, env *relaytest.Env) net.Conn {
	t.Helper()
	return rawConnFrom(t, env, "")
}

// rawConnFrom is rawConn dialled from localIP ("": the system's choice).
func rawConnFrom(t *testing.T, env *relaytest.Env, localIP string) net.Conn {
	t.Helper()
	d := net.Dialer{}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	c, err := d.Dial("tcp", env.Server.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(relaytest.IOTimeout))
	return c
}

// status sends req on a fresh connection and returns the response's status.
func status(t *testing.T, env *relaytest.Env, req string) int {
	t.Helper()
	c := rawConn(t, env)
	go c.Write([]byte(req)) // the relay may answer before it has read it all
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	return resp.StatusCode
}

// upgradeRequest is a browser-leg upgrade with extra header lines.
func upgradeRequest(env *relaytest.Env, extra string) string {
	host := env.Server.Listener.Addr().String()
	return "GET " + relayleg.AttachPath + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" + extra + "\r\n"
}

// Headers are bounded before the relay sees the request: 64 KiB of them
// get HTTP 431, not a 1 MiB allowance per connection.
func TestHeaderBytesBounded(t *testing.T) {
	env := relaytest.Start(t, nil)
	if got := status(t, env, upgradeRequest(env, "X-Pad: "+strings.Repeat("a", 64<<10)+"\r\n")); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB of headers: HTTP %d, want 431", got)
	}
}

// The subprotocol header is bounded: an upgrade offering a hundred
// subprotocols is refused with HTTP 400 before the credential is looked at.
func TestSubprotocolHeaderBounded(t *testing.T) {
	env := relaytest.Start(t, nil)
	offers := "Sec-WebSocket-Protocol: " + relayleg.Subprotocol + strings.Repeat(", x", 100) + "\r\n"
	if got := status(t, env, upgradeRequest(env, "Origin: "+env.Origin+"\r\n"+offers)); got != http.StatusBadRequest {
		t.Fatalf("100 subprotocols offered: HTTP %d, want 400", got)
	}
}

// Connections not yet upgraded are bounded: past PendingConns a new one
// gets 503 with Retry-After and is closed, and a place frees once one of
// them closes. Upgraded connections do not count. (net/http counts a
// connection in its accept loop, so connections dialled one after another
// are counted in that order.)
func TestPendingConnsBounded(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) { c.Limits.PendingConns = 3 })
	rt := env.Connect(t)
	upgraded := env.Attach(t, "") // counted until its upgrade, then not
	var trickling []net.Conn
	for range 3 {
		c := rawConn(t, env)
		c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")) // and nothing more
		trickling = append(trickling, c)
	}
	c := rawConn(t, env)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a connection past the bound: %v %+v, want HTTP 503 with Retry-After", err, resp)
	}
	trickling[0].Close()
	for deadline := time.Now().Add(relaytest.IOTimeout); status(t, env, "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") == http.StatusServiceUnavailable; {
		if time.Now().After(deadline) {
			t.Fatal("a place never freed after a pending connection closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	upgraded.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: upgraded.Instance, Session: upgraded.Session, Payload: []byte(`"still here"`)})
	if f, err := rt.ReadCargo(); err != nil || string(f.Payload) != `"still here"` {
		t.Fatalf("the upgraded socket: %s %v", f.Payload, err)
	}
}

// One client address cannot take every place among the connections not yet
// upgraded: past PendingConnsPerAddress of its own, a connection from it is
// answered 503 saying so, and a browser from another address still gets in.
// Before, one address that held PendingConns connections (redialling each
// as HeaderTimeout let it go) got every browser and runtime HTTP 503.
func TestPendingConnsPerAddress(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Limits.PendingConns = 3
		c.Limits.PendingConnsPerAddress = 2
	})
	env.Connect(t)
	var held []net.Conn
	for range 3 { // the whole count, from one address
		c := rawConnFrom(t, env, "127.0.0.1")
		c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")) // and nothing more; the refused one may fail it
		held = append(held, c)
	}

	b, resp, err := relaytest.DialBrowser(context.Background(), env.AttachURL, env.ClientToken,
		relaytest.DialOptions{Origin: env.Origin, LocalIP: "127.0.0.2"})
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("a browser from another address while 127.0.0.1 holds %d connections: %v (HTTP %d)", len(held), err, code)
	}
	defer b.WS.CloseNow()
	if f, _, err := b.Hello(env.Instance, "", librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeWelcome {
		t.Fatalf("browser hello: %s %s %v", f.Type, f.Payload, err)
	}

	resp, err = http.ReadResponse(bufio.NewReader(held[2]), nil)
	if err != nil {
		t.Fatalf("the third connection from 127.0.0.1: %v, want HTTP 503", err)
	}
	why, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(why), "address") {
		t.Fatalf("the third connection from 127.0.0.1: HTTP %d, Retry-After %q, %q; want 503 with Retry-After, saying its address has too many",
			resp.StatusCode, resp.Header.Get("Retry-After"), why)
	}
}
