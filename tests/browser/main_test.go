//go:build js && wasm

// Package browser holds the tests that need a real browser: the jsbridge
// transport, the IndexedDB store and the JavaScript API, run inside headless
// Chromium by wasmbrowsertest (see run.sh). The test binary is the page's Go
// program; relay.js and its modules are loaded into the same page from their
// embedded sources, so the tests exercise the modules that ship.
package browser

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/jsbridge"
	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
)

// relayModule is relay.js's module namespace (its exports).
var relayModule js.Value

// moduleURLs are the Blob URLs of the modules relay.js imports, by file
// name: importing one again (relayjsModule) gives the instance relay.js has.
var moduleURLs = map[string]string{}

func TestMain(m *testing.M) {
	source, err := moduleSource(relayjs.Files, "relay.js", moduleURLs)
	if err == nil {
		relayModule, err = importModule(source)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loading relay.js:", err)
		os.Exit(1)
	}
	// What wasm/main.go does in relay.wasm: hand relay.js the API. The test
	// binary is the page's Go program, so loadRelay finds it running.
	if err := jsbridge.Register(); err != nil {
		fmt.Fprintln(os.Stderr, "registering the API:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// moduleSource returns the source of the module name in files, its imports
// of the folder's other modules ("./x.js") made Blob URLs of their own
// (urls holds those made so far): a module imported from a Blob URL cannot
// resolve a relative one.
func moduleSource(files fs.FS, name string, urls map[string]string) (string, error) {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		return "", err
	}
	var failed error
	source := localImport.ReplaceAllStringFunc(string(b), func(m string) string {
		dep := localImport.FindStringSubmatch(m)[1]
		if _, ok := urls[dep]; !ok {
			src, err := moduleSource(files, dep, urls)
			if err != nil {
				failed = err
				return m
			}
			urls[dep] = blobURL(src)
		}
		return `from "` + urls[dep] + `"`
	})
	return source, failed
}

var localImport = regexp.MustCompile(`from "\./([a-z]+\.js)"`)

// importModule evaluates source as an ES module and returns its namespace.
// The module is imported by a second, tiny module (a <script type=module>)
// from a Blob URL, because Go cannot spell import() without eval, and the
// load event of a module script fires after it ran.
func importModule(source string) (js.Value, error) {
	return importURL(blobURL(source))
}

// relayjsModule is the namespace of one of the modules relay.js imports
// (store.js, …): the instance relay.js uses.
func relayjsModule(t *testing.T, name string) js.Value {
	t.Helper()
	url, ok := moduleURLs[name]
	if !ok {
		t.Fatalf("relay.js does not import %s", name)
	}
	mod, err := importURL(url)
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	return mod
}

func importURL(url string) (js.Value, error) {
	global := js.Global()
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

// testContext bounds a test's waits, so that a broken page fails the test
// instead of hanging the suite. It is no measure of speed: a test streaming
// 6,000 chunks into a transcript took 20 s with both cores taken by other
// browsers (make test beside more browser tests), and failed at its last
// step when this was 20 s.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
