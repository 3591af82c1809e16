//go:build js && wasm

package browser

import (
	"context"
	_ "embed"
	"strconv"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
)

//go:embed testdata/fakerelay.js
var fakeRelayJS string

// fakes is testdata/fakerelay.js: a relay scripted from the page.
var fakes = testModule("fakerelay.js", fakeRelayJS)

// newFakeRelay is a relay scripted in the page (testdata/fakerelay.js) at
// a fresh URL, speaking librelay's frame types and protocol version.
func newFakeRelay(t *testing.T) js.Value {
	return fakes(t).Call("fakeRelay", map[string]any{
		"hello": librelay.TypeHello, "welcome": librelay.TypeWelcome, "resume": librelay.TypeResume,
		"resumed": librelay.TypeResumed, "ack": librelay.TypeAck, "heartbeat": librelay.TypeHeartbeat,
		"version": librelay.ProtocolVersion,
	})
}

// The frames the fake relay pushes in one batch, and what of them reaches
// the application. relay.js parses each message once and hands Go the
// envelope of a plain acp.message; everything else (odd field types,
// garbage, control frames, other cargo) Go reads from the text as before,
// and the engine's decisions are the same either way.
var fakeBatch = []string{
	// The payload not last: with a transcript, handed over as text.
	`{"payload":{"n":1},"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":1}`,
	// null is not a string: handed over as text, which Go reads as absent.
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":2,"trace":null,"payload":{"n":2}}`,
	// Fields that change from frame to frame, and back.
	// A "payload" key in the payload too: with a transcript, as text.
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":3,"id":"rt-7","trace":"t-1","payload":{"n":3,"payload":[]}}`,
	// Space around the payload: with a transcript, as text.
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":4,"payload" : { "n" : 4 } }`,
	// A duplicate: dropped.
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":3,"payload":{"n":"duplicate"}}`,
	// Unsequenced: delivered with seq 0.
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","payload":{"n":"unsequenced"}}`,
	// Other cargo moves the cursor and is not delivered.
	`{"type":"x.other","instance":"fake-inst","session":"att-fake","seq":5,"payload":{}}`,
	// A control request the engine answers.
	`{"type":"relay.heartbeat","id":"hb-1"}`,
	// Not JSON: dropped, so seq 7 is a gap the engine resumes from 5 to fill.
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":6,"payload":{"n":6}`,
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":7,"payload":{"n":7}}`,
}

// What the fake relay sends again when the engine resumes after seq 5.
var fakeResent = []string{
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":6,"payload":{"n":6}}`,
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":7,"payload":{"n":7,"s":"ü\u2028\"x\\ \ud83d\ude00"}}`,
	// A binary message: relay.js does not parse those, Go does, and hands
	// its payload over as text.
	`binary:{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":8,"payload":{"n":8}}`,
	// No payload: delivered as null.
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":9}`,
	// Payloads whose UTF-8 length takes fewer bytes than the room relay.js
	// leaves for it when it puts a held payload into its entry: the bytes
	// move down (entries.js putText).
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":10,"payload":"` + strings.Repeat("a", 100) + `"}`,
	`{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":11,"payload":"` + strings.Repeat("b", 6000) + `"}`,
}

// Each delivered message, as JSON.stringify(message) and its seq.
var fakeDelivered = []struct {
	json string
	seq  int
}{
	{`{"n":1}`, 1}, {`{"n":2}`, 2}, {`{"n":3,"payload":[]}`, 3}, {`{"n":4}`, 4}, {`{"n":"unsequenced"}`, 0},
	{`{"n":6}`, 6}, {"{\"n\":7,\"s\":\"ü\u2028\\\"x\\\\ 😀\"}", 7}, {`{"n":8}`, 8}, {`null`, 9},
	{`"` + strings.Repeat("a", 100) + `"`, 10}, {`"` + strings.Repeat("b", 6000) + `"`, 11},
}

