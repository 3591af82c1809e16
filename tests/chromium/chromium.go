// Package chromium starts headless Chromium for this repository's browser
// tests and benchmarks (tests/e2e, tests/bench) and opens tabs in it that
// record what the page reports as broken.
//
// It holds what the notes (shared/notes/browser-and-wasm.md) found Chromium
// 156 and chromedp v0.16.0 need on this kind of machine, so that every
// caller starts the browser the same way:
//
//   - chromedp's defaults (headless, no first run, no background networking,
//     no sync) and, as root, its --no-sandbox, which chromedp adds by itself;
//   - --host-resolver-rules mapping every name but 127.0.0.1 (and
//     127.0.0.2, another site on this machine for tests/e2e, and
//     MachineAddr, an insecure origin on it) to NOTFOUND, because Chromium
//     still tries to reach Google's hosts with background networking off,
//     and a test or a measurement must see this machine's traffic only;
//     component updates off for the same reason;
//   - a profile, XDG_CONFIG_HOME, XDG_CACHE_HOME and TMPDIR inside folders
//     the run owns: Chromium and chromedp write there, and nothing may land
//     under the home folder or outlive the run;
//   - chromedp.Cancel to close the browser, a clean shutdown that leaves no
//     folders behind (a plain cancel kills it).
//
// Benchmarks and tests/e2e also turn DevTools network tracking off in their
// tabs (DisableNetworkTracking). tests/e2e runs its tests side by side in
// one browser, each in a browser context of its own (Isolated), every tab
// in a window of its own (OpenWindow).
package chromium

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// resolverRules lets Chromium resolve this machine's addresses only.
func resolverRules() string {
	rules := "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1, EXCLUDE 127.0.0.2"
	if a := MachineAddr(); a != "" {
		rules += ", EXCLUDE " + a
	}
	return rules
}

// MachineAddr is an IPv4 address of this machine other than loopback, or ""
// when it has none. A page served there over http is not a secure context
// (no Web Locks, no crypto.subtle), as the demo opened from a phone on the
// same network is; loopback pages are.
func MachineAddr() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// DefaultPath is Debian's package, a shell wrapper around
// /usr/lib/chromium/chromium.
const DefaultPath = "/usr/bin/chromium"

// Path is the browser to drive: $CHROMIUM, or DefaultPath.
func Path() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return DefaultPath
}

// Options say which browser to start and where it may write.
type Options struct {
	// Exec is the browser's executable; empty means Path().
	Exec string
	// Profile is the profile folder (--user-data-dir). Tabs of one browser
	// share it, and with it IndexedDB and Web Locks.
	Profile string
	// Scratch is a folder the run owns: XDG_CONFIG_HOME and XDG_CACHE_HOME
	// go under it and the browser's TMPDIR is it. Browsers started with the
	// same Scratch share their font caches, which are then built once.
	Scratch string
	// Width and Height are the size of the browser's windows in CSS
	// pixels, its first and every one OpenWindow opens; 0 leaves
	// Chromium's default.
	Width, Height int
	// Extra are further allocator options, after this package's (a flag
	// only one caller wants).
	Extra []chromedp.ExecAllocatorOption
}

// Browser is one running headless Chromium.
type Browser struct {
	ctx    context.Context
	cancel func()
}

// window is the size of a Browser's windows, kept in its contexts for
// OpenWindow.
type window struct{ width, height int }

type windowKey struct{}

// browserContextKey holds the browser context (Isolated) whose tabs a
// context's OpenWindow opens. chromedp's own record of it is not inherited
// by the context of a tab it attached to by target id, as OpenWindow's are.
type browserContextKey struct{}

