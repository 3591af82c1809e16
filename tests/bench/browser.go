package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/performance"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/relaywasm/relaywasm/tests/chromium"
)

// evalLimit bounds one call into the page, so a broken page fails the run
// instead of hanging it. The longest call, one full inbound stream, takes a
// second or two.
const evalLimit = 2 * time.Minute

// browser is one headless Chromium with a profile of its own.
type browser struct{ *chromium.Browser }

// startBrowser starts Chromium writing nothing outside tmp (profile, XDG
// folders, TMPDIR), with the flags package chromium gives for this machine,
// cfg.JSFlags, when not empty, for V8, and its output to cfg.ChromiumLog.
func startBrowser(cfg Config, tmp string) (*browser, error) {
	o := chromium.Options{Exec: cfg.Chromium, Profile: filepath.Join(tmp, "profile"), Scratch: tmp}
	if cfg.JSFlags != "" {
		o.Extra = append(o.Extra, chromedp.Flag("js-flags", cfg.JSFlags))
	}
	if cfg.ChromiumLog != nil {
		o.Extra = append(o.Extra, chromedp.CombinedOutput(cfg.ChromiumLog))
	}
	b, err := chromium.Start(o)
	if err != nil {
		return nil, err
	}
	return &browser{b}, nil
}

func (b *browser) close() { b.Close() }

// tab is one browser tab showing the bench page.
type tab struct {
	ctx context.Context
	ct  *chromium.Tab // records uncaught exceptions and console.error calls
}

// openTab opens url in a new tab, which ends with the browser, with
// DevTools network tracking off (it slows WebSocket frames down) and
// Performance metrics on (cpuTime).
func (b *browser) openTab(url string) (*tab, error) {
	ct, err := chromium.OpenTab(b.Context(), url, chromium.DisableNetworkTracking(), performance.Enable())
	if err != nil {
		return nil, err
	}
	return &tab{ctx: ct.Context(), ct: ct}, nil
}

// healthy reports what the page reported as broken, if anything: a
// benchmark whose page threw measured something else than it says.
func (t *tab) healthy() error {
	if p := t.ct.Problems(); len(p) > 0 {
		return fmt.Errorf("the bench page reported: %s", strings.Join(p, "; "))
	}
	return nil
}

// checkIsolated fails unless the page is cross-origin isolated, as the
// stack was asked to serve it: otherwise performance.now() is clamped to
// 100 µs and the round-trip figures silently lose their precision. A page
// that loads something cross-origin without Cross-Origin-Resource-Policy
// is refused it under the stack's COEP, and fails here or in its calls.
func (t *tab) checkIsolated() error {
	var isolated bool
	if err := t.run(chromedp.Evaluate(`crossOriginIsolated === true`, &isolated)); err != nil {
		return fmt.Errorf("reading crossOriginIsolated: %w", err)
	}
	if !isolated {
		return errors.New("the bench page is not cross-origin isolated (COOP/COEP headers missing?): performance.now() would have 100 µs resolution")
	}
	return t.healthy()
}

// run runs actions on the tab under evalLimit.
func (t *tab) run(actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(t.ctx, evalLimit)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// call evaluates window.bench.<fn>(args…), awaiting its Promise, into out,
// with the tab in front. Arguments go through JSON, so the expression is
// never built from strings. The bench's tabs open behind the browser's
// first, blank one, and a tab behind another is a hidden page
// (document.hidden), which browsers run differently (timers slowed,
// nothing drawn, relay.js spacing no flush): a chat page is one somebody
// looks at.
func (t *tab) call(out any, fn string, args ...any) error {
	if args == nil {
		args = []any{}
	}
	js, err := json.Marshal(args)
	if err != nil {
		return err
	}
	expr := fmt.Sprintf("window.bench.%s(...%s)", fn, js)
	err = t.run(page.BringToFront(), chromedp.Evaluate(expr, out, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
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
