package e2e

import (
	"io"
	"log"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/tests/chromium"
	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// A page served over https: chats over wss://, as a site does, with
// relay.wasm on its thread and in a worker, and over ws:// to a relay on
// this machine in the engines that allow that mixed content (not WebKit,
// which fails it as it does every ws:// from such a page, and whose failure
// must then name that among its possible causes). Given a ws:// URL
// to another host, the attach ends with bad_options saying to use wss://,
// in every engine: Chromium's and Firefox's WebSocket refuse such a URL
// when made, and WebKit's (every iOS webview's) fails it with a bare error
// event, an unreachable relay's, and had it redialled for ever.
func TestSecurePage(t *testing.T) {
	t.Parallel()
	const elsewhere = "ws://relay.invalid/v1/attach"
	for _, c := range []struct{ mode, query string }{{"main", "?main&relay="}, {"worker", "?relay="}} {
		t.Run(c.mode, func(t *testing.T) {
			// A stack and origin each: WebKit's tests share one browser.
			s := startStackServing(t, workerDir, 0)
			origin := secureProxy(t, s)
			page := "https://" + origin + "/"
			relays := []string{"wss://" + origin + relayleg.AttachPath}
			loopback := "ws://" + s.Addr() + relayleg.AttachPath
			webkit := engine == webdriver.WebKit || engine == webdriver.WPE
			if !webkit {
				relays = append(relays, loopback)
			}
			b := newBrowser(t)
			for _, r := range relays {
				t.Logf("relay at %s", r)
				cspChats(openTab(t, b, "https", page+c.query+url.QueryEscape(r)), c.mode)
			}
			if webkit {
				// It looks like an unreachable relay; the error names it among the causes.
				tb := openTab(t, b, "https", page+c.query+url.QueryEscape(loopback))
				tb.waitFor("the first dial to fail", `window.__w && (__w.ready || __w.last)`)
				var e struct{ Code, Message string }
				tb.eval(`__w.last ?? {}`, &e)
				if e.Code != "unreachable" || !strings.Contains(e.Message, "in WebKit, ws:// from an https: page") {
					t.Fatalf("attaching to %s from a page served over https: in WebKit: %+v; want unreachable naming WebKit's refusal", loopback, e)
				}
			}
			tb := openTab(t, b, "https", page+c.query+url.QueryEscape(elsewhere))
			tb.waitFor("the attach to fail", `window.__w && (__w.ready || __w.error)`)
			var e struct{ Code, Message string }
			tb.eval(`__w.error ?? {}`, &e)
			if e.Code != "bad_options" || !strings.Contains(e.Message, elsewhere) || !strings.Contains(e.Message, "wss://") {
				t.Fatalf("attaching to %s from a page served over https: ended %+v; want bad_options naming the URL and wss://", elsewhere, e)
			}
		})
	}
}

// secureProxy serves s's pages and relay over https: and wss:, from a proxy
// of the test's own whose certificate the engines are told to accept, and
// returns its host. Only the scheme differs: the proxy asks for each page
// and upgrade as the stack's own host.
func secureProxy(t *testing.T, s *stack.Stack) string {
	t.Helper()
	p := httptest.NewUnstartedServer(stackProxy(t, s))
	p.Listener.Close()
	p.Listener = listenFresh(t, "127.0.0.1")
	p.Config.ErrorLog = log.New(io.Discard, "", 0) // an engine's probing connections
	p.StartTLS()
	t.Cleanup(p.Close)
	return p.Listener.Addr().String()
}

// stackProxy passes every request, upgrades included, to s's own server
// (its pages, the module's files and the relay), for a server of a test's
// own to serve them at another origin.
func stackProxy(t *testing.T, s *stack.Stack) *httputil.ReverseProxy {
	t.Helper()
	target, err := url.Parse(s.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
}

// The demo page served over http from an address of this machine other than
// loopback, as `go run ./demo -addr 0.0.0.0:8080` serves it to a phone on
// the same network: not a secure context, so the page has no Web Locks and
// no crypto.subtle (the relay's key is pinned, and relay.wasm checks the
// welcome itself). It chats, a reload in the middle of an answer shows the
// whole answer once, and a second tab gets a stream of its own, in both
// modes, in every engine.
func TestInsecureContext(t *testing.T) {
	t.Parallel()
	addr := chromium.MachineAddr()
	if addr == "" {
		t.Skip("this machine has no address but loopback: no insecure origin to serve the page from")
	}
	inModes(t, func(t *testing.T, m pageMode) {
		s := startFreshStack(t, stack.Config{
			Addr: net.JoinHostPort(addr, "0"), WebDir: webDir, ModuleDir: moduleDir, Logger: logger(),
			EditRuntime: func(c *devruntime.Config) { c.AgentRate = streamRate },
		})
		t.Cleanup(func() { s.Close() })
		tb := openChat(t, newBrowser(t), "tab", strings.Replace(s.PinnedPageURL(), "/#", "/"+m.query+"#", 1))
		m.check(tb)
		var lacks struct{ Secure, Locks, Subtle bool }
		tb.eval(`({secure: isSecureContext, locks: navigator.locks !== undefined, subtle: crypto.subtle !== undefined})`, &lacks)
		if lacks.Secure || lacks.Locks || lacks.Subtle {
			t.Fatalf("the page at %s is a secure context (%+v); it tests nothing", addr, lacks)
		}
		n := countLasting(4 * time.Second)
		goOn := countStored(tb, s, n)
		goOn()
		tb.reload()
		finishCount(tb, n)
		if st := tb.chat(); st.Redrawn == 0 || st.Redrawn+st.Live != n {
			t.Errorf("after the reload %d chunks redrawn + %d delivered, want some redrawn and %d in all", st.Redrawn, st.Live, n)
		}

		// A second tab gets a stream of its own (locks.js's stand-in for
		// Web Locks), and the first chats on, not superseded.
		two := openChat(t, tb.ctx, "tab 2", strings.Replace(s.PinnedPageURL(), "/#", "/"+m.query+"#", 1))
		if a, b := tb.chat().Stream, two.chat().Stream; a != "chat" || b != "chat#2" {
			t.Fatalf("the tabs attached streams %q and %q, want chat and chat#2", a, b)
		}
		two.prompt("count 2")
		two.waitFor("tab 2's count to end", lastAgentDone)
		checkConversation(t, two.name, two.transcript(), [2]string{"count 2", countText(2)})
		tb.prompt("count 3")
		tb.waitFor("tab 1's second count to end", lastAgentDone)
		for _, st := range tb.chat().States {
			if st.State == "closed" {
				t.Fatalf("tab 1's attachment ended (%s) once tab 2 attached", st.Code)
			}
		}
	})
}
