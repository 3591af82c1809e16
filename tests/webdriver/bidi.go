package webdriver

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// firefoxPath is Debian's firefox-esr; $FIREFOX overrides it.
func firefoxPath() string {
	if p := os.Getenv("FIREFOX"); p != "" {
		return p
	}
	return "firefox-esr"
}

// firefoxPrefs keep Firefox off the network and quiet; the remote agent
// adds its own recommended automation preferences on top. The last six
// keep it from doing work no test looks at: preloading the new-tab page
// in a privileged content process for every window, keeping a spare
// content process started, and recording telemetry. Over six tests/e2e
// tests they took the processor time of Firefox's processes from 32-34 to
// 27-30 s (2026-12-07, measured per thread from /proc).
const firefoxPrefs = `user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("app.update.disabledForTesting", true);
user_pref("network.captive-portal-service.enabled", false);
user_pref("network.connectivity-service.enabled", false);
user_pref("browser.safebrowsing.malware.enabled", false);
user_pref("browser.safebrowsing.phishing.enabled", false);
user_pref("extensions.update.enabled", false);
user_pref("network.dns.disablePrefetch", true);
user_pref("network.proxy.type", 0);
user_pref("browser.newtabpage.enabled", false);
user_pref("browser.newtab.preload", false);
user_pref("browser.startup.page", 0);
user_pref("dom.ipc.processPrelaunch.enabled", false);
user_pref("toolkit.telemetry.enabled", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
`

// firefox is Firefox driven over WebDriver BiDi: one WebSocket to the
// browser, a browsing context per tab.
type firefox struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	conn    *websocket.Conn
	version string
	first   *bidiTab

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan bidiReply
	logs    map[string][]string // console errors and uncaught exceptions, by context
	closed  bool
}

type bidiReply struct {
	Type    string          `json:"type"`
	ID      int             `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Params  json.RawMessage `json:"params"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
}

func startFirefox(ctx context.Context, o Options) (Browser, error) {
	profile := filepath.Join(o.Scratch, "firefox-profile")
	if err := os.MkdirAll(profile, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(profile, "user.js"), []byte(firefoxPrefs), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(firefoxPath(), "--headless", "--no-remote", "--profile", profile,
		"--remote-debugging-port=0", "--width", fmt.Sprint(o.Width), "--height", fmt.Sprint(o.Height), "about:blank")
	cmd.Env = append(os.Environ(),
		"HOME="+o.Scratch, "TMPDIR="+o.Scratch,
		"XDG_CONFIG_HOME="+filepath.Join(o.Scratch, "xdg-config"),
		"XDG_CACHE_HOME="+filepath.Join(o.Scratch, "xdg-cache"),
		"MOZ_CRASHREPORTER_DISABLE=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (Debian's firefox-esr): %w", firefoxPath(), err)
	}
	f := &firefox{cmd: cmd, exited: make(chan struct{}), waiting: map[int]chan bidiReply{}, logs: map[string][]string{}}
	go func() { cmd.Wait(); close(f.exited) }()
	addr := make(chan string, 1)
	var early strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "WebDriver BiDi listening on "); ok {
				addr <- strings.TrimSpace(rest)
				break
			}
			if early.Len() < 4000 {
				early.WriteString(line + "\n")
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var url string
	select {
	case url = <-addr:
	case <-f.exited:
		return nil, fmt.Errorf("firefox exited before listening: %s", early.String())
	case <-ctx.Done():
		f.kill()
		return nil, fmt.Errorf("firefox did not listen: %w", ctx.Err())
	}
	conn, _, err := websocket.Dial(ctx, url+"/session", nil)
	if err != nil {
		f.kill()
		return nil, fmt.Errorf("dialling firefox's BiDi: %w", err)
	}
	conn.SetReadLimit(256 << 20) // screenshots
	f.conn = conn
	go f.readLoop()
	var sess struct {
		Capabilities struct {
			BrowserName    string `json:"browserName"`
			BrowserVersion string `json:"browserVersion"`
		} `json:"capabilities"`
	}
	if err := f.call(ctx, "session.new", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{"acceptInsecureCerts": true}}}, &sess); err != nil {
		f.kill()
		return nil, err
	}
	f.version = "Firefox " + sess.Capabilities.BrowserVersion
	if err := f.call(ctx, "session.subscribe", map[string]any{"events": []string{"log.entryAdded"}}, nil); err != nil {
		f.kill()
		return nil, err
	}
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	if err := f.call(ctx, "browsingContext.getTree", map[string]any{}, &tree); err != nil || len(tree.Contexts) == 0 {
		f.kill()
		return nil, fmt.Errorf("firefox has no tab: %v", err)
	}
	f.first = &bidiTab{f: f, id: tree.Contexts[0].Context}
	return f, nil
}

