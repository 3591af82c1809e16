package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/performance"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// evalLimit bounds one call into the page, so a broken page fails the run
// instead of hanging it. The longest call, one full inbound stream, takes a
// second or two.
const evalLimit = 2 * time.Minute

// browser is one headless Chromium with a profile of its own.
type browser struct {
	ctx    context.Context
	cancel func()
}

// startBrowser starts Chromium with the flags the notes give for this
// machine, writing nothing outside tmp (profile, XDG folders, TMPDIR).
func startBrowser(exe, tmp string) (*browser, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(filepath.Join(tmp, "profile")),
		// Nothing but loopback: Chromium still tries to reach Google's hosts.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Env(
			"XDG_CONFIG_HOME="+filepath.Join(tmp, "xdg-config"),
			"XDG_CACHE_HOME="+filepath.Join(tmp, "xdg-cache"),
			"TMPDIR="+tmp,
		),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if err := chromedp.Run(bctx); err != nil {
		bcancel()
		acancel()
		return nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	return &browser{ctx: bctx, cancel: func() {
		chromedp.Cancel(bctx) // a clean shutdown: no leftover folders
		bcancel()
		acancel()
	}}, nil
}

func (b *browser) close() { b.cancel() }

// tab is one browser tab showing the bench page.
type tab struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions and console.error calls
}

// openTab opens url in a new tab with DevTools network tracking off: with
// it on, every WebSocket frame becomes a DevTools event, which alone cut
// plain JavaScript from 23.7k to 14.5k frames/s (notes).
func (b *browser) openTab(url string) (*tab, error) {
	ctx, _ := chromedp.NewContext(b.ctx) // ends with the browser
	t := &tab{ctx: ctx}
	chromedp.ListenTarget(ctx, t.listen)
	// The tab's first Run must not carry a deadline: the tab's own event
	// loop would end with it.
	if err := chromedp.Run(ctx, network.Disable(), performance.Enable(), chromedp.Navigate(url)); err != nil {
		return nil, fmt.Errorf("opening %s: %w", url, err)
	}
	return t, nil
}

// listen records what the page reports as broken: a benchmark whose page
// threw measured something else than it says.
func (t *tab) listen(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *cdpruntime.EventExceptionThrown:
		problem = "uncaught: " + ev.ExceptionDetails.Error()
	case *cdpruntime.EventConsoleAPICalled:
		if ev.Type != cdpruntime.APITypeError {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			if a.Value != nil {
				parts = append(parts, string(a.Value))
			} else {
				parts = append(parts, a.Description)
			}
		}
		problem = "console.error: " + strings.Join(parts, " ")
	default:
		return
	}
	t.mu.Lock()
	t.problems = append(t.problems, problem)
	t.mu.Unlock()
}

// healthy reports what the page reported as broken, if anything.
func (t *tab) healthy() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.problems) == 0 {
		return nil
	}
	return fmt.Errorf("the bench page reported: %s", strings.Join(t.problems, "; "))
}

// run runs actions on the tab under evalLimit.
func (t *tab) run(actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(t.ctx, evalLimit)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// call evaluates window.bench.<fn>(args…), awaiting its Promise, into out.
// Arguments go through JSON, so the expression is never built from strings.
func (t *tab) call(out any, fn string, args ...any) error {
	if args == nil {
		args = []any{}
	}
	js, err := json.Marshal(args)
	if err != nil {
		return err
	}
	expr := fmt.Sprintf("window.bench.%s(...%s)", fn, js)
	err = t.run(chromedp.Evaluate(expr, out, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	if err != nil {
		return fmt.Errorf("bench.%s: %w", fn, errors.Join(err, t.healthy()))
	}
	return nil
}

// cpuTime is CPU time the renderer spent, in seconds: on the page's main
// thread, and in its whole process (with the thread receiving WebSocket
// data, the garbage collector's and the wasm compiler's).
type cpuTime struct{ thread, process float64 }

func (c cpuTime) minus(d cpuTime) cpuTime { return cpuTime{c.thread - d.thread, c.process - d.process} }

// cpuTime reads the renderer's CPU time so far (DevTools Performance
// metrics ThreadTime and ProcessTime): real CPU time, unlike a sampling
// profiler's busy time, which on a loaded machine counts time the thread
// was runnable but not running.
func (t *tab) cpuTime() (cpuTime, error) {
	var c cpuTime
	err := t.run(chromedp.ActionFunc(func(ctx context.Context) error {
		metrics, err := performance.GetMetrics().Do(ctx)
		for _, m := range metrics {
			switch m.Name {
			case "ThreadTime":
				c.thread = m.Value
			case "ProcessTime":
				c.process = m.Value
			}
		}
		return err
	}))
	if err == nil && c.thread == 0 {
		err = errors.New("the page reports no ThreadTime")
	}
	return c, err
}

// reload reloads the tab in front (a background tab may be scheduled
// differently) and waits for its load event.
func (t *tab) reload() error {
	return t.run(page.BringToFront(), chromedp.Reload())
}
