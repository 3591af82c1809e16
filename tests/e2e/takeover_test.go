package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// The runtime's machine loses power (or sleeps, or its NAT loses the
// mapping): its connection goes silent, closing nothing, and the runtime
// comes back as a fresh process, which takes the instance over once the
// silent connection misses the relay's probe. The page, attached all
// along, is told (runtime_gone), redials, learns that its stream is gone
// (the banner), opens a new session, and the next prompt is answered.
// Before, the page said Connected and a prompt got no answer for ever: the
// fresh runtime numbered its stream from 1, and the client dropped it all
// as already seen.
func TestPageAfterRuntimeTakeover(t *testing.T) {
	hop := relaytest.NewProxy(t, "127.0.0.1:1") // pointed at the relay once it listens
	s := startFreshStack(t, stack.Config{
		WebDir: webDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) {
			c.AgentRate = streamRate
			u, err := url.Parse(c.Relay)
			if err != nil {
				t.Error(err)
				return
			}
			hop.Repoint(u.Host)
			u.Host = hop.Addr()
			c.Relay = u.String()
		},
	})
	t.Cleanup(func() { s.Close() })
	if s.TLS() {
		t.Skip("the second runtime here dials plain HTTP")
	}
	tb := openChat(t, newBrowser(t), "tab", s.PageURL())
	tb.prompt("count 20")
	tb.waitFor("the count", lastAgentDone)

	hop.Freeze()
	runFreshRuntime(t, s)
	tb.waitFor("the page to be told its stream is gone", `__chat.evictions.length > 0 && !document.getElementById("banner").hidden`)
	tb.waitReady()
	tb.prompt("ping")
	tb.waitFor("the answer from the new runtime", lastAgentDone)
}

// runFreshRuntime runs a second dev runtime for s's instance, dialling the
// relay directly, until the test ends, and waits until it is welcomed.
func runFreshRuntime(t *testing.T, s *stack.Stack) {
	t.Helper()
	cfg := s.Config()
	rt, err := devruntime.New(devruntime.Config{
		Relay: s.HTTPURL(), Instance: cfg.Instance, Credential: cfg.RuntimeToken, RelayKey: s.PublicKey(),
		AgentRate: streamRate, Logger: logger().With("part", "fresh runtime"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-rt.Connected():
	case <-time.After(waitLimit):
		t.Fatal("the fresh runtime was not welcomed")
	}
}