// With a transcript, the payloads reach the store whichever way they go:
// held in relay.js for its store (IndexedDB), or handed to Go for Go's
// (storage "memory"); relay.js holds none once the attachment has closed.
func TestAPIEnvelopesFromTheFakeRelay(t *testing.T) {
	for _, c := range []struct {
		history int
		storage string
	}{{0, "indexeddb"}, {100, "indexeddb"}, {100, "memory"}} {
		history := c.history
		t.Run("history "+strconv.Itoa(history)+" "+c.storage, func(t *testing.T) {
			ctx := testContext(t)
			fr := newFakeRelay(t)
			resend := js.FuncOf(func(_ js.Value, args []js.Value) any {
				if args[0].Int() == 5 {
					fr.Call("push", toAny(fakeResent)...)
				}
				return nil
			})
			defer resend.Release()
			fr.Set("onResume", resend)
			r := recorder(t, map[string]any{"failSeq": 12})
			att := must(t, ctx, loadRelay(t, ctx, map[string]any{"storage": c.storage}).Call("attach", map[string]any{
				"url": fr.Get("url"), "instance": "fake-inst", "token": "t", "name": "fake",
				"history": history, "onMessage": r.Get("onMessage"), "onState": r.Get("onState"),
			}))
			closed := false
			defer func() {
				if !closed {
					must(t, ctx, att.Call("close"))
				}
			}()
			must(t, ctx, fr.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
				return args[0].Get("answered").Int() == 1
			}), "the first resume answered"))
			fr.Call("push", toAny(fakeBatch)...)
			if _, err := await(ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
				return args[0].Get("messages").Length() >= len(fakeDelivered)
			}), "every message")); err != nil {
				t.Fatalf("%v: delivered %s %s; resumes %s; states %s", err, stringify(r.Get("messages")), stringify(r.Get("metas")), stringify(fr.Get("resumes")), stringify(r.Get("states")))
			}

			msgs, metas := r.Get("messages"), r.Get("metas")
			if msgs.Length() != len(fakeDelivered) {
				t.Fatalf("%d messages delivered, want %d", msgs.Length(), len(fakeDelivered))
			}
			for i, want := range fakeDelivered {
				got, meta := stringify(msgs.Index(i)), metas.Index(i)
				if got != want.json || meta.Get("seq").Int() != want.seq || meta.Get("session").String() != "att-fake" || meta.Get("replay").Bool() {
					t.Errorf("message %d: %s %s, want %s seq %d", i, got, stringify(meta), want.json, want.seq)
				}
			}
			if got := stringify(fr.Get("resumes")); got != "[0,5]" {
				t.Errorf("resumes after %s, want [0,5] (the gap at seq 6)", got)
			}
			if got := stringify(fr.Get("acks")); got != `["hb-1"]` {
				t.Errorf("acks %s, want the heartbeat's", got)
			}
			waitCursor(t, ctx, att, 11)
			if history > 0 {
				checkFakeTranscript(t, ctx, att)
			}

			// A message the handler refuses is not committed: relay.js
			// holds its payload (with a transcript in IndexedDB) until the
			// attachment ends, and then no more.
			held := relayjsModule(t, "held.js")
			fr.Call("push", `{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":12,"payload":{"n":12}}`)
			for r.Get("attempts").Int() <= len(fakeDelivered) { // a refusal wakes no until
				if ctx.Err() != nil {
					t.Fatalf("seq 12 never reached the handler: %s", stringify(r.Get("metas")))
				}
				time.Sleep(5 * time.Millisecond)
			}
			if n, hold := held.Call("held").Int(), history > 0 && c.storage == "indexeddb"; hold != (n > 0) {
				t.Errorf("relay.js holds %d payloads after the refusal", n)
			}
			must(t, ctx, att.Call("close"))
			closed = true
			for held.Call("held").Int() > 0 {
				if ctx.Err() != nil {
					t.Fatalf("relay.js still holds %d payloads after the close", held.Call("held").Int())
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// checkFakeTranscript checks that att's transcript holds every message
// delivered from the fake relay.
func checkFakeTranscript(t *testing.T, ctx context.Context, att js.Value) {
	t.Helper()
	h := must(t, ctx, att.Call("history"))
	var in []string
	for i := range h.Length() {
		if e := h.Index(i); !e.Get("out").Bool() {
			in = append(in, stringify(e.Get("message"))+"@"+strconv.Itoa(e.Get("seq").Int()))
		}
	}
	var want []string
	for _, d := range fakeDelivered {
		want = append(want, d.json+"@"+strconv.Itoa(d.seq))
	}
	if stringify(js.ValueOf(toAny(in))) != stringify(js.ValueOf(toAny(want))) {
		t.Errorf("transcript %q, want %q", in, want)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
