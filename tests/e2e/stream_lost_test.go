package e2e

import (
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// A session/prompt whose response is lost (its turn ended while the page
// was offline, against a runtime that does not resume, as contenox ships:
// not_resumed) must not keep the requests of later turns of its session
// open. It did: the stream took the dead prompt for a turn still running,
// and every later request for one that might be of it, so for the rest of
// the session a permission dialog stayed on screen after its turn ended
// (the user pressed Stop), and a reloaded page was asked it again.

// lostPromptThenCancel has the page's first stream send a prompt whose
// response goes out while the page is offline and is lost, opens a new
// stream on the same attachment (session/load), and there asks a
// permission and cancels its turn (session/cancel) with the dialog open,
// against a runtime that sends no $/cancel_request: only the turn's end can
// close the dialog.
func lostPromptThenCancel(t *testing.T) *tab {
	t.Helper()
	needSDK(t)
	// The runtime dials the relay through a hop that keeps the lines it
	// sends (one JSON frame a line), for the test to see it send a
	// response that is lost.
	var tap *relaytest.Proxy
	s := startFreshStack(t, stack.Config{
		WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) {
			c.NoCancelRequest, c.NoResume = true, true
			tap = runtimeHop(t, c)
		},
	})
	t.Cleanup(func() { s.Close() })
	p, tb := sdkBehindProxy(t, s)
	release := s.Runtime().PauseAt(1)
	t.Cleanup(release)
	tb.eval(`__acp.promptLater("count 2")`, nil)
	sdkWait(tb, "the first chunk", `__acp.conversation.some(e => e.role === "agent")`)
	p.Down()
	sdkWait(tb, "the page to see the drop", `__acp.att.state !== "open"`)
	release() // the turn ends while the page is offline
	if !tap.WaitLine(`"stopReason"`, waitLimit) {
		t.Fatalf("still waiting for the runtime's response to the prompt: it sent %d lines, none holding a stopReason", len(tap.Lines()))
	}
	p.Up()
	sdkWait(tb, "the SDK's connection to end with the loss", `__acp.closed`)
	var answered, lost bool
	tb.eval(`__acp.att.history().then(h => h.some(e => !e.out && e.message?.result?.stopReason))`, &answered)
	tb.eval(`__acp.att.history().then(h => h.some(e => e.lost?.reason === "not_resumed"))`, &lost)
	if answered || !lost {
		t.Fatalf("the transcript holds a prompt's response %t, a not_resumed loss %t: want the response lost", answered, lost)
	}

	tb.eval(teeStreams, nil)
	tb.eval(`__acp.holding.length = 0, __acp.asked.length = 0, __acp.answers.length = 0, __acp.connect(),
		__acp.initialize().then(() => __acp.load(__acp.sessionId)).then(() => __acp.loaded = true)`, nil)
	sdkWait(tb, "the session loaded on a new stream", `__acp.loaded`)
	cancelTurn(tb, false)
	return tb
}

// The live stream: the dialog goes away with its turn, the SDK told once.
func TestStreamLostPromptResponseTurnEnds(t *testing.T) {
	t.Parallel()
	tb := lostPromptThenCancel(t)
	sdkWait(tb, "the dialog to go away with its turn", `__acp.holding.length === 0`)
	cancels, asked := sdkCancels(tb)
	if len(cancels) != 1 || cancels[0] != asked {
		t.Fatalf("the SDK read $/cancel_request for %v, want one for %s, the permission request", cancels, asked)
	}
}

// A reload after that turn ended: the reloaded page's SDK is not asked the
// ended turn's permission again (it is asked nothing before a prompt of its
// own has been answered, and the transcript's requests come first).
func TestStreamReloadLostPromptResponse(t *testing.T) {
	t.Parallel()
	tb := lostPromptThenCancel(t)
	// The runtime numbers nothing (seq 0): the cursor stays 0, and the
	// stored transcript is what the reloaded page goes by.
	sdkWait(tb, "the stored transcript to hold the cancelled turn's end", `import("/relay.js").then(m => m.loadRelay())
		.then(r => r.history({url: __acp.url, instance: __acp.instance, name: __acp.att.name}))
		.then(h => h.some(e => !e.out && e.message?.result?.stopReason === "cancelled"))`)
	tb.do("reloading", tb.page.reload)
	sdkReady(tb)
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" {
		t.Fatalf("a prompt after the reload ended %+v, want end_turn", a)
	}
	var asked int
	tb.eval(`__acp.asked.length`, &asked)
	if asked != 0 {
		t.Fatalf("the reloaded page's SDK was asked %d permissions, want none: their turns had ended", asked)
	}
}
