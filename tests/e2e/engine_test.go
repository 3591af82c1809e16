package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/device"
	"github.com/relaywasm/relaywasm/tests/chromium"
	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// engine is the browser engine this run drives: $ENGINE (chromium, firefox
// or webkit; `make test-browser ENGINE=…`), Chromium when unset. A run is
// one engine; `make test` runs the package once per engine. Chromium is
// driven through chromedp (tests/chromium), Firefox over WebDriver BiDi and
// WebKit over classic WebDriver (tests/webdriver).
var engine = func() webdriver.Engine {
	if e := os.Getenv("ENGINE"); e != "" {
		return webdriver.Engine(e)
	}
	return webdriver.Chromium
}()

// page is what the tests do to a tab, engine by engine.
type page interface {
	eval(ctx context.Context, expr string, out any) error
	reload(ctx context.Context) error
	// navigate loads url in the tab and waits for its load event.
	navigate(ctx context.Context, url string) error
	// back goes back one entry in the tab's history (webdriver.Tab's Back).
	back(ctx context.Context) error
	// viewport sets the viewport in CSS pixels; phone also asks for a
	// phone's pixel ratio (and, in Chromium, its touch and user agent).
	viewport(ctx context.Context, width, height int, phone bool) error
	screenshot(ctx context.Context) ([]byte, error)
	// typeEnter puts text into the field sel and presses Enter.
	typeEnter(ctx context.Context, sel, text string) error
	click(ctx context.Context, sel string) error
	// offline takes the network away (navigator.onLine, the offline
	// event, no new connections) or gives it back; errNoNetworkEmulation
	// where the engine's automation cannot.
	offline(ctx context.Context, off bool) error
	// front brings the tab to the front, its document visible, as the
	// page a person has come back to.
	front(ctx context.Context) error
	problems(ctx context.Context) []string
}

// wdBrowser is a WebDriver browser as the tests' parent context carries it
// (newBrowser's result and every tab's ctx), so that openTab(t, one.ctx, …)
// opens a second tab of the same browser in every engine.
type wdBrowser struct {
	b webdriver.Browser

	mu        sync.Mutex
	firstUsed bool
}

type wdBrowserKey struct{}

// engineRecorded reads $ENGINE again inside a test, where go test records
// what a test reads: its cached results are then per engine. (The package
// variable is set before the recording starts.)
func engineRecorded() { os.Getenv("ENGINE") }

// browserStartLimit bounds a browser's start-up: Firefox took 2.5 s here
// on a quiet machine and over a minute with the suites of three engines
// side by side on a loaded one. A hang guard, not a claim about speed.
const browserStartLimit = 4 * time.Minute

// windowWidth and windowHeight are every browser window's size as a test
// gets it: a desktop's.
const windowWidth, windowHeight = 1280, 800

// startEngine starts a browser of the run's engine for newBrowser.
func startEngine(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserStartLimit)
	defer cancel()
	var b webdriver.Browser
	if shared := sharedBrowser(t); shared != nil {
		var err error
		if b, err = shared.Isolated(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
	} else {
		var err error
		if b, err = takeClassic(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { giveBack(t, b) })
	}
	t.Logf("engine: %s", b.Version())
	return context.WithValue(context.Background(), wdBrowserKey{}, &wdBrowser{b: b})
}

// runBrowser is a browser the whole run shares: started by the first test
// that needs it (get), closed by TestMain (closeShared). Each test gets an
// isolated context of it, a fresh profile as far as the page can tell, in
// milliseconds rather than the seconds a browser takes to start.
type runBrowser[B any] struct {
	once sync.Once
	b    B
	stop func() // closes b; nil until it started
	err  error
}

// get starts the browser with start in a folder of the run's temporary
// one (TestMain's), once, and returns it; a failed start fails every test
// that asks. start returns the browser and what closes it.
func (r *runBrowser[B]) get(t *testing.T, start func(scratch string) (B, func(), error)) B {
	t.Helper()
	r.once.Do(func() {
		scratch, err := os.MkdirTemp("", string(engine)+"-")
		if err != nil {
			r.err = err
			return
		}
		r.b, r.stop, r.err = start(scratch)
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.b
}

func (r *runBrowser[B]) close() {
	if r.stop != nil {
		r.stop()
	}
}

// firefoxShared is the run's one Firefox; each test gets a user context of
// it (Isolator).
var firefoxShared runBrowser[webdriver.Browser]

// sharedBrowser is the run's shared WebDriver browser, or nil when the
// engine gives each test a process of its own.
func sharedBrowser(t *testing.T) webdriver.Isolator {
	t.Helper()
	if engine != webdriver.Firefox {
		return nil
	}
	return firefoxShared.get(t, func(scratch string) (webdriver.Browser, func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), browserStartLimit)
		defer cancel()
		b, err := webdriver.Start(ctx, engine, webdriver.Options{Scratch: scratch, Width: windowWidth, Height: windowHeight})
		if err != nil {
			return nil, nil, err
		}
		return b, func() { b.Close() }, nil
	}).(webdriver.Isolator)
}

