package e2e

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/relaywasm/relaywasm/demo/stack"
)

// No two pages of a run share an origin. WebKit's and WPE's browsers are
// pooled across tests (takeClassic, giveBack), and what a page stores stays
// in the browser, keyed by its origin: sessionStorage in the pooled first
// tab, localStorage, IndexedDB. The kernel hands a port out again once its
// listener has closed, so a page served on a port an earlier test's page
// had would start with that test's storage (seen once in WebKit: the worker
// page took an earlier test's ACP session from sessionStorage, and the
// runtime, a new one, did not know it). So every server a page comes from
// listens on a host and port no earlier server of the run had. (Chromium
// gives each test a browser context of its own, storage included: the Vite
// dev server, which only Chromium's test uses, picks its own port.)

var listened = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: make(map[string]bool)}

// firstListen records addr (host:port) and says whether no server of the
// run listened there before.
func firstListen(addr string) bool {
	listened.Lock()
	defer listened.Unlock()
	if listened.addrs[addr] {
		return false
	}
	listened.addrs[addr] = true
	return true
}

// listenFresh listens on host at a port no server of the run had. A port
// had before is held open while the next is asked for, so that the kernel
// hands out another.
func listenFresh(t *testing.T, host string) net.Listener {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatalf("listening on %s: %v", host, err)
		}
		if firstListen(ln.Addr().String()) {
			return ln
		}
		held = append(held, ln)
	}
}

// startFreshStack starts a stack with cfg (its Addr at port 0) on a port no
// server of the run had, as listenFresh does. The caller closes it.
func startFreshStack(t *testing.T, cfg stack.Config) *stack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()
	var held []*stack.Stack
	defer func() {
		for _, s := range held {
			s.Close()
		}
	}()
	for {
		s, err := stack.Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if firstListen(s.Addr()) {
			return s
		}
		held = append(held, s)
	}
}
