package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/stack"
)

// trapWrap is wasm_exec.js as the page's wasmExec, with one thing added in
// the worker that loads it: a message on the BroadcastChannel
// "relaywasm-test-trap" (from the page) throws a WebAssembly.RuntimeError
// uncaught in the worker, as a trap out of relay.wasm (unreachable, an
// access out of bounds) reaches the worker's top level, with no Go exit.
// Nothing in relay.wasm, relay.js or worker.js knows of it.
const trapWrap = `await import("/wasm_exec.js");
new BroadcastChannel("relaywasm-test-trap").onmessage = () => {
  throw new WebAssembly.RuntimeError("unreachable (relaywasm test trap)");
};
`

// A worker that fails after it started (here an uncaught RuntimeError, as
// from a wasm trap, with no Go exit) is told to the application as
// relay.wasm's exit is on the main thread: a call waiting (an attach whose
// token function has not answered) rejects with wasm_exited, as do sendACP, history, attach and the
// Relay's history and forget after; each live attachment's onState hears
// "closed" with the code wasm_exited, once, and its getters keep the last
// cursor and session; the slots' locks the page held for the worker go, so
// another tab may take the streams. Before, the page only logged the worker's error: the
// waiting attach never settled and the attachment stayed "open".
func TestWorkerFailureTold(t *testing.T) {
	t.Parallel()
	tb, _ := trapTab(t, strings.NewReplacer())
	var before struct {
		Cursor  int
		Session string
	}
	tb.eval(`({cursor: __x.att.cursor, session: __x.att.session})`, &before)

	// An attach whose token function has not answered waits in the worker.
	tb.eval(`__x.pending = null, __x.asked = false, __x.outcome(__x.relay.attach({
		url: "ws://" + location.host + "/v1/attach", instance: "demo", name: "held", onMessage() {},
		token: () => ((__x.asked = true), new Promise(() => {})),
	})).then((o) => (__x.pending = o)), null`, nil)
	tb.waitFor("the worker to ask for the token", `__x.asked`)
	// The page holds the slots' locks for the worker (tabs.js).
	slotLocks := func(test string) string {
		return `(navigator.locks.query().then((q) => (__x.locks = q.held.filter((l) => l.name.startsWith("relaywasm:")).length)), ` + test + `)`
	}
	tb.waitFor("the page to hold both slots' locks", slotLocks(`__x.locks === 2`))
	tb.eval(`new BroadcastChannel("relaywasm-test-trap").postMessage(1), null`, nil)
	tb.waitFor("the waiting attach to settle", `__x.pending !== null`)
	tb.waitFor("the attachment to be closed", `__x.states.some((s) => s.state === "closed")`)
	tb.waitFor("the slots' locks to go", slotLocks(`__x.locks === 0`))

	type outcome struct{ Code, Name string }
	var after struct {
		Pending, Send, History, Attach, Stored, Forget outcome
		Close                                          struct{ Ok bool }
		Closed                                         []struct{ Code, Storage string }
		State                                          string
		Cursor                                         int
		Session                                        string
	}
	tb.eval(`(async () => {
		const other = { url: "ws://" + location.host + "/v1/attach", instance: "demo", token: "dev-token", name: "other", onMessage() {} };
		return {
			pending: __x.pending,
			send: await __x.outcome(__x.att.sendACP({ jsonrpc: "2.0", id: 3, method: "ping" })),
			history: await __x.outcome(__x.att.history()),
			attach: await __x.outcome(__x.relay.attach(other)),
			stored: await __x.outcome(__x.relay.history(other)),
			forget: await __x.outcome(__x.relay.forget(other)),
			close: await __x.outcome(__x.att.close()),
			closed: __x.states.filter((s) => s.state === "closed"),
			state: __x.att.state, cursor: __x.att.cursor, session: __x.att.session,
		};
	})()`, &after)
	for what, got := range map[string]outcome{
		"the waiting attach": after.Pending, "a sendACP after": after.Send, "history() after": after.History,
		"an attach after": after.Attach, "the Relay's history() after": after.Stored, "forget() after": after.Forget,
	} {
		if got.Code != "wasm_exited" || got.Name != "RelayError" {
			t.Errorf("%s rejected with %s %q, want a RelayError wasm_exited", what, got.Name, got.Code)
		}
	}
	if !after.Close.Ok {
		t.Errorf("close() of the ended attachment failed, want it to resolve as on the main thread")
	}
	if len(after.Closed) != 1 || after.Closed[0].Code != "wasm_exited" || after.Closed[0].Storage == "" {
		t.Errorf("onState heard closed %+v, want once, with the code wasm_exited and the storage", after.Closed)
	}
	if after.State != "closed" || after.Cursor != before.Cursor || after.Session != before.Session {
		t.Errorf("the getters say %q, cursor %d, session %q; want closed, %d, %q", after.State, after.Cursor, after.Session, before.Cursor, before.Session)
	}
}

