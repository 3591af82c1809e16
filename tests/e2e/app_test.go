package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// demo/app is a web app as users build them: Vite, TypeScript, the official
// ACP SDK over att.stream(), and relaywasm installed from the tarball `make
// npm` packs (`make app`, which `make test` runs: npm ci from the app's
// committed lockfile, then npm install --no-save of the tarball). These
// tests type-check it, build it with vite build, serve the output and no
// module files beside it (the bundle must carry relay.wasm and wasm_exec.js
// itself), and chat through it. window.__app is what they read.

var appDir = filepath.Join(repoRoot, "demo", "app")

var (
	appBuild     sync.Once
	appOut       string
	appBuildFail string
)

// builtApp runs tsc --noEmit and vite build once per test run and returns
// the folder of the built app.
func builtApp(t *testing.T) string {
	t.Helper()
	appInstalled(t)
	appBuild.Do(func() {
		dir, err := os.MkdirTemp("", "relaywasm-app-")
		if err != nil {
			appBuildFail = err.Error()
			return
		}
		appOut = dir
		if err := appTool("tsc", "--noEmit"); err != nil {
			appBuildFail = err.Error()
			return
		}
		if err := viteBuild(dir); err != nil {
			appBuildFail = err.Error()
		}
	})
	if appBuildFail != "" {
		t.Fatal(appBuildFail)
	}
	return appOut
}

// viteBuild runs vite build of demo/app into the folder out, with flags
// added.
func viteBuild(out string, flags ...string) error {
	return appTool("vite", append([]string{"build", "--outDir", out, "--emptyOutDir", "--logLevel", "warn"}, flags...)...)
}

// appTool runs one of demo/app's npm tools in demo/app.
func appTool(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(appDir, "node_modules", ".bin", name), args...)
	cmd.Dir = appDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// appInstalled fails the test unless `make app` installed relaywasm's
// tarball into demo/app.
func appInstalled(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(appDir, "node_modules", "relaywasm", "package.json")); err != nil {
		t.Fatal("demo/app has no relaywasm installed: run `make app` (npm ci, then the packed tarball)")
	}
}

// The built bundle carries the module's files as assets, emitted by the
// bundler from relay.js's new URL(…, import.meta.url), with no configuration,
// and worker.js as the worker's bundle.
func TestDemoAppBundlesTheModule(t *testing.T) {
	t.Parallel()
	out := builtApp(t)
	assets, err := os.ReadDir(filepath.Join(out, "assets"))
	if err != nil {
		t.Fatal(err)
	}
	// Each once: a second new URL("./worker.js", import.meta.url) in
	// relay.js, outside new Worker(...), would have it emit worker.js again
	// as a file of its own.
	var counts [3]int
	for _, a := range assets {
		for i, k := range appAssets {
			if strings.HasPrefix(a.Name(), k.prefix) && strings.HasSuffix(a.Name(), k.suffix) {
				counts[i]++
			}
		}
	}
	if counts != [3]int{1, 1, 1} {
		t.Errorf("vite build emitted %v; want one each of relay-*.wasm, wasm_exec-*.js and worker-*.js among the assets", assets)
	}
}

// appAssets are the module's files as vite build names them.
var appAssets = [3]struct{ prefix, suffix string }{{"relay-", ".wasm"}, {"wasm_exec-", ".js"}, {"worker-", ".js"}}

// appPage opens the built app against a stack of its own; fragment is
// added to its URL (the app's settings, as "worker=1").
func appPage(t *testing.T, rate float64, fragment string) *tab {
	t.Helper()
	out := builtApp(t)
	s := startStackOf(t, out, rate, nil, logger())
	tb := openTab(t, newBrowser(t), "app", s.PageURL()+fragment)
	appReady(tb)
	return tb
}

func appReady(tb *tab) {
	tb.t.Helper()
	tb.waitFor("the app to be ready", `window.__app && (__app.ready || __app.error)`)
	var failed string
	tb.eval(`__app.error ? JSON.stringify(__app.error) : ""`, &failed)
	if failed != "" {
		tb.t.Fatalf("the app failed: %s", failed)
	}
}

