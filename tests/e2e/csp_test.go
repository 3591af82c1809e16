package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// A page with as strict a Content-Security-Policy as relaywasm allows
// (tests/workerpage/strict.html: its own scripts, wasm-unsafe-eval, a worker
// and connections of its own origin) chats, with relay.wasm on its thread
// and in a worker.
func TestStrictContentSecurityPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, query string }{{"main", "?main"}, {"worker", ""}} {
		t.Run(c.mode, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			cspChats(openTab(t, newBrowser(t), "strict", s.PageURL()+"strict.html"+c.query), c.mode)
		})
	}
}

// A page whose Content-Security-Policy has no wasm-unsafe-eval
// (tests/workerpage/nowasm.html) cannot compile relay.wasm on its thread:
// loadRelay says so, and what the policy must allow, which the engines' own
// words do not all say. A worker has the policy its own script was served
// with (worker.js here: none), so in worker mode the page's refused compile
// is given up and the worker compiles relay.wasm itself, and the page chats.
func TestContentSecurityPolicyWithoutWasm(t *testing.T) {
	t.Parallel()
	const cure = " (the Content-Security-Policy must allow 'wasm-unsafe-eval' in script-src; WebAssembly needs no more, not 'unsafe-eval')"
	s := startStackServing(t, workerDir, 0)
	t.Run("main", func(t *testing.T) {
		tb := openTab(t, newBrowser(t), "no wasm", s.PageURL()+"nowasm.html?main")
		// Firefox reports the refusal as an error of the page: the one
		// report this page is for.
		tb.page = allowing{tb.page, "wasm-unsafe-eval"}
		tb.waitFor("the page to fail", `window.__w && (__w.ready || __w.error)`)
		var e struct{ Code, Message string }
		tb.eval(`__w.error ?? {}`, &e)
		if e.Code != "wasm_load_failed" || !strings.HasPrefix(e.Message, "could not start relay.wasm: ") || !strings.HasSuffix(e.Message, cure) {
			t.Errorf("loadRelay failed with %s: %q; want wasm_load_failed, the engine's words, then%s", e.Code, e.Message, cure)
		}
	})
	t.Run("worker", func(t *testing.T) {
		tb := openTab(t, newBrowser(t), "no wasm", s.PageURL()+"nowasm.html")
		tb.page = allowing{tb.page, "wasm-unsafe-eval"}
		cspChats(tb, "worker")
	})
}

// A page that requires Trusted Types (require-trusted-types-for 'script')
// and allows relay.js's policy (trusted-types relaywasm) chats with
// relay.wasm on its thread and in a worker, made from worker.js's URL
// (tests/workerpage/trusted.html) or, for a worker.js of another origin,
// from a blob: URL (the page of TestPackageFromAnotherOrigin). There the
// engines take a worker's URL only as a TrustedScriptURL: worker mode had
// fallen back to the main thread in all three. A violation would be
// reported as an error of the page, which fails the test. Where the page's
// directive does not allow the policy, worker mode falls back to the main
// thread, chats there, and the reason names what the directive must allow.
func TestTrustedTypesRequired(t *testing.T) {
	t.Parallel()
	const cure = "trusted-types must allow the policy relaywasm"
	for _, c := range []struct {
		name, page, mode string
		cdn, refused     bool
	}{
		{"main", "trusted.html?main", "main", false, false},
		{"worker", "trusted.html", "worker", false, false},
		{"worker from another origin", "?trusted=relaywasm&relay=", "worker", true, false},
		{"worker with the policy not allowed", "?trusted=%27none%27&relay=", "main", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			u := s.PageURL() + c.page
			if c.cdn {
				u = startPageLoading(t, startCDN(t, s)) + c.page + url.QueryEscape("ws://"+s.Addr()+relayleg.AttachPath)
			}
			tb := openTab(t, newBrowser(t), "trusted types", u)
			if c.refused {
				// The refused policy and Worker, reported as the page's
				// errors where the engine does (Firefox).
				tb.page = allowing{tb.page, "trusted-types"}
				tb.waitFor("the page to start", `window.__w && (__w.ready || __w.error)`)
				if w := workerState(tb); !strings.Contains(w.Reason, cure) {
					t.Fatalf("loadRelay({worker: true}) fell back with the reason %q; want one saying %s", w.Reason, cure)
				}
			}
			cspChats(tb, c.mode)
		})
	}
}

// cspChats checks that the worker page is ready with relay.wasm in mode and
// that a count reaches it whole.
func cspChats(tb *tab, mode string) {
	tb.t.Helper()
	const n = 100
	workerReady(tb, mode)
	tb.eval(fmt.Sprintf(`__w.prompt("count %d")`, n), nil)
	tb.waitFor("the whole count", fmt.Sprintf(`__w.live.length >= %d`, n))
	checkCount(tb.t, workerState(tb), n)
}