// trapTab opens exitPage, changed by edit, in worker mode with trapWrap as
// its wasmExec, and returns it attached and answered once (initialize), with
// the stack serving it.
func trapTab(t *testing.T, edit *strings.Replacer) (*tab, *stack.Stack) {
	t.Helper()
	dir := t.TempDir()
	page := strings.Replace(edit.Replace(exitPage), `wasmExec: "/gowrap.js"`, `wasmExec: "/trapwrap.js"`, 1)
	for name, text := range map[string]string{"trap.html": page, "trapwrap.js": trapWrap} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startStackServing(t, dir, 0)
	tb := openTab(t, newBrowser(t), "trap", s.PageURL()+"trap.html?worker")
	tb.page = allowing{tb.page, "relaywasm test trap"}
	tb.waitFor("the page to attach", `window.__x && (__x.ready || __x.error !== null)`)
	var mode string
	tb.eval(`__x.mode ?? String(__x.error)`, &mode)
	if mode != "worker" {
		t.Fatalf("the page started in mode %q, want worker", mode)
	}
	tb.waitFor("the attachment to open", `__x.att.state === "open"`)
	tb.eval(`__x.att.sendACP({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } }), null`, nil)
	tb.waitFor("the answer", `__x.got.length > 0 && __x.att.cursor === __x.got.at(-1)`)
	return tb, s
}

// Right after close() is called, before its Promise resolves, state says
// "closed" in either mode, as the main thread's close() ends the attachment
// within the call, and stays so: a state the worker reported before it
// heard the close does not take it back. onState hears "closed" once, by
// the time close() has resolved. Before, worker mode said "open" until the
// worker's answer came.
func TestStateClosedAtClose(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			tb := lifetimesTab(t, mode)
			var got struct {
				Now, Tick, After string
				Closed           int
			}
			tb.eval(`(async () => {
				const p = __l.att.close();
				const now = __l.att.state;
				await Promise.resolve();
				const tick = __l.att.state;
				await p;
				return { now, tick, after: __l.att.state, closed: __l.states.filter((s) => s.state === "closed").length };
			})()`, &got)
			if got.Now != "closed" || got.Tick != "closed" || got.After != "closed" || got.Closed != 1 {
				t.Errorf("state %q as close() returned, %q a microtask later, %q once it resolved, onState heard closed %d times; want closed throughout, once",
					got.Now, got.Tick, got.After, got.Closed)
			}
		})
	}
}

// What the page's handlers accepted after the worker failed (a handler's
// Promise held the message as it failed, and resolved after) is committed
// on the page, as at pagehide: the tab's next page reads it in the
// transcript. Before, it was lost: its count went to the ended worker.
func TestWorkerFailureCommitsWhatWasAccepted(t *testing.T) {
	t.Parallel()
	tb, s := trapTab(t, strings.NewReplacer(
		`name: "exit",`, `name: "exit", history: 50,`,
		`onMessage: (m, meta) => { X.got.push(meta.seq); },`, `onMessage: (m, meta) => { X.got.push(meta.seq); if (X.hold) { X.held = meta.seq; return X.hold.p; } },`,
	))
	tb.eval(`__x.hold = {}, __x.hold.p = new Promise((r) => (__x.hold.r = r)), null`, nil)
	tb.eval(`__x.att.sendACP({ jsonrpc: "2.0", id: 2, method: "session/new", params: { cwd: "/", mcpServers: [] } }), null`, nil)
	tb.waitFor("the handler to hold the answer", `__x.held > 0`)
	var held int
	tb.eval(`__x.held`, &held)
	tb.eval(`new BroadcastChannel("relaywasm-test-trap").postMessage(1), null`, nil)
	tb.waitFor("the attachment to be closed", `__x.states.some((s) => s.state === "closed")`)
	// The count follows the Promise within its microtasks: a task later
	// it has been committed, and written.
	tb.eval(`(async () => { __x.hold.r(); await new Promise((r) => setTimeout(r)); })()`, nil)

	tb.do("loading the tab's next page", func(ctx context.Context) error { return tb.page.navigate(ctx, s.PageURL()+"trap.html?main") })
	tb.waitFor("the next page to attach", `window.__x && (__x.ready || __x.error !== null)`)
	var seqs []int
	tb.eval(`__x.relay.history({ url: "ws://" + location.host + "/v1/attach", instance: "demo", name: "exit" }).then((h) => h.filter((e) => !e.out).map((e) => e.seq))`, &seqs)
	if !slices.Contains(seqs, held) {
		t.Errorf("the transcript's received seqs are %v, want %d (accepted after the worker failed) among them", seqs, held)
	}
}