// A prompt through the built app: the SDK's session/prompt is answered
// end_turn after every chunk, once and in order; with relay.wasm on the
// page's thread and in the Web Worker the bundler emitted worker.js as
// (the worker's own imports of wasm_exec.js and relay.wasm bundled with it).
func TestDemoAppChats(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, fragment string }{{"main", ""}, {"worker", "#worker=1"}} {
		t.Run(c.mode, func(t *testing.T) { appChats(t, c.mode, c.fragment) })
	}
}

func appChats(t *testing.T, mode, fragment string) {
	appCount(appPage(t, 0, fragment), mode, `/relay-[^/]*\.wasm$`)
}

// appCount checks that relay.wasm runs in mode in the app, that a count is
// answered whole and end_turn, and that the page fetched relay.wasm (its
// path matching wasmPath) once.
func appCount(tb *tab, mode, wasmPath string) {
	t := tb.t
	t.Helper()
	var got struct{ Mode, Reason string }
	tb.eval(`({mode: __app.mode, reason: __app.reason})`, &got)
	if got.Mode != mode {
		t.Fatalf("relay.wasm runs in %q (%s), want %q", got.Mode, got.Reason, mode)
	}
	tb.eval(`__app.send("count 300")`, nil)
	tb.waitFor("the answer to end", `__app.stopReasons.length === 1`)
	var text, stop string
	tb.eval(`__app.text`, &text)
	tb.eval(`__app.stopReasons[0]`, &stop)
	if stop != "end_turn" || text != countText(300) {
		t.Errorf("stop %q, text %s; want end_turn and %s", stop, describe(text), describe(countText(300)))
	}
	// The page fetched relay.wasm once: loadRelay took the compile that
	// main.ts's first import, relaywasm/preload, had started (and in worker
	// mode handed the compiled module to the worker).
	var fetches int
	tb.eval(`performance.getEntriesByType("resource").filter((e) => new RegExp(`+strconv.Quote(wasmPath)+`).test(new URL(e.name).pathname)).length`, &fetches)
	if fetches != 1 {
		t.Errorf("the app fetched relay.wasm %d times, want once", fetches)
	}
}

// A reload in the middle of an answer: the reloaded app loads its session
// (session/load) and shows the conversation with every chunk once, in order,
// and the rest of the answer after it.
func TestDemoAppReloadKeepsTheConversation(t *testing.T) {
	t.Parallel()
	n := countLasting(7500 * time.Millisecond)
	tb := appPage(t, streamRate, "")
	appReloadMidCount(tb, n)
	tb.waitFor("the whole answer", `__app.text.length >= `+strconv.Itoa(len(countText(n))))
	var text string
	tb.eval(`__app.text`, &text)
	turns := appTurns(tb)
	if text != countText(n) {
		t.Errorf("after the reload the answer reads %s, want %s", describe(text), describe(countText(n)))
	}
	if len(turns) != 2 || turns[0].Role != "user" || turns[0].Text != "count "+strconv.Itoa(n) || turns[1].Role != "agent" {
		t.Errorf("turns after the reload: %+v; want the prompt, then the answer", clipTurns(turns))
	}
}

// The same reload against a runtime that does not resume, as contenox
// v1.0.0 ships: what it sent while the page was away never reaches the
// reloaded app, and relay.js says so (not_resumed) as the app's initialize,
// held until then, goes out. That loss comes before the SDK's conversation
// began, so its connection stays up, and session/load brings the whole
// answer back from the agent, the rest of it streaming after. In worker
// mode the loss and the sends' outcomes cross from the worker in the order
// the engine told them.
func TestDemoAppReloadAgainstNonResumingRuntime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, fragment string }{{"main", ""}, {"worker", "#worker=1"}} {
		t.Run(c.mode, func(t *testing.T) { appReloadNonResuming(t, c.fragment) })
	}
}

