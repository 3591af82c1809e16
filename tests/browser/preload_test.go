//go:build !js

package browser

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// compileSpy counts the page's compiles of relay.wasm, streaming or from the
// whole body; the module script after it notes when the page's own modules
// ran. It must come first in the page.
const compileSpy = `<script>
window.spy = { streaming: 0, whole: 0 };
for (const [name, count] of [["compileStreaming", "streaming"], ["compile", "whole"]]) {
  const original = WebAssembly[name];
  WebAssembly[name] = (...args) => {
    spy[count]++;
    return original.apply(WebAssembly, args);
  };
}
</script>`

const spiedLoad = `<script type="module">
import { loadRelay } from "./relay.js";
spy.modules = performance.now();
window.loaded = loadRelay({ storage: "memory" }).then(() => "loaded", (e) => e.code + ": " + e.message);
</script>`

// what the page reports once loadRelay settled
type compiles struct {
	Loaded    string
	Streaming int
	Whole     int
	Fetches   int  // requests for relay.wasm, from resource timing
	Early     bool // the first request for relay.wasm started before the page's modules ran
}

const reportCompiles = `window.loaded.then((loaded) => {
  const fetches = performance.getEntriesByName(new URL("relay.wasm", location.href).href);
  return { loaded, streaming: spy.streaming, whole: spy.whole, fetches: fetches.length, early: fetches[0]?.startTime < spy.modules };
})`

// preload.js starts relay.wasm's compile before the page's modules have
// loaded, and loadRelay takes that compile instead of fetching and
// compiling again; without preload.js the compile starts only once the
// page's modules run (so the first case's "early" is preload.js's doing).
// A preload that failed (the first request for relay.wasm answered 503) is
// tried once more by loadRelay, which reports what the server said when
// that fails too; and a relay.wasm served with a type other
// than application/wasm, which compileStreaming refuses, is compiled from
// its whole body.
func TestPreloadAndContentType(t *testing.T) {
	wasm, b := moduleBrowser(t)

	preload := `<script type="module" src="preload.js"></script>`
	for _, c := range []struct {
		name string
		s    served
		want compiles
	}{
		{"preloaded", served{page: compileSpy + preload + spiedLoad}, compiles{"loaded", 1, 0, 1, true}},
		{"not preloaded", served{page: compileSpy + spiedLoad}, compiles{"loaded", 1, 0, 1, false}},
		{"preload failed", served{page: compileSpy + preload + spiedLoad, failing: 1}, compiles{"loaded", 1, 0, 2, true}},
		{"preload and its retry failed", served{page: compileSpy + preload + spiedLoad, failing: 2},
			compiles{"wasm_load_failed: could not start relay.wasm: HTTP 503 for SERVER/relay.wasm: not yet", 0, 0, 2, true}},
		{"served as octet-stream", served{page: compileSpy + spiedLoad, wasmType: "application/octet-stream"}, compiles{"loaded", 0, 1, 1, false}},
		{"preloaded as octet-stream", served{page: compileSpy + preload + spiedLoad, wasmType: "application/octet-stream"}, compiles{"loaded", 0, 1, 1, true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.s.wasm = wasm
			srv := httptest.NewServer(modulePage(t, c.s))
			defer srv.Close()
			var got compiles
			evalPage(t, b, srv.URL, reportCompiles, &got)
			got.Loaded = strings.ReplaceAll(got.Loaded, srv.URL, "SERVER")
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
