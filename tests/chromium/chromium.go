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
//   - --host-resolver-rules mapping every name but 127.0.0.1 to NOTFOUND,
//     because Chromium still tries to reach Google's hosts with background
//     networking off, and a test or a measurement must see loopback traffic
//     only; component updates off for the same reason;
//   - a profile, XDG_CONFIG_HOME, XDG_CACHE_HOME and TMPDIR inside folders
//     the run owns: Chromium and chromedp write there, and nothing may land
//     under the home folder or outlive the run;
//   - chromedp.Cancel to close the browser, a clean shutdown that leaves no
//     folders behind (a plain cancel kills it).
//
// A benchmark also turns DevTools network tracking off in its tabs
// (DisableNetworkTracking).
package chromium

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

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
	// Extra are further allocator options, after this package's (a window
	// size, a flag only one caller wants).
	Extra []chromedp.ExecAllocatorOption
}

// Browser is one running headless Chromium.
type Browser struct {
	ctx    context.Context
	cancel func()
}

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
		// Nothing but loopback: Chromium still tries to reach Google's hosts.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Env(
			"XDG_CONFIG_HOME="+filepath.Join(o.Scratch, "xdg-config"),
			"XDG_CACHE_HOME="+filepath.Join(o.Scratch, "xdg-cache"),
			"TMPDIR="+o.Scratch,
		),
	)
	opts = append(opts, o.Extra...)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
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
