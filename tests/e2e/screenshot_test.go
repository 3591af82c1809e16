package e2e

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// outDir receives the screenshots, for a person to look at (git-ignored).
const outDir = "out"

// story is echoed word by word, slowly enough to be caught mid-answer.
const story = "This answer is streaming word by word from a dev agent that has no public address. " +
	"The page reached it through a relay, over a WebSocket, from a Go client compiled to WebAssembly. " +
	"Reload the tab now and the answer carries on from the last word this page saw; " +
	"take the network away and it waits, then resumes, with nothing lost and nothing shown twice."

// layout is what the screenshots' checks read from the page.
type layout struct {
	ViewportWidth int     `json:"vw"`
	PageWidth     int     `json:"pw"` // the document's scroll width: wider than the viewport means sideways scrolling
	ComposerTop   float64 `json:"composerTop"`
	ComposerBot   float64 `json:"composerBottom"`
	ViewportH     float64 `json:"vh"`
	StatusShown   bool    `json:"statusShown"`
	AtEnd         bool    `json:"atEnd"` // the conversation is scrolled to its newest line
	Status        string  `json:"status"`
	// TitleClear says the page's title is shown whole (not cut short) and
	// ends before the connection state begins.
	TitleClear bool `json:"titleClear"`
	// PromptFont is the composer's text size in CSS px. Safari on iOS zooms
	// the page into a field whose text is smaller than 16 px when it is
	// focused, and leaves it zoomed: every tap on the composer did that.
	PromptFont float64 `json:"promptFont"`
}

// readLayout reads the layout as the next frame shows it. The page keeps
// the end in view from a ResizeObserver, once per frame; a chunk that came
// since the last frame is not scrolled to yet. A ResizeObserver made here
// reports at the next frame, after the page's own (observers are called in
// the order they were made).
const readLayout = `new Promise((resolve) => {
	const transcript = document.getElementById("transcript");
	const read = new ResizeObserver(() => {
		read.disconnect();
		const c = document.getElementById("composer").getBoundingClientRect();
		const s = document.getElementById("status").getBoundingClientRect();
		const v = document.getElementById("scroller");
		const h = document.querySelector("h1");
		resolve({
			vw: innerWidth, pw: document.documentElement.scrollWidth, vh: innerHeight,
			composerTop: c.top, composerBottom: c.bottom,
			statusShown: s.width > 0 && s.right <= innerWidth,
			status: document.getElementById("status-text").textContent,
			atEnd: v.scrollHeight - v.scrollTop - v.clientHeight < 2,
			titleClear: h.scrollWidth <= h.clientWidth && h.getBoundingClientRect().right <= s.left,
			promptFont: parseFloat(getComputedStyle(document.getElementById("prompt")).fontSize),
		});
	});
	read.observe(transcript);
})`

// Screenshots of the page mid-conversation, at a desktop and a phone
// viewport (and the phone in the dark scheme), written to out/ on every run.
// The checks fail when the layout breaks: sideways scrolling, a composer
// pushed off screen, a hidden connection state, a title cut short.
func TestScreenshots(t *testing.T) {
	t.Parallel()
	s := startStack(t, 40)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL())

	tb.viewport(1280, 800, false)
	if err := writeShot(tb, "empty.png"); err != nil {
		t.Error(err)
	}
	tb.prompt("ping")
	tb.waitFor("pong", lastAgentDone)
	tb.prompt("count 5")
	tb.waitFor("the count", lastAgentDone)
	tb.prompt(story)
	tb.waitFor("the echo to be under way", lastAgentChunks+" >= 25")
	shoot(t, tb, "desktop.png", 1280, 800)

	tb.waitFor("the echo to end", lastAgentDone)
	tb.viewport(390, 844, true) // an iPhone 12
	var vw int
	tb.eval("innerWidth", &vw)
	if (engine == webdriver.WebKit || engine == webdriver.WPE) && vw > 390 {
		t.Logf("%s: no phone.png: its window is at least %d px wide and its WebDriver emulates no device", engine, vw)
		return
	}
	tb.prompt(story)
	tb.waitFor("the second echo to be under way", lastAgentChunks+" >= 25")
	shoot(t, tb, "phone.png", 390, 844)
	if tb.darkScheme() {
		shoot(t, tb, "phone-dark.png", 390, 844)
	} else {
		t.Logf("%s: no phone-dark.png: its automation cannot emulate prefers-color-scheme", engine)
	}
}

// shoot checks the layout at the current viewport and writes a screenshot.
func shoot(t *testing.T, tb *tab, name string, width, height int) {
	t.Helper()
	var l layout
	tb.eval(readLayout, &l)
	if l.ViewportWidth != width {
		t.Errorf("%s: the viewport is %d wide, want %d", name, l.ViewportWidth, width)
	}
	if l.PageWidth > l.ViewportWidth {
		t.Errorf("%s: the page is %d px wide in a %d px viewport: it scrolls sideways", name, l.PageWidth, l.ViewportWidth)
	}
	if l.ComposerTop < l.ViewportH/2 || l.ComposerBot > l.ViewportH+0.5 {
		t.Errorf("%s: the composer spans %.0f–%.0f px of a %.0f px viewport, want it at the bottom, on screen", name, l.ComposerTop, l.ComposerBot, l.ViewportH)
	}
	if !l.AtEnd {
		t.Errorf("%s: the conversation is not scrolled to the newest line while it streams", name)
	}
	if !l.StatusShown || l.Status != "Connected" {
		t.Errorf("%s: the connection state shows %q (on screen: %v), want Connected", name, l.Status, l.StatusShown)
	}
	if !l.TitleClear {
		t.Errorf("%s: the page's title is cut short or runs under the connection state", name)
	}
	if l.PromptFont < 16 {
		t.Errorf("%s: the composer's text is %.4g px; under 16 px Safari on iOS zooms the page in at every tap on it", name, l.PromptFont)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	buf, err := tb.page.screenshot(ctx)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("%s: not a PNG: %v", name, err)
	}
	if b := img.Bounds(); b.Dx() < width || b.Dy() < height {
		t.Errorf("%s: the screenshot is %dx%d, want at least %dx%d", name, b.Dx(), b.Dy(), width, height)
	}
	if err := writeOut(shotName(name), buf); err != nil {
		t.Fatal(err)
	}
}

// writeOut writes a file to out/, creating it.
func writeOut(name string, b []byte) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(outDir, name), b, 0o644)
}
