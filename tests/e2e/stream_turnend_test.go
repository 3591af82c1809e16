package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// A prompt turn that ends while a request of its session is open on a live
// stream (the user cancelled while the permission dialog was open), against
// a runtime that sends no $/cancel_request for it (ACP need not): the
// stream tells the SDK the request is cancelled, so the app's dialog goes
// away instead of staying open for a turn that is over, and the SDK's
// answer to it is dropped, not sent to a runtime past it.
// (TestStreamReloadAfterTurnEnded: a reloaded page is not asked it again.)

// noCancelSDKPage opens the SDK page against a runtime that sends no
// $/cancel_request, with the page's stream teed (sdkTee), ready for a
// prompt.
func noCancelSDKPage(t *testing.T) *tab {
	t.Helper()
	s := noCancelStack(t)
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL()+"?start=no")
	sdkTee(tb)
	return tb
}

// warnCapture keeps the page's console.warn calls in __acp.warned.
const warnCapture = `__acp.warned = [], console.warn = (...a) => __acp.warned.push(a.join(" "))`

// warnings returns what the page's console.warn said since warnCapture.
func warnings(tb *tab) []string {
	tb.t.Helper()
	var w []string
	tb.eval(`__acp.warned`, &w)
	return w
}

// teeStreams wraps __acp.att's stream() (__acp.tee(att) wraps that of an
// attachment made later) so that every message the SDK reads is also kept
// in __acp.seen, and keeps every console.warn in __acp.warned.
const teeStreams = warnCapture + `, __acp.seen = [],
	__acp.tee = (att) => {
		const stream = att.stream.bind(att);
		att.stream = (o) => {
			const s = stream(o), r = s.readable.getReader();
			const readable = new ReadableStream({
				async pull(c) {
					const { value, done } = await r.read();
					if (done) return c.close();
					__acp.seen.push(value);
					c.enqueue(value);
				},
				cancel: (why) => r.cancel(why),
			}, { highWaterMark: 0 });
			return { readable, writable: s.writable };
		};
	},
	__acp.att && __acp.tee(__acp.att)`

// sdkTee starts the SDK page (opened with ?start=no) as it starts itself,
// with its streams teed (teeStreams).
func sdkTee(tb *tab) {
	tb.t.Helper()
	sdkWait(tb, "the page's module", `typeof __acp.attach === "function"`)
	tb.eval(teeStreams+`, __acp.attach().then(() => {
			__acp.tee(__acp.att);
			__acp.connect();
			return __acp.initialize().then(() => __acp.newSession()).then(() => (__acp.ready = true));
		}).catch((e) => (__acp.error = { code: e?.code ?? "", message: String(e?.message ?? e) }))`, nil)
	sdkReady(tb)
}

