//go:build js && wasm

// Command wasm is relay.wasm, the client that relay.js loads into a page. It
// is only wiring: jsbridge holds the JavaScript API, the browser transport and
// the IndexedDB store; wasm/client holds the engine.
package main

import "github.com/relaywasm/relaywasm/jsbridge"

func main() {
	if err := jsbridge.Register(); err != nil {
		// relay.js was not loaded first (it is what starts this module), or
		// it is from another build (jsbridge.ErrOtherBuild; relay.js is told,
		// and loadRelay rejects with wasm_load_failed).
		println("relay.wasm:", err.Error())
		return
	}
	select {} // JavaScript calls in from now on; main must not return
}