func (f *firefox) Engine() Engine  { return Firefox }
func (f *firefox) Version() string { return f.version }
func (f *firefox) Tab() Tab        { return f.first }

func (f *firefox) NewTab(ctx context.Context) (Tab, error) {
	var r struct {
		Context string `json:"context"`
	}
	if err := f.call(ctx, "browsingContext.create", map[string]any{"type": "tab"}, &r); err != nil {
		return nil, err
	}
	return &bidiTab{f: f, id: r.Context}, nil
}

func (f *firefox) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.call(ctx, "browser.close", map[string]any{}, nil)
	select {
	case <-f.exited:
	case <-time.After(15 * time.Second):
		f.kill()
	}
	f.conn.CloseNow()
	return nil
}

func (f *firefox) kill() {
	f.cmd.Process.Kill()
	<-f.exited
}

func (f *firefox) readLoop() {
	defer func() {
		f.mu.Lock()
		f.closed = true
		for id, ch := range f.waiting {
			close(ch)
			delete(f.waiting, id)
		}
		f.mu.Unlock()
	}()
	for {
		_, b, err := f.conn.Read(context.Background())
		if err != nil {
			return
		}
		var m bidiReply
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		if m.Type == "event" {
			f.event(m)
			continue
		}
		f.mu.Lock()
		ch := f.waiting[m.ID]
		delete(f.waiting, m.ID)
		f.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// event records log.entryAdded entries of level error: console.error
// calls, uncaught exceptions and unhandled rejections.
func (f *firefox) event(m bidiReply) {
	if m.Method != "log.entryAdded" {
		return
	}
	var e struct {
		Type   string `json:"type"`
		Level  string `json:"level"`
		Text   string `json:"text"`
		Source struct {
			Context string `json:"context"`
		} `json:"source"`
	}
	if json.Unmarshal(m.Params, &e) != nil || e.Level != "error" {
		return
	}
	what := "console.error: "
	if e.Type == "javascript" {
		what = "uncaught: "
	}
	f.mu.Lock()
	f.logs[e.Source.Context] = append(f.logs[e.Source.Context], what+e.Text)
	f.mu.Unlock()
}

func (f *firefox) call(ctx context.Context, method string, params any, out any) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrExited
	}
	f.nextID++
	id := f.nextID
	ch := make(chan bidiReply, 1)
	f.waiting[id] = ch
	f.mu.Unlock()
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if err := f.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: %w", method, ErrExited)
		}
		if m.Type == "error" {
			return fmt.Errorf("%s: %s: %s", method, m.Error, clip(m.Message, 500))
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		delete(f.waiting, id)
		f.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

type bidiTab struct {
	f  *firefox
	id string
}

func (t *bidiTab) Navigate(ctx context.Context, url string) error {
	return t.f.call(ctx, "browsingContext.navigate", map[string]any{"context": t.id, "url": url, "wait": "complete"}, nil)
}

func (t *bidiTab) Reload(ctx context.Context) error {
	return t.f.call(ctx, "browsingContext.reload", map[string]any{"context": t.id, "wait": "complete"}, nil)
}

func (t *bidiTab) Back(ctx context.Context) error {
	return t.f.call(ctx, "browsingContext.traverseHistory", map[string]any{"context": t.id, "delta": -1}, nil)
}

func (t *bidiTab) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Type   string `json:"type"`
		Result struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := t.f.call(ctx, "script.evaluate", map[string]any{
		"expression":      evalWrapper(expr),
		"target":          map[string]any{"context": t.id},
		"awaitPromise":    true,
		"resultOwnership": "none",
	}, &r)
	if err != nil {
		return err
	}
	if r.Type == "exception" {
		return &ScriptError{Message: r.ExceptionDetails.Text}
	}
	return decode(r.Result.Value, out)
}

