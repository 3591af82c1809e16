// Package webdriver drives Firefox and WebKit for this repository's browser
// tests (tests/browser's runner, tests/e2e) through one small client of the
// project's own: WebDriver BiDi for Firefox, which Firefox speaks itself
// (no geckodriver, which Debian does not package), and classic WebDriver
// over HTTP for WebKitGTK's WebKitWebDriver, which refuses BiDi. Chromium
// stays with chromedp (tests/chromium).
//
// What shared/notes/engines.md measured these engines need on this kind of
// machine is here, so every caller starts them the same way:
//
//   - Firefox: --headless --no-remote --profile DIR --remote-debugging-port,
//     its stderr line "WebDriver BiDi listening on ws://…" as the sign it is
//     ready, a read limit raised for screenshots;
//   - WebKit: a display (an Xvfb of the run's own, unless $DISPLAY names
//     one), and a session whose browser arguments contain --automation, or
//     the session request hangs with no error; its accelerated compositing
//     off (WEBKIT_DISABLE_COMPOSITING_MODE), which Xvfb could only run in
//     software GL, so a page paints each frame while its screenshot is
//     taken, or an idle page's screenshot never comes;
//   - WebKit has no log endpoint: console errors and unhandled rejections
//     are caught by the page itself (Recorder), and Tab.Problems reads them;
//   - both sessions accept certificates they cannot check
//     (acceptInsecureCerts), so a test can serve a page over https: from a
//     server of its own (httptest's), as tests/e2e's TestSecurePage does.
//
// Every folder a browser writes to is under Options.Scratch, which the
// caller owns and removes.
package webdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Engine names a browser engine, as ENGINE= names it in the Makefile.
type Engine string

const (
	Chromium Engine = "chromium"
	Firefox  Engine = "firefox"
	WebKit   Engine = "webkit"
	// WPE is WPE WebKit 2.38 (Debian's wpewebkit-driver and cog), about
	// Safari 16: the older iPhones.
	WPE Engine = "wpe"
)

// Options say where a browser may write.
type Options struct {
	// Scratch is a folder the caller owns: the profile, HOME, XDG folders
	// and TMPDIR of the browser go under it.
	Scratch string
	// Cache is a folder the caller owns for what a browser builds at its
	// start and browsers started with the same Cache can share: WebKitGTK's
	// GStreamer plugin registry, which a WebKit started without one spends
	// about half a processor-second rebuilding. Empty: each browser builds
	// its own under Scratch.
	Cache string
	// Width and Height are the first window's size (default 1280×800).
	Width, Height int
}

// Browser is one running browser with its first tab.
type Browser interface {
	// Engine is the engine's name; Version its product and version as the
	// browser reports them (for a failure message and the README's matrix).
	Engine() Engine
	Version() string
	// Tab is the tab the browser started with.
	Tab() Tab
	// NewTab opens another tab in the same profile (same IndexedDB, same
	// Web Locks), or fails with ErrOneView.
	NewTab(ctx context.Context) (Tab, error)
	// Close shuts the browser down and waits for it.
	Close() error
}

// Isolator is a browser that can give a caller a browser of its own
// (separate storage, separate tabs) without starting another process.
// Firefox is one (user contexts); WebKit starts in 0.6 s and is not.
type Isolator interface {
	Isolated(ctx context.Context) (Browser, error)
}

// Offliner is a tab whose network the automation can take away: Firefox's
// (BiDi emulation.setNetworkConditions). WebKitWebDriver has no network
// emulation.
type Offliner interface {
	SetOffline(ctx context.Context, offline bool) error
}

// Tab is one top-level browsing context.
type Tab interface {
	// Navigate loads url and waits for its load event.
	Navigate(ctx context.Context, url string) error
	// Reload reloads the page and waits for its load event.
	Reload(ctx context.Context) error
	// Back goes back one entry in the tab's history and waits until the
	// page is shown, loaded again or restored from the back/forward cache.
	// A script's history.back() followed by Eval races the navigation: in
	// WebKit such an Eval, its script started in the page being left, hung
	// until its deadline.
	Back(ctx context.Context) error
	// Eval evaluates a JavaScript expression, awaits it when it is a
	// Promise, and decodes its value (as JSON.stringify gives it) into out,
	// which may be nil. A thrown exception or a rejection is an error.
	Eval(ctx context.Context, expr string, out any) error
	// SetViewport sets the size of the page's viewport in CSS pixels and,
	// where the engine can, the device pixel ratio (0 leaves it).
	SetViewport(ctx context.Context, width, height int, scale float64) error
	// Screenshot is a PNG of the viewport.
	Screenshot(ctx context.Context) ([]byte, error)
	// Problems are what the page reported as broken so far: uncaught
	// exceptions, unhandled rejections and console.error calls.
	Problems(ctx context.Context) []string
	// Close closes the tab.
	Close() error
}

// Start starts a browser of the engine.
func Start(ctx context.Context, e Engine, o Options) (Browser, error) {
	if o.Width == 0 {
		o.Width, o.Height = 1280, 800
	}
	switch e {
	case Firefox:
		return startFirefox(ctx, o)
	case WebKit:
		return startWebKit(ctx, o)
	case WPE:
		return startWPE(ctx, o)
	}
	return nil, fmt.Errorf("webdriver: no driver for engine %q (chromium goes through tests/chromium)", e)
}

// evalWrapper turns an expression into one whose value is a JSON string, so
// that both protocols hand back the same thing: the caller's value as
// JSON.stringify spells it ("null" for undefined).
func evalWrapper(expr string) string {
	return "(async () => JSON.stringify(await (" + expr + "\n)) ?? \"null\")()"
}

func decode(raw string, out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		return fmt.Errorf("decoding %.200s: %w", raw, err)
	}
	return nil
}

// ErrExited is returned for a command sent to a browser that has gone.
var ErrExited = errors.New("webdriver: the browser has exited")

// ErrOneView: the browser cannot open another tab. cog, WPE WebKit's
// browser under WPEWebDriver, shows one view, and its New Window answers
// with the handle of the window already open: the "second tab" was the
// first page, navigated away, which once read as two tabs sharing one
// stream.
var ErrOneView = errors.New("webdriver: the browser shows one view and opens no other tab")

// ScriptError is an exception or rejection the page's script ended in.
type ScriptError struct{ Message string }

func (e *ScriptError) Error() string { return "script: " + e.Message }

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
