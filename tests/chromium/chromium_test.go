package chromium_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/relaywasm/relaywasm/tests/chromium"
)

// A page's uncaught exceptions and console.error calls are recorded in
// order, with their text, and nothing else the console says is; a second
// tab opened from the first has a record of its own.
func TestProblems(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/broken":
			w.Write([]byte(`<script>
console.log("fine"); console.warn("still fine");
console.error("bad", 42, {a: 1});
throw new Error("boom");
</script>`))
		default:
			w.Write([]byte(`<p>fine</p>`))
		}
	}))
	defer srv.Close()

	dir := t.TempDir()
	b, err := chromium.Start(chromium.Options{Profile: filepath.Join(dir, "profile"), Scratch: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	broken, err := chromium.OpenTab(b.Context(), srv.URL+"/broken", chromium.DisableNetworkTracking())
	if err != nil {
		t.Fatal(err)
	}
	fine, err := chromium.OpenTab(broken.Context(), srv.URL+"/fine")
	if err != nil {
		t.Fatal(err)
	}
	defer fine.Close()

	// Events arrive asynchronously; a round trip to the page after the load
	// event lets them in, and the deadline only stops a broken browser.
	ctx, cancel := context.WithTimeout(broken.Context(), 30*time.Second)
	defer cancel()
	for len(broken.Problems()) < 2 {
		var ok bool
		if err := chromedp.Run(ctx, chromedp.Evaluate(`true`, &ok)); err != nil {
			break // reported below with what did arrive
		}
	}
	got := broken.Problems()
	if len(got) != 2 || got[0] != `console.error: "bad" 42 Object` || !strings.HasPrefix(got[1], "uncaught: ") || !strings.Contains(got[1], "boom") {
		t.Fatalf("problems of the broken page: %q", got)
	}
	if p := fine.Problems(); len(p) != 0 {
		t.Errorf("problems of the fine page: %q", p)
	}
	got[0] = "changed"
	if slices.Contains(broken.Problems(), "changed") {
		t.Error("Problems returned the tab's own slice")
	}
}

// Isolated contexts of one browser share no storage; a window opened from
// a tab shares its tab's; and every window's page stays visible, at the
// browser's size, whatever opens after it (OpenWindow).
func TestIsolatedWindows(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<p>fine</p>`))
	}))
	defer srv.Close()

	dir := t.TempDir()
	b, err := chromium.Start(chromium.Options{Profile: filepath.Join(dir, "profile"), Scratch: dir, Width: 800, Height: 600})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(parent context.Context) *chromium.Tab {
		t.Helper()
		tab, err := chromium.OpenWindow(parent, srv.URL+"/")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tab.Close)
		return tab
	}
	eval := func(tab *chromium.Tab, expr string, out any) {
		t.Helper()
		c, cancel := context.WithTimeout(tab.Context(), 30*time.Second)
		defer cancel()
		if err := chromedp.Run(c, chromedp.Evaluate(expr, out)); err != nil {
			t.Fatal(err)
		}
	}
	one, closeOne, err := b.Isolated(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeOne()
	two, closeTwo, err := b.Isolated(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeTwo()

	first := open(one)
	eval(first, `localStorage.setItem("k", "one"), true`, nil)
	other := open(two)
	sibling := open(first.Context())
	for _, c := range []struct {
		name string
		tab  *chromium.Tab
		want string
	}{{"the first window", first, "one"}, {"a window of another context", other, ""}, {"a window opened from the first", sibling, "one"}} {
		var got struct {
			Stored     string `json:"stored"`
			Visibility string `json:"visibility"`
			Width      int    `json:"width"`
		}
		eval(c.tab, `({stored: localStorage.getItem("k") ?? "", visibility: document.visibilityState, width: outerWidth})`, &got)
		if got.Stored != c.want || got.Visibility != "visible" || got.Width != 800 {
			t.Errorf("%s: stored %q, %s, %d px wide; want %q, visible, 800 px", c.name, got.Stored, got.Visibility, got.Width, c.want)
		}
	}
}
