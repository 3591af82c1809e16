//go:build js && wasm

package browser

import (
	"context"
	"syscall/js"
	"testing"
	"time"
)

// What an attachment keeps lives as long as it needs to, not as long as the
// attachment: a tab open for days reconnects thousands of times.

// untilOpenAgain waits until r's last state is open.
func untilOpenAgain(t *testing.T, ctx context.Context, r js.Value) {
	t.Helper()
	must(t, ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
		states := args[0].Get("states")
		return states.Length() > 0 && states.Index(states.Length()-1).Index(0).String() == "open"
	}), "open again"))
}

// With a transcript relay.js holds payload texts for the attachment
// (held.js), and with them the sockets they came on. A socket no commit can
// take from any more is forgotten: before, every socket the attachment ever
// had stayed until its end, one more each time the browser went offline
// and online again.
func TestHeldSocketsStayFewOverReconnects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const cycles = 20
	held := relayjsModule(t, "held.js")
	r := recorder(t, nil)
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", attachOptions(t, r, "reconnects", map[string]any{"history": 100})))
	defer func() { must(t, ctx, att.Call("close")) }()
	must(t, ctx, app(t).Call("request", att, r, "initialize", map[string]any{"protocolVersion": 1}))
	before := held.Call("joined").Int()
	for i := range cycles {
		r.Set("states", js.Global().Get("Array").New())
		app(t).Call("fire", "window", "offline")
		must(t, ctx, r.Call("untilState", "offline"))
		app(t).Call("fire", "window", "online")
		untilOpenAgain(t, ctx, r)
		if i%2 == 0 { // a message committed from the new socket (held.js take)
			must(t, ctx, app(t).Call("request", att, r, "initialize", map[string]any{"protocolVersion": 1}))
		}
	}
	if after := held.Call("joined").Int(); after > before {
		t.Fatalf("held.js knows %d sockets after %d reconnects, %d before: it keeps the attachment's old sockets", after, cycles, before)
	}
}
