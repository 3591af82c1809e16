package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/stack"
)

// Worker mode, loadRelay({worker: true}), in the page tests/workerpage: the
// page talks raw ACP to the dev agent with relay.wasm in a module Web
// Worker, and records every chunk it finds in its transcript and every chunk
// onMessage gets, each with its seq (window.__w).

var workerDir = filepath.Join(repoRoot, "tests", "workerpage")

// pageMode is one of the demo page's two ways of running relay.wasm: on the
// page's main thread, or in a Web Worker (?worker), to which the page
// forwards the lifecycle events a worker does not get.
type pageMode struct{ name, query string }

var (
	mainThread = pageMode{"main", ""}
	inWorker   = pageMode{"worker", "?worker"}
)

// withQuery is query (empty, or "?" and parameters) with param added.
func withQuery(query, param string) string {
	if query == "" {
		return "?" + param
	}
	return query + "&" + param
}

// inModes runs test once in each mode, as subtests.
func inModes(t *testing.T, test func(*testing.T, pageMode)) {
	for _, m := range []pageMode{mainThread, inWorker} {
		t.Run(m.name, func(t *testing.T) { test(t, m) })
	}
}

// check fails the test unless the demo page in tb runs relay.wasm in this
// mode: a worker that did not start falls back to the main thread, and the
// test would then be the main thread's again.
func (m pageMode) check(tb *tab) {
	tb.t.Helper()
	var mode string
	tb.eval(`__chat.mode`, &mode)
	if mode != m.name {
		tb.t.Fatalf("%s: the page runs relay.wasm in mode %q, want %q", tb.name, mode, m.name)
	}
}

// workerChunks is what the page has of a count: the chunks the transcript
// held when it started, then the ones onMessage got.
type workerChunks struct {
	Mode   string      `json:"mode"`
	Reason string      `json:"reason"`
	Hist   [][2]any    `json:"hist"`
	Live   [][2]any    `json:"live"`
	Error  interface{} `json:"error"`
}

func workerState(tb *tab) workerChunks {
	tb.t.Helper()
	var w workerChunks
	tb.eval(`({mode: __w.mode, reason: __w.reason, hist: __w.hist, live: __w.live, error: __w.error})`, &w)
	return w
}

func workerReady(tb *tab, mode string) {
	tb.t.Helper()
	tb.waitFor("the worker page to be ready", `window.__w && (__w.ready || __w.error)`)
	w := workerState(tb)
	if w.Error != nil {
		tb.t.Fatalf("%s: the page failed to start: %v", tb.name, w.Error)
	}
	if w.Mode != mode {
		tb.t.Fatalf("%s: relay.mode is %q (reason %q), want %q", tb.name, w.Mode, w.Reason, mode)
	}
}

// checkCount checks that the transcript's chunks plus onMessage's are the
// count 1..n, each once, in order, and that onMessage got no seq twice.
func checkCount(t *testing.T, w workerChunks, n int) {
	t.Helper()
	all := append(append([][2]any(nil), w.Hist...), w.Live...)
	if len(all) != n {
		t.Fatalf("%d chunks (%d in the transcript, %d delivered), want %d", len(all), len(w.Hist), len(w.Live), n)
	}
	lastSeq := 0.0
	for i, c := range all {
		seq, _ := c[0].(float64)
		if seq <= lastSeq {
			t.Fatalf("chunk %d has seq %v after seq %v: doubled or out of order", i, seq, lastSeq)
		}
		lastSeq = seq
		if want := strconv.Itoa(i+1) + "\n"; c[1] != want {
			t.Fatalf("chunk %d is %q, want %q (%d in the transcript)", i, c[1], want, len(w.Hist))
		}
	}
}

// A count of 4 s in worker mode, reloaded in the middle: the reloaded page's
// transcript plus what the worker delivers after the reload hold every
// chunk once, in order.
func TestWorkerModeReload(t *testing.T) {
	t.Parallel()
	if w := workerReload(t, ""); len(w.Hist) == 0 {
		t.Fatal("the reloaded page's transcript is empty: nothing of the count was written before the reload")
	}
}

