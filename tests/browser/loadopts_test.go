//go:build js && wasm

package browser

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// loadRelay called again with the same options, as a component that loads
// on every mount does, gives the same Relay and makes no Store in Go: each
// call had made one, with a goroutine (its fallback's wait) that lived as
// long as the page. The goroutines of everything else running may come
// and go meanwhile, so the count may move a little, not by a goroutine per
// call.
func TestLoadRelayAgainMakesNoStore(t *testing.T) {
	ctx := testContext(t)
	options := map[string]any{"database": database(t)}
	first := loadRelay(t, ctx, options)
	before := runtime.NumGoroutine()
	const n = 50
	same := true
	for range n {
		same = loadRelay(t, ctx, options).Equal(first) && same
	}
	if after := runtime.NumGoroutine(); after-before >= n/2 {
		t.Errorf("%d loads with the same options took the page from %d goroutines to %d", n, before, after)
	}
	if !same {
		t.Error("loadRelay with the same options gave another Relay")
	}
}

// A relayKey that is not a public key rejects attach with bad_options in
// one line that names relayKey. The message was two (the engine's
// sentinel, a newline, librelay's error) and named no option.
func TestMalformedRelayKeyNamesIt(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	_, err := await(ctx, relay.Call("attach", attachOptions(t, recorder(t, nil), "bad-key", map[string]any{"relayKey": "not a key"})))
	var je *JSError
	if !errors.As(err, &je) || je.Name != "RelayError" || je.Code != "bad_options" {
		t.Fatalf("got %v, want a RelayError bad_options", err)
	}
	if strings.Contains(je.Message, "\n") || !strings.Contains(je.Message, "relayKey") {
		t.Fatalf("the message is %q: want one line naming relayKey", je.Message)
	}
}