// closeShared closes the shared browsers a test started, and the pool's.
func closeShared() {
	firefoxShared.close()
	chromiumShared.close()
	classicPool.mu.Lock()
	defer classicPool.mu.Unlock()
	for _, b := range classicPool.idle {
		b.Close()
	}
	classicPool.idle = nil
}

// classicPool holds the WebKit (or WPE) browsers of tests that passed, for
// later tests to take instead of starting their own: a WebKit start costs
// two processor-seconds or more (WebKitWebDriver, its UI, web and network
// processes, an Xvfb), and WebKit has no isolated context to hand out as
// Chromium and Firefox do. What a test leaves in a browser stays with the
// test's origin, and every test's stack has an origin of its own (its
// port): its storage, Web Locks and sessionStorage are never another
// test's. A browser whose test failed is closed, not handed on.
var classicPool struct {
	mu   sync.Mutex
	idle []webdriver.Browser
}

// takeClassic takes a browser from the pool, or starts one.
func takeClassic(ctx context.Context) (webdriver.Browser, error) {
	classicPool.mu.Lock()
	if n := len(classicPool.idle); n > 0 {
		b := classicPool.idle[n-1]
		classicPool.idle = classicPool.idle[:n-1]
		classicPool.mu.Unlock()
		return b, nil
	}
	classicPool.mu.Unlock()
	scratch, err := os.MkdirTemp("", string(engine)+"-")
	if err != nil {
		return nil, err
	}
	return webdriver.Start(ctx, engine, webdriver.Options{Scratch: scratch, Cache: os.TempDir(), Width: windowWidth, Height: windowHeight})
}

// giveBack puts t's browser back in the pool once t is over, its first tab
// on a blank page at the size it started with (the tab's others were closed
// by their own cleanups); it closes the browser instead when t failed or
// that does not work.
func giveBack(t *testing.T, b webdriver.Browser) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := b.Tab()
	if t.Failed() || first.Navigate(ctx, "about:blank") != nil || first.SetViewport(ctx, windowWidth, windowHeight, 0) != nil {
		b.Close()
		return
	}
	classicPool.mu.Lock()
	defer classicPool.mu.Unlock()
	classicPool.idle = append(classicPool.idle, b)
}

// openEngineTab opens url in a tab of parent's WebDriver browser: the
// browser's own first tab, then new ones.
func openEngineTab(t *testing.T, parent context.Context, url string) (page, error) {
	wb, _ := parent.Value(wdBrowserKey{}).(*wdBrowser)
	if wb == nil {
		return nil, fmt.Errorf("no %s browser in the parent context (newBrowser's or a tab's)", engine)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	wb.mu.Lock()
	first := !wb.firstUsed
	wb.firstUsed = true
	wb.mu.Unlock()
	wt := wb.b.Tab()
	if !first {
		var err error
		if wt, err = wb.b.NewTab(ctx); errors.Is(err, webdriver.ErrOneView) {
			t.Skipf("%s: %v", engine, err)
		} else if err != nil {
			return nil, err
		}
		t.Cleanup(func() { wt.Close() })
	}
	if err := wt.Navigate(ctx, url); err != nil {
		return nil, err
	}
	return &wdPage{tab: wt}, nil
}

// wdPage is a tab of Firefox or WebKit.
type wdPage struct{ tab webdriver.Tab }

func (p *wdPage) eval(ctx context.Context, expr string, out any) error {
	return p.tab.Eval(ctx, expr, out)
}
func (p *wdPage) reload(ctx context.Context) error { return p.tab.Reload(ctx) }
func (p *wdPage) back(ctx context.Context) error   { return p.tab.Back(ctx) }
func (p *wdPage) navigate(ctx context.Context, url string) error {
	return p.tab.Navigate(ctx, url)
}

func (p *wdPage) viewport(ctx context.Context, width, height int, phone bool) error {
	scale := 1.0
	if phone {
		scale = 3 // an iPhone 12's
	}
	return p.tab.SetViewport(ctx, width, height, scale)
}

// screenshot waits two animation frames first: WebKit's screenshot can be
// blank or one frame late otherwise (shared/notes/engines.md).
func (p *wdPage) screenshot(ctx context.Context) ([]byte, error) {
	if err := p.tab.Eval(ctx, `new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, nil); err != nil {
		return nil, err
	}
	return p.tab.Screenshot(ctx)
}

// typeEnter does from script what a keyboard does: the text as one input
// event (as a paste or an IME gives it) and Enter as a keydown the page may
// cancel. The page does not ask whether an event is trusted.
func (p *wdPage) typeEnter(ctx context.Context, sel, text string) error {
	return p.tab.Eval(ctx, fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		el.focus();
		el.value = %q;
		el.dispatchEvent(new InputEvent("input", {bubbles: true, inputType: "insertText", data: el.value}));
		const key = (type) => new KeyboardEvent(type, {key: "Enter", code: "Enter", keyCode: 13, bubbles: true, cancelable: true});
		el.dispatchEvent(key("keydown"));
		el.dispatchEvent(key("keyup"));
		return true;
	})()`, sel, text), nil)
}

