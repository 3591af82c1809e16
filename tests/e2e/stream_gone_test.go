package e2e

import (
	"net/url"
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// A request whose turn ended (the user cancelled, the dialog left on
// screen), which the runtime then cancelled itself ($/cancel_request, as
// the dev runtime does), so the stream waits for the SDK's "cancelled"
// answer to send it; then the runtime restarts, and its new process, which
// numbers its requests afresh, asks a permission under the old request's
// wire id. That request is queued in the attachment behind a message the
// stream holds, unread (the SDK reads slowly): the stream has not seen it
// when the app answers the old dialog, "cancelled". The runtime that asked
// for that answer is gone: it must not go out under the id, where the new
// process took it for the answer to its request (a denial the user never
// gave, "permission cancelled"); only the new dialog's answer does.
// (TestStreamLateCancelAnswerWhileNewRequestUnread: the new request
// delivered to the stream, unread.)
func TestStreamLateCancelAnswerWhileNewRequestQueued(t *testing.T) {
	t.Parallel()
	lateCancelAnswerWhileQueued(t, false)
}

// The same, the runtime's $/cancel_request of the old request coming
// before the response that ends its turn (the dev runtime's ACP library
// sends them in either order; CancelRequestFirst fixes this one): the
// stream then keeps the request, over, for the SDK's answer, which the
// runtime asked for, instead of taking it as moot at the turn's end. The
// runtime that asked is gone all the same.
func TestStreamLateCancelAnswerWhileNewRequestQueuedCancelFirst(t *testing.T) {
	t.Parallel()
	lateCancelAnswerWhileQueued(t, true)
}

func lateCancelAnswerWhileQueued(t *testing.T, cancelFirst bool) {
	// Each runtime dials the relay through a hop that keeps the lines it
	// sends (one JSON frame a line): the test sees the new process send
	// its request, which nothing on the page shows while it is queued.
	var hop *relaytest.Proxy
	tb, restart := cancelledBeforeRestart(t, func(c *devruntime.Config) {
		c.CancelRequestFirst = cancelFirst
		hop = runtimeHop(t, c)
	})

	if cancelFirst {
		var order string
		tb.eval(`__acp.att.history().then(h => h.filter(e => !e.out && (e.message?.method === "$/cancel_request" || e.message?.result?.stopReason === "cancelled")).map(e => e.message.method ?? "response").join(" "))`, &order)
		if order != "$/cancel_request response" {
			t.Fatalf("the runtime sent %q, want its $/cancel_request before the cancelled turn's response", order)
		}
	}
	restart()
	watchDelivered(tb)
	// The SDK reads the new session's response, and nothing after it: the
	// stream holds the ping's chunk, unread, and the attachment delivers
	// nothing more meanwhile.
	tb.eval(`__acp.setLimit(__acp.reads + 1), __acp.newSession().then(() => __acp.promptLater("ping"))`, nil)
	sdkWait(tb, "the ping's chunk held by the stream", `__acp.delivered.some(m => m?.params?.update?.content?.text === "pong")`)
	tb.eval(`__acp.promptLater("permission to read README")`, nil)
	if !hop.WaitLine(`session/request_permission`, waitLimit) {
		t.Fatalf("still waiting for the new process's permission request: it sent %d lines, none holding one", len(hop.Lines()))
	}
	var seen bool
	tb.eval(`__acp.delivered.some(m => m?.method === "session/request_permission") || __acp.asked.length !== 1`, &seen)
	if seen {
		t.Fatal("the new process's request reached the stream: the test would not see it queued behind the held message")
	}

	answerOldWhileUnread(tb)
}

// runtimeHop has the runtime c configures dial the relay through a hop that
// keeps the lines it sends (one JSON frame a line), and returns the hop.
func runtimeHop(t *testing.T, c *devruntime.Config) *relaytest.Proxy {
	t.Helper()
	u, err := url.Parse(c.Relay)
	if err != nil || u.Scheme != "http" {
		t.Fatalf("the runtime dials %q, want a plain http relay for the hop", c.Relay)
	}
	hop := relaytest.NewProxy(t, u.Host, relaytest.RecordLines())
	c.Relay = "http://" + hop.Addr()
	return hop
}

// The runtime's connection drops while its permission request is on its
// way to the app (lost), and the same process dials again: the relay tells
// the page runtime_gone, and the runtime, resuming the stream, sends the
// request again. It is of the turn of the prompt sent before the drop,
// whose response that process still sends: when the user cancels the turn
// (this runtime sends no $/cancel_request), the dialog goes away with it.
// A stream that took the prompts sent before runtime_gone for a new
// process's, whose responses never come, left it on screen.
func TestStreamSameRuntimeBackDialogEndsWithItsTurn(t *testing.T) {
	t.Parallel()
	needSDK(t)
	var hop *relaytest.Proxy
	s := startFreshStack(t, stack.Config{
		WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) {
			c.NoCancelRequest = true
			hop = runtimeHop(t, c)
		},
	})
	t.Cleanup(func() { s.Close() })
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL())
	tb.page = allowing{tb.page, refusedDial}
	sdkReady(tb)
	hop.Mute()
	tb.eval(`__acp.hold = true, __acp.promptLater("permission to write")`, nil)
	if !hop.WaitLine(`session/request_permission`, waitLimit) {
		t.Fatalf("still waiting for the runtime's permission request: it sent %d lines, none holding one", len(hop.Lines()))
	}
	hop.Cut()
	sdkWait(tb, "the page told runtime_gone and open again", `__acp.states.some(s => s.code === "runtime_gone") && __acp.att.state === "open"`)
	sdkWait(tb, "the request, sent again, handed to the app", `__acp.asked.length === 1 && __acp.holding.length === 1`)
	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: __acp.sessionId}))`, nil)
	sdkWait(tb, "the turn's answer", `__acp.answers.some(a => a.text === "permission to write")`)
	sdkWait(tb, "the dialog to go away with its turn", `__acp.holding.length === 0`)
}
