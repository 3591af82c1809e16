package webdriver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// webkitDriverPath is Debian's webkit2gtk-driver; $WEBKIT_WEBDRIVER
// overrides it.
func webkitDriverPath() string {
	if p := os.Getenv("WEBKIT_WEBDRIVER"); p != "" {
		return p
	}
	return "WebKitWebDriver"
}

// webkit is WebKitGTK driven over classic WebDriver: one session of
// WebKitWebDriver, a window handle per tab. Classic WebDriver acts on the
// session's current window, so every tab command switches to its window
// first, under one lock.
type webkit struct {
	engine  Engine // WebKit or WPE
	x       *xvfb  // nil when $DISPLAY was given, or for WPE
	driver  *exec.Cmd
	exited  chan struct{}
	base    string // http://127.0.0.1:P/session/ID
	version string
	client  *http.Client
	first   *classicTab

	mu      sync.Mutex // one command at a time, with its window switch
	current string     // the window the session is on
}

// classicFlavour is a WebKit port driven over classic WebDriver. WPE WebKit
// differs from WebKitGTK in this: its driver is WPEWebDriver, its browser
// cog on the headless platform (no display needed), and its window stays
// 800×600 whatever a session asks.
type classicFlavour struct{ driver, product string }

var (
	gtkFlavour = classicFlavour{driver: "", product: "WebKitGTK"}
	wpeFlavour = classicFlavour{driver: "WPEWebDriver", product: "WPE WebKit"}
)

func startWebKit(ctx context.Context, o Options) (Browser, error) {
	return startClassic(ctx, o, gtkFlavour)
}

func startWPE(ctx context.Context, o Options) (Browser, error) {
	return startClassic(ctx, o, wpeFlavour)
}