func (p *wdPage) click(ctx context.Context, sel string) error {
	return p.tab.Eval(ctx, fmt.Sprintf(`(document.querySelector(%q).click(), true)`, sel), nil)
}

func (p *wdPage) problems(ctx context.Context) []string { return p.tab.Problems(ctx) }

func (p *wdPage) offline(ctx context.Context, off bool) error {
	o, ok := p.tab.(webdriver.Offliner)
	if !ok {
		return errNoNetworkEmulation
	}
	return o.SetOffline(ctx, off)
}

// A WebDriver session's window is its one tab, in front already.
func (p *wdPage) front(ctx context.Context) error { return nil }

// errNoNetworkEmulation is an engine whose automation cannot take the
// network away (WebKitWebDriver).
var errNoNetworkEmulation = errors.New("no network emulation")

// networkEmulating is newBrowser for a test that takes the network away.
// In an engine whose automation cannot (its tabs are no webdriver.Offliner:
// WebKitWebDriver's) it skips the test, before the test starts a stack and
// a stream only to find out at setOffline. Chromium's DevTools protocol
// can.
func networkEmulating(t *testing.T) context.Context {
	t.Helper()
	b := newBrowser(t)
	if engine == webdriver.Chromium {
		return b
	}
	if _, ok := b.Value(wdBrowserKey{}).(*wdBrowser).b.Tab().(webdriver.Offliner); !ok {
		t.Skipf("%s: its automation has no network emulation (taking the network away)", engine)
	}
	return b
}

// cdpPage is a Chromium tab through chromedp.
type cdpPage struct{ tab *chromium.Tab }

func (p *cdpPage) do(ctx context.Context, actions ...chromedp.Action) error {
	// ctx carries the deadline; the tab's context the target.
	c, cancel := context.WithCancel(p.tab.Context())
	defer cancel()
	if d, ok := ctx.Deadline(); ok {
		var cd context.CancelFunc
		c, cd = context.WithDeadline(c, d)
		defer cd()
	}
	return chromedp.Run(c, actions...)
}

func (p *cdpPage) eval(ctx context.Context, expr string, out any) error {
	return p.do(ctx, evaluate(expr, out))
}
func (p *cdpPage) reload(ctx context.Context) error { return p.do(ctx, chromedp.Reload()) }

// back runs history.back() in the page: a page restored from the
// back/forward cache fires no load event, which chromedp's NavigateBack
// would wait for. The CDP evaluations that follow are not lost in the
// navigation as a WebDriver script's can be.
func (p *cdpPage) back(ctx context.Context) error {
	return p.do(ctx, chromedp.Evaluate(`history.back()`, nil))
}
func (p *cdpPage) navigate(ctx context.Context, url string) error {
	return p.do(ctx, chromedp.Navigate(url))
}

func (p *cdpPage) viewport(ctx context.Context, width, height int, phone bool) error {
	if phone && width == 390 && height == 844 {
		return p.do(ctx, chromedp.Emulate(device.IPhone12))
	}
	if phone {
		return p.do(ctx, chromedp.EmulateViewport(int64(width), int64(height), chromedp.EmulateScale(3), chromedp.EmulateMobile, chromedp.EmulateTouch))
	}
	return p.do(ctx, chromedp.EmulateViewport(int64(width), int64(height)))
}

