package e2e

import "testing"

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
