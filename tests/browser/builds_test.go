//go:build !js

package browser

import (
	"cmp"
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/jsbridge/bundle"
	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
	"github.com/relaywasm/relaywasm/tests/chromium"
)

// A relay.js and a relay.wasm from different builds refuse each other, and
// loadRelay says so with wasm_load_failed. This runs natively (the rest of
// the package runs in the page): it builds relay.wasm, serves it with
// relay.js's modules, and loads them in Chromium as a page does, once with
// the modules as they are, and then with boundary.js as another build would
// have it: another boundary version (relay.wasm refuses the bridge and tells
// relay.js), and a bridge under another name (a relay.wasm that cannot find
// the bridge exits without registering, as one from before the boundary was
// versioned would).
func TestBuildsRefuseEachOther(t *testing.T) {
	wasm, b := moduleBrowser(t)

	version := "export const VERSION = " + strconv.Itoa(boundary.Version) + ";"
	global := `export const BRIDGE_GLOBAL = "` + boundary.BridgeGlobal + `";`
	for _, c := range []struct {
		name     string
		old, new string // boundary.js as served: old replaced by new
		want     string // what loadRelay settles with
	}{
		{"one build", "", "", "loaded"},
		{"another boundary version", version, "export const VERSION = " + strconv.Itoa(boundary.Version+1) + ";", "wasm_load_failed: relay.wasm speaks boundary version " + strconv.Itoa(boundary.Version)},
		{"a bridge relay.wasm cannot find", global, `export const BRIDGE_GLOBAL = "__relaywasm_bridge_other";`, "wasm_load_failed: relay.wasm exited before it registered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(relayjs.BoundaryJS, c.old) {
				t.Fatalf("boundary.js has no %q to replace", c.old)
			}
			srv := httptest.NewServer(modulePage(t, served{wasm: wasm, boundaryJS: strings.Replace(relayjs.BoundaryJS, c.old, c.new, 1)}))
			defer srv.Close()
			var got string
			evalPage(t, b, srv.URL, "window.loaded", &got)
			if !strings.HasPrefix(got, c.want) {
				t.Fatalf("loadRelay settled with %q, want %q…", got, c.want)
			}
		})
	}
}

