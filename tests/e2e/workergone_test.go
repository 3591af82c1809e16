package e2e

import (
	"testing"

	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// A worker the browser ends itself (out of memory, its process gone) fires
// no event on the page, and the page went on waiting on it: calls never
// settled and the attachment stayed "open". The worker now holds a Web
// Lock while it lives, which the page asks for: once the worker is gone
// the page is granted it, and tells the application as it does a worker
// that failed (TestWorkerFailureTold): onState hears "closed" with
// wasm_exited, once, and calls reject with it. terminate(), called here on
// the Worker relay.js made, without relay.js knowing, stands for the
// engine ending it: it fires no event either, and lets the worker's locks
// go as an ended worker's go (Chromium, Firefox and WebKit alike).
func TestWorkerEndedByTheBrowserTold(t *testing.T) {
	t.Parallel()
	tb := lifetimesTab(t, "worker")
	tb.page = allowing{tb.page, "the worker running relay.wasm failed: the browser ended it"} // relay.js logs it
	tb.eval(`__l.workers[0].terminate(), null`, nil)
	tb.waitFor("the attachment to be closed", `__l.states.some((s) => s.state === "closed")`)
	var got struct {
		Closed []struct{ Code string }
		Send   string
		State  string
	}
	tb.eval(`(async () => ({
		closed: __l.states.filter((s) => s.state === "closed"),
		send: await __l.att.sendACP({ jsonrpc: "2.0", id: 9, method: "ping" }).then(() => "ok", (e) => e?.code ?? String(e)),
		state: __l.att.state,
	}))()`, &got)
	if len(got.Closed) != 1 || got.Closed[0].Code != "wasm_exited" {
		t.Errorf("onState heard closed %+v, want once, with the code wasm_exited", got.Closed)
	}
	if got.Send != "wasm_exited" || got.State != "closed" {
		t.Errorf("after the worker ended sendACP gave %q and state is %q, want wasm_exited and closed", got.Send, got.State)
	}
}

// A page restored from the back/forward cache still tells the application
// of a worker the browser ends, as TestWorkerEndedByTheBrowserTold does:
// onState hears "closed" with wasm_exited. WebKit drops the pending Web
// Lock requests of a page it caches, the page's request for the worker's
// lock among them, so the restored page asks for it again (remote.js
// watch). Before, in WebKit the attachment stayed "open" after the worker
// was gone, its calls never settling. Firefox does not cache this page: it
// loads again, with a new worker, and the test is skipped there.
func TestRestoredPageWorkerEndedByTheBrowserTold(t *testing.T) {
	t.Parallel()
	tb := lifetimesTab(t, "worker")
	tb.page = allowing{tb.page, "the worker running relay.wasm failed: the browser ended it"} // relay.js logs it
	var away string
	tb.eval(`new URL("/relay.js", location.href).href`, &away)
	if !leaveAndComeBack(tb, away, `location.search === "?worker" && window.__l && __l.ready`) {
		if engine == webdriver.Chromium || engine == webdriver.WebKit {
			t.Fatalf("%s loaded the page again instead of restoring it from the back/forward cache, as it does here", engine)
		}
		t.Skipf("%s did not restore the page from the back/forward cache", engine)
	}
	tb.eval(`__l.workers[0].terminate(), null`, nil)
	tb.waitFor("the attachment to be closed", `__l.states.some((s) => s.state === "closed")`)
	var closed []struct{ Code string }
	tb.eval(`__l.states.filter((s) => s.state === "closed")`, &closed)
	if len(closed) != 1 || closed[0].Code != "wasm_exited" {
		t.Errorf("onState heard closed %+v, want once, with the code wasm_exited", closed)
	}
}
