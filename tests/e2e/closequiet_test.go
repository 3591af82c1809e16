package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quietPage is lifetimesPage with the page's worker able to hold back the
// close() call: while X.holdClose is set, the page's message that asks the
// worker to close waits until the worker has posted a state, and goes the
// moment that state reaches the page, before relay.js reads it. That is
// the race of a worker busy as close() is called: the state was sent
// before the worker heard the close, and arrives after the app called it.
var quietPage = strings.Replace(lifetimesPage, `    this.addEventListener("message", ({ data }) => data?.t === "reply" && X.replies.set(data.id, data));`,
	`    this.addEventListener("message", ({ data }) => data?.t === "reply" && X.replies.set(data.id, data));
    this.addEventListener("message", ({ data }) => data?.t === "state" && X.held?.());
  }
  postMessage(m, ...rest) {
    if (!X.holdClose || m?.t !== "call" || m.op !== "close") return super.postMessage(m, ...rest);
    X.holdClose = false;
    X.held = () => ((X.held = null), (X.released = true), super.postMessage(m, ...rest));`, 1)

// After close(), the app's onState hears nothing but the attachment's
// "closed", in either mode: a state the worker reported before it heard the
// close (here "offline", told to the worker in the same task as the close)
// is dropped on the page, as on the main thread, where close() ends the
// attachment within the call. Before, worker mode called onState("offline")
// after close() had been called: an app that tears its view down in
// close() got a callback into the dead view.
func TestNoStateAfterClose(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			tb := quietTab(t, mode)
			tb.eval(`(__l.holdClose = __l.mode === "worker", dispatchEvent(new Event("offline")),
				__l.closedAt = __l.states.length, __l.closing = __l.att.close(),
				__l.closing.then(() => (__l.closeDone = true)), null)`, nil)
			tb.waitFor("close() to resolve", `__l.closeDone === true`)
			var after []struct{ State, Code string }
			tb.eval(`__l.states.slice(__l.closedAt)`, &after)
			var released bool
			tb.eval(`__l.released === true`, &released)
			if mode == "worker" && !released {
				t.Fatal("the page's close() call was not held until the worker's state came: the test did not race")
			}
			if len(after) != 1 || after[0].State != "closed" {
				t.Errorf("onState heard %+v after close() was called, want only closed", after)
			}
		})
	}
}

// quietTab opens quietPage in mode ("main" or "worker") on a stack of its
// own, once the attachment is open.
func quietTab(t *testing.T, mode string) *tab {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quiet.html"), []byte(quietPage), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStackServing(t, dir, 0)
	tb := openTab(t, newBrowser(t), "quiet", s.PageURL()+"quiet.html?"+mode)
	tb.waitFor("the page to attach", `window.__l && (__l.ready || __l.error !== null)`)
	var start struct {
		Error *string
		Mode  string
	}
	tb.eval(`({error: __l.error, mode: __l.mode})`, &start)
	if start.Error != nil || start.Mode != mode {
		t.Fatalf("the page started in mode %q (error %v), want %q", start.Mode, start.Error, mode)
	}
	tb.waitFor("the attachment to open", `__l.att.state === "open"`)
	return tb
}
