// Package relayjs ships the JavaScript half of relaywasm: relay.js, the ES
// module an application imports (it loads relay.wasm, owns the WebSocket
// event handlers and installs the helpers jsbridge calls), and relay.d.ts,
// its TypeScript declarations.
//
// The files are embedded so that what a server hands out, what `make wasm`
// copies into dist/ and what the browser tests import are the same bytes as
// the ones in this folder. wasm_exec.js is deliberately not here: it must be
// the one of the Go that built relay.wasm, so the build copies it from
// $(go env GOROOT)/lib/wasm.
package relayjs

import "embed"

// RelayJS is the source of relay.js.
//
//go:embed relay.js
var RelayJS string

// StreamJS is the source of stream.js, which relay.js imports (att.stream()).
//
//go:embed stream.js
var StreamJS string

// RelayDTS is the source of relay.d.ts.
//
//go:embed relay.d.ts
var RelayDTS string

// Files holds relay.js, stream.js and relay.d.ts, for serving them as they are.
//
//go:embed relay.js stream.js relay.d.ts
var Files embed.FS