// cancelTurn asks for a permission, holds the dialog (deaf: it stays on
// screen even once cancelled), cancels the turn (session/cancel) and waits
// for its end, which must come without a $/cancel_request from the runtime.
func cancelTurn(tb *tab, deaf bool) {
	tb.t.Helper()
	tb.eval(fmt.Sprintf(`__acp.hold = true, __acp.deaf = %t, __acp.promptLater("permission to write")`, deaf), nil)
	sdkWait(tb, "the permission request", `__acp.asked.length === 1 && __acp.holding.length === 1`)
	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: __acp.sessionId}))`, nil)
	sdkWait(tb, "the cancelled turn's answer", `__acp.answers.length === 1`)
	var stop string
	tb.eval(`__acp.answers[0].stopReason ?? __acp.answers[0].message`, &stop)
	if stop != "cancelled" {
		tb.t.Fatalf("the turn ended %q, want cancelled", stop)
	}
	noRuntimeCancel(tb)
}

func noRuntimeCancel(tb *tab) {
	tb.t.Helper()
	var told bool
	tb.eval(`__acp.att.history().then(h => h.some(e => !e.out && e.message?.method === "$/cancel_request"))`, &told)
	if told {
		tb.t.Fatal("the agent sent $/cancel_request: the test would not see the turn's end alone settle the request")
	}
}

// permissionAnswers returns how many responses the page sent the runtime
// with the wire id of its (last) permission request, or with the id the
// SDK was handed it under, once a prompt after it has ended (the SDK
// writes in order, so its answer to the request has been written by then).
func permissionAnswers(tb *tab) int {
	tb.t.Helper()
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" || a.Chunks != 1 {
		tb.t.Fatalf("a prompt after the cancelled turn ended %+v, want end_turn after 1 chunk", a)
	}
	var n int
	tb.eval(`__acp.att.history().then(h => {
		const wire = JSON.stringify(h.filter(e => !e.out && e.message?.method === "session/request_permission").pop().message.id);
		const local = JSON.stringify(__acp.seen.filter(m => m.method === "session/request_permission").pop().id);
		return h.filter(e => e.out && !e.message?.method && [wire, local].includes(JSON.stringify(e.message?.id))).length;
	})`, &n)
	return n
}

// sdkCancels returns the requestIds of the $/cancel_request notifications
// the SDK read, and the id it was handed the permission request under.
func sdkCancels(tb *tab) (cancels []string, asked string) {
	tb.t.Helper()
	tb.eval(`__acp.seen.filter(m => m.method === "$/cancel_request").map(m => JSON.stringify(m.params.requestId))`, &cancels)
	tb.eval(`JSON.stringify(__acp.seen.filter(m => m.method === "session/request_permission").pop().id)`, &asked)
	return cancels, asked
}

// The app closes a dialog whose request is cancelled: it goes away when the
// turn ends, the SDK's answer to the cancel ("cancelled") goes nowhere and
// draws no warning, and the next prompt runs as usual.
func TestStreamTurnEndedLive(t *testing.T) {
	t.Parallel()
	tb := noCancelSDKPage(t)
	cancelTurn(tb, false)
	sdkWait(tb, "the dialog to go away with its turn", `__acp.holding.length === 0`)
	if n := permissionAnswers(tb); n != 0 {
		t.Fatalf("%d answers to the permission request went to the runtime after its turn ended, want none", n)
	}
	cancels, asked := sdkCancels(tb)
	if len(cancels) != 1 || cancels[0] != asked {
		t.Fatalf("the SDK read $/cancel_request for %v, want one for %s, the permission request", cancels, asked)
	}
	if warned := warnings(tb); len(warned) != 0 {
		t.Fatalf("the console warned %q: the SDK's own answer to the stream's cancel is no answer of the app's", warned)
	}
	var n int
	tb.eval(`__acp.asked.length`, &n)
	if n != 1 {
		t.Fatalf("the SDK was asked %d permissions, want 1", n)
	}
}

// An app that leaves the dialog on screen (the user's click racing the
// cancel): its Allow, given after the turn ended, does not go to the
// runtime, and the console says it was dropped.
func TestStreamTurnEndedLiveAnswerDropped(t *testing.T) {
	t.Parallel()
	tb := noCancelSDKPage(t)
	cancelTurn(tb, true)
	tb.eval(`__acp.answer("allow")`, nil)
	if n := permissionAnswers(tb); n != 0 {
		t.Fatalf("%d answers to the permission request went to the runtime after its turn ended, want none", n)
	}
	if warned := warnings(tb); len(warned) != 1 || !strings.Contains(warned[0], "turn had ended") {
		t.Fatalf("the console warned %q, want one warning that the app's answer was dropped, its turn having ended", warned)
	}
}

// A runtime that does send $/cancel_request, after its response to the
// prompt (as the dev runtime, on the Go ACP SDK, does): the SDK hears of
// the cancel once (the stream's, at the response; the runtime's is not
// handed over a second time), and its answer goes out, as the runtime's
// cancel asks.
func TestStreamTurnEndedCancelledByRuntime(t *testing.T) {
	t.Parallel()
	needSDK(t)
	s := startStackServing(t, sdkDir, 0)
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL()+"?start=no")
	sdkTee(tb)
	tb.eval(`__acp.hold = true, __acp.promptLater("permission to write")`, nil)
	sdkWait(tb, "the permission request", `__acp.asked.length === 1 && __acp.holding.length === 1`)
	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: __acp.sessionId}))`, nil)
	sdkWait(tb, "the cancelled turn's answer", `__acp.answers.length === 1`)
	sdkWait(tb, "the dialog to go away", `__acp.holding.length === 0`)
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" || a.Chunks != 1 {
		t.Fatalf("a prompt after the cancelled turn ended %+v, want end_turn after 1 chunk", a)
	}
	cancels, asked := sdkCancels(tb)
	if len(cancels) != 1 || cancels[0] != asked {
		t.Fatalf("the SDK read $/cancel_request for %v, want one, for %s", cancels, asked)
	}
	var answered bool
	tb.eval(`__acp.att.history().then(h => {
		const r = h.filter(e => !e.out && e.message?.method === "session/request_permission").pop().message;
		return h.some(e => e.out && !e.message?.method && JSON.stringify(e.message?.id) === JSON.stringify(r.id));
	})`, &answered)
	if !answered {
		var dump string
		tb.eval(`__acp.att.history().then(h => JSON.stringify(h.map(e => [e.out, e.message?.method, e.message?.id, e.message?.params?.requestId, e.message?.result])))`, &dump)
		t.Log(dump)
		t.Fatal("the SDK's answer to the cancel did not go out: the runtime's cancel asks for one")
	}
}