// A file relay.js cannot load makes loadRelay say which file, from where,
// and what came instead (for worker.js, the Relay's reason for running on
// the main thread names the file and the possible causes). Where relay.js
// looked beside itself (no wasm or wasmExec option) it says so, since that
// is where a bundler that leaves new URL(…, import.meta.url) as written
// (esbuild, Rollup) fails first.
// A page served in relay.wasm's place (a single-page app's server answers
// any path it lacks with the app) is named as such, not as the engine's
// "expected magic word".
func TestMissingFilesSayWhere(t *testing.T) {
	wasm, b := moduleBrowser(t)

	const beside = " (relay.js loads relay.wasm, wasm_exec.js and worker.js from beside itself: copy them there from the package where a bundler did not, or name them with loadRelay's wasm and wasmExec)"
	const viteCache = " (relay.js loads relay.wasm, wasm_exec.js and worker.js from beside itself, and Vite's dependency optimizer moved it into its cache without them, as Vite 7 and earlier do: add optimizeDeps: { exclude: [\"relaywasm\"] } to vite.config)"
	// Vite 7's dev server as measured (7.3.8, by hand): relay.js bundled
	// (here: as it ships, one file) into node_modules/.vite/deps and
	// imported with the cache's version (?v=), its new URL(…)s left as
	// written, and nothing beside it there (wasm_exec.js, whose import
	// comes first, is not found). Vite 8 rewrites them (tests/e2e
	// TestDemoAppInViteDevServer).
	const viteDeps = "node_modules/.vite/deps/"
	inViteCache := strings.Replace(loadPage, `"./relay.js"`, `"./`+viteDeps+`relay.js?v=d3e8b02e"`, 1)
	named := strings.Replace(loadPage, `storage: "memory"`, `storage: "memory", wasm: "./elsewhere.wasm"`, 1)
	inWorker := `<!doctype html><script type="module">
import { loadRelay } from "./relay.js";
const fetched = () => performance.getEntriesByName(new URL("relay.wasm", location.href).href).length;
window.loaded = loadRelay({ storage: "memory", worker: true }).then(
  (r) => r.mode + ": " + r.reason + "; fetches of relay.wasm: " + fetched(),
  (e) => e.code + ": " + e.message);
</script>`
	for _, c := range []struct {
		name string
		s    served
		want string // what loadRelay settles with
	}{
		{"no relay.wasm", served{missing: "relay.wasm"}, "wasm_load_failed: could not start relay.wasm: HTTP 404 for SERVER/relay.wasm: 404 page not found" + beside},
		{"a page for relay.wasm", served{pageFor: "relay.wasm"}, `wasm_load_failed: could not start relay.wasm: SERVER/relay.wasm is not a WebAssembly module: it came as text/html, beginning "<!doctype html><script type=\"module\">\nimport { loadRelay } f"` + beside},
		{"no wasm_exec.js", served{missing: "wasm_exec.js"}, "wasm_load_failed: could not start relay.wasm: wasm_exec.js did not load from SERVER/wasm_exec.js: Failed to fetch dynamically imported module: SERVER/wasm_exec.js" + beside},
		{"relay.js in Vite's dependency cache", served{page: inViteCache, dir: viteDeps, bundled: true, missing: "wasm_exec.js"}, "wasm_load_failed: could not start relay.wasm: wasm_exec.js did not load from SERVER/" + viteDeps + "wasm_exec.js: Failed to fetch dynamically imported module: SERVER/" + viteDeps + "wasm_exec.js" + viteCache},
		{"no relay.wasm where it was named", served{page: named, missing: "elsewhere.wasm"}, "wasm_load_failed: could not start relay.wasm: HTTP 404 for SERVER/elsewhere.wasm: 404 page not found"},
		// The main thread takes over with the page's compile for the
		// worker: relay.wasm is fetched once.
		{"no worker.js", served{page: inWorker, missing: "worker.js"}, "main: the worker failed: worker.js did not load (not found beside relay.js, a Content-Security-Policy without worker-src, or no module workers); fetches of relay.wasm: 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.s.wasm = wasm
			srv := httptest.NewServer(modulePage(t, c.s))
			defer srv.Close()
			var got string
			evalPage(t, b, srv.URL, "window.loaded", &got)
			got = strings.ReplaceAll(got, srv.URL, "SERVER")
			if got != c.want {
				t.Fatalf("loadRelay settled with\n%q, want\n%q", got, c.want)
			}
		})
	}
}

// The URLs a page names its files with (loadRelay's wasm and wasmExec)
// resolve as the page's own fetch() resolves them: against the document's
// base URL, which a <base href> sets, on the page's thread and in worker
// mode alike. Here the page is at /app/, its base /lib/, where the files
// are. wasmExec had been imported as it was given, and "wasm_exec.js" is a
// module specifier the engines refuse ("Failed to resolve module
// specifier"); in worker mode the page had resolved it against its
// location, /app/, where it is not.
func TestNamedFilesResolveAgainstThePage(t *testing.T) {
	wasm, b := moduleBrowser(t)
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			page := `<!doctype html><base href="/lib/"><script type="module">
import { loadRelay } from "./relay.js";
window.loaded = loadRelay({ storage: "memory", worker: ` + strconv.FormatBool(mode == "worker") + `, wasm: "relay.wasm", wasmExec: "wasm_exec.js" }).then(
  (r) => r.mode + (r.reason && ": " + r.reason),
  (e) => e.code + ": " + e.message);
</script>`
			srv := httptest.NewServer(modulePage(t, served{wasm: wasm, page: page, pageFor: "app/", dir: "lib/"}))
			defer srv.Close()
			var got string
			evalPage(t, b, srv.URL+"/app", "window.loaded", &got)
			if got != mode {
				t.Fatalf("loadRelay settled with %q, want relay.wasm running in %q", strings.ReplaceAll(got, srv.URL, "SERVER"), mode)
			}
		})
	}
}

