package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/stack"
)

// The options of loadRelay and attach as applications give them, in both
// modes, on tests/workerpage's blank.html: relay.js is imported into it and
// loadRelay called by the test itself (window.__relay, window.__relayjs).

// loadedIn opens blank.html in a browser of its own (WPE opens no second
// tab) and loads a Relay there in mode: "main", or "worker".
func loadedIn(t *testing.T, s *stack.Stack, mode string) *tab {
	t.Helper()
	tb := openTab(t, newBrowser(t), mode, s.PageURL()+"blank.html")
	var got string
	tb.eval(`import("/relay.js").then(async (m) => {
		window.__relayjs = m;
		window.__relay = await m.loadRelay({ worker: `+fmt.Sprint(mode == "worker")+` });
		window.__stream = { url: new URL("/v1/attach", location.href.replace(/^http/, "ws")), instance: "demo", token: "dev-token" };
		return __relay.mode + (__relay.reason ? ": " + __relay.reason : "");
	})`, &got)
	if got != mode {
		t.Fatalf("the Relay runs in mode %q, want %q", got, mode)
	}
	return tb
}

// inBothModes runs test on a page loaded in each mode, as subtests.
func inBothModes(t *testing.T, test func(*testing.T, *tab)) {
	s := startStackServing(t, workerDir, 0)
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) { test(t, loadedIn(t, s, mode)) })
	}
}

// Attach options as a framework holds them attach in worker mode as on the
// main thread: wrapped in Proxies, nested ones too (Vue's reactive(), MobX),
// with a function inside backoff, and keys attach does not know holding a
// function or a DOM node. Worker mode posted the options as given, and the
// structured clone refused each of them (bad_options "could not be cloned")
// where the main thread attached.
func TestAttachOptionsAsFrameworksHoldThem(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, tb *tab) {
		var got []string
		tb.eval(`(async () => {
			const outcome = (o) => __relay.attach(o).then((a) => a.close().then(() => "attached"), (e) => (e.code ?? "") + " " + e.message);
			const reactive = (o) => new Proxy(o, { get: (t, k, r) => { const v = Reflect.get(t, k, r); return v !== null && typeof v === "object" && !(v instanceof URL) && !(v instanceof Node) ? reactive(v) : v; } });
			const base = { ...__stream, onMessage() {} };
			return [
				await outcome(reactive({ ...base, name: "proxy", backoff: { initialMs: 100, maxMs: 1000 }, heartbeat: { intervalMs: 5000 } })),
				await outcome({ ...base, name: "jitter", backoff: { initialMs: 100, jitter() {} } }),
				await outcome({ ...base, name: "extra", hook() {}, mountedOn: document.body }),
				await outcome(reactive({ ...base, name: "all", backoff: { initialMs: 100, jitter() {} }, hook() {}, mountedOn: document.body })),
			];
		})()`, &got)
		want := []string{"attached", "attached", "attached", "attached"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("attach with a Proxy, a function in backoff, extra keys, all three: %q, want %q", got, want)
		}
	})
}

// Wrong arguments reject with a RelayError bad_options whose message names
// the argument, in both modes, as relay.d.ts promises of every rejection:
// sendACP's options null, a signal that is not an AbortSignal (attach's and
// sendACP's), and loadRelay's options null each rejected with a TypeError
// of the engine's.
func TestWrongArgumentsRejectWithRelayError(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, tb *tab) {
		var got []string
		tb.eval(`(async () => {
			const { RelayError, loadRelay } = __relayjs;
			const outcome = (f) => Promise.resolve().then(f).then(() => "ok", (e) => (e instanceof RelayError ? e.code + ": " + e.message : "not a RelayError: " + e));
			const att = await __relay.attach({ ...__stream, name: "wrong-args", onMessage() {} });
			const ping = { jsonrpc: "2.0", method: "ping" };
			try {
				return [
					await outcome(() => att.sendACP(ping, null)),
					await outcome(() => att.sendACP(ping, { signal: "x" })),
					await outcome(() => __relay.attach({ ...__stream, name: "wrong-signal", onMessage() {}, signal: "x" })),
					await outcome(() => loadRelay(null)),
					await outcome(() => att.sendACP(ping, { signal: new AbortController().signal })),
				];
			} finally {
				await att.close();
			}
		})()`, &got)
		want := []string{
			"bad_options: sendACP's options must be an object, not null",
			"bad_options: signal must be an AbortSignal, not a string",
			"bad_options: signal must be an AbortSignal, not a string",
			"bad_options: loadRelay's options must be an object, not null",
			"ok",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("wrong arguments:\n got %q\nwant %q", got, want)
		}
	})
}

