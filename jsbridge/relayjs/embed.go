// Package relayjs ships the JavaScript half of relaywasm: relay.js, the ES
// module an application imports, the modules it imports (one per concern,
// relay.js says which), preload.js (a page's head starts relay.wasm's
// compile with it), worker.js (worker mode's worker), and relay.d.ts and
// preload.d.ts, their TypeScript declarations. tests/browser loads the
// modules as they are; each entry ships as one file holding what it imports
// (jsbridge/bundle).
//
// The files are embedded so that what `make wasm` bundles into dist/ and
// what the browser tests import are the same bytes as the ones in this
// folder. wasm_exec.js is deliberately not here: it must be
// the one of the Go that built relay.wasm, so the build copies it from
// $(go env GOROOT)/lib/wasm.
package relayjs

import (
	"embed"
	"slices"
)

//go:generate go run ../boundary/gen

// Names are the files of this folder, relay.js first: the modules the
// entries are made of, and the declarations.
var Names = []string{
	"relay.js", "relay.d.ts", "attachment.js", "boundary.js", "bridge.js", "compile.js", "crossing.js", "entries.js",
	"errors.js", "held.js", "lifecycle.js", "load.js", "locks.js", "preload.js", "preload.d.ts", "records.js", "remote.js", "sockets.js", "store.js",
	"stream.js", "tabs.js", "worker.js",
}

// Entries are the modules a page or a worker loads by URL: relay.js, the
// worker mode's worker.js and preload.js. `make wasm` ships each as one file
// holding it and what it imports (jsbridge/bundle); the other modules are
// their parts.
var Entries = []string{"relay.js", "worker.js", "preload.js"}

// Declarations are the TypeScript declarations of the entries a page imports.
var Declarations = []string{"relay.d.ts", "preload.d.ts"}

// Shipped are the files of this folder's making that dist/ and the npm
// package hold: the entries, each bundled, and the declarations.
func Shipped() []string { return append(slices.Clone(Entries), Declarations...) }

// Files holds the files Names lists, for jsbridge/bundle and the browser
// tests.
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
