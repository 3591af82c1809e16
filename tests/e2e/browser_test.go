package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/relaywasm/relaywasm/tests/chromium"
	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// waitLimit bounds every wait for the page, so a broken page fails the test
// instead of hanging it. It is never an assertion about speed.
const waitLimit = 60 * time.Second

// pollEvery is how often a wait re-reads the page.
const pollEvery = 20 * time.Millisecond

// newBrowser gives the test a browser of its own (engine_test.go's engine),
// which goes when the test ends: in Chromium and Firefox an isolated context
// of the run's one browser (sharedChromium, sharedBrowser), to the page a
// fresh profile, in WebKit a process of its own. Tests run side by side
// (t.Parallel), so every tab has a window of its own and stays visible. The
// context is the parent of the browser's tabs (openTab).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	engineRecorded()
	if engine != webdriver.Chromium {
		return startEngine(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), browserStartLimit)
	defer cancel()
	b, closeContext, err := sharedChromium(t).Isolated(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeContext)
	return b
}

// chromiumShared is the run's one Chromium; each test gets a browser
// context of it (Isolated). Its XDG folders and TMPDIR are the run's
// temporary folder (TestMain's), never under the home folder.
var chromiumShared runBrowser[*chromium.Browser]

func sharedChromium(t *testing.T) *chromium.Browser {
	t.Helper()
	return chromiumShared.get(t, func(profile string) (*chromium.Browser, func(), error) {
		b, err := chromium.Start(chromium.Options{
			Profile: profile, Scratch: os.TempDir(), Width: windowWidth, Height: windowHeight,
			Extra: []chromedp.ExecAllocatorOption{
				chromedp.Flag("hide-scrollbars", true),
				// TestSecurePage's https: server has a certificate of its
				// own, as the WebDriver engines' sessions accept
				// (acceptInsecureCerts).
				chromedp.Flag("ignore-certificate-errors", true),
			},
		})
		if err != nil {
			return nil, nil, err
		}
		return b, b.Close, nil
	})
}

// tab is one browser tab showing the chat page.
type tab struct {
	t    *testing.T
	name string
	// ctx is the parent of another tab of the same browser (openTab), and
	// in Chromium the tab's chromedp context.
	ctx  context.Context
	page page
	tab  *chromium.Tab // Chromium only; nil in the other engines
}

// openTab opens the page in a new tab of parent's browser (parent is a
// browser or another tab). The test fails if the page throws, rejects a
// Promise unhandled, or logs an error.
func openTab(t *testing.T, parent context.Context, name, url string) *tab {
	t.Helper()
	if engine != webdriver.Chromium {
		p, err := openEngineTab(t, parent, url)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tb := &tab{t: t, name: name, ctx: parent, page: p}
		t.Cleanup(tb.checkHealthy)
		return tb
	}
	// Network tracking off: the tests read no network events, and with it
	// on every WebSocket frame would be a DevTools event to send and decode.
	ct, err := chromium.OpenWindow(parent, url, chromium.DisableNetworkTracking())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(ct.Close)
	tb := &tab{t: t, name: name, ctx: ct.Context(), page: &cdpPage{tab: ct}, tab: ct}
	t.Cleanup(tb.checkHealthy)
	return tb
}

// openChat opens the page in a new tab and waits until it is ready to chat.
func openChat(t *testing.T, parent context.Context, name, url string) *tab {
	t.Helper()
	tb := openTab(t, parent, name, url)
	tb.waitReady()
	return tb
}

// checkHealthy fails the test if the page threw or logged an error.
func (tb *tab) checkHealthy() {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for _, p := range tb.page.problems(ctx) {
		tb.t.Errorf("%s: the page reported %s (in %s)", tb.name, p, engine)
	}
}

// run runs chromedp actions on the tab under waitLimit. Only Chromium
// speaks them: in another engine the test is skipped, saying so.
func (tb *tab) run(actions ...chromedp.Action) {
	tb.t.Helper()
	skipUnless(tb.t, "Chrome DevTools actions (chromedp)")
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", tb.name, err)
	}
}

// do runs one engine-neutral step under waitLimit.
func (tb *tab) do(what string, step func(ctx context.Context) error) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := step(ctx); err != nil {
		tb.t.Fatalf("%s: %s in %s: %v", tb.name, what, engine, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a Promise) into out.
func (tb *tab) eval(expr string, out any) {
	tb.t.Helper()
	tb.do("evaluating "+clip(expr), func(ctx context.Context) error { return tb.page.eval(ctx, expr, out) })
}

// viewport sets the tab's viewport in CSS pixels, a phone's when phone.
func (tb *tab) viewport(width, height int, phone bool) {
	tb.t.Helper()
	tb.do("setting the viewport", func(ctx context.Context) error { return tb.page.viewport(ctx, width, height, phone) })
}

// click clicks the element sel.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.do("clicking "+sel, func(ctx context.Context) error { return tb.page.click(ctx, sel) })
}

func evaluate(expr string, out any) chromedp.Action {
	return chromedp.Evaluate(expr, out, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})
}

