// Package relayjs ships the JavaScript half of relaywasm: relay.js, the ES
// module an application imports, the modules it imports (one per concern,
// relay.js says which), preload.js (a page's head starts relay.wasm's
// compile with it), and relay.d.ts and preload.d.ts, their TypeScript
// declarations. The files are shipped as they are: no build step, no
// bundler needed.
//
// The files are embedded so that what a server hands out, what `make wasm`
// copies into dist/ and what the browser tests import are the same bytes as
// the ones in this folder. wasm_exec.js is deliberately not here: it must be
// the one of the Go that built relay.wasm, so the build copies it from
// $(go env GOROOT)/lib/wasm.
package relayjs

import "embed"

//go:generate go run ../boundary/gen

// Names are the files of this folder that ship, relay.js first.
var Names = []string{
	"relay.js", "relay.d.ts", "attachment.js", "boundary.js", "bridge.js", "compile.js", "crossing.js",
	"errors.js", "lifecycle.js", "load.js", "preload.js", "preload.d.ts", "records.js", "remote.js", "sockets.js", "store.js",
	"stream.js", "tabs.js", "worker.js",
}

// Files holds the files Names lists, for serving them as they are.
//
//go:embed *.js *.d.ts
var Files embed.FS

// RelayDTS is the source of relay.d.ts.
//
//go:embed relay.d.ts
var RelayDTS string

// BoundaryJS is the committed boundary.js (generated from jsbridge/boundary).
//
//go:embed boundary.js
var BoundaryJS string
