// Package e2e drives the demo chat page (demo/web) in headless Chromium
// against the dev relay and the dev runtime, started in-process on loopback,
// the way a person uses it: type a prompt, watch the answer stream, reload
// mid-answer, lose the relay or the network, open a second tab.
//
// The tests read the page through its test hooks (data-role, data-seq and
// data-done on the transcript's elements, window.__chat for connection
// state) rather than by scraping text, and every check is about what is
// shown, never about how long it took: deadlines exist only so that a broken
// page fails instead of hanging.
//
// relay.wasm, relay.js and wasm_exec.js come from dist/ when `make wasm` has
// built them from the current sources; otherwise TestMain builds them into a
// temporary directory, so `go test ./tests/e2e` works on its own.
// Screenshots of the page at a desktop and a phone viewport go to out/.
package e2e
