package stack

import (
	"net/http"
	"os"
	"path"
	"slices"
	"strings"

	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
)

// ModuleFiles are the files of the built module (`make wasm` writes them to
// dist/) that the page loads from its own directory: relay.js imports
// wasm_exec.js, starts worker.js and fetches relay.wasm beside itself.
var ModuleFiles = append([]string{"relay.wasm", "wasm_exec.js"}, relayjs.Shipped()...)

// static serves the page's directory at / and, at the same root, the
// module's files from their own directory. It is a dev server: every
// response is revalidated (Cache-Control: no-cache, answered 304 Not
// Modified from the file's time), so a rebuilt module or an edited page is
// picked up by a reload, while an unchanged relay.wasm comes from the
// browser's cache instead of 3.9 MB over the wire. (Chromium also keeps
// the code it optimised of a module compiled while streaming, about 150 KB
// beside the cache entry, and none while DevTools is attached; compiling
// on a reload measured the same with it and without it: the functions are
// compiled lazily, and reading and decoding the module is the cost.) .wasm
// goes out as application/wasm, which compileStreaming requires.
type static struct {
	web      http.Handler // nil when no page directory is served
	module   string       // "" when no module directory is served
	isolated bool         // Config.CrossOriginIsolated
}

// isolation are the response headers that make a document cross-origin
// isolated (Config.CrossOriginIsolated). They go on every response the
// static server gives: a document needs them itself (a reloaded page, an
// iframe, a worker's script), and on a script or the module they are
// harmless.
var isolation = [][2]string{
	{"Cross-Origin-Opener-Policy", "same-origin"},
	{"Cross-Origin-Embedder-Policy", "require-corp"},
}

// newStatic returns nil when neither directory exists, so the stack serves
// the relay alone.
func newStatic(webDir, moduleDir string, isolated bool) http.Handler {
	s := &static{isolated: isolated}
	if isDir(webDir) {
		s.web = http.FileServer(http.Dir(webDir))
	}
	if isDir(moduleDir) {
		s.module = moduleDir
	}
	if s.web == nil && s.module == "" {
		return nil
	}
	return s
}

func isDir(d string) bool {
	st, err := os.Stat(d)
	return d != "" && err == nil && st.IsDir()
}

func (s *static) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	if s.isolated {
		for _, h := range isolation {
			w.Header().Set(h[0], h[1])
		}
	}
	if strings.HasSuffix(req.URL.Path, ".wasm") {
		w.Header().Set("Content-Type", "application/wasm")
	}
	if name := path.Base(req.URL.Path); s.module != "" && path.Dir(req.URL.Path) == "/" && slices.Contains(ModuleFiles, name) {
		http.ServeFileFS(w, req, os.DirFS(s.module), name)
		return
	}
	if s.web == nil {
		http.NotFound(w, req)
		return
	}
	s.web.ServeHTTP(w, req)
}
