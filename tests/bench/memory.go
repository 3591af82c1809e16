package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// memoryEngines are the engines the memory figure is measured in. Each
// tells the size of relay.wasm's linear memory the same way (its exported
// WebAssembly.Memory, which the bench page keeps when relay.js
// instantiates the module), so every engine can tell it.
var memoryEngines = []webdriver.Engine{webdriver.Chromium, webdriver.Firefox, webdriver.WebKit}

// memoryFigures are (7): relay.wasm's memory after Sizes.MemoryFrames
// received messages, beside its memory once attached, in each engine. Go's
// wasm memory only grows (golang/go#59061), and a phone kills a tab that
// uses too much: the figure is the high-water mark a long stream leaves.
func memoryFigures(ctx context.Context, cfg Config, tmp string) ([]Row, error) {
	var rows []Row
	for _, e := range memoryEngines {
		before, after, version, err := memoryIn(ctx, cfg, e, filepath.Join(tmp, "memory-"+string(e)))
		if err != nil {
			return rows, fmt.Errorf("memory in %s: %w", e, err)
		}
		rows = append(rows, Row{
			Figure: fmt.Sprintf("relay.wasm memory after %d received messages, %s", cfg.Sizes.MemoryFrames, version),
			Unit:   "B", Value: after, Baseline: before, BaseName: "once attached", Ratio: after / before,
		})
	}
	return rows, nil
}

// caller calls window.bench.<fn>(args…) in a page, awaiting it, into out.
type caller interface {
	call(out any, fn string, args ...any) error
}

// memoryIn streams in one engine and reads the module's memory before and
// after. Chromium goes through the figures' own session (chromedp); Firefox
// and WebKit through tests/webdriver.
func memoryIn(ctx context.Context, cfg Config, e webdriver.Engine, tmp string) (before, after float64, version string, err error) {
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return 0, 0, "", err
	}
	var c caller
	if e == webdriver.Chromium {
		s, err := openSession(ctx, cfg, cfg.ModuleDir, tmp)
		if err != nil {
			return 0, 0, "", err
		}
		defer s.close()
		c, version = s.tab, "Chromium"
	} else {
		st, err := startStack(ctx, cfg.webDir(), cfg.ModuleDir)
		if err != nil {
			return 0, 0, "", err
		}
		defer st.Close()
		b, err := webdriver.Start(ctx, e, webdriver.Options{Scratch: tmp})
		if err != nil {
			return 0, 0, "", err
		}
		defer b.Close()
		t := &wdTab{ctx: ctx, t: b.Tab()}
		if err := t.t.Navigate(ctx, st.PageURL()); err != nil {
			return 0, 0, "", err
		}
		// WebKit may fire the load event before the page's module ran.
		if err := t.waitBench(); err != nil {
			return 0, 0, "", err
		}
		if err := t.call(nil, "configure", newPageConfig(st, cfg.Sizes.History)); err != nil {
			return 0, 0, "", err
		}
		c, version = t, b.Version()
	}
	if err := c.call(nil, "setup"); err != nil {
		return 0, 0, "", err
	}
	if err := c.call(&before, "memory"); err != nil {
		return 0, 0, "", err
	}
	// In streams of Sizes.Frames, as the inbound figure streams: one
	// stream of 100,000 at full speed outran the relay's queue for a
	// consumer (slow_consumer) on the loaded machine, and the page counts
	// every message received either way.
	for left := cfg.Sizes.MemoryFrames; left > 0; {
		n := min(left, cfg.Sizes.Frames)
		var r streamResult
		if err := c.call(&r, "stream", wasmIDB, n, cfg.Sizes.FrameBytes); err != nil {
			return 0, 0, "", err
		}
		left -= n
	}
	if err := c.call(&after, "memory"); err != nil {
		return 0, 0, "", err
	}
	return before, after, version, nil
}

// wdTab is the bench page in Firefox or WebKit.
type wdTab struct {
	ctx context.Context
	t   webdriver.Tab
}

// waitBench waits until the bench page's module has set window.bench.
func (w *wdTab) waitBench() error {
	ctx, cancel := context.WithTimeout(w.ctx, evalLimit)
	defer cancel()
	for {
		var ok bool
		if err := w.t.Eval(ctx, `typeof window.bench === "object"`, &ok); err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the bench page never set window.bench: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (w *wdTab) call(out any, fn string, args ...any) error {
	if args == nil {
		args = []any{}
	}
	js, err := json.Marshal(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(w.ctx, evalLimit)
	defer cancel()
	if err := w.t.Eval(ctx, fmt.Sprintf("window.bench.%s(...%s)", fn, js), out); err != nil {
		return fmt.Errorf("bench.%s: %w (the page reported %v)", fn, err, w.t.Problems(ctx))
	}
	return nil
}
