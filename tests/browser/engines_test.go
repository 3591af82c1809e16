//go:build js && wasm

package browser

import (
	"errors"
	"testing"

	"github.com/relaywasm/relaywasm/jsbridge"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// errorOnlyURL is a URL the stand-in of errorOnlyJS answers.
const errorOnlyURL = "ws://error-only.invalid/v1/attach"

// errorOnlyJS stands in for WebSocket at errorOnlyURL and does what WebKit
// (2.50) does for a connection it refuses to make, such as a port on
// Fetch's bad-ports list: it goes CLOSED and fires error, and never close.
// Every other URL goes to the WebSocket that was there before.
const errorOnlyJS = `
const Prev = globalThis.WebSocket;
class ErrorOnly {
  static CONNECTING = 0; static OPEN = 1; static CLOSING = 2; static CLOSED = 3;
  static Real = Prev.Real ?? Prev; // for tests that watch the real sockets' sends (app.js)
  constructor(url, protocols) {
    if (String(url) !== "` + errorOnlyURL + `") return new Prev(url, protocols);
    this.readyState = 0;
    this.protocol = "";
    setTimeout(() => { this.readyState = 3; this.onerror?.({}); }, 0);
  }
  send() { throw new DOMException("not open", "InvalidStateError"); }
  close() {}
}
globalThis.WebSocket = ErrorOnly;
`

var errorOnly = testModule("error-only WebSocket", errorOnlyJS)

// WebKit fires error and no close for a socket it never connects (a
// blocked port); Chromium and Firefox fire both, as the spec says. relay.js
// gives such a socket its close, so the dial ends in ErrDialFailed in every
// engine instead of waiting for an event that never comes. The stand-in
// makes every engine behave as WebKit does; TestTransportDialRefused dials
// port 1 for real.
func TestEngineWebKitErrorWithoutClose(t *testing.T) {
	errorOnly(t)
	_, err := jsbridge.Transport{}.Dial(testContext(t), errorOnlyURL, nil)
	var ce *client.CloseError
	if !errors.Is(err, jsbridge.ErrDialFailed) || errors.As(err, &ce) {
		t.Fatalf("dialing a socket that fires error and no close: %v, want ErrDialFailed", err)
	}
}
