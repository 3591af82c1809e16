package e2e

import (
	"context"
	"net/url"
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// A permission request open when the runtime is taken over by a new process
// (its machine restarted behind a connection that died unseen), against a
// runtime that does not resume (contenox as it ships): the stream ends with
// not_resumed, and the app's new stream must not offer the old request
// again. The new process numbers its requests from the start, so the app's
// answer to the old one (id 1) would answer the new process's own request
// of that id, a permission the user never saw. The new process's request
// that follows is asked, once, and its answer ends its turn.
func TestStreamStaleRequestAfterTakeover(t *testing.T) {
	t.Parallel()
	needSDK(t)
	hop := relaytest.NewProxy(t, "127.0.0.1:1")
	s := startFreshStack(t, stack.Config{
		WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) {
			c.NoResume = true
			u, _ := url.Parse(c.Relay)
			hop.Repoint(u.Host)
			u.Host = hop.Addr()
			c.Relay = u.String()
		},
	})
	t.Cleanup(func() { s.Close() })
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL())
	sdkReady(tb)
	tb.eval(`__acp.hold = true, __acp.promptLater("permission to write")`, nil)
	sdkWait(tb, "the permission request", `__acp.asked.length === 1`)

	// The runtime's connection dies unseen, and a new process takes over.
	hop.Freeze()
	cfg := s.Config()
	rt, err := devruntime.New(devruntime.Config{
		Relay: s.HTTPURL(), Instance: cfg.Instance, Credential: cfg.RuntimeToken, RelayKey: s.PublicKey(),
		NoResume: true, Logger: logger().With("part", "new runtime"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-rt.Connected()
	sdkWait(tb, "the SDK's connection to end with the loss", `__acp.closed`)

	// What demo/app does then: a new stream, initialize, a new session. The
	// stream offers what it offers before anything live, so once
	// initialize is answered the old request would have been asked.
	var session string
	tb.eval(`__acp.holding.length = 0, __acp.hold = false, __acp.connect(), __acp.initialize().then(() => __acp.newSession())`, &session)
	var asked int
	tb.eval(`__acp.asked.length`, &asked)
	if asked != 1 {
		t.Fatalf("the new stream's SDK was asked %d permissions in all, want only the first stream's: the old process's request was offered again", asked)
	}
	if a := prompted(tb, "permission to read"); a.StopReason != "end_turn" {
		t.Fatalf("the new process's permission turn ended %+v, want end_turn", a)
	}
	tb.eval(`__acp.asked.length`, &asked)
	if asked != 2 {
		t.Fatalf("the SDK was asked %d permissions in all, want 2 (the new process's asked once)", asked)
	}
}