// The same with a commit window of a minute: nothing is written before the
// reload but what the page's pagehide writes, so the reloaded page's
// transcript holds anything only if that write (or, where the engine tore
// it down, its copy in sessionStorage) was made on the page itself. The
// store lived in the worker until this turn: WebKit ended the worker before
// it heard of the pagehide (the reloaded page found nothing written), and
// Firefox on a busy machine before its write committed, so the reload went
// back up to one commit window, which a runtime that does not resume never
// sends again.
func TestWorkerModeReloadWritesAtPagehide(t *testing.T) {
	t.Parallel()
	w := workerReload(t, "?window=60000")
	if len(w.Hist) == 0 {
		t.Fatal("nothing was written at pagehide: the reloaded page's transcript is empty")
	}
}

func workerReload(t *testing.T, query string) workerChunks {
	s := startStackServing(t, workerDir, streamRate)
	tb := openTab(t, newBrowser(t), "worker", s.PageURL()+query)
	workerReady(tb, "worker")
	var stored func()
	if query == "" { // as countUnderWay: the worker's windowed writes have landed some
		var before int
		tb.eval(storedCursor, &before)
		stored = func() { waitStored(tb, before+2) }
	}
	return reloadMidCount(tb, s, "worker", stored)
}

// reloadMidCount has the worker page in tb (ready, relay.wasm running in
// mode) ask s's runtime for a count, reloads it while the count is under
// way, after stored returns if it is not nil, and checks that the reloaded
// page's transcript and what it is delivered after hold the whole count,
// each chunk once and in order.
func reloadMidCount(tb *tab, s *stack.Stack, mode string, stored func()) workerChunks {
	t := tb.t
	t.Helper()
	n := countLasting(4 * time.Second)
	goOn := s.Runtime().PauseAt(interruptAfter) // as startCountHeld
	t.Cleanup(goOn)
	tb.eval(fmt.Sprintf(`__w.prompt("count %d")`, n), nil)
	tb.waitFor("the count to be under way", `__w.live.length >= `+strconv.Itoa(interruptAfter))
	if stored != nil {
		stored()
	}
	goOn()
	tb.do("reloading", tb.page.reload)
	workerReady(tb, mode)
	tb.waitFor("the whole count after the reload", fmt.Sprintf(`__w.hist.length + __w.live.length >= %d && (__w.live.at(-1) ?? __w.hist.at(-1))[1] === "%d\n"`, n, n))
	w := workerState(tb)
	if len(w.Live) == 0 {
		t.Fatalf("the reload came at the wrong time: %d chunks in the transcript, none after", len(w.Hist))
	}
	checkCount(t, w, n)
	return w
}

// A page whose Content-Security-Policy forbids workers: loadRelay({worker:
// true}) falls back to the main thread, says so, and the page still chats,
// having fetched relay.wasm once.
func TestWorkerModeFallback(t *testing.T) {
	t.Parallel()
	const n = 200
	s := startStackServing(t, workerDir, 0)
	tb := openTab(t, newBrowser(t), "csp", s.PageURL()+"csp.html")
	// Firefox reports the blocked worker as an error of the page: that one
	// report is what this page is for.
	tb.page = allowing{tb.page, "worker-src"}
	workerReady(tb, "main")
	w := workerState(tb)
	if w.Reason == "" {
		t.Error("relay.reason is empty after a fall back to the main thread")
	}
	// The main thread took the compile the page had started for the worker.
	var fetches int
	tb.eval(`performance.getEntriesByType("resource").filter((e) => new URL(e.name).pathname.endsWith("/relay.wasm")).length`, &fetches)
	if fetches != 1 {
		t.Errorf("the page fetched relay.wasm %d times, want once", fetches)
	}
	tb.eval(fmt.Sprintf(`__w.prompt("count %d")`, n), nil)
	tb.waitFor("the whole count", fmt.Sprintf(`__w.live.length >= %d`, n))
	checkCount(t, workerState(tb), n)
}

// allowing is a page whose problems leave out the ones that contain allow:
// the one report a test expects of the browser itself.
type allowing struct {
	page
	allow string
}

func (p allowing) problems(ctx context.Context) []string {
	var out []string
	for _, m := range p.page.problems(ctx) {
		if !strings.Contains(m, p.allow) {
			out = append(out, m)
		}
	}
	return out
}

