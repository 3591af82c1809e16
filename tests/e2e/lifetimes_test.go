package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/relaywasm/relaywasm/demo/stack"
)

// lifetimesPage attaches in main or worker mode (?worker) and records what
// its handler sees (window.__l): each message's [seq, att.cursor read in
// the handler], and how many messages each batch held (a batch is what the
// handler gets in one turn, with no microtask in between). The page's
// Workers and WebSockets are recorded as relay.js makes them (the test
// looks at them, relay.js has no hook): in worker mode, the worker's
// answers to calls the test makes itself; in main mode, whether the
// socket has brought a prompt's answer (holdChunk = stopped: the handler
// holds the next chunk until then, so that the batch after it holds the
// rest of the stream).
const lifetimesPage = `<!doctype html><html lang="en"><title>lifetimes</title>
<script type="module">
import { loadRelay } from "/relay.js";
const X = (window.__l = { ready: false, error: null, states: [], got: [], batches: [], answers: new Map(),
  workers: [], replies: new Map(), sockets: [], arrived: null, holdChunk: false, badToken: false });
const W = globalThis.Worker;
globalThis.Worker = class extends W {
  constructor(...args) {
    super(...args);
    X.workers.push(this);
    this.addEventListener("message", ({ data }) => data?.t === "reply" && X.replies.set(data.id, data));
  }
};
X.stopped = 0; // the prompts' answers the page's sockets brought
let answered = () => {};
const WS = globalThis.WebSocket;
globalThis.WebSocket = class extends WS {
  constructor(...args) {
    super(...args);
    X.sockets.push(this);
    this.addEventListener("message", (ev) => {
      if (typeof ev.data === "string" && ev.data.includes("stopReason")) X.stopped++, answered();
    });
  }
};
let inTurn = false;
try {
  const relay = await loadRelay({ worker: location.search.includes("worker") });
  X.mode = relay.mode;
  X.relay = relay;
  X.att = await relay.attach({
    url: "ws://" + location.host + "/v1/attach", instance: "demo", name: "lifetimes",
    token: () => (X.badToken ? "not-the-token" : "dev-token"),
    onMessage(m, meta) {
      if (!inTurn) {
        inTurn = true;
        X.batches.push(0);
        queueMicrotask(() => (inTurn = false));
      }
      X.batches[X.batches.length - 1]++;
      X.got.push([meta.seq, X.att ? X.att.cursor : -1]);
      if (m?.id !== undefined && m.method === undefined) X.answers.set(m.id, m);
      if (X.holdChunk !== false && m?.params?.update?.sessionUpdate === "agent_message_chunk") {
        const before = X.holdChunk; // X.stopped when the prompt went
        X.holdChunk = false;
        if (X.stopped === before) return new Promise((resolve) => (answered = resolve));
      }
    },
    onState: (state, info) => X.states.push({ state, code: info.code ?? "" }),
  });
  let id = 1;
  X.request = (method, params) => {
    const n = id++;
    X.att.sendACP({ jsonrpc: "2.0", id: n, method, params });
    return n;
  };
  X.ready = true;
} catch (e) {
  X.error = String(e?.message ?? e);
}
</script></html>`

// lifetimesTab opens lifetimesPage in mode ("main" or "worker") on a stack
// of its own, once the attachment is open.
func lifetimesTab(t *testing.T, mode string) *tab {
	t.Helper()
	return modeTab(t, "lifetimes", lifetimesPage, mode, startStackServing)
}

// modeTab serves page as name.html beside the demo's files on a stack that
// start starts, opens it in mode ("main" or "worker", its query), and
// returns once the page's attachment (window.__l.att) is open. The page
// sets __l.mode to the mode it runs in, __l.ready once attached, and
// __l.error if it could not attach.
func modeTab(t *testing.T, name, page, mode string, start func(*testing.T, string, float64) *stack.Stack) *tab {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name+".html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, dir, 0)
	tb := openTab(t, newBrowser(t), name, s.PageURL()+name+".html?"+mode)
	tb.waitFor("the page to attach", `window.__l && (__l.ready || __l.error !== null)`)
	var started struct {
		Error *string
		Mode  string
	}
	tb.eval(`({error: __l.error, mode: __l.mode})`, &started)
	if started.Error != nil || started.Mode != mode {
		t.Fatalf("the page started in mode %q (error %v), want %q", started.Mode, started.Error, mode)
	}
	tb.waitFor("the attachment to open", `__l.att.state === "open"`)
	return tb
}

