package e2e

import (
	"strings"
	"testing"
)

// tokenPage is lifetimesPage whose token function counts its calls
// (X.tokens) and those that start once the test set X.ending, just before
// it calls close() or detach() (X.late). While X.holdToken is set, the
// next call's token is held until the test calls X.giveToken().
var tokenPage = strings.NewReplacer(
	`token: () => (X.badToken ? "not-the-token" : "dev-token"),`,
	`token: () => ((X.tokens = (X.tokens ?? 0) + 1), X.ending && (X.late = (X.late ?? 0) + 1),
      X.holdToken ? new Promise((resolve) => ((X.holdToken = false), (X.giveToken = () => resolve("dev-token")))) : "dev-token"),`).Replace(lifetimesPage)

// After close() or detach(), the app's token function is not called, in
// either mode: a redial under way (here: the page went offline and online
// in the same task as the call) asks for no token. Before, it did, so that
// an app that tears its session down in close() was asked to refresh a
// token for a user who had logged out.
func TestNoTokenAfterClose(t *testing.T) {
	t.Parallel()
	for _, c := range endCases() {
		t.Run(c.name, func(t *testing.T) {
			tb := modeTab(t, "token", tokenPage, c.mode, startStackServing)
			tb.eval(`(dispatchEvent(new Event("offline")), dispatchEvent(new Event("online")),
				__l.ending = true, __l.closing = __l.att.`+c.op+`(),
				__l.closing.then(() => (__l.closeDone = true)), null)`, nil)
			tb.waitFor(c.op+"() to resolve", `__l.closeDone === true`)
			// Whatever the engine was doing has had its turn: a second
			// attachment of the page attaches (its dial goes after the
			// first's redial would have) and is closed.
			tb.eval(`(__l.relay.attach({ url: "ws://" + location.host + "/v1/attach", instance: "demo", name: "second",
				token: "dev-token", onMessage() {} }).then((a) => a.close()).then(() => (__l.second = true), (e) => (__l.second = String(e))), null)`, nil)
			tb.waitFor("a second attachment to attach and close", `__l.second !== undefined`)
			var got struct{ Tokens, Late int }
			tb.eval(`({ tokens: __l.tokens ?? 0, late: __l.late ?? 0 })`, &got)
			if got.Late != 0 {
				t.Errorf("the token function was called %d times after %s() was called (%d in all), want none", got.Late, c.op, got.Tokens)
			}
		})
	}
}

// A token the function gives only after close() or detach() was called is
// not used: the redial that asked for it does not go. The page's sockets
// are counted on the main thread (in worker mode they are the worker's).
func TestNoDialWithATokenGivenAfterClose(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"close", "detach"} {
		t.Run(op, func(t *testing.T) {
			tb := modeTab(t, "token", tokenPage, "main", startStackServing)
			tb.eval(`(__l.holdToken = true, dispatchEvent(new Event("offline")), dispatchEvent(new Event("online")), null)`, nil)
			tb.waitFor("the redial to ask for a token", `__l.giveToken !== undefined`)
			tb.eval(`(__l.socketsAt = __l.sockets.length, __l.closing = __l.att.`+op+`(), __l.giveToken(),
				__l.closing.then(() => (__l.closeDone = true)), null)`, nil)
			tb.waitFor(op+"() to resolve", `__l.closeDone === true`)
			// As in TestNoTokenAfterClose: the engine has had its turn once
			// a second attachment attached.
			tb.eval(`(__l.relay.attach({ url: "ws://" + location.host + "/v1/attach", instance: "demo", name: "second",
				token: "dev-token", onMessage() {} }).then((a) => a.close()).then(() => (__l.second = true), (e) => (__l.second = String(e))), null)`, nil)
			tb.waitFor("a second attachment to attach and close", `__l.second !== undefined`)
			var got []string
			tb.eval(`__l.sockets.slice(__l.socketsAt).map((s) => s.url)`, &got)
			if len(got) != 1 { // the second attachment's
				t.Errorf("after %s() the page opened %d sockets (%v), want only the second attachment's", op, len(got), got)
			}
		})
	}
}