// An onState or onEvicted that is not a function rejects attach with
// bad_options, as onMessage does, in both modes; null is none. They were
// taken, and every state change then logged a TypeError of the engine's.
func TestAttachRefusesHandlersThatAreNotFunctions(t *testing.T) {
	t.Parallel()
	inBothModes(t, func(t *testing.T, tb *tab) {
		var got []string
		tb.eval(`(async () => {
			const outcome = (o) => __relay.attach({ ...__stream, onMessage() {}, ...o }).then((a) => a.close().then(() => "attached"), (e) => e.code + ": " + e.message);
			return [
				await outcome({ name: "state-string", onState: "x" }),
				await outcome({ name: "evicted-number", onEvicted: 5 }),
				await outcome({ name: "nulls", onState: null, onEvicted: null }),
			];
		})()`, &got)
		want := []string{
			"bad_options: onState must be a function, not a string",
			"bad_options: onEvicted must be a function, not a number",
			"attached",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("handlers that are not functions:\n got %q\nwant %q", got, want)
		}
	})
}

// loadRelay called again with the same database, storage, commitWindowMs
// and worker options, as a component that loads on every mount does, gives
// the same Relay and costs nothing: each call had made a new Store in
// relay.wasm, with a goroutine and an IndexedDB connection for the life of
// the page. The page counts indexedDB.open calls (relay.js opens its
// databases on the page in both modes). Other options make a Relay of
// their own. A wasm other than the one the page loaded is refused
// (bad_options); the same one, by another spelling of its URL, or none at
// all, is taken.
func TestLoadRelayAgainGivesTheSameRelay(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			tb := openTab(t, newBrowser(t), mode, s.PageURL()+"blank.html")
			var got struct {
				Mode                       string
				Same, Together, OtherDB    bool
				Opens, OpensAfter          int
				OtherWasm, SameWasm, NoneW string
			}
			tb.eval(`(async () => {
				let opens = 0;
				const open = indexedDB.open.bind(indexedDB);
				indexedDB.open = (...a) => (opens++, open(...a));
				const { loadRelay } = await import("/relay.js");
				const o = { worker: `+fmt.Sprint(mode == "worker")+`, database: "loadopts-same" };
				const first = await loadRelay(o);
				await first.history({ url: "ws://127.0.0.1:1/v1/attach", instance: "demo" }); // the store has opened
				const after = opens;
				const again = [];
				for (let i = 0; i < 20; i++) again.push(await loadRelay({ ...o }));
				const together = await Promise.all([loadRelay({ ...o }), loadRelay({ ...o })]);
				const other = await loadRelay({ ...o, database: "loadopts-other" });
				await other.history({ url: "ws://127.0.0.1:1/v1/attach", instance: "demo" });
				const outcome = (p) => p.then((r) => (r === first ? "the same Relay" : "another Relay"), (e) => e.code + ": " + e.message);
				return {
					mode: first.mode,
					same: again.every((r) => r === first),
					together: together.every((r) => r === first),
					otherDB: other !== first,
					opens: after,
					opensAfter: opens - after - 1,
					otherWasm: await outcome(loadRelay({ ...o, wasm: "/nope/relay.wasm" })),
					sameWasm: await outcome(loadRelay({ ...o, wasm: "/relay.wasm" })),
					noneW: await outcome(loadRelay({ ...o })),
				};
			})()`, &got)
			if got.Mode != mode {
				t.Fatalf("the Relay runs in mode %q, want %q", got.Mode, mode)
			}
			if !got.Same || !got.Together || !got.OtherDB {
				t.Errorf("20 loads after the first gave the same Relay: %v; two at once: %v; another database another Relay: %v; want all true", got.Same, got.Together, got.OtherDB)
			}
			if got.Opens < 1 || got.OpensAfter != 0 {
				t.Errorf("indexedDB.open was called %d times by the first load, and %d times more by 22 loads with the same options (beside one for another database), want at least 1, then 0", got.Opens, got.OpensAfter)
			}
			if !strings.HasPrefix(got.OtherWasm, "bad_options: ") || got.SameWasm != "the same Relay" || got.NoneW != "the same Relay" {
				t.Errorf("a load naming another wasm: %q, want bad_options; the same wasm: %q; none: %q, want the same Relay", got.OtherWasm, got.SameWasm, got.NoneW)
			}
		})
	}
}