func (t *bidiTab) SetViewport(ctx context.Context, width, height int, scale float64) error {
	p := map[string]any{"context": t.id, "viewport": map[string]any{"width": width, "height": height}}
	if scale > 0 {
		p["devicePixelRatio"] = scale
	}
	return t.f.call(ctx, "browsingContext.setViewport", p, nil)
}

func (t *bidiTab) Screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := t.f.call(ctx, "browsingContext.captureScreenshot", map[string]any{"context": t.id}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

func (t *bidiTab) Problems(ctx context.Context) []string {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return append([]string(nil), t.f.logs[t.id]...)
}

func (t *bidiTab) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if t == t.f.first {
		return nil // the browser's last tab goes with the browser
	}
	return t.f.call(ctx, "browsingContext.close", map[string]any{"context": t.id}, nil)
}

// Isolated is a browser of its own for one caller without a process of its
// own: a Firefox user context (a container), whose tabs share nothing with
// other user contexts' (cookies, IndexedDB, Web Locks are keyed by it).
// Starting Firefox took 2.5 s here, up to 10 s on a loaded machine; a user
// context takes milliseconds. Its first tab is a window of its own, so that
// callers running side by side do not put each other's tabs in the
// background (a tab behind another is hidden: its timers are throttled and
// it draws nothing); later tabs open in that window. Closing it closes its
// tabs and removes it.
func (f *firefox) Isolated(ctx context.Context) (Browser, error) {
	var uc struct {
		UserContext string `json:"userContext"`
	}
	if err := f.call(ctx, "browser.createUserContext", map[string]any{}, &uc); err != nil {
		return nil, err
	}
	u := &userContext{f: f, id: uc.UserContext}
	first, err := u.create(ctx, map[string]any{"type": "window", "userContext": u.id})
	if err != nil {
		u.Close()
		return nil, err
	}
	u.first = first
	return u, nil
}

type userContext struct {
	f     *firefox
	id    string
	first *bidiTab
}

func (u *userContext) Engine() Engine  { return Firefox }
func (u *userContext) Version() string { return u.f.version }
func (u *userContext) Tab() Tab        { return u.first }

// NewTab opens a tab in the user context's window, in front of its others.
func (u *userContext) NewTab(ctx context.Context) (Tab, error) {
	return u.create(ctx, map[string]any{"type": "tab", "userContext": u.id, "referenceContext": u.first.id})
}

func (u *userContext) create(ctx context.Context, params map[string]any) (*bidiTab, error) {
	var r struct {
		Context string `json:"context"`
	}
	if err := u.f.call(ctx, "browsingContext.create", params, &r); err != nil {
		return nil, err
	}
	return &bidiTab{f: u.f, id: r.Context}, nil
}

func (u *userContext) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return u.f.call(ctx, "browser.removeUserContext", map[string]any{"userContext": u.id}, nil)
}

// SetOffline emulates the network going away in this tab and coming back
// (WebDriver BiDi's emulation.setNetworkConditions): navigator.onLine and
// the offline and online events, and no new connection while offline.
func (t *bidiTab) SetOffline(ctx context.Context, offline bool) error {
	var cond any // null: the emulation ends
	if offline {
		cond = map[string]any{"type": "offline"}
	}
	return t.f.call(ctx, "emulation.setNetworkConditions", map[string]any{"networkConditions": cond, "contexts": []string{t.id}}, nil)
}
