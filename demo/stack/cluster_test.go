package stack_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
)

// A cluster node is served with the same bounds as the single relay
// (Relay.ConfigureServer): its connections not yet upgraded are bounded, and
// a request whose body never comes is let go after HeaderTimeout, so such
// requests cannot hold a node's places for good. Before, a node had only a
// header timeout: the held request kept its connection open for ever, and
// nothing bounded how many of them a node held.
func TestClusterNodeBounds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	c, err := stack.StartCluster(ctx, stack.ClusterConfig{
		Nodes: 1, RelayOnly: true, Logger: slog.New(slog.DiscardHandler),
		EditRelay: func(_ int, rc *relay.Config) {
			rc.Limits.PendingConns = 1
			rc.Limits.HeaderTimeout = 2 * time.Second // the test waits this long once
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	n := c.Node(0)

	held := dialNode(t, n)
	if _, err := held.Write([]byte("POST /nowhere HTTP/1.1\r\nHost: " + n.Addr() + "\r\nContent-Length: 100\r\n\r\n")); err != nil {
		t.Fatal(err)
	} // and the body never comes
	probe := dialNode(t, n)
	go probe.Write([]byte("GET /nowhere HTTP/1.1\r\nHost: " + n.Addr() + "\r\n\r\n"))
	if resp, err := http.ReadResponse(bufio.NewReader(probe), nil); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("past PendingConns on a node: %v %+v, want HTTP 503", err, resp)
	}
	// dialNode's deadline bounds the wait.
	if _, err := io.Copy(io.Discard, held); err != nil {
		t.Fatalf("a request whose body never came: %v, want its connection closed by the node", err)
	}

	for deadline := time.Now().Add(relaytest.WaitLimit); ; time.Sleep(10 * time.Millisecond) {
		rt, code, err := relaytest.DialRuntime(context.Background(), n.HTTPURL(), c.Config().RuntimeToken)
		if err == nil {
			defer rt.Conn.Close()
			if f, _, err := rt.Hello(c.Config().Instance, librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeWelcome {
				t.Fatalf("runtime hello: %s %s %v", f.Type, f.Payload, err)
			}
			return
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("a runtime once the held request is let go: %v (HTTP %d)", err, code)
		}
	}
}

// dialNode opens a TCP connection to n, closed at the test's end.
func dialNode(t *testing.T, n *stack.Node) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(relaytest.IOTimeout))
	return c
}

// With a certificate every node serves both legs over TLS, as the single
// relay does (what the demo's -tls-cert with -nodes gives): the cluster's
// runtime dials node 0 over TLS, a browser trusting the CA attaches to
// node 1 over wss, and its prompt reaches the runtime across NATS and is
// answered. Plain HTTP reaches no node. Before, the nodes served plain HTTP
// whatever the relay's config said, and the demo refused -tls-cert with
// -nodes, so a contenox runtime (it dials https only) could not be run
// against a cluster.
func TestClusterTLS(t *testing.T) {
	cert := relaytest.NewCert(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	c, err := stack.StartCluster(ctx, stack.ClusterConfig{
		Nodes: 2, Logger: slog.New(slog.DiscardHandler),
		EditRelay: func(_ int, rc *relay.Config) { rc.TLSCert, rc.TLSKey = cert.CertFile, cert.KeyFile },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, n := range c.Nodes() {
		if !n.TLS() || !strings.HasPrefix(n.HTTPURL(), "https://") || !strings.HasPrefix(n.AttachURL(), "wss://") {
			t.Fatalf("node %d: TLS %v, urls %s %s", n.Index, n.TLS(), n.HTTPURL(), n.AttachURL())
		}
	}
	cfg, n1 := c.Config(), c.Node(1)
	relaytest.WaitFor(t, "node 1 to route to the runtime on node 0", func() bool {
		return n1.Table().Runtime(cfg.Instance) != nil
	})
	e := &relaytest.Env{
		HTTPURL: n1.HTTPURL(), AttachURL: n1.AttachURL(), Instance: cfg.Instance,
		ClientToken: cfg.ClientToken, RuntimeToken: cfg.RuntimeToken, Key: c.PublicKey(),
		Origin: "http://127.0.0.1:1234", TLS: cert.ClientConfig(),
	}
	b := e.Attach(t, "")
	sess, err := b.StartChat()
	if err != nil {
		t.Fatal(err)
	}
	if chunks, _, stop, err := b.Prompt(3, sess, "ping"); err != nil || stop != "end_turn" || len(chunks) != 1 {
		t.Fatalf("prompt on node 1 to the runtime on node 0, over TLS: %q %q %v", chunks, stop, err)
	}
	for _, n := range c.Nodes() {
		if _, _, err := relaytest.DialRuntime(t.Context(), "http://"+n.Addr(), cfg.RuntimeToken); err == nil {
			t.Fatalf("plain HTTP reached node %d, served over TLS", n.Index)
		}
	}
}
