package e2e

import (
	"strings"
	"testing"
)

// A request the runtime cancelled ($/cancel_request) whose dialog the app
// never answers (it leaves it on screen) must not be kept by the stream
// for as long as the stream lasts: a long-lived stream would gather one
// such request per cancelled dialog. Nothing outside the stream shows what
// it keeps, but what it keeps shows in what it does with an answer that
// comes at last: while it keeps the request, the answer goes out under the
// request's wire id; once it has let go, the answer is dropped. It lets go
// once a turn begun after the cancel has ended (a prompt the user sent
// since): the runtime, past the request, waits for no answer then. Before,
// it kept the request until the app answered, and the answer, however
// late, went out.

// cancelledLeftOpen has a runtime that sends $/cancel_request (the dev
// runtime) cancel a permission request whose dialog the app leaves on
// screen (deaf), then ends a turn begun after that ("ping"). The dev
// runtime's cancel may come after its response to the prompt, the request
// over twice (its turn ended first), or before it. With direct, the
// permission's prompt goes out through att.sendACP, not the SDK: the
// stream knows of no turn of the request's, and only the runtime's cancel
// says it is over, whichever comes first.
func cancelledLeftOpen(t *testing.T, direct bool) *tab {
	t.Helper()
	needSDK(t)
	s := startStackServing(t, sdkDir, 0)
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL()+"?start=no")
	sdkTee(tb)
	tb.eval(`__acp.hold = true, __acp.deaf = true`, nil)
	if direct {
		tb.eval(`__acp.att.sendACP({jsonrpc: "2.0", id: "direct", method: "session/prompt",
			params: {sessionId: __acp.sessionId, prompt: [{type: "text", text: "permission to write"}]}}).then(() => true)`, nil)
	} else {
		tb.eval(`__acp.promptLater("permission to write")`, nil)
	}
	sdkWait(tb, "the permission request", `__acp.asked.length === 1 && __acp.holding.length === 1`)
	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: __acp.sessionId}))`, nil)
	if direct {
		sdkWait(tb, "the cancelled turn's answer", `__acp.others.some(m => m.id === "direct" && m.result?.stopReason === "cancelled")`)
	} else {
		sdkWait(tb, "the cancelled turn's answer", `__acp.answers.length === 1`)
	}
	sdkWait(tb, "the runtime's $/cancel_request", `__acp.att.history().then(h => h.some(e => !e.out && e.message?.method === "$/cancel_request"))`)
	var first bool
	tb.eval(`__acp.att.history().then(h => h.findIndex(e => !e.out && e.message?.method === "$/cancel_request") < h.findIndex(e => !e.out && e.message?.result?.stopReason))`, &first)
	t.Logf("the runtime's $/cancel_request came before its response to the prompt: %t", first)
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" {
		t.Fatalf("a prompt after the cancelled turn ended %+v, want end_turn", a)
	}
	return tb
}

// The app's answer, the "cancelled" outcome ACP has a client give a
// cancelled request, comes after that: it goes nowhere, silently.
func TestStreamRuntimeCancelledLetGo(t *testing.T) {
	t.Parallel()
	for _, direct := range []bool{false, true} {
		t.Run(map[bool]string{false: "prompt of the SDK", true: "prompt sent past the stream"}[direct], func(t *testing.T) {
			tb := cancelledLeftOpen(t, direct)
			tb.eval(`__acp.holding[0]({outcome: {outcome: "cancelled"}})`, nil)
			if n := permissionAnswers(tb); n != 0 {
				t.Fatalf("%d answers to the cancelled permission request went to the runtime after a later turn ended, want none: the stream still kept it", n)
			}
			if w := warnings(tb); len(w) != 0 {
				t.Fatalf("the console warned %q, want nothing: the app gave the cancelled outcome", w)
			}
		})
	}
}

// The app's Allow (the user clicked the dialog left on screen) goes
// nowhere either, and the console says it was dropped.
func TestStreamRuntimeCancelledLetGoAllow(t *testing.T) {
	t.Parallel()
	tb := cancelledLeftOpen(t, true)
	tb.eval(`__acp.answer("allow")`, nil)
	if n := permissionAnswers(tb); n != 0 {
		t.Fatalf("%d answers to the cancelled permission request went to the runtime after a later turn ended, want none", n)
	}
	if w := warnings(tb); len(w) != 1 || !strings.Contains(w[0], "was over") {
		t.Fatalf("the console warned %q, want one warning that the app's answer to a request that was over was dropped", w)
	}
}
