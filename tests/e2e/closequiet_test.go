package e2e

import (
	"strings"
	"testing"
)

// quietPage is lifetimesPage with the page's worker able to hold back the
// close() or detach() call: while X.holdClose names a kind of the worker's
// messages ("state", "evicted"), the page's message that asks the worker to
// close or detach waits until the worker has posted one, and goes the
// moment it reaches the page, before relay.js reads it. That is the race of
// a worker busy as close() or detach() is called: the message was sent
// before the worker heard the call, and arrives after the app made it. The page counts onEvicted's
// calls (X.evictions), calls X.whenState with each state onState hears,
// and its resume waits 1 s for an answer the dev runtime never gives
// (not_resumed).
var quietPage = strings.NewReplacer(
	`name: "lifetimes",`, `name: "lifetimes", resumeTimeoutMs: 1000, onEvicted: () => (X.evictions = (X.evictions ?? 0) + 1),`,
	`onState: (state, info) => X.states.push({ state, code: info.code ?? "" }),`, `onState: (state, info) => (X.states.push({ state, code: info.code ?? "" }), X.whenState?.(state)),`,
	`    this.addEventListener("message", ({ data }) => data?.t === "reply" && X.replies.set(data.id, data));`,
	`    this.addEventListener("message", ({ data }) => data?.t === "reply" && X.replies.set(data.id, data));
    this.addEventListener("message", ({ data }) => data?.t === X.holdFor && X.held?.());
  }
  postMessage(m, ...rest) {
    if (!X.holdClose || m?.t !== "call" || (m.op !== "close" && m.op !== "detach")) return super.postMessage(m, ...rest);
    X.holdFor = X.holdClose;
    X.holdClose = false;
    X.held = () => ((X.held = null), (X.released = true), super.postMessage(m, ...rest));`).Replace(lifetimesPage)

// After close() or detach(), the app's onState hears nothing but the
// attachment's "closed", in either mode: a state the worker reported
// before it heard the call (here "offline", told to the worker in the same
// task as the call) is dropped on the page, as on the main thread, where
// close() and detach() end the attachment within the call. Before, worker
// mode called onState("offline") after close() had been called: an app
// that tears its view down in close() got a callback into the dead view;
// and after detach() it still did, once close() no longer let it through.
func TestNoStateAfterClose(t *testing.T) {
	t.Parallel()
	for _, c := range endCases() {
		t.Run(c.name, func(t *testing.T) {
			tb := quietTab(t, c.mode, false)
			tb.eval(`(__l.holdClose = __l.mode === "worker" && "state", dispatchEvent(new Event("offline")),
				__l.closedAt = __l.states.length, __l.closing = __l.att.`+c.op+`(),
				__l.closing.then(() => (__l.closeDone = true)), null)`, nil)
			tb.waitFor(c.op+"() to resolve", `__l.closeDone === true`)
			var after []struct{ State, Code string }
			tb.eval(`__l.states.slice(__l.closedAt)`, &after)
			var released bool
			tb.eval(`__l.released === true`, &released)
			if c.mode == "worker" && !released {
				t.Fatalf("the page's %s() call was not held until the worker's state came: the test did not race", c.op)
			}
			if len(after) != 1 || after[0].State != "closed" {
				t.Errorf("onState heard %+v after %s() was called, want only closed", after, c.op)
			}
			var state string
			tb.eval(`__l.att.state`, &state)
			if state != "closed" {
				t.Errorf("state is %q once %s() has resolved, want closed", state, c.op)
			}
		})
	}
}

// endCase is a way the application ends an attachment (op: "close" or
// "detach"), in a mode ("main" or "worker").
type endCase struct{ name, op, mode string }

// endCases are both ways in both modes.
func endCases() []endCase {
	var cs []endCase
	for _, op := range []string{"close", "detach"} {
		for _, mode := range []string{"main", "worker"} {
			cs = append(cs, endCase{op + "/" + mode, op, mode})
		}
	}
	return cs
}

// quietTab opens quietPage in mode ("main" or "worker") on a stack of its
// own, its runtime one that does not resume if noResume, once the
// attachment is open.
func quietTab(t *testing.T, mode string, noResume bool) *tab {
	t.Helper()
	start := startStackServing
	if noResume {
		start = startNonResumingStack
	}
	return modeTab(t, "quiet", quietPage, mode, start)
}

// After close() or detach(), onEvicted is not called, in either mode: a
// loss the worker told before it heard the call (here not_resumed: a
// redial's resume, to a runtime that does not resume, unanswered) is
// dropped on the page, as onState's states are. Before, worker mode called
// onEvicted after close() had been called, and then after detach().
//
// The call is made as onState hears the redial's "open": the redial has
// its token by then (none is asked for once the call is made), and the
// worker posts the loss after that state, so it reaches the page after
// the call.
func TestNoEvictionAfterClose(t *testing.T) {
	t.Parallel()
	for _, c := range endCases() {
		t.Run(c.name, func(t *testing.T) {
			tb := quietTab(t, c.mode, true)
			tb.eval(`(__l.evictedAt = __l.evictions ?? 0,
				__l.whenState = (state) => {
					if (state !== "open") return;
					__l.whenState = null;
					__l.holdClose = __l.mode === "worker" && "evicted";
					__l.closing = __l.att.`+c.op+`();
					__l.closing.then(() => (__l.closeDone = true));
				},
				dispatchEvent(new Event("offline")), dispatchEvent(new Event("online")), null)`, nil)
			tb.waitFor(c.op+"() to resolve", `__l.closeDone === true`)
			var got struct {
				Released   bool
				Before, At int
			}
			tb.eval(`({ released: __l.released === true, before: __l.evictedAt, at: __l.evictions ?? 0 })`, &got)
			if c.mode == "worker" && !got.Released {
				t.Fatalf("the page's %s() call was not held until the worker told a loss: the test did not race", c.op)
			}
			if got.At != got.Before {
				t.Errorf("onEvicted was called %d times after %s() was called, want none", got.At-got.Before, c.op)
			}
		})
	}
}
