package stack_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/relaywasm/relaywasm/demo/stack"
)

// A stack whose address another process holds (make demo with 8080 taken)
// fails with one line, which a log shows as it is rather than with a \n,
// naming the address and the flag that picks another, and still matching
// ErrStack and the listen's own error.
func TestAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Addr: ln.Addr().String(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		s.Close()
		t.Fatal("a stack started on an address another listener holds")
	}
	checkTaken(t, err, ln.Addr())
}

// The same for the relay nodes on NATS (make demo DEMO_FLAGS=-nodes=3),
// whose first node's address is taken.
func TestClusterAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	c, err := stack.StartCluster(ctx, stack.ClusterConfig{
		Nodes: 1, Addr: ln.Addr().String(), RelayOnly: true, Logger: slog.New(slog.DiscardHandler),
	})
	if err == nil {
		c.Close()
		t.Fatal("a cluster started on an address another listener holds")
	}
	checkTaken(t, err, ln.Addr())
}

func checkTaken(t *testing.T, err error, addr net.Addr) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, addr.String()+" is taken") || !strings.Contains(msg, "-addr") {
		t.Errorf("error %q: want one line saying %s is taken and naming -addr", msg, addr)
	}
	if !errors.Is(err, stack.ErrStack) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %q is not ErrStack and EADDRINUSE", msg)
	}
}
