//go:build js && wasm

package browser

import (
	"context"
	"strconv"
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

// seeingJS records, for each message its onMessage gets, [seq, the
// attachment's cursor read in the handler].
const seeingJS = `export function seeing() {
  const s = { seen: [], att: null };
  s.onMessage = (m, meta) => { s.seen.push([meta.seq, s.att === null ? -1 : s.att.cursor]); };
  return s;
}`

var seeing = testModule("seeing.js", seeingJS)

// att.cursor is the seq of the last message onMessage accepted, also while
// a batch is being delivered: the third message of a batch sees the second
// one's, as in worker mode. Before, the main thread said the cursor from
// before the batch, which relay.wasm moves only once the batch is done.
func TestCursorMovesWithinABatch(t *testing.T) {
	ctx := testContext(t)
	fr := newFakeRelay(t)
	s := seeing(t).Call("seeing")
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", map[string]any{
		"url": fr.Get("url"), "instance": "fake-inst", "token": "t", "name": "cursor",
		"onMessage": s.Get("onMessage"),
	}))
	defer func() { must(t, ctx, att.Call("close")) }()
	s.Set("att", att)
	must(t, ctx, fr.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
		return args[0].Get("answered").Int() == 1
	}), "the first resume answered"))
	frame := func(seq int) any {
		return `{"type":"acp.message","instance":"fake-inst","session":"att-fake","seq":` + strconv.Itoa(seq) + `,"payload":{"n":` + strconv.Itoa(seq) + `}}`
	}
	fr.Call("push", frame(1), frame(2), frame(3)) // one task: one batch
	waitUntil(t, ctx, "three messages", func() bool { return s.Get("seen").Length() == 3 })
	if got := stringify(s.Get("seen")); got != "[[1,0],[2,1],[3,2]]" {
		t.Fatalf("[seq, cursor in the handler]: %s, want [[1,0],[2,1],[3,2]]", got)
	}
	waitCursor(t, ctx, att, 3)
}
