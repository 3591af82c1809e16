//go:build js && wasm

package browser

import (
	"fmt"
	"strings"
	"syscall/js"
	"testing"
)

// A relayKey that is not a string, a sendQueue that is not a positive
// count and a maxSendBytes that is not a count of bytes up to
// MAX_FRAME_BYTES reject attach with bad_options, as the other options' bad
// values do; a good maxSendBytes is the engine's limit on a send. relay.wasm read a relayKey given as bytes (a Uint8Array) as none, so
// the relay's key went unpinned without a word, and a sendQueue of 0, -1 or
// "5" as its default, 256.
func TestAttachChecksItsOptions(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	r := recorder(t, nil)
	key := js.Global().Get("Uint8Array").New(32)
	for _, c := range []struct {
		name  string
		value any
	}{
		{"relayKey", key},
		{"relayKey", 42},
		{"relayKey", js.Null()},
		{"sendQueue", 0},
		{"sendQueue", -1},
		{"sendQueue", 2.5},
		{"sendQueue", "5"},
		{"sendQueue", js.Global().Get("NaN")},
		{"maxSendBytes", 0},
		{"maxSendBytes", -1},
		{"maxSendBytes", 16<<20 + 1},
		{"maxSendBytes", "5"},
	} {
		t.Run(fmt.Sprintf("%s=%v", c.name, c.value), func(t *testing.T) {
			rejects(t, ctx, relay.Call("attach", attachOptions(t, r, "bad-option", map[string]any{c.name: c.value})), "bad_options")
		})
	}
	// A good sendQueue, and the key as a string, still attach.
	att, err := await(ctx, relay.Call("attach", attachOptions(t, r, "good-option", map[string]any{"sendQueue": 4})))
	if err != nil {
		t.Fatalf("attach with sendQueue 4: %v", err)
	}
	if _, err := await(ctx, att.Call("close")); err != nil {
		t.Fatal(err)
	}
	// maxSendBytes reaches the engine: a message over it is refused, not sent.
	att, err = await(ctx, relay.Call("attach", attachOptions(t, r, "small-frames", map[string]any{"maxSendBytes": 1000})))
	if err != nil {
		t.Fatalf("attach with maxSendBytes 1000: %v", err)
	}
	defer att.Call("close")
	rejects(t, ctx, att.Call("sendACP", `{"jsonrpc":"2.0","method":"big","params":"`+strings.Repeat("x", 1000)+`"}`), "frame_too_large")
}
