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
// The tests run side by side (t.Parallel; go test's -parallel, by default
// as many as the machine has cores): each has a stack of its own on ports
// of its own, and a browser of its own (newBrowser), which in Chromium and
// Firefox is an isolated context of the run's one browser, to the page a
// fresh profile, with every tab in a window of its own so that no test's
// page is hidden behind another's. WebKit has no such context: a test that
// passed hands its browser on to a later one (classicPool), whose origin,
// a port of its own, shares nothing with it. On a 2-core machine a browser
// test is processor-bound more than it waits for its paced streams.
// Running two at once took the Chromium run from 296 to 225 s on such a
// machine; sharing the browser process as well, which saves Chromium's
// start (about two processor-seconds) per test, to 162 s. The streams a
// test interrupts are paced (streamRate says at what rate, and what a
// faster one cost) and sized by how long they last (countLasting), so
// every interruption lands at the same moment of its stream whatever the
// rate.
//
// relay.wasm, relay.js and wasm_exec.js come from dist/ when `make wasm` has
// built them from the current sources; otherwise TestMain builds them into a
// temporary directory, so `go test ./tests/e2e` works on its own.
// Screenshots of the page at a desktop and a phone viewport go to out/.
package e2e
