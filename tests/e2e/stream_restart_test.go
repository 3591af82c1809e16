package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// The runtime restarts while the page's stream goes on: the page hears
// runtime_gone, redials, and no loss ends its stream (here the new process
// resumes the page's stream, which the old one, not resuming, never
// numbered, so there is nothing it could have missed; against two
// processes that do not resume the same holds until not_resumed comes,
// resumeTimeoutMs after the redial). The old process's permission request
// is still open in the app. The app starts a new session (the new process
// knows none) and asks again: the new process numbers its requests
// afresh, so its permission request comes with the old one's wire id. The
// user answers Allow on the old dialog, still on screen: that answer must
// not reach the new process as the answer to its request (a permission the
// user never gave); the new dialog is answered Reject, and that is what the
// new process hears, the only answer that goes out with the id.
func TestStreamLiveAnswerAfterRuntimeRestart(t *testing.T) {
	t.Parallel()
	// deaf: the old dialog stays on screen, answerable, even once
	// cancelled (the user's click racing the cancel).
	tb, id := restartedRuntimeReusesID(t, true)
	sdkWait(tb, "both dialogs", `__acp.holding.length === 2`)
	tb.eval(`__acp.holding[0]({outcome: {outcome: "selected", optionId: "allow"}}), __acp.holding[1]({outcome: {outcome: "selected", optionId: "reject"}})`, nil)
	newTurnHeard(tb, "permission reject")
	if answers := answersWithID(tb, id); answers != 1 {
		t.Fatalf("%d responses went out with the reused id %s after the new process's request, want 1 (the new dialog's)", answers, id)
	}
	if w := warnings(tb); len(w) != 1 || !strings.Contains(w[0], "new request with that id") {
		t.Fatalf("the console warned %q, want one warning that the app's answer (Allow) was dropped", w)
	}
}

// The same, the app closing a dialog when its request is cancelled: once
// the new process's request of the same id comes, the old dialog goes away
// (the SDK is told the old request is cancelled), the SDK's own answer to
// that cancel goes nowhere, and the new dialog is the only one left.
func TestStreamLiveCancelledAfterRuntimeRestart(t *testing.T) {
	t.Parallel()
	tb, _ := restartedRuntimeReusesID(t, false)
	sdkWait(tb, "the old dialog to go away, the new one left", `__acp.holding.length === 1`)
	tb.eval(`__acp.answer("reject")`, nil)
	newTurnHeard(tb, "permission reject")
	if w := warnings(tb); len(w) != 0 {
		t.Fatalf("the console warned %q, want nothing: the app gave no answer to the old request", w)
	}
}

// restartedRuntimeReusesID runs the scenario up to the new process's
// permission request, asked through the page's stream that read the old
// process's, unanswered; it returns the tab and the wire id both requests
// had (JSON).
func restartedRuntimeReusesID(t *testing.T, deaf bool) (*tab, string) {
	t.Helper()
	tb, restart := askedBeforeRestart(t, deaf, "permission to DELETE the production database", nil)
	restart()
	// The new process knows no session: the app starts one on the same
	// SDK connection and asks again.
	tb.eval(`__acp.newSession().then(() => __acp.promptLater("permission to read README"))`, nil)
	sdkWait(tb, "the new process's request", `__acp.asked.length === 2`)
	var closed string
	tb.eval(`JSON.stringify(__acp.closed)`, &closed)
	if closed != "null" {
		t.Fatalf("the SDK's connection ended (%s): the test would not see the stream go on across the restart", closed)
	}
	return tb, reusedID(tb)
}

