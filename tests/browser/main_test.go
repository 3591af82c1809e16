//go:build js && wasm

// Package browser holds the tests that need a real browser: the jsbridge
// transport, the IndexedDB store and the JavaScript API, run inside headless
// Chromium by wasmbrowsertest (see run.sh). The test binary is the page's Go
// program; relay.js is loaded into the same page from its embedded source,
// so the tests exercise the module that ships.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/jsbridge"
	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
)

// relayModule is relay.js's module namespace (its exports).
var relayModule js.Value

func TestMain(m *testing.M) {
	// relay.js imports stream.js beside it; from a Blob URL, "beside" is
	// the Blob URL of stream.js's embedded source.
	relaySource := strings.Replace(relayjs.RelayJS, `"./stream.js"`, `"`+blobURL(relayjs.StreamJS)+`"`, 1)
	mod, err := importModule(relaySource)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loading relay.js:", err)
		os.Exit(1)
	}
	relayModule = mod
	// What wasm/main.go does in relay.wasm: hand relay.js the API. The test
	// binary is the page's Go program, so loadRelay finds it running.
	if err := jsbridge.Register(); err != nil {
		fmt.Fprintln(os.Stderr, "registering the API:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// importModule evaluates source as an ES module and returns its namespace.
// The module is imported by a second, tiny module (a <script type=module>)
// from a Blob URL, because Go cannot spell import() without eval, and the
// load event of a module script fires after it ran.
func importModule(source string) (js.Value, error) {
	global := js.Global()
	url := blobURL(source)
	const slot = "__relaywasm_test_module"
	shim := blobURL(`import * as m from "` + url + `"; globalThis.` + slot + ` = m;`)
	done := make(chan error, 1)
	script := global.Get("document").Call("createElement", "script")
	onload := js.FuncOf(func(js.Value, []js.Value) any { done <- nil; return nil })
	onerror := js.FuncOf(func(js.Value, []js.Value) any { done <- errors.New("module failed to load"); return nil })
	defer onload.Release()
	defer onerror.Release()
	script.Set("type", "module")
	script.Set("onload", onload)
	script.Set("onerror", onerror)
	script.Set("src", shim)
	global.Get("document").Get("head").Call("appendChild", script)
	select {
	case err := <-done:
		if err != nil {
			return js.Value{}, err
		}
	case <-time.After(10 * time.Second):
		return js.Value{}, errors.New("timed out loading the module")
	}
	mod := global.Get(slot)
	if mod.IsUndefined() {
		return js.Value{}, errors.New("the module did not evaluate (a syntax error?)")
	}
	return mod, nil
}

// testModule returns the loader of a test-only module, imported on first use.
func testModule(name, source string) func(*testing.T) js.Value {
	var (
		once sync.Once
		mod  js.Value
		err  error
	)
	return func(t *testing.T) js.Value {
		t.Helper()
		once.Do(func() { mod, err = importModule(source) })
		if err != nil {
			t.Fatalf("loading %s: %v", name, err)
		}
		return mod
	}
}

func blobURL(source string) string {
	global := js.Global()
	blob := global.Get("Blob").New([]any{source}, map[string]any{"type": "text/javascript"})
	return global.Get("URL").Call("createObjectURL", blob).String()
}

// await waits for a JavaScript Promise; a rejection is an error carrying the
// rejection's code and message.
func await(ctx context.Context, p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	ok := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{v: arg0(args)}
		return nil
	})
	fail := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- result{err: jsError(arg0(args))}
		return nil
	})
	defer ok.Release()
	defer fail.Release()
	p.Call("then", ok, fail)
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return js.Value{}, ctx.Err()
	}
}

func arg0(args []js.Value) js.Value {
	if len(args) == 0 {
		return js.Undefined()
	}
	return args[0]
}

// JSError is a rejection or exception seen from Go.
type JSError struct {
	Name, Code, Message string
}

func (e *JSError) Error() string { return e.Name + " [" + e.Code + "]: " + e.Message }

func jsError(v js.Value) error {
	if v.Type() != js.TypeObject {
		return &JSError{Name: "non-object", Message: v.String()}
	}
	str := func(p string) string {
		if f := v.Get(p); f.Type() == js.TypeString {
			return f.String()
		}
		return ""
	}
	return &JSError{Name: str("name"), Code: str("code"), Message: str("message")}
}

// env returns a variable the test run (run.sh) passes in. A missing one
// fails the test: a run that cannot reach the relay has tested nothing.
func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set; run the browser tests with tests/browser/run.sh", name)
	}
	return v
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