// In worker mode an attachment that ends on its own (here: its token is
// refused on a redial) is let go by the worker too. The page drops it at
// once, so its close() or detach(), the only calls that let it go before,
// never reach the worker; the worker kept it, and what it holds, for the
// page's life. The test asks the worker itself how many it holds (a call
// it posts to the worker, as the page's calls go).
func TestWorkerLetsGoOfAnAttachmentThatEnded(t *testing.T) {
	t.Parallel()
	tb := lifetimesTab(t, "worker")
	held := func(id string) int {
		tb.eval(`__l.workers[0].postMessage({ t: "call", id: `+id+`, op: "attachments", args: [] }), null`, nil)
		tb.waitFor("the worker's answer", `__l.replies.has(`+id+`)`)
		var reply struct {
			OK    bool
			Value int
		}
		tb.eval(`__l.replies.get(`+id+`)`, &reply)
		if !reply.OK {
			t.Fatalf("the worker did not answer: %+v", reply)
		}
		return reply.Value
	}
	// Ids no call of the page's has.
	if n := held("1073741824"); n != 1 {
		t.Fatalf("the worker holds %d attachments while the page's is open, want 1", n)
	}
	tb.eval(`__l.badToken = true, dispatchEvent(new Event("offline")), null`, nil)
	tb.waitFor("the attachment offline", `__l.att.state === "offline"`)
	tb.eval(`dispatchEvent(new Event("online")), null`, nil)
	tb.waitFor("the attachment to end", `__l.states.some((s) => s.state === "closed")`)
	var ended struct{ State, Code string }
	tb.eval(`({state: __l.att.state, code: __l.states.at(-1).code})`, &ended)
	if ended.State != "closed" || ended.Code != "unauthorized" {
		t.Fatalf("the attachment is %q (code %q), want closed with unauthorized", ended.State, ended.Code)
	}
	if n := held("1073741825"); n != 0 {
		t.Fatalf("the worker holds %d attachments after the page's ended, want none", n)
	}
	// What the page calls on it still fails as it did: closed.
	var send struct{ Code string }
	tb.eval(`__l.att.sendACP({ jsonrpc: "2.0", method: "x" }).then(() => ({ code: "" }), (e) => ({ code: e.code }))`, &send)
	if send.Code != "closed" {
		t.Fatalf("a sendACP after the end rejected with %q, want closed", send.Code)
	}
}

// att.cursor read in onMessage is the seq of the last message onMessage
// accepted, in either mode: each message sees the one before it, within a
// batch too. The main thread said the cursor from before the batch (the
// engine moves it once the batch is done), worker mode the last accepted.
// In main mode the handler holds the first chunk until the socket has
// brought the whole answer, so the next batch holds the rest of the
// stream; in worker mode the sockets are the worker's, and a stream of 500
// chunks comes in batches of more than one.
func TestCursorInTheHandlerIsTheLastAccepted(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			tb := lifetimesTab(t, mode)
			tb.eval(`__l.request("initialize", { protocolVersion: 1, clientCapabilities: {} }), null`, nil)
			tb.eval(`__l.request("session/new", { cwd: "/", mcpServers: [] }), null`, nil)
			tb.waitFor("the session", `__l.answers.has(2)`)
			tb.eval(`__l.holdChunk = __l.sockets.length > 0 ? __l.stopped : false, null`, nil)
			tb.eval(`__l.request("session/prompt", { sessionId: __l.answers.get(2).result.sessionId, prompt: [{ type: "text", text: "count 500" }] }), null`, nil)
			tb.waitFor("the prompt's answer", `__l.answers.has(3)`)
			var got struct {
				Wrong    [][2][2]int
				Messages int
				Batch    int
			}
			tb.eval(`(() => {
				const g = __l.got, wrong = [];
				for (let i = 1; i < g.length; i++) if (g[i][1] !== -1 && g[i][1] !== g[i - 1][0]) wrong.push([g[i - 1], g[i]]);
				return { wrong: wrong.slice(0, 5), messages: g.length, batch: Math.max(...__l.batches) };
			})()`, &got)
			if len(got.Wrong) > 0 {
				t.Errorf("of %d messages, some saw a cursor other than the seq before theirs ([seq, cursor] before, then theirs): %v", got.Messages, got.Wrong)
			}
			if got.Batch < 3 {
				t.Errorf("no batch held three messages or more (the largest %d): the test checked no cursor within a batch", got.Batch)
			}
			t.Logf("%d messages, the largest batch %d", got.Messages, got.Batch)
		})
	}
}

// After close() or detach(), state says "closed" once the returned Promise
// has resolved, in either mode, and onState heard it once. Before that it
// may still say what it said: close() ends the attachment within the call
// in either mode (TestStateClosedAtClose), but detach() waits to tell the
// runtime, and in worker mode for the worker's answer (relay.d.ts says so).
func TestStateClosedOnceCloseResolves(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			tb := lifetimesTab(t, mode)
			type ended struct {
				Now, After string
				Closed     int
			}
			var closed, detached ended
			tb.eval(`(async () => {
				const p = __l.att.close();
				const now = __l.att.state;
				await p;
				return { now, after: __l.att.state, closed: __l.states.filter((s) => s.state === "closed").length };
			})()`, &closed)
			tb.eval(`(async () => {
				const states = [];
				const att = await __l.relay.attach({
					url: "ws://" + location.host + "/v1/attach", instance: "demo", token: "dev-token", name: "lifetimes-detach",
					onMessage() {}, onState: (state) => states.push(state),
				});
				const p = att.detach();
				const now = att.state;
				await p;
				return { now, after: att.state, closed: states.filter((s) => s === "closed").length };
			})()`, &detached)
			for op, got := range map[string]ended{"close()": closed, "detach()": detached} {
				if got.After != "closed" || got.Closed != 1 {
					t.Errorf("once %s resolved: state %q, onState heard closed %d times; want closed, once", op, got.After, got.Closed)
				}
				t.Logf("%s: state %q when the call returned", op, got.Now)
			}
		})
	}
}