// att.stream() over a worker's attachment: what the SDK writes crosses to the
// worker with an id of the stream's own, and the response comes back to the
// readable with the id it was written with.
func TestWorkerModeStream(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	tb := openTab(t, newBrowser(t), "worker", s.PageURL())
	workerReady(tb, "worker")
	var got struct {
		ID     *int `json:"id"`
		Result struct {
			ProtocolVersion int `json:"protocolVersion"`
		} `json:"result"`
	}
	tb.eval(`__w.streamInitialize()`, &got)
	if got.ID == nil || *got.ID != 0 || got.Result.ProtocolVersion != 1 {
		t.Fatalf("the stream read %+v, want the initialize response with id 0", got)
	}
	var ids []string
	tb.eval(`__w.att.history().then(h => h.filter(e => e.out && e.message.method === "initialize").map(e => String(e.message.id)))`, &ids)
	if len(ids) != 2 || !strings.HasPrefix(ids[1], "rw-") {
		t.Fatalf("initialize went out with ids %q, want the page's, then the stream's own (rw-…)", ids)
	}
}

// attachmentChecks is what the page's attachment answers to the calls both
// modes must take and refuse alike (attachment.js): its resumable, then the
// outcome ("sent", "resumed" or the RelayError's code) of a send with a
// trace, a send with a trace that is not a string, one with a trace the
// envelope refuses, one with no JSON, and a resume from before the start.
const attachmentChecks = `(async () => {
	const a = __w.att;
	const outcome = (p, ok) => p.then(() => ok, (e) => e.code ?? String(e));
	const echo = (id) => ({ jsonrpc: "2.0", id, method: "_relaywasm/echo", params: {} });
	return [
		a.resumable,
		await outcome(a.sendACP(echo("t-ok"), { trace: "trace-1" }), "sent"),
		await outcome(a.sendACP(echo("t-num"), { trace: 5 }), "sent"),
		await outcome(a.sendACP(echo("t-bad"), { trace: "no spaces allowed" }), "sent"),
		await outcome(a.sendACP(undefined), "sent"),
		await outcome(a.resume(-1), "resumed"),
	];
})()`

// An attachment in worker mode takes and refuses what one on the main
// thread does, and says whether the runtime resumes (att.resumable), as
// relay.d.ts promises for both.
func TestWorkerModeAttachmentMatchesMainThread(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	answers := map[string][]any{}
	for _, mode := range []string{"main", "worker"} {
		url := s.PageURL()
		if mode == "main" {
			url += "?main"
		}
		tb := openTab(t, newBrowser(t), mode, url) // a browser each: WPE's opens no second tab
		workerReady(tb, mode)
		var att, relay []any
		tb.eval(attachmentChecks, &att)
		tb.eval(relayChecks, &relay)
		answers[mode], answers[mode+" relay"] = att, relay
	}
	m, w := answers["main"], answers["worker"]
	if fmt.Sprint(m) != fmt.Sprint(w) {
		t.Fatalf("worker mode answers %v, the main thread %v", w, m)
	}
	if len(m) != 6 || m[0] != true || m[1] != "sent" || m[2] != "bad_options" || m[3] == "sent" || m[4] != "bad_payload" || m[5] != "bad_cursor" {
		t.Fatalf("the attachment answers %v, want [true sent bad_options <refused> bad_payload bad_cursor]", m)
	}
	m, w = answers["main relay"], answers["worker relay"]
	if fmt.Sprint(m) != fmt.Sprint(w) {
		t.Fatalf("worker mode's Relay answers %v, the main thread's %v", w, m)
	}
	if want := "[bad_options bad_options bad_options bad_options stored stored none attached]"; fmt.Sprint(m) != want {
		t.Fatalf("the Relay answers %v, want %s", m, want)
	}
}

// relayChecks is what the page's Relay answers to the calls both modes
// must take and refuse alike: the outcome (the RelayError's code, or
// whether the transcript read holds entries) of relay.history with no
// options, a URL that is not ws:// or wss://, a url that is not a string,
// an options object holding a value no worker can be sent (a DOM node),
// then of the page's stream named by its URL as a URL, by its attach's
// options (functions and all), and of a stream never stored; and whether
// an attach takes its url as a URL.
const relayChecks = `(async () => {
	const r = __w.relay;
	const outcome = (p) => p.then((h) => (h.length > 0 ? "stored" : "none"), (e) => e.code ?? String(e));
	const url = new URL("/v1/attach", location.href.replace(/^http/, "ws"));
	const stream = { url, instance: "demo", name: __w.att.name };
	return [
		await outcome(r.history()),
		await outcome(r.history({ url: "https://relay.example/v1/attach", instance: "demo" })),
		await outcome(r.history({ url: 7, instance: "demo" })),
		await outcome(r.history({ ...stream, url: document.body })),
		await outcome(r.history(stream)),
		await outcome(r.history({ ...stream, url: url.href, onMessage() {}, token: async () => "t" })),
		await outcome(r.history({ ...stream, name: "never" })),
		await r.attach({ url, instance: "demo", token: "dev-token", name: "as-url", onMessage() {} }).then((a) => a.close().then(() => "attached"), (e) => e.code ?? String(e)),
	];
})()`

