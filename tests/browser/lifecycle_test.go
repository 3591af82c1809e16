//go:build js && wasm

package browser

import (
	"context"
	"encoding/base64"
	"syscall/js"
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
)

// The page's lifecycle reaches the connection: becoming visible probes it
// with a heartbeat (a sleeping tab may have lost its socket unnoticed),
// offline closes it and says so, and online redials at once rather than
// after the backoff. The relay is the page's scripted one, which counts what
// the client sends.
func TestAPILifecycleEvents(t *testing.T) {
	ctx := testContext(t)
	fr := newFakeRelay(t)
	r, until := quietAttach(t, ctx, fr, "lifecycle")
	until("the first resume answered", func(f js.Value) bool { return f.Get("answered").Int() == 1 })

	// Only a visible page probes; the offline and online parts run either way.
	if vis := js.Global().Get("document").Get("visibilityState").String(); vis == "visible" {
		js.Global().Get("document").Call("dispatchEvent", js.Global().Get("Event").New("visibilitychange"))
		until("a heartbeat on becoming visible", func(f js.Value) bool { return f.Get("heartbeats").Int() == 1 })
	} else {
		t.Logf("the test page is %s: the probe on becoming visible is not checked", vis)
	}

	js.Global().Call("dispatchEvent", js.Global().Get("Event").New("offline"))
	if _, err := await(ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
		states := args[0].Get("states")
		return states.Length() > 0 && states.Index(states.Length()-1).Index(0).String() == "offline"
	}), "the offline state")); err != nil {
		t.Fatalf("%v: states %s", err, stringify(r.Get("states")))
	}
	if n := fr.Get("hellos").Int(); n != 1 {
		t.Fatalf("%d dials while offline, want none after the first", n)
	}
	js.Global().Call("dispatchEvent", js.Global().Get("Event").New("online"))
	until("a redial on online", func(f js.Value) bool { return f.Get("hellos").Int() == 2 && f.Get("answered").Int() == 2 })

	// Each dial's hello carries a nonce of its own, NonceSize random bytes
	// (drawn from the page's crypto.getRandomValues in this build).
	var nonces []string
	for i := range fr.Get("nonces").Length() {
		n := fr.Get("nonces").Index(i)
		b, err := base64.StdEncoding.DecodeString(n.String())
		if n.Type() != js.TypeString || err != nil || len(b) != librelay.NonceSize {
			t.Fatalf("hello %d has nonce %s, want %d bytes in base64", i+1, stringify(n), librelay.NonceSize)
		}
		nonces = append(nonces, n.String())
	}
	if nonces[0] == nonces[1] {
		t.Fatalf("both dials sent nonce %s", nonces[0])
	}
}

// quietAttach attaches to the fake relay fr, with its state in memory and
// a backoff and heartbeat of an hour, so that within a test only the page's
// lifecycle redials or probes. It returns the attachment's recorder and
// until, which waits for cond to hold over fr. The test's cleanup closes
// the attachment.
func quietAttach(t *testing.T, ctx context.Context, fr js.Value, name string) (r js.Value, until func(what string, cond func(js.Value) bool)) {
	t.Helper()
	r = recorder(t, nil)
	att := must(t, ctx, loadRelay(t, ctx, map[string]any{"storage": "memory"}).Call("attach", map[string]any{
		"url": fr.Get("url"), "instance": "fake-inst", "token": "t", "name": name,
		"onMessage": r.Get("onMessage"), "onState": r.Get("onState"),
		"backoff":   map[string]any{"initialMs": 3_600_000, "maxMs": 3_600_000},
		"heartbeat": map[string]any{"intervalMs": 3_600_000, "timeoutMs": 3_600_000},
	}))
	t.Cleanup(func() { must(t, ctx, att.Call("close")) })
	until = func(what string, cond func(js.Value) bool) {
		t.Helper()
		f := js.FuncOf(func(_ js.Value, args []js.Value) any { return cond(args[0]) })
		defer f.Release()
		must(t, ctx, fr.Call("until", f, what))
	}
	return r, until
}