// askedBeforeRestart opens the SDK page on a runtime that does not resume,
// console warnings captured, and has it prompt, the app holding the
// runtime's permission request (deaf: answerable even once cancelled). It
// returns the tab, and restart: it restarts the runtime as one that
// resumes and waits for the page to be back after runtime_gone. edit, if
// not nil, adjusts each runtime's config too (both processes').
func askedBeforeRestart(t *testing.T, deaf bool, prompt string, edit func(*devruntime.Config)) (*tab, func()) {
	t.Helper()
	needSDK(t)
	resumes := false // the restarted runtime resumes; the first does not
	s := startFreshStack(t, stack.Config{
		WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) {
			c.NoResume = !resumes
			if edit != nil {
				edit(c)
			}
		},
	})
	t.Cleanup(func() { s.Close() })
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL())
	tb.page = allowing{tb.page, refusedDial}
	sdkReady(tb)
	tb.eval(warnCapture, nil)
	tb.eval(fmt.Sprintf(`__acp.hold = true, __acp.deaf = %t, __acp.promptLater(%q)`, deaf, prompt), nil)
	sdkWait(tb, "the permission request", `__acp.asked.length === 1 && __acp.holding.length === 1`)
	return tb, func() {
		resumes = true
		restartRuntime(t, s)
		sdkWait(tb, "the page to be back after runtime_gone", `__acp.states.some(s => s.code === "runtime_gone") && __acp.att.state === "open"`)
	}
}

// reusedID is the wire id (JSON) of the two runtimes' permission requests,
// which must be the same.
func reusedID(tb *tab) string {
	tb.t.Helper()
	var ids []string
	tb.eval(`__acp.att.history().then(h => h.filter(e => !e.out && e.message?.method === "session/request_permission").map(e => JSON.stringify(e.message.id)))`, &ids)
	if len(ids) != 2 || ids[0] != ids[1] {
		tb.t.Fatalf("the runtimes' permission requests had wire ids %v, want two equal ones: the test would not see an id reused", ids)
	}
	return ids[1]
}

// answersWithID counts the responses that went out with wire id (JSON)
// after the last permission request.
func answersWithID(tb *tab, id string) int {
	tb.t.Helper()
	var answers int
	tb.eval(fmt.Sprintf(`__acp.att.history().then(h => {
		const asked = h.findLastIndex(e => !e.out && e.message?.method === "session/request_permission");
		return h.slice(asked).filter(e => e.out && !e.message?.method && JSON.stringify(e.message?.id) === %q).length;
	})`, id), &answers)
	return answers
}