// Loads in worker mode that fail settle, each, and say why. Two loads made
// together whose worker cannot load relay.wasm (wasm_exec.js missing, as a
// wrong path in an app whose effect runs twice, React's StrictMode) both
// fall back to the main thread and fail there alike: the second had waited
// for good, its answer dropped with the worker the first gave up. And a
// bad option is refused before anything loads: it had been taken for a
// worker that cannot start, which ended a working worker and loaded
// relay.wasm on the main thread for nothing, and a good load made beside
// it waited for good.
func TestWorkerModeLoadsThatFailSettle(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	tb := openTab(t, newBrowser(t), "blank", s.PageURL()+"blank.html")
	// The missing file, as the engines report it: a 404, or (Firefox) a
	// module of the wrong type.
	tb.page = allowing{allowing{tb.page, "404"}, "/nope/wasm_exec.js"}
	tb.eval(`import("/relay.js").then(({ loadRelay }) => {
		const outcome = (p) => p.then((r) => "loaded in " + r.mode, (e) => e.code ?? String(e));
		window.__r = {};
		for (const k of ["a", "b"]) outcome(loadRelay({ worker: true, wasmExec: "/nope/wasm_exec.js" })).then((o) => (__r[k] = o));
	})`, nil)
	tb.waitFor("both loads to settle", `window.__r?.a !== undefined && __r.b !== undefined`)
	var both [2]string
	tb.eval(`[__r.a, __r.b]`, &both)
	if both != [2]string{"wasm_load_failed", "wasm_load_failed"} {
		t.Errorf("two loads with wasm_exec.js missing ended %q, want both wasm_load_failed", both)
	}

	tb = openTab(t, newBrowser(t), "blank", s.PageURL()+"blank.html")
	tb.eval(`import("/relay.js").then(({ loadRelay }) => {
		const outcome = (p) => p.then((r) => "loaded in " + r.mode, (e) => e.code ?? String(e));
		window.__r = {};
		outcome(loadRelay({ worker: true, commitWindowMs: -5 })).then((o) => (__r.bad = o));
		outcome(loadRelay({ worker: true })).then((o) => (__r.good = o));
	})`, nil)
	tb.waitFor("both loads to settle", `window.__r?.bad !== undefined && __r.good !== undefined`)
	var got struct{ Bad, Good, Go string }
	tb.eval(`({ bad: __r.bad, good: __r.good, go: typeof globalThis.Go })`, &got)
	if got.Bad != "bad_options" || got.Good != "loaded in worker" || got.Go != "undefined" {
		t.Errorf("a load with a bad option beside a good one: %+v, want bad_options, the good one loaded in the worker, and no Go on the page", got)
	}
}

// close() during a delivery, in both modes: no message reaches onMessage
// once close() is called, and what the handlers accepted before it counts,
// so the stream's next attach delivers neither less nor more again. The
// page attaches a stream of its own, has the dev agent count to 3,000, and
// at the 300th chunk (mid-batch in a flood) either calls close() from the
// handler ("handler") or returns a Promise that it resolves only after
// close() has resolved ("held"). The next attach of the stream must start
// right after the last message accepted: the one after the 300th chunk, or
// the 300th chunk itself, whose Promise was pending at the close. Worker
// mode counted none of the batch before (the close reached the worker
// before the page's count), and both modes delivered the rest of the batch
// after the close. In "stream", att.stream() holds a response its readable
// was never read for as the attachment closes: that message too goes to no
// one (it went to onMessage), and comes again.
func TestCloseDuringDeliveryCountsWhatWasAccepted(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	b := newBrowser(t)
	for _, mode := range []string{"main", "worker"} {
		url := s.PageURL()
		if mode == "main" {
			url += "?main"
		}
		tb := openTab(t, b, mode, url)
		workerReady(tb, mode)
		for _, how := range []string{"handler", "held", "stream"} {
			var got struct {
				After, At, First, Accepted int
				Err                        string
			}
			tb.eval(fmt.Sprintf(closeDuringDelivery, how), &got)
			if got.Err != "" {
				t.Fatalf("%s, %s: %s", mode, how, got.Err)
			}
			if got.After != 0 {
				t.Errorf("%s, %s: onMessage got %d messages after close()", mode, how, got.After)
			}
			want := got.At + 1 // closed from the handler: the message was accepted
			if how != "handler" {
				want = got.At // pending, or never read, at the close
			}
			if got.First != want {
				t.Errorf("%s, %s: the message closed at was seq %d (%d messages accepted); the next attach delivers from seq %d, want %d",
					mode, how, got.At, got.Accepted, got.First, want)
			}
		}
	}
}