// screenshot captures the page as FullScreenshot does. Chromium's capture
// waits for the compositor's next frame, and of a page where nothing
// changes it may make none: with two other suites and a busy loop beside
// it, the first capture of TestScreenshots (an idle page) hung for good in
// 3 runs of 6, the viewport-only capture as well. So a capture that takes
// seconds is given up on, and the next one starts after a screencast's
// frames have been asked for, which makes the compositor draw.
func (p *cdpPage) screenshot(ctx context.Context) ([]byte, error) {
	for {
		var buf []byte
		try, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := p.do(try, chromedp.FullScreenshot(&buf, 100))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil { // nil too
			return buf, err
		}
		err = p.do(ctx, cdppage.StartScreencast().WithFormat(cdppage.ScreencastFormatJpeg).WithQuality(1), chromedp.Sleep(250*time.Millisecond), cdppage.StopScreencast())
		if err != nil {
			return nil, err
		}
	}
}

// typeEnter sends the text as one input (as a paste or an IME would put it)
// and Enter as one keyDown: chromedp.SendKeys sends Enter's character as a
// separate event, which no keyboard does and which a keydown handler cannot
// cancel.
func (p *cdpPage) typeEnter(ctx context.Context, sel, text string) error {
	enter := func(t input.KeyType) *input.DispatchKeyEventParams {
		return input.DispatchKeyEvent(t).WithKey("Enter").WithCode("Enter").WithWindowsVirtualKeyCode(13)
	}
	return p.do(ctx,
		chromedp.Focus(sel, chromedp.ByQuery),
		input.InsertText(text),
		enter(input.KeyDown).WithText("\r"),
		enter(input.KeyUp),
	)
}

func (p *cdpPage) click(ctx context.Context, sel string) error {
	return p.do(ctx, chromedp.Click(sel, chromedp.ByQuery))
}

func (p *cdpPage) problems(context.Context) []string { return p.tab.Problems() }

// offline switches the tab's network emulation: navigator.onLine and the
// online/offline events (OverrideNetworkState), and whether connections can
// be made at all (EmulateNetworkConditionsByRule).
func (p *cdpPage) offline(ctx context.Context, off bool) error {
	return p.do(ctx,
		network.OverrideNetworkState(off, 0, -1, -1),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := network.EmulateNetworkConditionsByRule([]*network.Conditions{{
				Offline: off, DownloadThroughput: -1, UploadThroughput: -1,
			}}).Do(ctx)
			return err
		}),
	)
}

// front brings the tab forward in its window. openTab gives every tab a
// window of its own, so the page is in front from the start; this only
// restates it.
func (p *cdpPage) front(ctx context.Context) error { return p.do(ctx, cdppage.BringToFront()) }

// darkScheme asks for prefers-color-scheme: dark, where the engine's
// automation can (Chromium's Emulation domain); false where it cannot.
func (tb *tab) darkScheme() bool {
	tb.t.Helper()
	if engine != webdriver.Chromium {
		return false
	}
	tb.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
	return true
}

// skipUnless skips the test outside Chromium, naming the engine and the
// automation feature it lacks.
func skipUnless(t *testing.T, feature string) {
	t.Helper()
	engineRecorded()
	if engine != webdriver.Chromium {
		t.Skipf("%s: its automation has no %s (Chromium's DevTools protocol has)", engine, feature)
	}
}

// pageWithRecorder copies the page's directory into tmp with
// webdriver.Recorder as the first script of index.html: WebKitWebDriver
// has no log endpoint, so in WebKit the page records its own uncaught
// exceptions, unhandled rejections and console.error calls. The page is
// otherwise the same files.
func pageWithRecorder(src, tmp string) (string, error) {
	dst := filepath.Join(tmp, "web")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return "", err
	}
	index := filepath.Join(dst, "index.html")
	b, err := os.ReadFile(index)
	if err != nil {
		return "", err
	}
	html := string(b)
	at := strings.Index(html, "<head>")
	if at < 0 {
		return "", fmt.Errorf("%s has no <head>", index)
	}
	at += len("<head>")
	html = html[:at] + "\n<script>" + webdriver.Recorder + "</script>" + html[at:]
	return dst, os.WriteFile(index, []byte(html), 0o644)
}

// shotName is a screenshot's file name in out/: the engine's name first.
func shotName(name string) string { return string(engine) + "-" + name }
