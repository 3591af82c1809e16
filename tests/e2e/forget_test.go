package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// relay.forget(stream) on tests/workerpage's blank.html, in both modes: the
// page imports relay.js itself (forgetPage) and attaches the stream
// "forget" through a proxy the tests can take down.

// forgetLoad loads a Relay on the page in mode and names the stream.
const forgetLoad = `import("/relay.js").then(async (m) => {
	window.__relay = await m.loadRelay({ worker: %v });
	window.__stream = { url: %q, instance: "demo", name: "forget" };
	window.__outcome = (p) => p.then(() => "ok", (e) => (e instanceof m.RelayError ? e.code + ": " + e.message : "not a RelayError: " + e));
	window.__stored = () => __relay.history(__stream).then((h) => h.length);
	return __relay.mode;
})`

// forgetPage is blank.html in a browser of its own, with a Relay loaded in
// mode; load loads it again (after a reload).
type forgetPage struct {
	*tab
	mode, url string
}

func openForgetPage(t *testing.T, s *stack.Stack, p *relaytest.Proxy, mode string) *forgetPage {
	t.Helper()
	fp := &forgetPage{tab: openTab(t, newBrowser(t), mode, s.PageURL()+"blank.html"), mode: mode, url: "ws://" + p.Addr() + relayleg.AttachPath}
	fp.load()
	return fp
}

func (fp *forgetPage) load() {
	fp.t.Helper()
	var got string
	fp.eval(fmt.Sprintf(forgetLoad, fp.mode == "worker", fp.url), &got)
	if got != fp.mode {
		fp.t.Fatalf("the Relay runs in mode %q, want %q", got, fp.mode)
	}
}

func (fp *forgetPage) reload() {
	fp.t.Helper()
	fp.do("reloading", fp.page.reload)
	fp.load()
}

// attached is what an attach of the stream began with.
type attached struct {
	Session string `json:"session"`
	Cursor  int    `json:"cursor"`
}

// attach attaches the stream (window.__att), keeping a transcript.
func (fp *forgetPage) attach() attached {
	fp.t.Helper()
	var a attached
	fp.eval(`(async () => {
		window.__got = [];
		window.__att = await __relay.attach({ ...__stream, token: "dev-token", history: 100, onMessage: (m, meta) => { __got.push(meta.seq); } });
		return { session: __att.session, cursor: __att.cursor };
	})()`, &a)
	return a
}

// exchange has the agent answer, and waits until the answer moved the
// cursor and is in the transcript.
func (fp *forgetPage) exchange() {
	fp.t.Helper()
	fp.eval(`__att.sendACP({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } }).then(() => true)`, new(bool))
	fp.waitFor("the answer to be delivered", `__got.length > 0 && __att.cursor > 0`)
}

func (fp *forgetPage) stored() int {
	fp.t.Helper()
	var n int
	fp.eval(`__stored()`, &n)
	return n
}

func (fp *forgetPage) forget() string {
	fp.t.Helper()
	var out string
	fp.eval(`__outcome(__relay.forget(__stream))`, &out)
	return out
}

// checkFresh fails unless a stood for a fresh stream: not the attachment
// id before, cursor 0.
func checkFresh(t *testing.T, a, before attached) {
	t.Helper()
	if a.Session == "" || a.Session == before.Session || a.Cursor != 0 {
		t.Fatalf("after forget the attach reclaimed session %q at cursor %d (before: %q at %d); want a fresh stream", a.Session, a.Cursor, before.Session, before.Cursor)
	}
}

// converse attaches, has a message delivered, and closes: the stream is
// stored (attachment id, cursor, transcript), reclaimable.
func converse(t *testing.T, fp *forgetPage) attached {
	t.Helper()
	fp.attach()
	fp.exchange()
	var before attached
	fp.eval(`({ session: __att.session, cursor: __att.cursor })`, &before)
	fp.eval(`__att.close().then(() => true)`, new(bool))
	if n := fp.stored(); n == 0 {
		t.Fatal("nothing of the stream was stored: forgetting it tests nothing")
	}
	return before
}

// forgetModes runs test in both modes, each with a stack of its own behind
// a proxy.
func forgetModes(t *testing.T, test func(t *testing.T, fp *forgetPage, p *relaytest.Proxy)) {
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			p := relaytest.NewProxy(t, s.Addr())
			test(t, openForgetPage(t, s, p, mode), p)
		})
	}
}

