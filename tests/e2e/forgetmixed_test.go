package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A page may hold two Relays, one in worker mode and one on the main
// thread (two loadRelay calls): each runs a relay.wasm of its own, and
// neither sees the other's attachments. forget of a stream the other one
// holds is refused with bad_options as before, and its message names the
// holder as it is, another Relay of this page, in both directions. Before,
// it said another tab held the stream, which sent an app looking for a tab
// that was not there.
func TestForgetNamesTheOtherRelayOfThePage(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	tb := openTab(t, newBrowser(t), "two relays", s.PageURL()+"blank.html")
	loadTwoRelays(tb)
	want := forgetHeldByTheOtherRelay
	for _, c := range []struct{ holder, forgetter string }{{"worker", "main"}, {"main", "worker"}} {
		var got struct {
			Name, Forget, After string
		}
		tb.eval(`(async () => {
			const att = await __r.`+c.holder+`.attach({ ...__stream, token: "dev-token", onMessage() {} });
			const forget = await __outcome(__r.`+c.forgetter+`.forget(__stream));
			await att.close();
			return { name: att.name, forget, after: await __outcome(__r.`+c.forgetter+`.forget(__stream)) };
		})()`, &got)
		if got.Name != "mixed" {
			t.Fatalf("the %s Relay attached %q, want mixed", c.holder, got.Name)
		}
		if got.Forget != want {
			t.Errorf("the %s Relay's forget of the stream the %s Relay holds: %q, want %q", c.forgetter, c.holder, got.Forget, want)
		}
		if got.After != "ok" {
			t.Errorf("the %s Relay's forget once the %s Relay closed: %q, want ok", c.forgetter, c.holder, got.After)
		}
	}
}

// forgetHeldByTheOtherRelay is forget's outcome, as __outcome says it, for
// the stream "mixed" held by the page's other Relay.
const forgetHeldByTheOtherRelay = `bad_options: forget: an attachment of another Relay of this page holds the stream "mixed": close() or detach() it first`

// loadTwoRelays loads relay.js into tb's page and two Relays from it,
// __r.worker in worker mode and __r.main on the main thread; __stream is
// the stream "mixed" of the stack's relay, and __outcome(p) says how
// Promise p settled: "ok", or the RelayError's code and message.
func loadTwoRelays(tb *tab) {
	tb.t.Helper()
	var modes []string
	tb.eval(`import("/relay.js").then(async (m) => {
		window.__r = { worker: await m.loadRelay({ worker: true }), main: await m.loadRelay({ worker: false }) };
		window.__stream = { url: "ws://" + location.host + "/v1/attach", instance: "demo", name: "mixed" };
		window.__outcome = (p) => p.then(() => "ok", (e) => (e instanceof m.RelayError ? e.code + ": " + e.message : "not a RelayError: " + e));
		return [__r.worker.mode, __r.main.mode];
	})`, &modes)
	if fmt.Sprint(modes) != "[worker main]" {
		tb.t.Fatalf("the Relays run in modes %v, want [worker main]", modes)
	}
}

// On a page that loads preload.js, reloaded while its worker-mode Relay
// held a stream, the main-thread Relay's forget of that stream still names
// the holder as another Relay of this page. The reloaded page's worker gets
// its slot's lock from the request preload.js made as the page loaded
// (tabs.js lockRemembered, takeEarly), and preload.js ships a copy of
// tabs.js of its own: the lock was counted as the page's in preload.js's
// copy, and relay.js's, which forget asks, did not know it, so the refusal
// said another tab held the stream. The count is now one per page
// (globalThis), as the early requests are.
func TestForgetNamesTheOtherRelayAfterAReloadWithPreload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	page := `<!doctype html><meta charset="utf-8"><title>two relays, preloaded</title><script type="module" src="/preload.js"></script>`
	if err := os.WriteFile(filepath.Join(dir, "preloaded.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStackServing(t, dir, 0)
	tb := openTab(t, newBrowser(t), "two relays", s.PageURL()+"preloaded.html")
	attach := `__r.worker.attach({ ...__stream, token: "dev-token", onMessage() {} }).then((a) => a.name)`
	for _, load := range []string{"first load", "reloaded"} {
		if load == "reloaded" {
			tb.do("reloading", tb.page.reload)
		}
		loadTwoRelays(tb)
		var name string
		tb.eval(attach, &name)
		if name != "mixed" {
			t.Fatalf("%s: the worker-mode Relay attached %q, want mixed", load, name)
		}
	}
	var got string
	tb.eval(`__outcome(__r.main.forget(__stream))`, &got)
	if got != forgetHeldByTheOtherRelay {
		t.Errorf("after the reload, the main-thread Relay's forget of the stream the worker-mode Relay holds: %q, want %q", got, forgetHeldByTheOtherRelay)
	}
}