// closeDuringDelivery is the page's side of the test above; %q is how the
// attachment closes mid-delivery.
const closeDuringDelivery = `(async () => {
	const how = %q;
	const r = __w.relay;
	const stream = { url: new URL("/v1/attach", location.href.replace(/^http/, "ws")), instance: "demo", token: "dev-token", name: "close-mid-" + how };
	const out = { After: 0, At: 0, First: 0, Accepted: 0, Err: "" };
	const waiting = new Map();
	let chunks = 0, closed = false, closing = null, release = null, att;
	const isChunk = (m) => m?.params?.update?.sessionUpdate === "agent_message_chunk";
	const onMessage = (m, meta) => {
		if (closed) {
			out.After++;
			return;
		}
		if (m?.id !== undefined && m.method === undefined) waiting.get(m.id)?.(m);
		if (isChunk(m) && ++chunks === 300) {
			out.At = meta.seq;
			if (how === "held") return new Promise((resolve) => (release = resolve));
			closed = true;
			closing = att.close();
		}
		out.Accepted++;
	};
	const ask = (id, method, params) =>
		new Promise((resolve) => {
			waiting.set(id, resolve);
			att.sendACP({ jsonrpc: "2.0", id, method, params });
		});
	const until = async (pred, what) => {
		for (const t0 = Date.now(); !pred(); await new Promise((r) => setTimeout(r, 10))) {
			if (Date.now() - t0 > 20000) throw new Error("timed out waiting for " + what);
		}
	};
	const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
	try {
		att = await r.attach({ ...stream, onMessage });
		await ask("c1", "initialize", { protocolVersion: 1, clientCapabilities: {} });
		if (how === "stream") {
			// The response to a request written to the stream is the stream's;
			// with no read, it is held. Its seq is the cursor's next.
			out.At = att.cursor + 1;
			const s = att.stream();
			await s.writable.getWriter().write({ jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: "/", mcpServers: [] } });
			await sleep(300); // the response arrives and is held by now
			closed = true;
			closing = att.close();
		} else {
			const s = await ask("c2", "session/new", { cwd: "/", mcpServers: [] });
			att.sendACP({ jsonrpc: "2.0", id: "c3", method: "session/prompt", params: { sessionId: s.result.sessionId, prompt: [{ type: "text", text: "count 3000" }] } });
			await until(() => closing !== null || release !== null, "the 300th chunk");
			if (how === "held") {
				closed = true;
				closing = att.close();
			}
		}
		await closing;
		release?.();
		await sleep(300); // what would come after the close comes by now
		let first = 0;
		const att2 = await r.attach({ ...stream, onMessage: (m, meta) => void (first ||= meta.seq) });
		await until(() => first > 0, "the next attach's first message");
		out.First = first;
		await att2.detach();
	} catch (e) {
		out.Err = String(e?.message ?? e);
	}
	return out;
})()`

// The demo page's ?worker setting reads as a user writes it: ?worker,
// ?worker=1 and ?worker=true ask for the worker, ?worker=0 and
// ?worker=false for the page's thread, as no ?worker does. ?worker=0 had
// run the worker: the setting was read by its presence alone.
func TestDemoPageWorkerSetting(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0)
	b := newBrowser(t)
	for _, c := range []struct {
		query string
		mode  pageMode
	}{
		{"?worker=0", mainThread},
		{"?worker=false", mainThread},
		{"?worker=1", inWorker},
	} {
		tb := openChat(t, b, c.query, s.PageURL()+c.query)
		c.mode.check(tb)
	}
}