// A shared device's logout: the page attached, was delivered a message,
// closed, and forgets the stream. The stream's transcript then reads [],
// and attaching it again, in the page and in a reloaded page, starts a
// fresh stream (another attachment id, cursor 0), where without forget
// the attach reclaimed the stored id and resumed from the stored cursor.
func TestForgetDeletesTheStream(t *testing.T) {
	t.Parallel()
	forgetModes(t, func(t *testing.T, fp *forgetPage, _ *relaytest.Proxy) {
		before := converse(t, fp)
		if got := fp.forget(); got != "ok" {
			t.Fatalf("forget after close: %s", got)
		}
		if n := fp.stored(); n != 0 {
			t.Fatalf("after forget relay.history holds %d entries, want none", n)
		}
		fp.reload()
		if n := fp.stored(); n != 0 {
			t.Fatalf("after forget and a reload relay.history holds %d entries, want none", n)
		}
		again := fp.attach()
		checkFresh(t, again, before)
		fp.exchange()
		fp.eval(`__att.close().then(() => true)`, new(bool))

		// An attach made while a forget is under way waits for it: it
		// takes the stream's own slot (not name#2 beside the lock forget
		// holds) and finds it forgotten.
		var both struct {
			Forget  string `json:"forget"`
			Name    string `json:"name"`
			Session string `json:"session"`
			Cursor  int    `json:"cursor"`
		}
		fp.eval(`(async () => {
			const forgot = __outcome(__relay.forget(__stream));
			const att = await __relay.attach({ ...__stream, token: "dev-token", onMessage() {} });
			const out = { forget: await forgot, name: att.name, session: att.session, cursor: att.cursor };
			await att.close();
			return out;
		})()`, &both)
		if both.Forget != "ok" || both.Name != "forget" {
			t.Fatalf("forget and attach at once: forget %q, attach got %q; want ok and forget", both.Forget, both.Name)
		}
		checkFresh(t, attached{both.Session, both.Cursor}, again)
	})
}

// forget refuses a stream an attachment holds, rather than delete it under
// that attachment: the page's own (bad_options, naming it) and another
// tab's; nothing is deleted, the page's attachment goes on, and once it is
// closed the forget works.
func TestForgetWhileAttachedRefuses(t *testing.T) {
	t.Parallel()
	forgetModes(t, func(t *testing.T, fp *forgetPage, _ *relaytest.Proxy) {
		var bad []string
		fp.eval(`Promise.all([__outcome(__relay.forget(null)), __outcome(__relay.forget({ url: "https://relay.example/v1/attach", instance: "demo" }))])`, &bad)
		if want := []string{"bad_options: forget needs an options object", `bad_options: url must be an absolute ws:// or wss:// URL, not "https://relay.example/v1/attach"`}; fmt.Sprint(bad) != fmt.Sprint(want) {
			t.Fatalf("forget of no stream: %q, want %q", bad, want)
		}
		fp.attach()
		fp.exchange()
		got := fp.forget()
		if want := `bad_options: forget: an attachment of this page holds the stream "forget": close() or detach() it first`; got != want {
			t.Fatalf("forget while attached: %q, want %q", got, want)
		}
		var state string
		fp.eval(`__att.state`, &state)
		if state != "open" {
			t.Fatalf("after the refused forget the attachment is %q, want open", state)
		}
		if n := fp.stored(); n == 0 {
			t.Fatal("the refused forget deleted the transcript")
		}
		fp.eval(`__att.close().then(() => true)`, new(bool))

		// Another tab of the browser holds the stream now.
		other := &forgetPage{tab: openTab(t, fp.ctx, "other tab", fp.pageURL()), mode: fp.mode, url: fp.url}
		other.load()
		if a := other.attach(); a.Session == "" {
			t.Fatal("the other tab attached no stream")
		}
		var name string
		other.eval(`__att.name`, &name)
		if name != "forget" {
			t.Fatalf("the other tab attached %q, want forget (this tab closed it)", name)
		}
		got = fp.forget()
		if !strings.HasPrefix(got, "bad_options: forget: an attachment in another tab holds the stream") {
			t.Fatalf("forget while another tab is attached: %q, want bad_options saying another tab holds it", got)
		}
		if n := fp.stored(); n == 0 {
			t.Fatal("the refused forget deleted the transcript")
		}
		other.eval(`__att.close().then(() => true)`, new(bool))
		if got := fp.forget(); got != "ok" {
			t.Fatalf("forget once the other tab closed: %s", got)
		}
		if n := fp.stored(); n != 0 {
			t.Fatalf("after forget relay.history holds %d entries, want none", n)
		}
	})
}

// pageURL is the URL the tab shows.
func (fp *forgetPage) pageURL() string {
	fp.t.Helper()
	var u string
	fp.eval(`location.href`, &u)
	return u
}

// With no relay to reach, a page reloaded then forgets the stream: no
// socket is needed. Once the relay is back, the attach starts a fresh
// stream.
func TestForgetWithTheRelayDown(t *testing.T) {
	t.Parallel()
	forgetModes(t, func(t *testing.T, fp *forgetPage, p *relaytest.Proxy) {
		before := converse(t, fp)
		p.Down()
		fp.reload()
		if n := fp.stored(); n == 0 {
			t.Fatal("the reloaded page found nothing stored")
		}
		if got := fp.forget(); got != "ok" {
			t.Fatalf("forget with the relay down: %s", got)
		}
		if n := fp.stored(); n != 0 {
			t.Fatalf("after forget relay.history holds %d entries, want none", n)
		}
		p.Up()
		checkFresh(t, fp.attach(), before)
		fp.eval(`__att.close().then(() => true)`, new(bool))
	})
}