// A request offered again on a new stream (after a loss ended the one that
// read it, against a runtime that does not resume), whose turn, a prompt
// of the earlier stream, then ends without a $/cancel_request: the SDK is
// told of it under the id it has the request under (the stream's own), the
// dialog goes away, and no answer goes out, with either id.
func TestStreamReofferedTurnEnded(t *testing.T) {
	t.Parallel()
	needSDK(t)
	s := startFreshStack(t, stack.Config{
		WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) { c.NoCancelRequest, c.NoResume = true, true },
	})
	t.Cleanup(func() { s.Close() })
	p, tb := sdkBehindProxy(t, s)
	tb.eval(`__acp.hold = true, __acp.promptLater("permission to write")`, nil)
	sdkWait(tb, "the permission request", `__acp.asked.length === 1`)
	p.Cut()
	sdkWait(tb, "the SDK's connection to end with the loss", `__acp.closed`)

	// The new stream, teed, offers the request again.
	tb.eval(teeStreams, nil)
	tb.eval(`__acp.holding.length = 0, __acp.connect(), __acp.initialize().then(() => __acp.load(__acp.sessionId))`, nil)
	sdkWait(tb, "the new SDK to be asked", `__acp.asked.length === 2 && __acp.holding.length === 1`)

	tb.eval(`__acp.opened.then(c => c.notify("session/cancel", {sessionId: __acp.sessionId}))`, nil)
	sdkWait(tb, "the first stream's prompt to be answered", `__acp.others.some(m => m.result?.stopReason === "cancelled")`)
	noRuntimeCancel(tb)
	sdkWait(tb, "the dialog to go away with its turn", `__acp.holding.length === 0`)
	cancels, asked := sdkCancels(tb)
	if !strings.HasPrefix(asked, `"rw-`) || len(cancels) != 1 || cancels[0] != asked {
		t.Fatalf("the SDK read $/cancel_request for %v, want one for %s, the stream's id of the request offered again", cancels, asked)
	}
	if n := permissionAnswers(tb); n != 0 {
		t.Fatalf("%d answers to the permission request went to the runtime after its turn ended, want none", n)
	}
	if warned := warnings(tb); len(warned) != 0 {
		t.Fatalf("the console warned %q: the SDK's own answer to the stream's cancel is no answer of the app's", warned)
	}
}

// promptOver sends a second prompt on the session while the first turn's
// permission dialog is open (the user typed on, without session/cancel):
// the dev agent cancels the first turn and starts the second, which asks
// again. It waits until the SDK has read the first turn's end ("cancelled")
// and been asked the second time, and says whether the second request came
// before the first prompt's response (the agent's two turns race; only that
// order makes the first turn's end meet a request of the next).
func promptOver(tb *tab) (crossed bool) {
	tb.t.Helper()
	tb.eval(`__acp.hold = true, __acp.promptLater("permission to write")`, nil)
	sdkWait(tb, "the first permission request", `__acp.asked.length === 1 && __acp.holding.length === 1`)
	tb.eval(`__acp.promptLater("permission to write")`, nil)
	sdkWait(tb, "the first turn's end and the second permission request", `__acp.asked.length === 2 && __acp.answers.length === 1`)
	var stop string
	tb.eval(`__acp.answers[0].stopReason ?? __acp.answers[0].message`, &stop)
	if stop != "cancelled" {
		tb.t.Fatalf("the first turn ended %q, want cancelled", stop)
	}
	tb.eval(`__acp.att.history().then(h => {
		const first = h.find(e => e.out && e.message?.method === "session/prompt").message.id;
		const end = h.findIndex(e => !e.out && !e.message?.method && e.message?.id === first);
		const asked = h.map((e, i) => !e.out && e.message?.method === "session/request_permission" ? i : -1).filter(i => i >= 0);
		return asked.length === 2 && asked[1] < end;
	})`, &crossed)
	return crossed
}