// waitFor polls a boolean JavaScript expression until it holds. On the
// deadline it fails the test with the page's state, for diagnosis. A name
// the page has not defined yet (a ReferenceError) is "not yet": the load
// event may come before the page's module has set window.__chat (it does
// in WebKit).
func (tb *tab) waitFor(what, expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		var ok bool
		tb.eval(`(() => { try { return Boolean(`+expr+"\n"+`) } catch (e) { if (e instanceof ReferenceError) return false; throw e } })()`, &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: still waiting for %s; page state: %s", tb.name, what, tb.snapshot())
		}
		time.Sleep(pollEvery)
	}
}

// waitReady waits until the page has redrawn its transcript and has an ACP
// session open.
func (tb *tab) waitReady() {
	tb.t.Helper()
	tb.waitFor("the chat to be ready", "window.__chat && __chat.ready")
}

// snapshot is the state the page under test keeps for its tests
// (window.__chat, __app or __w; their Attachment left out), with the page's
// address and readiness, as JSON, for failure messages.
func (tb *tab) snapshot() string {
	var s string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const expr = `JSON.stringify({url: location.href, readyState: document.readyState,
		state: window.__chat ?? window.__app ?? window.__w ?? null}, (k, v) => (k === "att" ? undefined : v))`
	if err := tb.page.eval(ctx, expr, &s); err != nil {
		return "unavailable: " + err.Error()
	}
	return s
}

// prompt types text into the composer and presses Enter, as a person does,
// and waits until the page has sent it. The text goes in as one input (as a
// paste or an IME would put it) and Enter as one keydown (page.typeEnter).
func (tb *tab) prompt(text string) {
	tb.t.Helper()
	const users = `document.querySelectorAll("#transcript [data-role=user]")`
	var before int
	tb.eval(users+".length", &before)
	var disabled bool
	tb.eval(`document.getElementById("prompt").disabled`, &disabled)
	if disabled {
		tb.t.Fatalf("%s: cannot type %q: the composer is disabled; page state: %s", tb.name, text, tb.snapshot())
	}
	tb.do("typing "+clip(text), func(ctx context.Context) error { return tb.page.typeEnter(ctx, "#prompt", text) })
	tb.waitFor("the prompt "+text+" to be sent", fmt.Sprintf(
		`(u => u.length === %d && u[%d].dataset.sent === "yes" && u[%d].querySelector(".text").textContent === %q)(%s)`,
		before+1, before, before, text, users))
	var left string
	tb.eval(`document.getElementById("prompt").value`, &left)
	if left != "" {
		tb.t.Errorf("%s: the composer still holds %q after sending", tb.name, left)
	}
}

// reload reloads the tab and waits until the chat is ready again.
func (tb *tab) reload() {
	tb.t.Helper()
	tb.do("reloading", tb.page.reload)
	tb.waitReady()
}

// item is one element of the transcript as the page shows it.
type item struct {
	Role string `json:"role"` // user, agent or divider
	ID   string `json:"id"`   // the JSON-RPC id of the prompt
	Done bool   `json:"done"` // an agent turn that has ended
	Stop string `json:"stop"` // its stop reason
	Text string `json:"text"`
	Seqs []int  `json:"seqs"` // the seq of every chunk shown, in DOM order
	Gaps []int  `json:"gaps"` // where the page marks a loss: the chunks shown before each mark
}

const readTranscript = `[...document.querySelectorAll("#transcript > li")].map(li => ({
	role: li.dataset.role ?? "",
	id: li.dataset.id ?? li.dataset.promptId ?? "",
	done: li.dataset.done === "true",
	stop: li.dataset.stopReason ?? "",
	text: (t => (t.querySelectorAll("[data-gap]").forEach(g => g.remove()), t.textContent))((li.querySelector(".text") ?? li).cloneNode(true)),
	seqs: [...li.querySelectorAll("[data-seq]")].map(s => Number(s.dataset.seq)),
	gaps: (() => {
		const at = [];
		let n = 0;
		for (const e of li.querySelectorAll("[data-seq], [data-gap]")) "gap" in e.dataset ? at.push(n) : n++;
		return at;
	})(),
}))`

// transcript reads what the page shows.
func (tb *tab) transcript() []item {
	tb.t.Helper()
	var items []item
	tb.eval(readTranscript, &items)
	return items
}

// lastAgentChunks is how many chunks the newest answer shows.
const lastAgentChunks = `(() => { const a = [...document.querySelectorAll("#transcript [data-role=agent]")].pop(); return a ? a.querySelectorAll("[data-seq]").length : 0 })()`

// lastAgentDone holds once the newest answer has ended.
const lastAgentDone = `[...document.querySelectorAll("#transcript [data-role=agent]")].pop()?.dataset.done === "true"`

// chatState is the part of window.__chat the tests look at.
type chatState struct {
	Ready      bool   `json:"ready"`
	State      string `json:"state"`
	SessionID  string `json:"sessionId"`
	Stream     string `json:"stream"`
	Attachment string `json:"attachment"`
	Chunks     int    `json:"chunks"`
	Redrawn    int    `json:"redrawn"`
	Live       int    `json:"live"`
	States     []struct {
		State  string `json:"state"`
		Chunks int    `json:"chunks"`
		Code   string `json:"code"`
	} `json:"states"`
	Evictions []json.RawMessage `json:"evictions"`
}

func (tb *tab) chat() chatState {
	tb.t.Helper()
	var s chatState
	tb.eval(`JSON.parse(JSON.stringify(window.__chat))`, &s)
	return s
}
