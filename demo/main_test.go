package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// The demo says the page needs relay.wasm only when nothing serves one: not
// for a bundled app that carries its own (make demo-app serves demo/app's
// build with -module ""), and not when the module directory has it.
func TestModuleHint(t *testing.T) {
	write := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	page, app, module, empty := filepath.Join(root, "page"), filepath.Join(root, "app"), filepath.Join(root, "module"), filepath.Join(root, "empty")
	write(filepath.Join(page, "index.html"))
	write(filepath.Join(app, "index.html"))
	write(filepath.Join(app, "assets", "relay-0a1b2c.wasm"))
	write(filepath.Join(module, "relay.wasm"))
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		web, module, want string // want: a word of the hint, or "" for none
	}{
		{page, "", "no module directory"},
		{page, empty, "no relay.wasm in"},
		{page, module, ""},
		{app, "", ""},
		{app, empty, ""},
	} {
		got := moduleHint(c.web, c.module)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("moduleHint(%s, %q) = %q, want one with %q", filepath.Base(c.web), c.module, got, c.want)
		}
	}
}

// -max-pending-conns and -max-pending-conns-per-address reach the relay
// main runs: with them, the connection past the bound (opened from the one
// loopback address, as every browser behind a local reverse proxy is) is
// refused with HTTP 503, and the connections before it are served. The
// per-address flag lowers the bound below its default (8 of 20 places) and
// raises it above it. Before, neither flag existed and the per-address
// bound was 64 whatever one needed.
func TestPendingConnsFlags(t *testing.T) {
	for _, c := range []struct {
		args     []string
		admitted int
		refusal  string // a word of the refused connection's body
	}{
		{[]string{"-max-pending-conns-per-address=2"}, 2, "from your address"},
		{[]string{"-max-pending-conns=20", "-max-pending-conns-per-address=12"}, 12, "from your address"},
		{[]string{"-max-pending-conns=3"}, 3, "the relay has too many"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			addr := startFlagged(t, c.args...)
			held := make([]net.Conn, c.admitted)
			for i := range held {
				held[i] = dialRaw(t, addr)
			}
			// The relay admits or refuses connections in its accept loop, in
			// the order they were dialled, and writes a refusal there: once
			// this one's is read, the ones before it have been judged.
			refused := dialRaw(t, addr)
			resp, err := http.ReadResponse(bufio.NewReader(refused), nil)
			if err != nil {
				t.Fatalf("connection %d: %v, want HTTP 503", c.admitted+1, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), c.refusal) {
				t.Fatalf("connection %d: HTTP %d %q, want 503 saying %q", c.admitted+1, resp.StatusCode, body, c.refusal)
			}
			for i, conn := range held {
				go fmt.Fprintf(conn, "GET /nowhere HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatalf("connection %d of %d admitted: %v, want it served (HTTP 404)", i+1, c.admitted, err)
				}
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("connection %d of %d admitted: HTTP %d, want it served (HTTP 404)", i+1, c.admitted, resp.StatusCode)
				}
				resp.Body.Close()
			}
		})
	}
}

// -tls-cert and -tls-key with -nodes serve every node over TLS, as they do
// the single relay: the ready file's URLs say https, the runtime the demo
// runs on node 0 is welcomed over TLS, and a browser trusting the CA
// attaches to node 1 and is answered by it across NATS, so a contenox
// runtime (it dials https only) can be pointed at any node. Before, the
// demo refused -tls-cert in cluster mode.
func TestClusterTLSFlags(t *testing.T) {
	dir := t.TempDir()
	cert := relaytest.NewCert(t, dir)
	ready := filepath.Join(dir, "ready")
	o := parse(t, "-nodes=2", "-tls-cert="+cert.CertFile, "-tls-key="+cert.KeyFile, "-ready-file="+ready)
	ctx, cancel := context.WithTimeout(t.Context(), relaytest.WaitLimit)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	c, err := startCluster(ctx, o, newKey(t), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	announceCluster(o, c, log)
	lines, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"RELAY_CONNECT_URL=https://" + c.Node(0).Addr() + "/v1/connect\n",
		"RELAY_NODES='https://" + c.Node(0).Addr() + " https://" + c.Node(1).Addr() + "'\n",
	} {
		if !strings.Contains(string(lines), want) {
			t.Errorf("the ready file has no line %q:\n%s", want, lines)
		}
	}
	n1 := c.Node(1)
	relaytest.WaitFor(t, "node 1 to route to the runtime on node 0", func() bool {
		return n1.Table().Runtime(o.instance) != nil
	})
	e := &relaytest.Env{
		AttachURL: n1.AttachURL(), Instance: o.instance, ClientToken: o.clientToken,
		Key: c.PublicKey(), Origin: "http://127.0.0.1:1234", TLS: cert.ClientConfig(),
	}
	b := e.Attach(t, "")
	sess, err := b.StartChat()
	if err != nil {
		t.Fatal(err)
	}
	if chunks, _, stop, err := b.Prompt(3, sess, "ping"); err != nil || stop != "end_turn" || len(chunks) != 1 {
		t.Fatalf("prompt on node 1 over TLS: %q %q %v", chunks, stop, err)
	}
}

// -hosts reaches every node of a cluster, as it reaches the single relay:
// a browser upgrade naming a host it lists is let through the Host check on
// each node (here it goes on to the WebSocket handshake's answer, 101),
// and one naming another host is refused 403. Before, the cluster's nodes
// served only loopback names and their own address, so a cluster behind a
// public name refused every browser.
func TestClusterHostsFlag(t *testing.T) {
	o := parse(t, "-mode=relay", "-nodes=2", "-hosts=relay.example.test")
	ctx, cancel := context.WithTimeout(t.Context(), relaytest.WaitLimit)
	defer cancel()
	c, err := startCluster(ctx, o, newKey(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for i, n := range c.Nodes() {
		for host, want := range map[string]int{"relay.example.test": http.StatusSwitchingProtocols, "other.example.test": http.StatusForbidden} {
			if got := upgradeStatus(t, n.Addr(), host); got != want {
				t.Errorf("node %d: an upgrade with Host %s got HTTP %d, want %d", i, host, got, want)
			}
		}
	}
}

// upgradeStatus sends addr a browser-leg upgrade naming host (from an
// origin the demo allows) and returns the status of its answer.
func upgradeStatus(t *testing.T, addr, host string) int {
	t.Helper()
	c := dialRaw(t, addr)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nOrigin: http://127.0.0.1:1234\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", relayleg.AttachPath, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// startFlagged starts the relay main starts with args (and -mode relay, a
// free loopback port, no page), stopped at the test's end, and returns its
// address.
func startFlagged(t *testing.T, args ...string) string {
	t.Helper()
	o := parse(t, append([]string{"-mode=relay"}, args...)...)
	ctx, cancel := context.WithTimeout(t.Context(), relaytest.WaitLimit)
	defer cancel()
	s, err := startStack(ctx, o, newKey(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Addr()
}

// parse parses args as main does, after a free loopback port and no page.
func parse(t *testing.T, args ...string) options {
	t.Helper()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	o, err := parseFlags(fs, append([]string{"-addr=127.0.0.1:0", "-web=", "-module="}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	key, err := loadKey("")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// dialRaw opens a TCP connection to addr, closed at the test's end.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(relaytest.IOTimeout))
	return c
}
