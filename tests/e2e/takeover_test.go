package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
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
	t.Parallel()
	hop, s := stackBehindHop(t, webDir, false)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL())
	tb.prompt("count 20")
	tb.waitFor("the count", lastAgentDone)

	hop.Freeze()
	runFreshRuntime(t, s, false)
	tb.waitFor("the page to be told its stream is gone", `__chat.evictions.length > 0 && !document.getElementById("banner").hidden`)
	tb.waitReady()
	tb.prompt("ping")
	tb.waitFor("the answer from the new runtime", lastAgentDone)
}

// The same through the ACP SDK (demo/app): told, the app sets its
// conversation up again on the new runtime, and the next prompt is
// answered. Before, the prompt waited for ever.
func TestAppAfterRuntimeTakeover(t *testing.T) {
	t.Parallel()
	hop, s := stackBehindHop(t, builtApp(t), false)
	tb := openTab(t, newBrowser(t), "app", s.PageURL())
	appReady(tb)
	tb.eval(`void __app.send("count 20")`, nil)
	tb.waitFor("the count", `__app.stopReasons.length === 1`)

	hop.Freeze()
	runFreshRuntime(t, s, false)
	tb.waitFor("the app to be told its stream is gone, and ready again", `__app.losses.length > 0 && __app.ready`)
	tb.eval(`void __app.send("ping")`, nil)
	tb.waitFor("the answer from the new runtime", `__app.stopReasons.length === 2`)
}

// stackBehindHop starts a stack serving web whose runtime dials the relay
// through hop, which the test freezes to make the runtime's connection go
// silent; noResume makes it a runtime that does not resume (contenox as it
// ships). The relay waits 1 s, not its default 5 s, for the frozen runtime
// to answer its probe before a newcomer takes the instance over: frozen, it
// never answers, so the takeover comes the same way, sooner (every test
// here freezes the hop before the newcomer's hello).
func stackBehindHop(t *testing.T, web string, noResume bool) (*relaytest.Proxy, *stack.Stack) {
	t.Helper()
	hop := relaytest.NewProxy(t, "127.0.0.1:1") // pointed at the relay once it listens
	s := startFreshStack(t, stack.Config{
		WebDir: web, ModuleDir: moduleDir, Logger: logger(),
		EditRelay: func(c *relay.Config) { c.Limits.TakeoverWait = time.Second },
		EditRuntime: func(c *devruntime.Config) {
			c.AgentRate, c.NoResume = streamRate, noResume
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
		t.Skip("the fresh runtime here dials plain HTTP")
	}
	return hop, s
}

// runFreshRuntime runs a second dev runtime for s's instance (one that does
// not resume, with noResume), dialling the relay directly, until the test
// ends, and waits until it is welcomed.
func runFreshRuntime(t *testing.T, s *stack.Stack, noResume bool) {
	t.Helper()
	cfg := s.Config()
	rt, err := devruntime.New(devruntime.Config{
		Relay: s.HTTPURL(), Instance: cfg.Instance, Credential: cfg.RuntimeToken, RelayKey: s.PublicKey(),
		AgentRate: streamRate, NoResume: noResume, Logger: logger().With("part", "fresh runtime"),
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