// A second prompt on the session while the first turn's dialog is open
// (no session/cancel first): the first turn's end cancels the first
// request only, not the second turn's, even when that arrived before the
// first prompt's response; the second dialog stays, and its Allow reaches
// the agent and ends the second turn. With the dev runtime as it is, and
// with one that sends no $/cancel_request.
func TestStreamSecondPromptSameSession(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		noCancel bool
	}{{"runtime cancels", false}, {"no $/cancel_request", true}} {
		t.Run(c.name, func(t *testing.T) {
			needSDK(t)
			s := startFreshStack(t, stack.Config{
				WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
				EditRuntime: func(rc *devruntime.Config) { rc.NoCancelRequest = c.noCancel },
			})
			t.Cleanup(func() { s.Close() })
			tb := openTab(t, newBrowser(t), "sdk", s.PageURL()+"?start=no")
			sdkTee(tb)
			crossed := promptOver(tb)
			t.Logf("the second request came before the first prompt's response: %t", crossed)

			// The SDK read the cancels the first turn's end brings before
			// its response: only the first request's.
			var cancels, asked []string
			tb.eval(`__acp.seen.filter(m => m.method === "$/cancel_request").map(m => JSON.stringify(m.params.requestId))`, &cancels)
			tb.eval(`__acp.seen.filter(m => m.method === "session/request_permission").map(m => JSON.stringify(m.id))`, &asked)
			if len(asked) != 2 || len(cancels) != 1 || cancels[0] != asked[0] {
				t.Fatalf("the SDK read $/cancel_request for %v, want one, for the first of the permission requests %v", cancels, asked)
			}
			sdkWait(tb, "the second dialog (the first gone)", `__acp.holding.length === 1`)
			tb.eval(`__acp.answer("allow")`, nil)
			sdkWait(tb, "the second turn's end", `__acp.answers.length === 2`)
			var a answer
			tb.eval(`__acp.answers[1]`, &a)
			if a.StopReason != "end_turn" {
				t.Fatalf("the second turn ended %+v, want end_turn", a)
			}
			sdkWait(tb, "the agent's answer to the permission", `__acp.conversation.some(e => e.role === "agent" && e.text === "permission allow")`)
			if warned := warnings(tb); len(warned) != 0 {
				t.Fatalf("the console warned %q", warned)
			}
		})
	}
}

// A reload while the second turn's dialog is open, the first turn (whose
// prompt's response came after the second turn's request) ended without a
// $/cancel_request: the reloaded page's SDK is asked the second turn's
// request, and only that, and its answer ends the second turn.
func TestStreamReloadSecondPromptSameSession(t *testing.T) {
	t.Parallel()
	s := noCancelStack(t)
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL())
	sdkReady(tb)
	crossed := promptOver(tb)
	t.Logf("the second request came before the first prompt's response: %t", crossed)
	noRuntimeCancel(tb)
	sdkWait(tb, "the second dialog (the first gone)", `__acp.holding.length === 1`)
	sdkWait(tb, "the Store to hold the cursor past the first turn's end", `__acp.att.history().then(() => __acp.storedCursor()).then(c => c > 0 && c >= __acp.att.cursor)`)

	tb.do("reloading", tb.page.reload)
	sdkReady(tb)
	permissionTurnEnded(tb, "allow")
	var asked []string
	tb.eval(`__acp.asked.map(p => p.sessionId)`, &asked)
	if len(asked) != 1 {
		t.Fatalf("the reloaded page's SDK was asked %d times, want once (the second turn's request)", len(asked))
	}
}

// noCancelStack is a stack serving the SDK page whose runtime sends no
// $/cancel_request (devruntime.Config.NoCancelRequest): a turn's end is
// all that tells its requests are moot.
func noCancelStack(t *testing.T) *stack.Stack {
	t.Helper()
	needSDK(t)
	s := startFreshStack(t, stack.Config{
		WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) { c.NoCancelRequest = true },
	})
	t.Cleanup(func() { s.Close() })
	return s
}
