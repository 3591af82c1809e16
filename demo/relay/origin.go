package relay

import (
	"net/http"
	"slices"

	"github.com/coder/websocket"
)

// NullOrigin is the Origin a page sends when it has no origin of its own: a
// Cordova app's page loaded from file://, a sandboxed iframe. It names no
// site, so every such page is the same origin to the relay; the relay
// accepts it only when Config.OriginPatterns names it, exactly.
const NullOrigin = "null"

// acceptOptions are the Origin rules for one browser upgrade. Patterns are
// coder/websocket's: a pattern without a scheme ("localhost:*") matches the
// origin's host whatever its scheme; one with a scheme
// ("capacitor://localhost", "https://localhost", "ionic://localhost")
// matches that scheme and host only, which is how a phone webview's page
// is allowed and nothing else by it. "null" is not a host pattern (as one
// it would let in an origin whose host is named null): it is taken out of
// the patterns and lets in exactly the Origin "null".
func (r *Relay) acceptOptions(req *http.Request, subprotocols []string) *websocket.AcceptOptions {
	patterns := r.cfg.OriginPatterns
	if slices.Contains(patterns, NullOrigin) {
		if req.Header.Get("Origin") == NullOrigin {
			return &websocket.AcceptOptions{Subprotocols: subprotocols, InsecureSkipVerify: true}
		}
		patterns = slices.DeleteFunc(slices.Clone(patterns), func(p string) bool { return p == NullOrigin })
	}
	return &websocket.AcceptOptions{Subprotocols: subprotocols, OriginPatterns: patterns}
}