func startClassic(ctx context.Context, o Options, fl classicFlavour) (Browser, error) {
	w := &webkit{client: &http.Client{}, exited: make(chan struct{}), engine: WebKit}
	driverPath := webkitDriverPath()
	if fl.driver != "" {
		driverPath, w.engine = fl.driver, WPE
	}
	display := os.Getenv("DISPLAY")
	if display == "" && w.engine == WebKit {
		x, err := startXvfb()
		if err != nil {
			return nil, err
		}
		w.x, display = x, x.display
	}
	port, err := freePort()
	if err != nil {
		w.stopX()
		return nil, err
	}
	w.driver = exec.Command(driverPath, fmt.Sprintf("--port=%d", port))
	w.driver.Env = append(os.Environ(),
		"DISPLAY="+display, "HOME="+o.Scratch, "TMPDIR="+o.Scratch,
		"XDG_CONFIG_HOME="+filepath.Join(o.Scratch, "xdg-config"),
		"XDG_CACHE_HOME="+filepath.Join(o.Scratch, "xdg-cache"),
		"XDG_DATA_HOME="+filepath.Join(o.Scratch, "xdg-data"))
	if w.engine == WebKit {
		// Xvfb has no GPU, so WebKitGTK's accelerated compositing draws
		// with Mesa's llvmpipe, GL in software, every frame of the whole
		// window: a page animating one 6-pixel dot kept 1.45 cores busy,
		// 0.18 without it. Without it WebKitGTK paints what changed, as it
		// does with no compositor, which is all these tests need (a phone
		// composites on its GPU either way). Its screenshots then need a
		// page that paints (Screenshot).
		w.driver.Env = append(w.driver.Env, "WEBKIT_DISABLE_COMPOSITING_MODE=1")
	}
	if o.Cache != "" {
		w.driver.Env = append(w.driver.Env, "GST_REGISTRY="+filepath.Join(o.Cache, "gstreamer-registry.bin"))
	}
	var logs bytes.Buffer
	w.driver.Stdout, w.driver.Stderr = &logs, &logs
	if err := w.driver.Start(); err != nil {
		w.stopX()
		return nil, fmt.Errorf("starting %s (Debian's webkit2gtk-driver, or wpewebkit-driver and cog): %w", driverPath, err)
	}
	go func() { w.driver.Wait(); close(w.exited) }()
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := w.waitReady(ctx, root); err != nil {
		w.stop()
		return nil, fmt.Errorf("%w; driver output: %s", err, clip(logs.String(), 2000))
	}
	// When args are given at all they must contain --automation, or the
	// session request hangs with no error (shared/notes/engines.md).
	opts := map[string]any{"webkitgtk:browserOptions": map[string]any{"args": []string{"--automation"}}}
	if w.engine == WPE {
		opts = map[string]any{"wpe:browserOptions": map[string]any{
			"binary": "cog", "args": []string{"--automation", "--platform=headless"},
		}}
	}
	opts["acceptInsecureCerts"] = true // a test's own https: server (package doc)
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": opts}}
	var sess struct {
		SessionID    string `json:"sessionId"`
		Capabilities struct {
			BrowserName    string `json:"browserName"`
			BrowserVersion string `json:"browserVersion"`
		} `json:"capabilities"`
	}
	if err := w.do(ctx, http.MethodPost, root+"/session", caps, &sess); err != nil {
		w.stop()
		return nil, fmt.Errorf("opening a WebKit session: %w", err)
	}
	w.base = root + "/session/" + sess.SessionID
	w.version = fl.product + " " + sess.Capabilities.BrowserVersion
	var handle string
	if err := w.do(ctx, http.MethodGet, w.base+"/window", nil, &handle); err != nil {
		w.Close()
		return nil, err
	}
	w.current = handle
	w.first = &classicTab{w: w, handle: handle}
	if err := w.first.SetViewport(ctx, o.Width, o.Height, 0); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (w *webkit) waitReady(ctx context.Context, root string) error {
	for {
		var st struct {
			Ready bool `json:"ready"`
		}
		if err := w.do(ctx, http.MethodGet, root+"/status", nil, &st); err == nil && st.Ready {
			return nil
		}
		select {
		case <-w.exited:
			return fmt.Errorf("WebKitWebDriver exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("WebKitWebDriver was not ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *webkit) Engine() Engine  { return w.engine }
func (w *webkit) Version() string { return w.version }
func (w *webkit) Tab() Tab        { return w.first }

func (w *webkit) NewTab(ctx context.Context) (Tab, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var r struct {
		Handle string `json:"handle"`
	}
	if err := w.do(ctx, http.MethodPost, w.base+"/window/new", map[string]any{"type": "tab"}, &r); err != nil {
		return nil, err
	}
	if r.Handle == w.first.handle {
		return nil, ErrOneView
	}
	return &classicTab{w: w, handle: r.Handle}, nil
}

func (w *webkit) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if w.base != "" {
		w.do(ctx, http.MethodDelete, w.base, nil, nil)
	}
	w.stop()
	return nil
}

func (w *webkit) stop() {
	w.driver.Process.Signal(os.Interrupt)
	select {
	case <-w.exited:
	case <-time.After(5 * time.Second):
		w.driver.Process.Kill()
		<-w.exited
	}
	w.stopX()
}

func (w *webkit) stopX() {
	if w.x != nil {
		w.x.close()
	}
}

// do sends one WebDriver command and decodes its value into out.
func (w *webkit) do(ctx context.Context, method, url string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	} else if method == http.MethodPost {
		rd = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, clip(string(b), 300))
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		json.Unmarshal(r.Value, &e)
		if e.Error == "javascript error" {
			return &ScriptError{Message: e.Message}
		}
		return fmt.Errorf("%s %s: %s: %s", method, strings.TrimPrefix(url, w.base), e.Error, clip(e.Message, 500))
	}
	if out != nil {
		return json.Unmarshal(r.Value, out)
	}
	return nil
}

type classicTab struct {
	w      *webkit
	handle string
}

// cmd runs one command on this tab's window.
func (t *classicTab) cmd(ctx context.Context, method, path string, body, out any) error {
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != t.handle {
		if err := w.do(ctx, http.MethodPost, w.base+"/window", map[string]any{"handle": t.handle}, nil); err != nil {
			return err
		}
		w.current = t.handle
	}
	return w.do(ctx, method, w.base+path, body, out)
}

func (t *classicTab) Navigate(ctx context.Context, url string) error {
	return t.cmd(ctx, http.MethodPost, "/url", map[string]any{"url": url}, nil)
}

func (t *classicTab) Reload(ctx context.Context) error {
	return t.cmd(ctx, http.MethodPost, "/refresh", nil, nil)
}

func (t *classicTab) Back(ctx context.Context) error {
	return t.cmd(ctx, http.MethodPost, "/back", nil, nil)
}

func (t *classicTab) Eval(ctx context.Context, expr string, out any) error {
	script := `const done = arguments[arguments.length - 1];
` + evalWrapper(expr) + `.then((v) => done({v: v}), (e) => done({e: String(e && e.stack ? e.message + "\n" + e.stack : e)}));`
	var r struct {
		V *string `json:"v"`
		E *string `json:"e"`
	}
	if err := t.cmd(ctx, http.MethodPost, "/execute/async", map[string]any{"script": script, "args": []any{}}, &r); err != nil {
		return err
	}
	if r.E != nil {
		return &ScriptError{Message: *r.E}
	}
	if r.V == nil {
		return decode("null", out)
	}
	return decode(*r.V, out)
}

// SetViewport sizes the window so that its viewport has the size asked for.
// WebKitGTK's window is the viewport plus whatever the browser draws around
// it, so the window is grown by what the viewport lacks. The window manager
// applies a size when it gets to it (on a busy machine a read straight
// after the command still sees the old one), so each new size is waited for
// before it is measured again, and a viewport already the size asked for is
// left alone. A size the window cannot reach (WebKitGTK has a minimum
// width) is left at its nearest: callers read innerWidth. WebKitGTK cannot
// emulate a device pixel ratio; scale is ignored.
func (t *classicTab) SetViewport(ctx context.Context, width, height int, scale float64) error {
	want := [2]int{width, height}
	inner, err := t.viewportSize(ctx)
	for try := 0; err == nil && inner != want && try < 4; try++ {
		var rect struct {
			Width  int `json:"width"`
			Height int `json:"height"`
		}
		if err := t.cmd(ctx, http.MethodGet, "/window/rect", nil, &rect); err != nil {
			return err
		}
		w, h := rect.Width+width-inner[0], rect.Height+height-inner[1]
		if err := t.cmd(ctx, http.MethodPost, "/window/rect", map[string]any{"width": w, "height": h}, nil); err != nil {
			return err
		}
		before := inner
		inner, err = t.awaitViewport(ctx, want)
		if err == nil && inner == before {
			break // the window did not move: it cannot get closer
		}
	}
	return err
}

func (t *classicTab) viewportSize(ctx context.Context) ([2]int, error) {
	var inner [2]int
	err := t.Eval(ctx, `[innerWidth, innerHeight]`, &inner)
	return inner, err
}

// awaitViewport reads the viewport until it is the size wanted or has held
// one size for half a second (the window settled short of it), within 5 s.
func (t *classicTab) awaitViewport(ctx context.Context, want [2]int) ([2]int, error) {
	var last [2]int
	same := 0
	for deadline := time.Now().Add(5 * time.Second); ; {
		inner, err := t.viewportSize(ctx)
		if err != nil || inner == want || time.Now().After(deadline) {
			return inner, err
		}
		if inner == last {
			same++
		} else {
			last, same = inner, 0
		}
		if same >= 10 {
			return inner, nil
		}
		select {
		case <-ctx.Done():
			return inner, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Screenshot captures the viewport. WebKitGTK without accelerated
// compositing (startClassic) answers a screenshot only once the page has
// painted after the request: a static page's hung until its deadline, every
// time, and a page painting each frame got its own in 60–90 ms. So from
// before the request until after the answer, the page repaints one
// transparent pixel each frame (paintEachFrame), which nothing can see.
func (t *classicTab) Screenshot(ctx context.Context) ([]byte, error) {
	if t.w.engine == WebKit {
		if err := t.Eval(ctx, paintEachFrame, nil); err != nil {
			return nil, fmt.Errorf("making the page paint for its screenshot: %w", err)
		}
		defer func() {
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			t.Eval(stop, stopPainting, nil)
		}()
	}
	var data string
	if err := t.cmd(ctx, http.MethodGet, "/screenshot", nil, &data); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(data)
}

func (t *classicTab) Problems(ctx context.Context) []string { return recorded(ctx, t) }

func (t *classicTab) Close() error {
	if t == t.w.first {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	if t.w.current != t.handle {
		if err := t.w.do(ctx, http.MethodPost, t.w.base+"/window", map[string]any{"handle": t.handle}, nil); err != nil {
			return err
		}
	}
	err := t.w.do(ctx, http.MethodDelete, t.w.base+"/window", nil, nil)
	t.w.current = t.w.first.handle
	t.w.do(ctx, http.MethodPost, t.w.base+"/window", map[string]any{"handle": t.w.first.handle}, nil)
	return err
}

// paintEachFrame puts a transparent 1×1 element at the viewport's corner and
// changes its background (transparent either way) every animation frame, so
// the page paints while it is there; stopPainting takes it away. Its key is
// a registered symbol, out of any page's names.
const (
	paintEachFrame = `(() => {
		const key = Symbol.for("webdriver.paintEachFrame");
		if (globalThis[key]) return true;
		const el = document.createElement("div");
		el.setAttribute("aria-hidden", "true");
		el.style.cssText = "position: fixed; left: 0; top: 0; width: 1px; height: 1px; pointer-events: none";
		document.documentElement.append(el);
		let on = true, n = 0;
		const paint = () => {
			if (!on) return;
			el.style.backgroundColor = n++ % 2 ? "rgba(0, 0, 0, 0)" : "rgba(0, 0, 1, 0)";
			requestAnimationFrame(paint);
		};
		requestAnimationFrame(paint);
		globalThis[key] = () => { on = false; el.remove(); delete globalThis[key]; };
		return true;
	})()`
	stopPainting = `(globalThis[Symbol.for("webdriver.paintEachFrame")]?.(), true)`
)