// moduleBrowser builds relay.wasm from this tree and starts a Chromium to
// load it in, or skips the test when there is no Chromium.
func moduleBrowser(t *testing.T) (wasm string, b *chromium.Browser) {
	t.Helper()
	if _, err := os.Stat(chromium.Path()); err != nil {
		t.Skipf("no Chromium at %s (make test installs it)", chromium.Path())
	}
	wasm = buildModule(t)
	b, err := chromium.Start(chromium.Options{Profile: filepath.Join(t.TempDir(), "profile"), Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return wasm, b
}

// buildModule builds relay.wasm from this tree into a temporary folder.
func buildModule(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "relay.wasm")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./wasm")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building relay.wasm: %v\n%s", err, msg)
	}
	return out
}

// evalPage opens url in a new tab of b and evaluates expr there, awaiting
// its Promise, into out.
func evalPage(t *testing.T, b *chromium.Browser, url, expr string, out any) {
	t.Helper()
	tab, err := chromium.OpenTab(b.Context(), url+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	ctx, cancel := context.WithTimeout(tab.Context(), time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Evaluate(expr, out, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})); err != nil {
		t.Fatal(err)
	}
}

// served is what modulePage serves.
type served struct {
	wasm       string // relay.wasm's path
	boundaryJS string // served as boundary.js; "" for the embedded one
	page       string // the page at /; "" for loadPage
	wasmType   string // relay.wasm's Content-Type; "" for application/wasm
	failing    int32  // how many of the first requests for relay.wasm are answered 503
	missing    string // a file answered 404
	pageFor    string // a file answered with the page, as a single-page app's server answers paths it does not have
	dir        string // the folder (ending in /) the module's files are served from; "" for /
	bundled    bool   // relay.js as it ships (one file), not its modules
}

// loadPage loads relay.js and puts what loadRelay settles with in
// window.loaded: "loaded", or the rejection's code and message.
const loadPage = `<!doctype html><script type="module">
import { loadRelay } from "./relay.js";
window.loaded = loadRelay({ storage: "memory" }).then(() => "loaded", (e) => e.code + ": " + e.message);
</script>`

// modulePage serves s.page and relay.js's modules (the embedded ones, or
// s.boundaryJS as boundary.js), wasm_exec.js the Go toolchain's and relay.wasm.
func modulePage(t *testing.T, s served) http.Handler {
	t.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	wasmExec := filepath.Join(strings.TrimSpace(string(goroot)), "lib", "wasm", "wasm_exec.js")
	page, wasmType, boundaryJS := cmp.Or(s.page, loadPage), cmp.Or(s.wasmType, "application/wasm"), cmp.Or(s.boundaryJS, relayjs.BoundaryJS)
	var wasmRequests atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/"), s.dir); {
		case s.missing != "" && name == s.missing:
			http.NotFound(w, r)
		case name == "" || name == s.pageFor:
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(page))
		case name == "relay.wasm":
			if wasmRequests.Add(1) <= s.failing {
				http.Error(w, "not yet", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", wasmType)
			http.ServeFile(w, r, s.wasm)
		case name == "wasm_exec.js":
			w.Header().Set("Content-Type", "text/javascript")
			http.ServeFile(w, r, wasmExec)
		case name == "relay.js" && s.bundled:
			b, err := bundle.File(name)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write(b)
		case name == "boundary.js":
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write([]byte(boundaryJS))
		default:
			b, err := fs.ReadFile(relayjs.Files, name)
			if err != nil {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write(b)
		}
	})
}
