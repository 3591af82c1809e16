package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// The page is offline (a phone asleep) while a runtime that does not resume
// (contenox as it ships) is replaced by a new process, so the page never
// hears runtime_gone. Back online, its stream ends with not_resumed, and
// the app's new stream offers the old permission request again. The new
// process numbers its requests afresh: its own permission request comes
// with the old one's wire id. The user answers Allow on the old dialog,
// still on screen: that answer must not reach the new process as the
// answer to its request (a permission the user never gave); the new
// request's own dialog is answered (Reject), and that is what the new
// process hears.
func TestStreamReofferedAnswerAfterOfflineTakeover(t *testing.T) {
	t.Parallel()
	// deaf: the old dialog stays on screen, answerable, even once
	// cancelled (the user's click racing the cancel).
	tb, id := offlineTakeover(t, true)
	sdkWait(tb, "both dialogs", `__acp.holding.length === 2`)
	tb.eval(`__acp.holding[0]({outcome: {outcome: "selected", optionId: "allow"}}), __acp.holding[1]({outcome: {outcome: "selected", optionId: "reject"}})`, nil)
	newTurnHeard(tb, "permission reject")
	if w := warnings(tb); len(w) != 1 || !strings.Contains(w[0], "offered again") {
		t.Fatalf("the console warned %q, want one warning that the app's answer (Allow) was dropped", w)
	}
	var answers int
	tb.eval(fmt.Sprintf(`__acp.att.history().then(h => h.filter(e => e.out && !e.message?.method && JSON.stringify(e.message?.id) === %q).length)`, id), &answers)
	if answers != 1 {
		t.Fatalf("%d responses went out with the reused id %s, want 1 (the new dialog's)", answers, id)
	}
}

// The same, the app closing a dialog when its request is cancelled: once
// the new process's request of the same id comes, the old dialog goes away
// (the SDK is told the old request is cancelled), and the new one is the
// only one left to answer.
func TestStreamReofferedCancelledAfterOfflineTakeover(t *testing.T) {
	t.Parallel()
	tb, _ := offlineTakeover(t, false)
	sdkWait(tb, "the old dialog to go away, the new one left", `__acp.holding.length === 1`)
	tb.eval(`__acp.answer("reject")`, nil)
	newTurnHeard(tb, "permission reject")
	// The SDK's answer to the stream's cancel ("cancelled") was written
	// before the new dialog's: it was dropped, and is no answer of the
	// app's to warn about.
	if w := warnings(tb); len(w) != 0 {
		t.Fatalf("the console warned %q, want nothing: the app gave no answer to the old request", w)
	}
}

// offlineTakeover runs the scenario up to the new process's permission
// request, asked through the page's second stream along with the first
// process's, offered again; it returns the tab and the wire id both
// requests had (JSON).
func offlineTakeover(t *testing.T, deaf bool) (*tab, string) {
	t.Helper()
	needSDK(t)
	hop, s := stackBehindHop(t, sdkDir, true)
	p, tb := sdkBehindProxy(t, s)
	tb.eval(warnCapture, nil)
	tb.eval(fmt.Sprintf(`__acp.hold = true, __acp.deaf = %t, __acp.promptLater("permission to DELETE the production database")`, deaf), nil)
	sdkWait(tb, "the permission request", `__acp.asked.length === 1`)

	// The page goes offline; meanwhile the runtime's connection dies
	// unseen and a new process takes the instance over.
	p.Down()
	sdkWait(tb, "the page to see the drop", `__acp.att.state !== "open"`)
	hop.Freeze()
	runFreshRuntime(t, s, true)
	p.Up()
	sdkWait(tb, "the SDK's connection to end with the loss", `__acp.closed`)
	var told bool
	tb.eval(`__acp.states.some(s => s.code === "runtime_gone")`, &told)
	if told {
		t.Fatal("the page heard runtime_gone: the test would not see an offline page")
	}

	// What demo/app does then: a new stream, initialize, a new session.
	// The stream offers the old request before anything live.
	tb.eval(`__acp.holding.length = 0, __acp.connect(), __acp.initialize().then(() => __acp.newSession())`, nil)
	sdkWait(tb, "the old request offered again", `__acp.asked.length === 2 && __acp.holding.length === 1`)
	tb.eval(`__acp.promptLater("permission to read README")`, nil)
	sdkWait(tb, "the new process's request", `__acp.asked.length === 3`)
	var ids []string
	tb.eval(`__acp.att.history().then(h => h.filter(e => !e.out && e.message?.method === "session/request_permission").map(e => JSON.stringify(e.message.id)))`, &ids)
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Fatalf("the runtimes' permission requests had wire ids %v, want two equal ones: the test would not see an id reused", ids)
	}
	return tb, ids[1]
}

// newTurnHeard waits for the end of the new process's permission turn and
// checks what its agent heard.
func newTurnHeard(tb *tab, want string) {
	tb.t.Helper()
	sdkWait(tb, "the new process's permission turn to end", `__acp.answers.some(a => a.text === "permission to read README")`)
	var heard string
	tb.eval(`__acp.conversation.filter(e => e.role === "agent").map(e => e.text).pop() ?? ""`, &heard)
	if heard != want {
		tb.t.Fatalf("the new process heard %q for its request, want %q: the old dialog's answer answered it", heard, want)
	}
}

// A request offered again (under an id of the stream's own) that the
// runtime then cancels ($/cancel_request with its wire id, after the app's
// session/cancel): the SDK hears of it, the dialog goes away, and the SDK's
// answer goes out with the wire id. Here the runtime only blipped (it does
// not resume, and is the same process), so the re-offer was wanted.
func TestStreamReofferedCancelledByRuntime(t *testing.T) {
	t.Parallel()
	needSDK(t)
	s := startNonResumingStack(t, sdkDir, 0)
	p, tb := sdkBehindProxy(t, s)
	tb.eval(`__acp.hold = true, __acp.promptLater("permission to write")`, nil)
	sdkWait(tb, "the permission request", `__acp.asked.length === 1`)
	p.Cut()
	sdkWait(tb, "the SDK's connection to end with the loss", `__acp.closed`)
	tb.eval(`__acp.holding.length = 0, __acp.connect(), __acp.initialize().then(() => __acp.load(__acp.sessionId))`, nil)
	sdkWait(tb, "the new SDK to be asked", `__acp.asked.length === 2 && __acp.holding.length === 1`)

	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: __acp.sessionId}))`, nil)
	sdkWait(tb, "the dialog to go away", `__acp.holding.length === 0`)
	const answeredWire = `__acp.att.history().then(h => {
		const r = h.filter(e => !e.out && e.message?.method === "session/request_permission").pop().message;
		return h.some(e => e.out && !e.message?.method && JSON.stringify(e.message?.id) === JSON.stringify(r.id));
	})`
	sdkWait(tb, "the SDK's answer to go out with the wire id", answeredWire)
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" || a.Chunks != 1 {
		t.Fatalf("a prompt after it ended %+v, want end_turn after 1 chunk", a)
	}
}
