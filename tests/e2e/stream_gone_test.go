package e2e

import (
	"net/url"
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
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
	// Each runtime dials the relay through a hop that keeps the lines it
	// sends (one JSON frame a line): the test sees the new process send
	// its request, which nothing on the page shows while it is queued.
	var hop *relaytest.Proxy
	tb, restart := cancelledBeforeRestart(t, func(c *devruntime.Config) {
		u, err := url.Parse(c.Relay)
		if err != nil || u.Scheme != "http" {
			t.Fatalf("the runtime dials %q, want a plain http relay for the hop", c.Relay)
		}
		hop = relaytest.NewProxy(t, u.Host, relaytest.RecordLines())
		c.Relay = "http://" + hop.Addr()
	})

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

// A prompt the runtime never answered because it restarted: its new
// process knows nothing of it, and numbers its sessions afresh, so the
// app's new session has the old one's id. The new process's permission
// request is of the new prompt's turn alone: when the user cancels that
// turn (the runtime sends no $/cancel_request of its own), the new dialog
// goes away with it. Were the old prompt, whose response never comes,
// taken for one of the turns the request may be of, the dialog would stay
// on screen for a turn that is over.
func TestStreamTurnEndsAfterRuntimeRestart(t *testing.T) {
	t.Parallel()
	tb, restart := askedBeforeRestart(t, false, "permission to write", func(c *devruntime.Config) { c.NoCancelRequest = true })
	restart()
	tb.eval(`__acp.newSession().then(() => __acp.promptLater("permission to read README"))`, nil)
	// The new request reuses the old one's wire id, so the old dialog goes.
	sdkWait(tb, "the new process's request, the old dialog gone", `__acp.asked.length === 2 && __acp.holding.length === 1`)
	var same bool
	tb.eval(`__acp.asked[0].sessionId === __acp.asked[1].sessionId`, &same)
	if !same {
		t.Fatal("the new process's session has an id of its own: the test would not see the old prompt taken for its turn")
	}
	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: __acp.sessionId}))`, nil)
	sdkWait(tb, "the new turn's answer", `__acp.answers.some(a => a.text === "permission to read README")`)
	sdkWait(tb, "the new dialog to go away with its turn", `__acp.holding.length === 0`)
}
