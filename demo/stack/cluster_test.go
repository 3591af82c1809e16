package stack_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
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