func appReloadNonResuming(t *testing.T, fragment string) {
	n := countLasting(7500 * time.Millisecond)
	s := startNonResumingStack(t, builtApp(t), streamRate)
	tb := openTab(t, newBrowser(t), "app", s.PageURL()+fragment)
	appReady(tb)
	appReloadMidCount(tb, n)
	appWholeThenPing(tb, n, "the reload")
}

// A dropped connection under a conversation under way, against a runtime
// that does not resume: the relay restarts in the middle of an answer, what
// the agent sent meanwhile is gone, and att.stream() says so (not_resumed),
// which closes the SDK's connection. The app opens a new stream and loads
// its session again, and session/load brings the whole answer back, the
// rest of it streaming after; the app goes on.
func TestDemoAppRelayRestartAgainstNonResumingRuntime(t *testing.T) {
	t.Parallel()
	n := countLasting(7500 * time.Millisecond)
	s := startNonResumingStack(t, builtApp(t), streamRate)
	tb := openTab(t, newBrowser(t), "app", s.PageURL())
	appReady(tb)
	tb.eval(`void __app.send("count `+strconv.Itoa(n)+`")`, nil)
	tb.waitFor("the answer to be under way", `__app.chunks >= `+strconv.Itoa(interruptAfter))
	restartRelay(tb, s)
	tb.waitFor("the app to come back from the loss", `__app.error || (__app.losses.length > 0 && __app.ready)`)
	var st struct {
		Error  *struct{ Code, Message string }
		Losses []string
	}
	tb.eval(`({error: __app.error, losses: __app.losses})`, &st)
	if st.Error != nil || len(st.Losses) != 1 || st.Losses[0] != "not_resumed" {
		t.Fatalf("after the relay restarted: error %+v, losses %q; want no error and one not_resumed", st.Error, st.Losses)
	}
	appWholeThenPing(tb, n, "the loss")
}

// appWholeThenPing waits until the app shows the whole count of n, checks
// it, and checks that the app goes on: a ping is answered pong. after says
// after what, for the failure messages.
func appWholeThenPing(tb *tab, n int, after string) {
	t := tb.t
	t.Helper()
	tb.waitFor("the whole answer", `__app.text.length >= `+strconv.Itoa(len(countText(n))))
	var text string
	tb.eval(`__app.text`, &text)
	if text != countText(n) {
		t.Errorf("after %s the answer reads %s, want %s", after, describe(text), describe(countText(n)))
	}
	var stop string
	tb.eval(`__app.send("ping")`, &stop)
	var last struct{ Role, Text string }
	tb.eval(`__app.turns.at(-1)`, &last)
	if stop != "end_turn" || last.Role != "agent" || last.Text != "pong" {
		t.Errorf("a prompt after %s ended %q, its answer %+v; want end_turn and pong", after, stop, last)
	}
}

// appReloadMidCount has the app ask for a count of n, reloads it once
// the answer is under way, and checks that the reloaded app loaded its
// session.
func appReloadMidCount(tb *tab, n int) {
	tb.t.Helper()
	tb.eval(`void __app.send("count `+strconv.Itoa(n)+`")`, nil)
	tb.waitFor("the answer to be under way", `__app.chunks >= `+strconv.Itoa(interruptAfter))
	tb.do("reloading", tb.page.reload)
	appReady(tb)
	var loaded bool
	tb.eval(`__app.loaded`, &loaded)
	if !loaded {
		tb.t.Fatal("the reloaded app did not load its session")
	}
}

func clipTurns[T any](turns []T) []T {
	if len(turns) > 4 {
		return turns[:4]
	}
	return turns
}

// appTurn is one of the app's turns (__app.turns).
type appTurn struct {
	Role string `json:"role"`
	Text string `json:"text"`
}

func appTurns(tb *tab) []appTurn {
	tb.t.Helper()
	var turns []appTurn
	tb.eval(`__app.turns`, &turns)
	return turns
}