// cancelledBeforeRestart is askedBeforeRestart with the request to write
// (edit as there), its turn then cancelled by the user (session/cancel):
// it returns once the prompt is answered and the runtime has sent its own
// $/cancel_request of the request, the app holding the old dialog still
// unanswered.
func cancelledBeforeRestart(t *testing.T, edit func(*devruntime.Config)) (*tab, func()) {
	t.Helper()
	tb, restart := askedBeforeRestart(t, true, "permission to write", edit)
	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: __acp.sessionId}))`, nil)
	sdkWait(tb, "the cancelled turn's answer", `__acp.answers.length === 1`)
	sdkWait(tb, "the runtime's own $/cancel_request", `__acp.att.history().then(h => h.some(e => !e.out && e.message?.method === "$/cancel_request"))`)
	return tb, restart
}

// A request whose turn ended (the user cancelled, the dialog left on
// screen), which the runtime then cancelled itself ($/cancel_request after
// its response, as the dev runtime does) while the app had yet to answer
// the stream's cancel of it; then the runtime restarts, its new process's
// request comes with the same wire id, and only then does the app answer
// the old dialog: "cancelled", the answer the runtime's cancel asked for.
// The runtime is past the old request by then: that answer must not go out
// under the id, where it answered the new request (and the new dialog's
// own answer went out a second time); only the new dialog's answer does.
func TestStreamLateCancelAnswerAfterRuntimeRestart(t *testing.T) {
	t.Parallel()
	tb, restart := cancelledBeforeRestart(t, nil)

	restart()
	tb.eval(`__acp.newSession().then(() => __acp.promptLater("permission to read README"))`, nil)
	sdkWait(tb, "the new process's request", `__acp.asked.length === 2 && __acp.holding.length === 2`)
	id := reusedID(tb)

	// The SDK writes in order: the old dialog's answer goes first.
	tb.eval(`__acp.holding[0]({outcome: {outcome: "cancelled"}}), __acp.holding[1]({outcome: {outcome: "selected", optionId: "reject"}})`, nil)
	newTurnHeard(tb, "permission reject")
	if answers := answersWithID(tb, id); answers != 1 {
		t.Fatalf("%d responses went out with the reused id %s after the new process's request, want 1 (the new dialog's)", answers, id)
	}
	if w := warnings(tb); len(w) != 0 {
		t.Fatalf("the console warned %q, want nothing: the app's answer to the old request was the cancelled outcome", w)
	}
}

// The same, but the new process's request is delivered to the stream while
// the SDK is not reading (the page's gate is shut), and the app answers the
// old dialog then: the stream holds the new request, unread, and its
// answer to the old one must not go out under the id meanwhile, where it
// answered the new request (with "cancelled", a dialog the user never saw)
// before the SDK ever read it. The stream is past the old request once the
// new one is delivered, read or not.
func TestStreamLateCancelAnswerWhileNewRequestUnread(t *testing.T) {
	t.Parallel()
	tb, restart := cancelledBeforeRestart(t, nil)

	restart()
	// The new request is held in the stream, unread, once it shows among
	// what the attachment delivered.
	watchDelivered(tb)
	// The SDK reads the new session's response, and nothing after it.
	tb.eval(`__acp.setLimit(__acp.reads + 1), __acp.newSession().then(() => __acp.promptLater("permission to read README"))`, nil)
	sdkWait(tb, "the new process's request delivered, unread", `__acp.delivered.some(m => m?.method === "session/request_permission") && __acp.asked.length === 1`)

	answerOldWhileUnread(tb)
}

// watchDelivered has the page keep what the attachment delivers to the
// stream (its tap) in __acp.delivered, read by the SDK or not.
func watchDelivered(tb *tab) {
	tb.t.Helper()
	tb.eval(`(() => {
		const tap = __acp.att._tap, deliver = tap.onMessage;
		__acp.delivered = [];
		tap.onMessage = (raw, meta) => (__acp.delivered.push(raw), deliver.call(tap, raw, meta));
	})()`, nil)
}

// answerOldWhileUnread has the app answer the old dialog "cancelled" while
// the SDK reads nothing more (the new process's request not read yet), and
// waits for that answer to have been written: a message the SDK writes
// after it (in order) went out, a session/cancel of no session (a
// notification nothing answers). Then the SDK reads the new request, the
// app answers it "reject", and only that answer may have gone out under
// the reused wire id, with nothing warned on the console.
func answerOldWhileUnread(tb *tab) {
	t := tb.t
	t.Helper()
	tb.eval(`__acp.holding[0]({outcome: {outcome: "cancelled"}})`, nil)
	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: "none"}))`, nil)
	sdkWait(tb, "the SDK's writes to go out", `__acp.att.history().then(h => h.some(e => e.out && e.message?.params?.sessionId === "none"))`)
	tb.eval(`__acp.setLimit(Infinity)`, nil)
	sdkWait(tb, "the new process's request read", `__acp.asked.length === 2 && __acp.holding.length === 2`)
	id := reusedID(tb)
	tb.eval(`__acp.holding[1]({outcome: {outcome: "selected", optionId: "reject"}})`, nil)
	newTurnHeard(tb, "permission reject")
	if answers := answersWithID(tb, id); answers != 1 {
		t.Fatalf("%d responses went out with the reused id %s after the new process's request, want 1 (the new dialog's)", answers, id)
	}
	if w := warnings(tb); len(w) != 0 {
		t.Fatalf("the console warned %q, want nothing: the app's answer to the old request was the cancelled outcome", w)
	}
}