// Start starts the browser and waits until it answers DevTools. Close it
// with Close.
func Start(o Options) (*Browser, error) {
	exe := o.Exec
	if exe == "" {
		exe = Path()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(o.Profile),
		// Nothing but this machine: Chromium still tries to reach Google's hosts.
		chromedp.Flag("host-resolver-rules", resolverRules()),
		chromedp.Flag("disable-component-update", true),
		chromedp.Env(
			"XDG_CONFIG_HOME="+filepath.Join(o.Scratch, "xdg-config"),
			"XDG_CACHE_HOME="+filepath.Join(o.Scratch, "xdg-cache"),
			"TMPDIR="+o.Scratch,
		),
	)
	if o.Width > 0 && o.Height > 0 {
		opts = append(opts, chromedp.WindowSize(o.Width, o.Height))
	}
	opts = append(opts, o.Extra...)
	actx, acancel := chromedp.NewExecAllocator(context.WithValue(context.Background(), windowKey{}, window{o.Width, o.Height}), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if err := chromedp.Run(bctx); err != nil {
		bcancel()
		acancel()
		return nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	return &Browser{ctx: bctx, cancel: func() {
		chromedp.Cancel(bctx) // a clean shutdown: no leftover folders
		bcancel()
		acancel()
	}}, nil
}

// Context is the browser's chromedp context, the parent of its tabs.
func (b *Browser) Context() context.Context { return b.ctx }

// Close shuts the browser down cleanly (chromedp.Cancel) and waits for it.
func (b *Browser) Close() { b.cancel() }

// Isolated is a browser of its own for one caller without a process of its
// own: a browser context of b, which to a page is a fresh profile (its own
// cookies, cache, IndexedDB and Web Locks, kept in memory, as in an
// incognito window). Starting Chromium took about 2.6 s and two
// processor-seconds on a 2-core machine; a browser context takes
// milliseconds. Open its tabs with OpenWindow on the returned context;
// close disposes of the browser context and every tab in it.
func (b *Browser) Isolated(ctx context.Context) (isolated context.Context, close func(), err error) {
	c := chromedp.FromContext(b.ctx)
	id, err := target.CreateBrowserContext().Do(cdp.WithExecutor(ctx, c.Browser))
	if err != nil {
		return nil, nil, fmt.Errorf("creating a browser context: %w", err)
	}
	close = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		target.DisposeBrowserContext(id).Do(cdp.WithExecutor(ctx, c.Browser))
	}
	return context.WithValue(b.ctx, browserContextKey{}, id), close, nil
}

// DisableNetworkTracking turns DevTools network tracking off in a tab.
// chromedp turns it on in every tab it attaches to, and then every
// WebSocket frame becomes a DevTools event: that alone cut plain
// JavaScript from 23.7k to 14.5k frames/s, so a benchmark runs it before
// navigating (OpenTab's before).
func DisableNetworkTracking() chromedp.Action { return network.Disable() }

// Tab is one browser tab, recording the page's uncaught exceptions and
// console.error calls: a test whose page threw tested something else than
// it says, and a benchmark measured something else.
type Tab struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	problems []string
}

// OpenTab opens url in a new tab of parent (a Browser's Context, or another
// tab's, which shares its browser and profile), running before first, and
// waits for the page's load event. Closing parent closes the tab.
func OpenTab(parent context.Context, url string, before ...chromedp.Action) (*Tab, error) {
	ctx, cancel := chromedp.NewContext(parent)
	return open(ctx, cancel, url, before)
}

// OpenWindow is OpenTab with the tab in a window of its own, of the
// Browser's size, in parent's browser context (an Isolated context, or a
// tab's opened from it). A tab behind another in its window is hidden (its
// timers throttled, nothing drawn); a window of its own keeps the page
// visible whatever other callers of the same browser open meanwhile.
func OpenWindow(parent context.Context, url string, before ...chromedp.Action) (*Tab, error) {
	c := chromedp.FromContext(parent)
	if c == nil || c.Browser == nil {
		return nil, fmt.Errorf("opening %s: the parent context has no started browser", url)
	}
	create := target.CreateTarget("about:blank").WithNewWindow(true)
	if id, ok := parent.Value(browserContextKey{}).(cdp.BrowserContextID); ok {
		create = create.WithBrowserContextID(id)
	}
	if w, _ := parent.Value(windowKey{}).(window); w.width > 0 && w.height > 0 {
		create = create.WithWidth(int64(w.width)).WithHeight(int64(w.height))
	}
	id, err := create.Do(cdp.WithExecutor(parent, c.Browser))
	if err != nil {
		return nil, fmt.Errorf("opening a window for %s: %w", url, err)
	}
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithTargetID(id))
	return open(ctx, cancel, url, before)
}

// open attaches to ctx's tab, records its problems, runs before and
// navigates to url.
func open(ctx context.Context, cancel context.CancelFunc, url string, before []chromedp.Action) (*Tab, error) {
	t := &Tab{ctx: ctx, cancel: cancel}
	chromedp.ListenTarget(ctx, t.listen)
	actions := append(slices.Clip(before), chromedp.Navigate(url))
	// The tab's first Run must not carry a deadline: the tab's own event
	// loop would end with it, and later calls would hang.
	if err := chromedp.Run(ctx, actions...); err != nil {
		cancel()
		if p := t.Problems(); len(p) > 0 {
			err = fmt.Errorf("%w; the page reported %s", err, strings.Join(p, "; "))
		}
		return nil, fmt.Errorf("opening %s: %w", url, err)
	}
	return t, nil
}

// Context is the tab's chromedp context, for chromedp.Run.
func (t *Tab) Context() context.Context { return t.ctx }

// Close closes the tab.
func (t *Tab) Close() { t.cancel() }

// Problems are what the page reported as broken so far, in order: each an
// uncaught exception ("uncaught: …") or a console.error call
// ("console.error: …").
func (t *Tab) Problems() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.problems...)
}

func (t *Tab) listen(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *cdpruntime.EventExceptionThrown:
		problem = "uncaught: " + ev.ExceptionDetails.Error()
	case *cdpruntime.EventConsoleAPICalled:
		if ev.Type != cdpruntime.APITypeError {
			return
		}
		problem = "console.error: " + consoleText(ev.Args)
	default:
		return
	}
	t.mu.Lock()
	t.problems = append(t.problems, problem)
	t.mu.Unlock()
}

// consoleText is a console call's arguments as the console shows them:
// values as JSON, objects by their description.
func consoleText(args []*cdpruntime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		if a.Value != nil {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}
