package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/stack"
)

// relaywasm served from another origin than the page's, as a CDN serves it
// (relay.js, or a bundle holding it, with the files beside it): the page
// chats with relay.wasm on its thread and in a worker, in every engine.
// The engines run a worker's script only from the page's own origin, so
// worker mode had fallen back to the main thread there (Chromium and WebKit
// refusing the Worker, Firefox failing it and relay.js then blaming a
// missing worker.js); the worker is now made from a blob: URL that loads
// worker.js. A page whose policy allows no blob: worker falls back to the
// main thread, chats there, and its reason names worker.js's URL and what
// the policy must allow.
func TestPackageFromAnotherOrigin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, query, mode string
		refused           bool // the page's policy refuses the blob: worker
	}{
		{"main", "?main&relay=", "main", false},
		{"worker", "?relay=", "worker", false},
		{"worker refused by the policy", "?policy&relay=", "main", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A stack and origins each: WebKit's tests share one browser,
			// and the stream a page stores is its origin's.
			s := startStackServing(t, workerDir, 0)
			cdn := startCDN(t, s)
			page := startPageLoading(t, cdn)
			tb := openTab(t, newBrowser(t), "another origin", page+c.query+url.QueryEscape(s.AttachURL()))
			if c.refused {
				// Firefox reports the refusal as an error of the page: the
				// one report this page is for.
				tb.page = allowing{tb.page, "worker-src"}
				tb.waitFor("the page to start", `window.__w && (__w.ready || __w.error)`)
				w := workerState(tb)
				if want := cdn + "/worker.js"; !strings.Contains(w.Reason, want) || !strings.Contains(w.Reason, "worker-src blob:") {
					t.Fatalf("loadRelay({worker: true}) fell back with the reason %q; want one naming %s and worker-src blob:", w.Reason, want)
				}
			}
			cspChats(tb, c.mode)
		})
	}
}

// Vite's build of demo/app with its assets on another origin (vite build
// --base naming it, as for a CDN): relay.wasm runs in the worker Vite
// emitted, whose URL Vite wrote into relay.js's new Worker(new URL(…)).
func TestDemoAppFromAnotherOrigin(t *testing.T) {
	t.Parallel()
	appInstalled(t)
	ln := listenLoopback(t)
	cdn := "http://" + ln.Addr().String()
	out := t.TempDir()
	if err := viteBuild(out, "--base", cdn+"/"); err != nil {
		t.Fatal(err)
	}
	serveCDN(t, ln, http.FileServer(http.Dir(out)))
	html, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := servePage(t, func(*http.Request, http.Header) []byte { return html })
	s := startStack(t, 0)
	tb := openTab(t, newBrowser(t), "app", page+"#worker=1&relay="+url.QueryEscape(s.AttachURL()))
	appReady(tb)
	appCount(tb, "worker", `/relay-[^/]*\.wasm$`)
}

// startCDN serves what s serves (the worker page's files and relay.js
// with the files beside it) from an origin of its own, as a CDN does, and
// returns its URL.
func startCDN(t *testing.T, s *stack.Stack) string {
	t.Helper()
	ln := listenLoopback(t)
	serveCDN(t, ln, stackProxy(t, s))
	return "http://" + ln.Addr().String()
}

// serveCDN serves h on ln allowing every origin by CORS, as a CDN does.
func serveCDN(t *testing.T, ln net.Listener, h http.Handler) {
	t.Helper()
	s := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		h.ServeHTTP(w, r)
	})}}
	s.Start()
	t.Cleanup(s.Close)
}

// listenLoopback is a listener on 127.0.0.1 at a port no server of the run
// had (listenFresh): an origin of its own once served.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	return listenFresh(t, "127.0.0.1")
}

// startPageLoading serves, at its own origin, a page whose scripts are
// preload.js and page.js from cdn, and returns its URL. With ?policy the
// page has a Content-Security-Policy that allows scripts and workers from
// cdn only; with ?trusted=names one that requires Trusted Types and allows
// the policies named.
func startPageLoading(t *testing.T, cdn string) string {
	t.Helper()
	return servePage(t, func(r *http.Request, h http.Header) []byte {
		q := r.URL.Query()
		if q.Has("policy") {
			h.Set("Content-Security-Policy", fmt.Sprintf("script-src %[1]s 'wasm-unsafe-eval'; worker-src %[1]s", cdn))
		}
		if q.Has("trusted") {
			h.Set("Content-Security-Policy", "require-trusted-types-for 'script'; trusted-types "+q.Get("trusted"))
		}
		return fmt.Appendf(nil, `<!doctype html><html lang="en"><title>relaywasm from another origin</title>`+
			`<script type="module" src="%[1]s/preload.js"></script><script type="module" src="%[1]s/page.js"></script></html>`, cdn)
	})
}

// servePage serves the HTML page html returns at every path of an origin
// of its own, and returns its URL; html may set headers.
func servePage(t *testing.T, html func(r *http.Request, h http.Header) []byte) string {
	t.Helper()
	ln := listenLoopback(t)
	servePageOn(t, ln, html)
	return "http://" + ln.Addr().String() + "/"
}

// servePageOn is servePage on ln.
func servePageOn(t *testing.T, ln net.Listener, html func(r *http.Request, h http.Header) []byte) {
	t.Helper()
	p := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(html(r, w.Header()))
	})}}
	p.Start()
	t.Cleanup(p.Close)
}
