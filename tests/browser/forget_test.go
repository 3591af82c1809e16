//go:build js && wasm

package browser

import (
	"syscall/js"
	"testing"
)

// relay.forget deletes a stream in either storage: from IndexedDB (and a
// Relay reloaded over the database finds nothing), and from a memory-only
// Relay, whose next attach in the page had reclaimed the stream. The
// attach after it starts a fresh stream: another attachment id, cursor 0.
func TestAPIForget(t *testing.T) {
	for _, storage := range []string{"indexeddb", "memory"} {
		t.Run(storage, func(t *testing.T) {
			ctx := testContext(t)
			db := database(t)
			relay := loadRelay(t, ctx, map[string]any{"database": db, "storage": storage})
			r := recorder(t, nil)
			opts := attachOptions(t, r, "forget-"+storage, map[string]any{"history": 100})
			att := must(t, ctx, relay.Call("attach", opts))
			must(t, ctx, app(t).Call("newSession", att, r))
			if settle(t, ctx, att, r) == 0 {
				t.Fatal("cursor 0 after two responses")
			}
			s1 := att.Get("session").String()
			rejects(t, ctx, relay.Call("forget", opts), "bad_options")
			must(t, ctx, att.Call("close"))
			if n := must(t, ctx, relay.Call("history", opts)).Length(); n == 0 {
				t.Fatal("nothing stored: forgetting tests nothing")
			}

			must(t, ctx, relay.Call("forget", opts))
			if n := must(t, ctx, relay.Call("history", opts)).Length(); n != 0 {
				t.Fatalf("after forget relay.history holds %d entries", n)
			}
			if storage == "indexeddb" {
				if n := must(t, ctx, reloadedRelay(t, ctx, db, relay).Call("history", opts)).Length(); n != 0 {
					t.Fatalf("after forget a reloaded Relay's history holds %d entries", n)
				}
			}
			again := must(t, ctx, relay.Call("attach", attachOptions(t, recorder(t, nil), "forget-"+storage, nil)))
			if again.Get("session").String() == s1 || again.Get("cursor").Int() != 0 {
				t.Fatalf("after forget the stream continued: session %q (before %q), cursor %d", again.Get("session").String(), s1, again.Get("cursor").Int())
			}
			must(t, ctx, again.Call("detach"))
		})
	}
}

// A tab whose slot is name#2 (another tab held name) forgets name#2, as
// relay.d.ts says to (att.name), and attaches name again without waiting
// for the forget: the attach waits for it and takes name#2 again, found
// forgotten. Before, attach waited only for a forget of the name it was
// given, took name (or name#3) while the forget held name#2, and the tab
// showed what another slot had stored. Found by review, 2026-12-07.
func TestAPIForgetSecondSlot(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	url, inst := env(t, "RELAY_ATTACH_URL"), env(t, "RELAY_INSTANCE")
	hold := js.Global().Get("Function").New("name", "return new Promise(ok => { navigator.locks.request(name, () => new Promise(rel => ok(rel))); })")
	release := must(t, ctx, hold.Invoke("relaywasm:"+url+"\x00"+inst+"\x00second")) // "another tab" holds the slot "second"
	att := must(t, ctx, relay.Call("attach", attachOptions(t, recorder(t, nil), "second", nil)))
	if n := att.Get("name").String(); n != "second#2" {
		t.Fatalf("the first attach got the slot %q, want second#2", n)
	}
	must(t, ctx, att.Call("close"))
	release.Invoke()
	forgot := relay.Call("forget", map[string]any{"url": url, "instance": inst, "name": "second#2"})
	again := must(t, ctx, relay.Call("attach", attachOptions(t, recorder(t, nil), "second", nil)))
	must(t, ctx, forgot)
	if n := again.Get("name").String(); n != "second#2" {
		t.Errorf("the attach made while second#2 was being forgotten got the slot %q, want second#2", n)
	}
	must(t, ctx, again.Call("detach"))
}
