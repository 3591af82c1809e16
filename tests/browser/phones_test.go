//go:build js && wasm

package browser

import (
	"syscall/js"
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
)

// What phones do to a page, as the page sees it: it comes back from the
// back/forward cache (pageshow with persisted, after Chrome on Android cut
// its socket), or from being frozen in the background (Chrome's resume
// event). Each checks the connection at once: a heartbeat when the socket
// is open, a redial when it is waiting to reconnect. A pageshow that is a
// plain load (persisted false) does nothing. The events are dispatched by
// the test, so this runs in every engine; tests/e2e has Chromium really
// freeze and cache a page.
func TestPhonePageshowAndResumeProbe(t *testing.T) {
	ctx := testContext(t)
	fr := newFakeRelay(t)
	_, until := quietAttach(t, ctx, fr, "phones")
	heartbeats := func(n int) func(js.Value) bool {
		return func(f js.Value) bool { return f.Get("heartbeats").Int() == n }
	}
	until("the first resume answered", func(f js.Value) bool { return f.Get("answered").Int() == 1 })
	// The fake relay counts heartbeats and answers none; the client sends
	// one probe at a time, so the test acks each.
	var lastHeartbeat string
	received := fr.Get("received")
	fr.Set("received", js.FuncOf(func(this js.Value, args []js.Value) any {
		if f := arg0(args); f.Get("type").String() == librelay.TypeHeartbeat {
			lastHeartbeat = f.Get("id").String()
		}
		return received.Invoke(args[0])
	}))
	ack := func() {
		fr.Call("push", `{"type":"`+librelay.TypeAck+`","re":"`+lastHeartbeat+`"}`)
	}

	pageshow := func(persisted bool) {
		ev := js.Global().Get("PageTransitionEvent").New("pageshow", map[string]any{"persisted": persisted})
		js.Global().Call("dispatchEvent", ev)
	}
	pageshow(false)
	pageshow(true)
	until("a heartbeat on pageshow from the back/forward cache", heartbeats(1))
	ack()
	// The ack reaches Go on a later turn, and until it has, a probe is
	// already running and another is not sent: resume is dispatched again
	// until it is answered with a heartbeat.
	until("a heartbeat on resume from frozen", func(f js.Value) bool {
		if f.Get("heartbeats").Int() == 2 {
			return true
		}
		js.Global().Get("document").Call("dispatchEvent", js.Global().Get("Event").New("resume"))
		return false
	})
	if n := fr.Get("heartbeats").Int(); n != 2 {
		t.Fatalf("%d heartbeats, want 2: a plain pageshow must not probe", n)
	}
}