// stallingWasm serves relay.wasm from another loopback origin (by CORS, so
// the worker may fetch it too), answering each request only once release
// is closed; asked receives a value per request as it arrives.
func stallingWasm(t *testing.T) (url string, asked <-chan struct{}, release func()) {
	t.Helper()
	arrived := make(chan struct{}, 16)
	gate := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, filepath.Join(moduleDir, "relay.wasm"))
	}))
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() {
		open()
		srv.Close()
	})
	return srv.URL + "/relay.wasm", arrived, open
}

// A load whose relay.wasm does not come (its server accepted the request
// and never answers) ends when loadRelay's signal aborts: it rejects with
// canceled, in both modes. It had waited for good, with no way to end it.
// A load tried again later gets the Relay once the server answers; a
// signal aborted already rejects at once, and one that is not an
// AbortSignal with bad_options.
func TestLoadRelayEndsWhenItsSignalAborts(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			wasm, asked, release := stallingWasm(t)
			tb := openTab(t, newBrowser(t), mode, s.PageURL()+"blank.html")
			tb.eval(`import("/relay.js").then(({ loadRelay }) => {
				const outcome = (p) => p.then((r) => "loaded in " + r.mode, (e) => e.code + ": " + e.message);
				window.__load = (o) => loadRelay({ worker: `+fmt.Sprint(mode == "worker")+`, wasm: `+strconv.Quote(wasm)+`, ...o });
				window.__ctl = new AbortController();
				window.__r = {};
				outcome(__load({ signal: __ctl.signal })).then((o) => (__r.stalled = o));
			})`, nil)
			select {
			case <-asked:
			case <-time.After(waitLimit):
				t.Fatal("relay.wasm was never asked for")
			}
			tb.eval(`__ctl.abort()`, nil)
			tb.waitFor("the stalled load to settle", `__r.stalled !== undefined`)
			tb.eval(`(() => {
				const outcome = (p) => p.then((r) => "loaded in " + r.mode, (e) => e.code + ": " + e.message);
				outcome(__load({ signal: AbortSignal.abort() })).then((o) => (__r.aborted = o));
				outcome(__load({ signal: "x" })).then((o) => (__r.notASignal = o));
				outcome(__load({})).then((o) => (__r.again = o));
			})()`, nil)
			tb.waitFor("the loads with a wrong signal to settle", `__r.aborted !== undefined && __r.notASignal !== undefined`)
			release()
			tb.waitFor("the load tried again to settle", `__r.again !== undefined`)
			var got struct{ Stalled, Aborted, NotASignal, Again string }
			tb.eval(`__r`, &got)
			want := struct{ Stalled, Aborted, NotASignal, Again string }{
				"canceled: the operation was aborted",
				"canceled: the operation was aborted",
				"bad_options: signal must be an AbortSignal, not a string",
				"loaded in " + mode,
			}
			if got != want {
				t.Fatalf("loads:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
