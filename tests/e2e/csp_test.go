package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/stack"
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
// (the worker page with trustedPolicy) or, for a worker.js of another
// origin, from a blob: URL (the page of TestPackageFromAnotherOrigin). There the
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
		{"main", "?main", "main", false, false},
		{"worker", "", "worker", false, false},
		{"worker from another origin", "?trusted=relaywasm&relay=", "worker", true, false},
		{"worker with the policy not allowed", "?trusted=%27none%27&relay=", "main", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			var u string
			if c.cdn {
				u = startPageLoading(t, startCDN(t, s)) + c.page + url.QueryEscape(s.AttachURL())
			} else {
				u = startHeaded(t, s, func(page bool, h http.Header) {
					if page {
						h.Set("Content-Security-Policy", trustedPolicy)
					}
				}) + c.page
			}
			tb := openTab(t, newBrowser(t), "trusted types", u)
			var enforced bool
			tb.eval(`globalThis.trustedTypes !== undefined`, &enforced)
			if !enforced {
				t.Skip("the engine has no Trusted Types (WPE 2.38, an older Safari): nothing to require")
			}
			if c.refused {
				// The refused policy and Worker, reported as the page's
				// errors where the engine does (Firefox).
				fellBackSaying(tb, "trusted-types", cure)
			}
			cspChats(tb, c.mode)
		})
	}
}

// trustedPolicy is tests/workerpage/strict.html's policy with Trusted
// Types required and relay.js's policy allowed.
const trustedPolicy = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self'; img-src 'self'; " +
	"require-trusted-types-for 'script'; trusted-types relaywasm"

// A cross-origin isolated page (Cross-Origin-Opener-Policy and
// -Embedder-Policy, as a page that uses SharedArrayBuffer has) chats with
// relay.wasm on its thread and in a worker. The engines run a worker's
// script there only if its own response carries an embedder policy too,
// and say nothing but that it did not load: worker mode fell back to the
// main thread, in all three, where the server sent the policy with the page
// alone, as servers that set it for HTML do. relay.js then makes the worker
// again from a blob: URL, which has the page's policy. Where the page's
// Content-Security-Policy refuses that too, the page falls back to its
// thread, chats there, and the reason says what each way needs.
func TestCrossOriginIsolatedPage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, query, mode string
		every             bool // the embedder policy sent with every file, not the page alone
		refused           bool // and no blob: worker
	}{
		{"main", "?main", "main", false, false},
		{"worker, the policy sent with the page alone", "", "worker", false, false},
		{"worker, the policy sent with every file", "", "worker", true, false},
		{"worker, and no blob: workers", "", "main", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			tb := openTab(t, newBrowser(t), "isolated", startIsolated(t, s, c.every, c.refused)+c.query)
			var isolated bool
			tb.eval(`crossOriginIsolated`, &isolated)
			if !isolated {
				t.Fatal("the page is not cross-origin isolated")
			}
			if c.refused {
				fellBackSaying(tb, "worker-src", "Cross-Origin-Embedder-Policy", "worker-src blob:")
			}
			cspChats(tb, c.mode)
		})
	}
}

// fellBackSaying waits for the worker page in tb to start and checks that
// loadRelay({worker: true}) fell back to the main thread with a reason
// naming each of cures. The page's errors holding refusal (the engine's
// report of what the page refused) are let through.
func fellBackSaying(tb *tab, refusal string, cures ...string) {
	tb.t.Helper()
	tb.page = allowing{tb.page, refusal}
	tb.waitFor("the page to start", `window.__w && (__w.ready || __w.error)`)
	w := workerState(tb)
	for _, cure := range cures {
		if !strings.Contains(w.Reason, cure) {
			tb.t.Fatalf("loadRelay({worker: true}) fell back with the reason %q; want one naming %s", w.Reason, strings.Join(cures, " and "))
		}
	}
}

// startIsolated is startHeaded with the worker page cross-origin isolated.
// every sends the embedder policy with every file, not the page alone;
// blobless gives the page a Content-Security-Policy allowing workers of its
// own origin only.
func startIsolated(t *testing.T, s *stack.Stack, every, blobless bool) string {
	t.Helper()
	return startHeaded(t, s, func(page bool, h http.Header) {
		if page || every {
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("Cross-Origin-Embedder-Policy", "require-corp")
		}
		if page && blobless {
			h.Set("Content-Security-Policy", "worker-src 'self'")
		}
	})
}

// startHeaded serves s's worker page, the module's files and relay from an
// origin of its own, through a proxy that lets set add headers to each
// response (page: the response is the worker page's), and returns the
// page's URL.
func startHeaded(t *testing.T, s *stack.Stack, set func(page bool, h http.Header)) string {
	t.Helper()
	p := stackProxy(t, s)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set(r.URL.Path == "/", w.Header())
		p.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = listenFresh(t, "127.0.0.1")
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/"
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
