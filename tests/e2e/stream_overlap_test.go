package e2e

import (
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// An agent that refuses a prompt sent while a turn of its session runs
// (stopReason "refusal" at once, the running turn going on, as agents that
// hold ACP to one prompt at a time do), against a runtime that sends no
// $/cancel_request. The first turn's permission request reaches the SDK
// after the second prompt went out, and before that prompt's refusal: it
// may be of either turn, as far as the stream can tell (requests name no
// prompt). The refusal ends the second turn only: the request's dialog
// stays, since the first turn, still running, may be waiting for it (it
// is), and its Allow reaches the agent and ends the first turn. Taken for
// the second turn's request (the newest prompt's), it was cancelled toward
// the SDK at the refusal, its dialog went away, and the first turn waited
// for an answer that would never come.
func TestStreamOverlappingPromptRefused(t *testing.T) {
	t.Parallel()
	needSDK(t)
	s := startFreshStack(t, stack.Config{
		WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) { c.RefuseOverlap, c.NoCancelRequest = true, true },
	})
	t.Cleanup(func() { s.Close() })
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL()+"?start=no")
	sdkWait(tb, "the page's module", `typeof __acp.attach === "function"`)
	tb.eval(frameWatch, nil)
	sdkTee(tb)

	// A message of another session is held, unread (the SDK reads no more
	// for now; the read it had pending takes the session's chunk, and its
	// turn's response is held): what comes after it waits in the engine,
	// its turn not yet found, until the SDK reads on.
	tb.eval(`__acp.opened.then(c => c.request("session/new", {cwd: "/", mcpServers: []})).then(r => {
		__acp.other = r.sessionId;
		__acp.setLimit(__acp.reads);
		__acp.opened.then(c => c.request("session/prompt", {sessionId: r.sessionId, prompt: [{type: "text", text: "count 1"}]}));
	})`, nil)
	sdkWait(tb, "the other session's turn to end", `__acp.frames.some(f => f.includes('"end_turn"'))`)
	// The first turn's request arrives, then the second prompt goes out
	// and is refused.
	tb.eval(`__acp.hold = true, __acp.promptLater("permission to write")`, nil)
	sdkWait(tb, "the permission request to arrive", `__acp.frames.some(f => f.includes("session/request_permission"))`)
	tb.eval(`__acp.promptLater("ping")`, nil)
	sdkWait(tb, "the refusal to arrive", `__acp.frames.some(f => f.includes('"refusal"'))`)

	tb.eval(`__acp.setLimit(Infinity)`, nil)
	sdkWait(tb, "the second prompt's answer", `__acp.answers.some(a => a.text === "ping")`)
	var stop string
	tb.eval(`__acp.answers.find(a => a.text === "ping").stopReason ?? __acp.answers.find(a => a.text === "ping").message`, &stop)
	if stop != "refusal" {
		t.Fatalf("the second prompt ended %q, want refusal: the test would not see a newer prompt answered first", stop)
	}
	var cancels []string
	tb.eval(`__acp.seen.filter(m => m.method === "$/cancel_request").map(m => JSON.stringify(m.params.requestId))`, &cancels)
	if len(cancels) != 0 {
		var dump string
		tb.eval(`__acp.att.history().then(h => JSON.stringify({seen: __acp.seen.map(m => [m.method, m.id, m.params?.requestId, m.result?.stopReason]), h: h.map(e => [e.out, e.message?.method, e.message?.id, e.message?.params?.sessionId, e.message?.result?.stopReason])}))`, &dump)
		t.Log(dump)
		t.Fatalf("the SDK read $/cancel_request for %v at the second prompt's refusal, want none: the first turn is still waiting for its request", cancels)
	}
	sdkWait(tb, "the dialog", `__acp.holding.length === 1`)
	tb.eval(`__acp.answer("allow")`, nil)
	sdkWait(tb, "the first turn's end", `__acp.answers.some(a => a.text === "permission to write")`)
	tb.eval(`__acp.answers.find(a => a.text === "permission to write").stopReason`, &stop)
	if stop != "end_turn" {
		t.Fatalf("the first turn ended %q, want end_turn", stop)
	}
	sdkWait(tb, "the agent's answer to the permission", `__acp.conversation.some(e => e.role === "agent" && e.text === "permission allow")`)
}

// frameWatch keeps the text of every WebSocket message the page receives
// in __acp.frames, for a test to see a message arrive before the stream
// hands it to the SDK. It must run before the page attaches.
const frameWatch = `(() => {
	window.__acp.frames = [];
	const keep = (d) => {
		if (typeof d === "string") __acp.frames.push(d);
		else if (d instanceof ArrayBuffer) __acp.frames.push(new TextDecoder().decode(d));
		else d?.text?.().then((t) => __acp.frames.push(t));
	};
	const WS = window.WebSocket;
	window.WebSocket = class extends WS {
		constructor(...a) {
			super(...a);
			this.addEventListener("message", (e) => keep(e.data));
		}
	};
})()`
