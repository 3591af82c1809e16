package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// exitPage is a page that attaches in main or worker mode (?worker) with
// wasmExec gowrap.js: wasm_exec.js, its Go made to keep every instance, so
// that a message on the BroadcastChannel "relaywasm-test-exit" (from the
// page, reaching the worker too) has relay.wasm exit as it does on a Go
// panic or when memory runs out: Go's own runtime.wasmExit, then what
// wasm_exec.js does when Go returns having exited. No hook in relay.wasm.
const exitPage = `<!doctype html><html lang="en"><title>relay.wasm exits</title>
<script type="module">
import { loadRelay } from "/relay.js";
const X = (window.__x = { ready: false, error: null, states: [], got: [], pending: null, sockets: [] });
const WS = globalThis.WebSocket; // the page's sockets (main mode), as relay.js makes them
globalThis.WebSocket = class extends WS {
  constructor(...args) {
    super(...args);
    X.sockets.push(this);
  }
};
const outcome = (p) => p.then(() => ({ ok: true, code: "" }), (e) => ({ ok: false, code: e?.code ?? "", name: e?.name ?? "" }));
X.outcome = outcome;
try {
  const relay = await loadRelay({ worker: location.search.includes("worker"), wasmExec: "/gowrap.js" });
  X.mode = relay.mode;
  X.relay = relay;
  X.att = await relay.attach({
    url: "ws://" + location.host + "/v1/attach", instance: "demo", token: "dev-token", name: "exit",
    onMessage: (m, meta) => { X.got.push(meta.seq); },
    onState: (state, info) => X.states.push({ state, code: info.code ?? "", storage: info.storage ?? "" }),
  });
  X.ready = true;
} catch (e) {
  X.error = String(e?.message ?? e);
}
</script></html>`

const goWrap = `await import("/wasm_exec.js");
const Go = globalThis.Go;
const gos = [];
globalThis.Go = class extends Go {
  constructor() {
    super();
    gos.push(this);
  }
};
new BroadcastChannel("relaywasm-test-exit").onmessage = () => {
  for (const go of gos) {
    if (go.exited) continue;
    go.importObject.gojs["runtime.wasmExit"](0);
    go._resolveExitPromise();
  }
};
`

// When relay.wasm exits (a Go panic; a phone's tab out of memory), the
// application is told, in either mode: each live attachment's onState
// hears "closed" with the code wasm_exited, once; a sendACP waiting (in the
// queue, offline) rejects with wasm_exited, as do sendACP, history and
// attach after; the getters keep the last state, cursor and session
// instead of throwing; the page's online and visibility listeners call
// into no exited Go (the page reports nothing but relay.js's one
// console.error). Before, nothing was told: the Promise waited for good,
// later calls rejected with a plain Error, and the getters threw.
func TestWasmExitTold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, text := range map[string]string{"exit.html": exitPage, "gowrap.js": goWrap} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			s := startStackServing(t, dir, 0)
			tb := openTab(t, newBrowser(t), "exit", s.PageURL()+"exit.html?"+mode)
			tb.page = allowing{tb.page, "relay.wasm exited"}
			tb.waitFor("the page to attach", `window.__x && (__x.ready || __x.error !== null)`)
			var start struct {
				Error *string
				Mode  string
			}
			tb.eval(`({error: __x.error, mode: __x.mode})`, &start)
			if start.Error != nil || start.Mode != mode {
				t.Fatalf("the page started in mode %q (error %v), want %q", start.Mode, start.Error, mode)
			}
			tb.waitFor("the attachment to open", `__x.att.state === "open"`)
			tb.eval(`__x.att.sendACP({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } }), null`, nil)
			tb.waitFor("the answer", `__x.got.length > 0 && __x.att.cursor === __x.got.at(-1)`)
			var before struct {
				Cursor  int
				Session string
			}
			tb.eval(`({cursor: __x.att.cursor, session: __x.att.session})`, &before)

			tb.eval(`dispatchEvent(new Event("offline")), null`, nil)
			tb.waitFor("the attachment offline", `__x.att.state === "offline"`)
			tb.eval(`__x.pending = null, __x.outcome(__x.att.sendACP({ jsonrpc: "2.0", id: 2, method: "ping" })).then((o) => (__x.pending = o)), null`, nil)
			tb.eval(`new BroadcastChannel("relaywasm-test-exit").postMessage(1), null`, nil)
			tb.waitFor("the waiting send to settle", `__x.pending !== null`)
			tb.waitFor("the attachment to be closed", `__x.states.some((s) => s.state === "closed")`)

			var after struct {
				Pending, Send, History, Attach struct{ Code, Name string }
				Closed                         []struct{ Code, Storage string }
				State                          string
				Cursor                         int
				Session                        string
			}
			tb.eval(`(async () => {
				dispatchEvent(new Event("online"));
				dispatchEvent(new Event("offline"));
				document.dispatchEvent(new Event("visibilitychange"));
				document.dispatchEvent(new Event("resume"));
				return {
					pending: __x.pending,
					send: await __x.outcome(__x.att.sendACP({ jsonrpc: "2.0", id: 3, method: "ping" })),
					history: await __x.outcome(__x.att.history()),
					attach: await __x.outcome(__x.relay.attach({ url: "ws://" + location.host + "/v1/attach", instance: "demo", token: "dev-token", name: "other", onMessage() {} })),
					closed: __x.states.filter((s) => s.state === "closed"),
					state: __x.att.state, cursor: __x.att.cursor, session: __x.att.session,
				};
			})()`, &after)
			for what, got := range map[string]struct{ Code, Name string }{"the waiting sendACP": after.Pending, "a sendACP after": after.Send, "history() after": after.History, "an attach after": after.Attach} {
				if got.Code != "wasm_exited" || got.Name != "RelayError" {
					t.Errorf("%s rejected with %s %q, want a RelayError wasm_exited", what, got.Name, got.Code)
				}
			}
			if len(after.Closed) != 1 || after.Closed[0].Code != "wasm_exited" || after.Closed[0].Storage == "" {
				t.Errorf("onState heard closed %+v, want once, with the code wasm_exited and the storage", after.Closed)
			}
			if after.State != "closed" || after.Cursor != before.Cursor || after.Session != before.Session {
				t.Errorf("the getters say %q, cursor %d, session %q; want closed, %d, %q", after.State, after.Cursor, after.Session, before.Cursor, before.Session)
			}
		})
	}
}

// Once relay.wasm has exited, relay.js closes its sockets: no Go is left to
// read what they bring or to answer the relay's heartbeats, and what came
// piled up unread while the relay kept the attachment as live.
func TestWasmExitClosesSockets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, text := range map[string]string{"exit.html": exitPage, "gowrap.js": goWrap} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startStackServing(t, dir, 0)
	tb := openTab(t, newBrowser(t), "exit", s.PageURL()+"exit.html?main")
	tb.page = allowing{tb.page, "relay.wasm exited"}
	tb.waitFor("the attachment to open", `window.__x && __x.ready && __x.att.state === "open"`)
	tb.eval(`new BroadcastChannel("relaywasm-test-exit").postMessage(1), null`, nil)
	tb.waitFor("the attachment to be closed", `__x.states.some((s) => s.state === "closed")`)
	var open int
	tb.eval(`__x.sockets.filter((ws) => ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING).length`, &open)
	if open != 0 {
		t.Fatalf("%d sockets still open after relay.wasm exited", open)
	}
}
