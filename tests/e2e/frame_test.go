package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// otherSite is an address of this machine that is another site than
// 127.0.0.1's: for an IP address the site is the address itself. The run's
// Chromium resolves it (tests/chromium).
const otherSite = "127.0.0.2"

// A chat embedded in another site's page, in a frame, as a chat widget is:
// the engines partition such a frame's IndexedDB, Web Locks and
// sessionStorage under the site holding it (each in its own way), and the
// chat must still work as on a page of its own. A reload of the site's page
// in the middle of a count loses and doubles nothing, with relay.wasm on the
// frame's thread and in its worker.
func TestEmbeddedInAnotherSite(t *testing.T) {
	t.Parallel()
	inModes(t, func(t *testing.T, m pageMode) {
		// A stack and sites each: WebKit's tests share one browser.
		s := startStackServing(t, workerDir, streamRate)
		tb := openTab(t, newBrowser(t), "site", startSiteFraming(t, s.PageURL()+"frame.html"+frameQuery(s, m), ""))
		workerReady(tb, m.name)
		if w := reloadMidCount(tb, s, m.name, nil); len(w.Hist) == 0 {
			t.Errorf("after the reload the frame's transcript holds no chunk of the count: its stored stream was not found")
		}
	})
}

// A chat in a sandboxed frame (sandbox="allow-scripts", without
// allow-same-origin), as some sites embed what they do not trust: the frame
// has no origin of its own (its Origin is "null"), so no IndexedDB,
// sessionStorage or Web Locks, and its module scripts load by CORS. The
// engines refuse it Web Locks with a SecurityError, and every attach had
// failed with it, in every engine; it now chats with its state in memory,
// on the frame's thread and in its worker (made from a blob: URL, as for a
// CDN: no script URL is of an opaque origin). The relay must accept the
// Origin null.
func TestInASandboxedFrame(t *testing.T) {
	t.Parallel()
	inModes(t, func(t *testing.T, m pageMode) {
		s := startStackOf(t, workerDir, 0, func(c *relay.Config) { c.OriginPatterns = append(c.OriginPatterns, relay.NullOrigin) }, logger())
		tb := openTab(t, newBrowser(t), "site", startSiteFraming(t, startCDN(t, s)+"/frame.html"+frameQuery(s, m), `sandbox="allow-scripts"`))
		tb.waitFor("the frame to start", `window.__w && (__w.ready || __w.error)`)
		var origin string
		tb.eval(`__w.origin`, &origin)
		if origin != relay.NullOrigin {
			t.Fatalf("the sandboxed frame's origin is %q, want %q", origin, relay.NullOrigin)
		}
		cspChats(tb, m.name)
	})
}

// frameQuery is frame.html's query for a frame on another origin than s's
// relay, with relay.wasm running in mode m: the relay's URL, and ?main for
// the frame's thread.
func frameQuery(s *stack.Stack, m pageMode) string {
	q := "?relay=" + url.QueryEscape(s.AttachURL())
	if m == mainThread {
		q += "&main"
	}
	return q
}

// startSiteFraming serves, at otherSite, a page holding frame in a frame
// (with attrs, the frame's further attributes), and returns its URL. Its
// window.__w mirrors the frame's (frame.js posts it); its __w.prompt posts
// the prompt to the frame.
func startSiteFraming(t *testing.T, frame, attrs string) string {
	t.Helper()
	ln := listenFresh(t, otherSite) // another site on this machine
	page := fmt.Appendf(nil, `<!doctype html><html lang="en"><title>another site</title>
<iframe id="chat" title="chat" src="%s" %s width="600" height="400"></iframe>
<script>
window.__w = { prompt: (text) => chat.contentWindow.postMessage({ prompt: text }, "*") };
addEventListener("message", (ev) => ev.source === chat.contentWindow && Object.assign(__w, ev.data));
</script></html>`, frame, attrs)
	servePageOn(t, ln, func(*http.Request, http.Header) []byte { return page })
	return "http://" + ln.Addr().String() + "/"
}
