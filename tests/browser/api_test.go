//go:build js && wasm

package browser

import (
	"context"
	"crypto/ed25519"
	_ "embed"
	"errors"
	"strconv"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/jsbridge"
	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// These tests use the JavaScript API as a page does: relay.js's loadRelay,
// attach and the Attachment's methods, with the handlers of testdata/app.js.

//go:embed testdata/app.js
var appJS string

// app is the test application of testdata/app.js.
var app = testModule("app.js", appJS)

// must awaits a Promise that must resolve.
func must(t *testing.T, ctx context.Context, p js.Value) js.Value {
	t.Helper()
	v, err := await(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rejects awaits a Promise that must reject with a RelayError of code.
func rejects(t *testing.T, ctx context.Context, p js.Value, code string) {
	t.Helper()
	_, err := await(ctx, p)
	var je *JSError
	if !errors.As(err, &je) || je.Name != "RelayError" || je.Code != code {
		t.Fatalf("got %v, want a RelayError %q", err, code)
	}
}

// loadRelay is the page's `await loadRelay(options)`.
func loadRelay(t *testing.T, ctx context.Context, options map[string]any) js.Value {
	t.Helper()
	if options == nil {
		options = map[string]any{}
	}
	if _, ok := options["database"]; !ok {
		options["database"] = database(t)
	}
	return must(t, ctx, relayModule.Call("loadRelay", options))
}

// reloadedRelay stands for a reloaded page's Relay: a new Store over the
// database db that earlier's Store wrote. Within one page a loadRelay with
// the same options gives the same Relay back, so this one's commit window
// is a millisecond shorter than the default.
func reloadedRelay(t *testing.T, ctx context.Context, db string, earlier js.Value) js.Value {
	t.Helper()
	r := loadRelay(t, ctx, map[string]any{"database": db, "commitWindowMs": boundary.DefaultCommitWindowMs - 1})
	if r.Equal(earlier) {
		t.Fatal("the reloaded page's Relay is the first page's: no new Store reads what it wrote")
	}
	return r
}

// attachOptions are the options of an attach with recorder r's handlers.
func attachOptions(t *testing.T, r js.Value, name string, extra map[string]any) map[string]any {
	o := map[string]any{
		"url":       env(t, "RELAY_ATTACH_URL"),
		"instance":  env(t, "RELAY_INSTANCE"),
		"token":     env(t, "RELAY_TOKEN"),
		"relayKey":  env(t, "RELAY_KEY"),
		"name":      name,
		"onMessage": r.Get("onMessage"),
		"onState":   r.Get("onState"),
		"onEvicted": r.Get("onEvicted"),
	}
	for k, v := range extra {
		o[k] = v
	}
	return o
}

func recorder(t *testing.T, options map[string]any) js.Value {
	if options == nil {
		options = map[string]any{}
	}
	return app(t).Call("recorder", options)
}

// chunks is what the recorder's agent_message_chunk texts were.
func chunks(r js.Value) []string {
	a := r.Call("chunks")
	out := make([]string, a.Length())
	for i := range out {
		out[i] = a.Index(i).String()
	}
	return out
}

// checkCount checks that texts are the dev agent's "count n" chunks 1…n,
// each once, in order.
func checkCount(t *testing.T, texts []string, n int) {
	t.Helper()
	if len(texts) != n {
		t.Fatalf("%d chunks, want %d", len(texts), n)
	}
	for i, s := range texts {
		if want := strconv.Itoa(i+1) + "\n"; s != want {
			t.Fatalf("chunk %d is %q, want %q", i, s, want)
		}
	}
}

func TestAPIAttachSendStream(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	if got := relay.Get("storage").String(); got != "indexeddb" {
		t.Fatalf("relay.storage = %q", got)
	}
	r := recorder(t, nil)
	att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "stream", map[string]any{"history": 100})))
	if s := att.Get("state").String(); s != "open" {
		t.Fatalf("state after attach: %q", s)
	}
	if att.Get("session").String() == "" {
		t.Fatal("no session after attach")
	}
	if n := att.Get("name").String(); n != "stream" {
		t.Fatalf("name %q", n)
	}

	sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
	id := must(t, ctx, app(t).Call("prompt", att, sid, "count 300"))
	res := must(t, ctx, r.Call("response", id))
	if got := res.Get("result").Get("stopReason").String(); got != "end_turn" {
		t.Fatalf("prompt answered %q", got)
	}
	checkCount(t, chunks(r), 300)

	// Every message was sequenced, in order, from the start, and the cursor
	// is the last one's seq.
	metas := r.Get("metas")
	for i := range metas.Length() {
		m := metas.Index(i)
		if seq := m.Get("seq").Int(); seq != i+1 {
			t.Fatalf("message %d has seq %d", i, seq)
		}
		if m.Get("replay").Bool() || m.Get("session").String() != att.Get("session").String() {
			t.Fatalf("message %d meta %v", i, js.Global().Get("JSON").Call("stringify", m))
		}
	}
	waitCursor(t, ctx, att, metas.Length())

	// onState said open, with where state is kept.
	states := r.Get("states")
	last := states.Index(states.Length() - 1)
	if last.Index(0).String() != "open" || last.Index(1).Get("storage").String() != "indexeddb" {
		t.Fatalf("last state %v", js.Global().Get("JSON").Call("stringify", last))
	}

	// The transcript holds both directions in order: the requests this page
	// sent and everything received.
	h := must(t, ctx, att.Call("history"))
	if h.Length() != 100 {
		t.Fatalf("history has %d entries, want the newest 100", h.Length())
	}
	lastEntry := h.Index(99)
	if lastEntry.Get("out").Bool() || lastEntry.Get("message").Get("id").Int() != id.Int() {
		t.Fatalf("last history entry %v", js.Global().Get("JSON").Call("stringify", lastEntry))
	}
	must(t, ctx, att.Call("close"))
	if s := att.Get("state").String(); s != "closed" {
		t.Fatalf("state after close: %q", s)
	}
	if c := att.Get("cursor").Int(); c != metas.Length() {
		t.Fatalf("cursor %d after close, want the last %d", c, metas.Length())
	}
}

func stringify(v js.Value) string { return js.Global().Get("JSON").Call("stringify", v).String() }

// A page reloaded mid-stream is a new Relay (a new Store on the same
// database) attaching with the same name: it reclaims the attachment, resumes
// from the stored cursor, and its transcript plus what the resume replays
// holds every message exactly once, in order.
func TestAPIReloadMidStreamLosesNothing(t *testing.T) {
	ctx := testContext(t)
	// Within the dev runtime's retention (8192 frames). The first page's
	// handler holds from the 200th chunk on (a Promise it does not settle),
	// so the close lands mid-stream however much of it had arrived: a page
	// starved while the stream came (WebKitGTK with the other core busy)
	// had taken it all in one batch and delivered it before the close.
	const n = 6000
	db := database(t)
	r1 := recorder(t, map[string]any{"holdAt": 200})
	relay1 := loadRelay(t, ctx, map[string]any{"database": db})
	att1 := must(t, ctx, relay1.Call("attach",
		attachOptions(t, r1, "reload", map[string]any{"history": 10 * n})))
	session := att1.Get("session").String()
	sid := must(t, ctx, app(t).Call("newSession", att1, r1)).String()
	id := must(t, ctx, app(t).Call("prompt", att1, sid, "count "+strconv.Itoa(n))).Int()
	must(t, ctx, r1.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
		return args[0].Get("chunkCount").Int() >= 200
	}), "200 chunks"))
	must(t, ctx, att1.Call("close")) // the page goes away mid-stream
	if seen := len(chunks(r1)); seen != 200 {
		t.Fatalf("the first page accepted %d chunks, want the 200 before its hold", seen)
	}
	cursor := att1.Get("cursor").Int()

	r2 := recorder(t, nil)
	relay2 := reloadedRelay(t, ctx, db, relay1)
	att2 := must(t, ctx, relay2.Call("attach", attachOptions(t, r2, "reload", map[string]any{"history": 10 * n})))
	if got := att2.Get("session").String(); got != session {
		t.Fatalf("the reloaded page got attachment %q, want its own %q back (its store in %s)",
			got, session, relay2.Get("storage").String())
	}
	if first := r2.Get("metas").Index(0); first.Truthy() && first.Get("seq").Int() != cursor+1 {
		t.Fatalf("after the reload delivery starts at seq %d, want %d", first.Get("seq").Int(), cursor+1)
	}
	res := must(t, ctx, r2.Call("response", id))
	if got := res.Get("result").Get("stopReason").String(); got != "end_turn" {
		t.Fatalf("prompt answered %q", got)
	}

	// What the first page accepted plus what the second received is the
	// stream, once; and the stored transcript is exactly that too.
	checkCount(t, append(chunks(r1), chunks(r2)...), n)
	h := must(t, ctx, att2.Call("history"))
	var texts []string
	seq := 0
	for i := range h.Length() {
		e := h.Index(i)
		if e.Get("out").Bool() {
			continue
		}
		if s := e.Get("seq").Int(); s != seq+1 {
			t.Fatalf("transcript entry %d has seq %d after %d", i, s, seq)
		}
		seq++
		m := e.Get("message")
		if m.Get("method").String() == "session/update" {
			texts = append(texts, m.Get("params").Get("update").Get("content").Get("text").String())
		}
	}
	checkCount(t, texts, n)
	must(t, ctx, att2.Call("detach"))
}

// The browser going offline closes the socket (Chromium would not); coming
// back online redials at once and resumes: nothing lost, nothing twice.
// How much of the stream was still to come when the socket closed depends
// on how fast the page took it in, and the log says: a page starved while
// the stream arrived (WebKitGTK with the other core busy) had all 6,000
// chunks in the batch it was delivering when it went offline, and a
// connection that fails during a delivery is reported once the delivery
// is over (client's await), so the whole stream was in before the state
// said offline and there was nothing left to resume.
func TestAPIOfflineOnlineResumes(t *testing.T) {
	ctx := testContext(t)
	const n = 6000 // within the dev runtime's retention (8192 frames): no eviction
	r := recorder(t, map[string]any{"offlineAt": 200})
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", attachOptions(t, r, "offline", nil)))
	detached := false
	t.Cleanup(func() {
		if !detached {
			att.Call("close") // a failure must not leave the stream's slot held for the next test
		}
	})
	sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
	id := must(t, ctx, app(t).Call("prompt", att, sid, "count "+strconv.Itoa(n))).Int()
	must(t, ctx, r.Call("untilState", "offline"))
	if s := att.Get("state").String(); s != "offline" {
		t.Fatalf("state %q while offline", s)
	}
	app(t).Call("fire", "window", "online")
	atOnline := len(chunks(r))
	res := must(t, ctx, r.Call("response", id))
	if got := res.Get("result").Get("stopReason").String(); got != "end_turn" {
		t.Fatalf("prompt answered %q", got)
	}
	if ev := r.Get("evictions"); ev.Length() > 0 {
		t.Fatalf("evictions reported: %s", stringify(ev))
	}
	checkCount(t, chunks(r), n)
	t.Logf("%d of the %d chunks came after the browser was back online", n-atOnline, n)
	if s := att.Get("state").String(); s != "open" {
		t.Fatalf("state %q after coming back online", s)
	}
	// What the resume brought is new to the page: not marked as a replay.
	metas := r.Get("metas")
	for i := range metas.Length() {
		if metas.Index(i).Get("replay").Bool() {
			t.Fatalf("message %d is marked as replayed; only an explicit resume() replays", i)
		}
	}
	must(t, ctx, att.Call("detach"))
	detached = true
}

// Handlers returning Promises are awaited one by one; a handler that throws
// does not move the cursor, and its message comes again.
func TestAPIAsyncAndFailingHandlers(t *testing.T) {
	ctx := testContext(t)
	const n = 200
	relay := loadRelay(t, ctx, nil)
	for _, tc := range []struct {
		name    string
		options map[string]any
	}{
		{"async", map[string]any{"async": true}},
		{"throws once", map[string]any{"failSeq": 50}},
		{"async and throws once", map[string]any{"async": true, "failSeq": 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recorder(t, tc.options)
			att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "handlers-"+tc.name, nil)))
			defer func() { must(t, ctx, att.Call("detach")) }()
			sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
			id := must(t, ctx, app(t).Call("prompt", att, sid, "count "+strconv.Itoa(n))).Int()
			must(t, ctx, r.Call("response", id))
			checkCount(t, chunks(r), n)
			accepted := r.Get("messages").Length()
			waitCursor(t, ctx, att, accepted)
			if _, fails := tc.options["failSeq"]; fails && r.Get("attempts").Int() <= accepted {
				t.Fatalf("%d attempts for %d messages: the failed one was not delivered again", r.Get("attempts").Int(), accepted)
			}
		})
	}
}

// Refusals that no redial can cure reject attach with their code; the token
// may be a function, called on every dial.
func TestAPIRefusals(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	r := recorder(t, nil)

	rejects(t, ctx, relay.Call("attach", attachOptions(t, r, "refused", map[string]any{"token": "not-the-token"})), "unauthorized")

	// Another relay's key (any valid key but the relay's).
	other := "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	rejects(t, ctx, relay.Call("attach", attachOptions(t, r, "refused", map[string]any{"relayKey": other})), "bad_relay_signature")

	rejects(t, ctx, relay.Call("attach", attachOptions(t, r, "refused", map[string]any{"relayKey": "not a key"})), "bad_options")
	rejects(t, ctx, relay.Call("attach", map[string]any{"url": env(t, "RELAY_ATTACH_URL")}), "bad_options")
	// A URL every engine's WebSocket takes, or none: older Safari throws on
	// http(s) and relative ones, and every engine on a port out of range.
	for _, url := range []string{"relay.example/v1/attach", "/v1/attach", "https://relay.example/v1/attach", "ws://127.0.0.1:99999/v1/attach"} {
		_, err := await(ctx, relay.Call("attach", attachOptions(t, r, "refused", map[string]any{"url": url})))
		var je *JSError
		if !errors.As(err, &je) || je.Code != "bad_options" || !strings.Contains(je.Message, "url must be an absolute ws:// or wss:// URL") {
			t.Errorf("attach to %q: %v, want bad_options saying what a url must be", url, err)
		}
	}

	// A token function that fails: the credential cannot be had.
	calls := 0
	failing := js.FuncOf(func(js.Value, []js.Value) any {
		calls++
		return js.Global().Get("Promise").Call("reject", js.Global().Get("Error").New("no token today"))
	})
	defer failing.Release()
	attachCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	abort := js.Global().Get("AbortController").New()
	p := relay.Call("attach", attachOptions(t, r, "refused", map[string]any{"token": failing, "signal": abort.Get("signal")}))
	go func() { <-attachCtx.Done(); abort.Call("abort") }()
	if _, err := await(ctx, p); err == nil {
		t.Fatal("attach with a failing token function succeeded")
	}
	if calls == 0 {
		t.Fatal("the token function was never called")
	}
}

// A URL where no relay answers (another path of the relay's server, which
// refuses the upgrade, as a typo in the URL does): attach keeps trying,
// and onState says unreachable, naming the URL and what a socket that did
// not open may mean, since browsers do not say. Aborted, the attach
// rejects with canceled in relay.js's words, not Go's "context canceled".
func TestAPIUnreachableSaysWhere(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	r := recorder(t, nil)
	url := strings.Replace(env(t, "RELAY_ATTACH_URL"), "/v1/attach", "/v1/atach", 1)
	abort := js.Global().Get("AbortController").New()
	p := relay.Call("attach", attachOptions(t, r, "nowhere", map[string]any{"url": url, "signal": abort.Get("signal")}))
	must(t, ctx, r.Call("untilState", "reconnecting"))
	states := r.Get("states")
	info := states.Index(states.Length() - 1).Index(1)
	if code, message := info.Get("code").String(), info.Get("message").String(); code != "unreachable" || !strings.Contains(message, url) || !strings.Contains(message, "another path") {
		t.Errorf("onState while no relay answers: %s %q; want unreachable, naming %s and what it may be", code, message, url)
	}
	abort.Call("abort")
	_, err := await(ctx, p)
	if je, ok := errors.AsType[*JSError](err); !ok || je.Code != "canceled" || je.Message != boundary.Aborted {
		t.Fatalf("the aborted attach: %v; want canceled, %q", err, boundary.Aborted)
	}
}

func TestAPITokenFunctionIsCalledOnEveryDial(t *testing.T) {
	ctx := testContext(t)
	calls := 0
	token := js.FuncOf(func(js.Value, []js.Value) any {
		calls++
		return js.Global().Get("Promise").Call("resolve", env(t, "RELAY_TOKEN"))
	})
	defer token.Release()
	r := recorder(t, nil)
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", attachOptions(t, r, "token", map[string]any{"token": token})))
	defer func() { must(t, ctx, att.Call("detach")) }()
	if calls != 1 {
		t.Fatalf("token function called %d times for one dial", calls)
	}
	app(t).Call("fire", "window", "offline")
	must(t, ctx, r.Call("untilState", "offline"))
	app(t).Call("fire", "window", "online")
	must(t, ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
		states := args[0].Get("states")
		return states.Index(states.Length()-1).Index(0).String() == "open"
	}), "open again"))
	if calls != 2 {
		t.Fatalf("token function called %d times for two dials", calls)
	}
}

// Two attachments of one stream name in one page (as in two tabs) get
// separate slots, hence separate streams; closing frees the slot.
func TestAPISlotsKeepTabsApart(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	r1, r2 := recorder(t, nil), recorder(t, nil)
	a1 := must(t, ctx, relay.Call("attach", attachOptions(t, r1, "tab", nil)))
	a2 := must(t, ctx, relay.Call("attach", attachOptions(t, r2, "tab", nil)))
	if n1, n2 := a1.Get("name").String(), a2.Get("name").String(); n1 != "tab" || n2 != "tab#2" {
		t.Fatalf("names %q and %q, want tab and tab#2", n1, n2)
	}
	if a1.Get("session").String() == a2.Get("session").String() {
		t.Fatal("two slots share an attachment id")
	}
	s1 := a1.Get("session").String()
	must(t, ctx, a1.Call("close"))
	r3 := recorder(t, nil)
	a3 := must(t, ctx, relay.Call("attach", attachOptions(t, r3, "tab", nil)))
	if n := a3.Get("name").String(); n != "tab" {
		t.Fatalf("after the first closed, a new attach got %q, want tab", n)
	}
	if s := a3.Get("session").String(); s != s1 {
		t.Fatalf("slot tab reclaimed %q, want its stored %q", s, s1)
	}
	must(t, ctx, a2.Call("detach"))
	must(t, ctx, a3.Call("detach"))
}

// detach ends the stream: a new attach with the name starts afresh.
func TestAPIDetachForgets(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	r := recorder(t, nil)
	att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "detach", nil)))
	must(t, ctx, app(t).Call("newSession", att, r))
	s1 := att.Get("session").String()
	if settle(t, ctx, att, r) == 0 {
		t.Fatal("cursor 0 after two responses")
	}
	must(t, ctx, att.Call("detach"))
	if s := att.Get("state").String(); s != "closed" {
		t.Fatalf("state %q after detach", s)
	}
	rejects(t, ctx, att.Call("sendACP", map[string]any{"jsonrpc": "2.0", "method": "x"}), "closed")

	again := must(t, ctx, relay.Call("attach", attachOptions(t, recorder(t, nil), "detach", nil)))
	if again.Get("session").String() == s1 || again.Get("cursor").Int() != 0 {
		t.Fatalf("after detach the stream continued: session %q cursor %d", again.Get("session").String(), again.Get("cursor").Int())
	}
	must(t, ctx, again.Call("detach"))
}

// A Relay reads a stream's stored transcript without attaching, as a page
// reloaded while the relay is down does to draw the conversation: the same
// entries as the stream's attachment reads, in this page while attached
// (written first) and in a reloaded page before it attaches; [] for a stream
// never stored, another instance's, one detached, or from a memory-only
// Relay, which sees no IndexedDB. A URL names the stream its href does.
func TestAPIHistoryWithoutAttaching(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	relay := loadRelay(t, ctx, map[string]any{"database": db})
	r := recorder(t, nil)
	opts := attachOptions(t, r, "kept", map[string]any{"history": 1000})
	att := must(t, ctx, relay.Call("attach", opts))
	sid := must(t, ctx, app(t).Call("newSession", att, r))
	must(t, ctx, r.Call("response", must(t, ctx, app(t).Call("prompt", att, sid, "count 20"))))
	want := stringify(must(t, ctx, att.Call("history")))
	if n := strings.Count(want, `"agent_message_chunk"`); n != 20 {
		t.Fatalf("the attachment's history holds %d chunks, want 20: %s", n, want)
	}
	name := map[string]any{"url": opts["url"], "instance": opts["instance"], "name": "kept"}
	if got := stringify(must(t, ctx, relay.Call("history", name))); got != want {
		t.Fatalf("relay.history while attached:\n%s\nthe attachment's:\n%s", got, want)
	}
	must(t, ctx, att.Call("close"))

	reloaded := reloadedRelay(t, ctx, db, relay)
	if got := stringify(must(t, ctx, reloaded.Call("history", opts))); got != want { // an attach's options will do
		t.Fatalf("relay.history of a reloaded page:\n%s\nthe attachment's:\n%s", got, want)
	}
	asURL := js.Global().Get("URL").New(opts["url"])
	if got := stringify(must(t, ctx, reloaded.Call("history", map[string]any{"url": asURL, "instance": opts["instance"], "name": "kept"}))); got != want {
		t.Fatalf("relay.history with the url as a URL:\n%s\nthe attachment's:\n%s", got, want)
	}
	for what, other := range map[string]map[string]any{
		"a stream never stored": {"url": opts["url"], "instance": opts["instance"], "name": "never"},
		"another instance's":    {"url": opts["url"], "instance": "elsewhere", "name": "kept"},
		"the default stream":    {"url": opts["url"], "instance": opts["instance"]},
	} {
		if got := stringify(must(t, ctx, reloaded.Call("history", other))); got != "[]" {
			t.Errorf("relay.history of %s: %s, want []", what, got)
		}
	}
	memory := loadRelay(t, ctx, map[string]any{"database": db, "storage": "memory"})
	if got := stringify(must(t, ctx, memory.Call("history", name))); got != "[]" {
		t.Errorf("a memory-only Relay read %s, want []", got)
	}
	for _, bad := range []any{nil, "kept", map[string]any{"url": "https://relay.example/v1/attach", "instance": "demo"}, map[string]any{"url": 7, "instance": "demo"},
		map[string]any{"url": opts["url"], "instance": ""}, map[string]any{"url": opts["url"], "instance": "demo", "name": 7}} {
		rejects(t, ctx, reloaded.Call("history", bad), "bad_options")
	}

	again := must(t, ctx, reloaded.Call("attach", attachOptions(t, recorder(t, nil), "kept", map[string]any{"history": 1000, "url": asURL})))
	if got := stringify(must(t, ctx, again.Call("history"))); got != want {
		t.Fatalf("the stream attached again reads\n%s\nwant\n%s", got, want)
	}
	must(t, ctx, again.Call("detach"))
	if got := stringify(must(t, ctx, reloaded.Call("history", name))); got != "[]" {
		t.Fatalf("relay.history after detach: %s, want []", got)
	}
}

func TestAPISendAndResume(t *testing.T) {
	ctx := testContext(t)
	r := recorder(t, nil)
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", attachOptions(t, r, "send", map[string]any{"history": 50})))
	defer func() { must(t, ctx, att.Call("detach")) }()

	rejects(t, ctx, att.Call("sendACP", "{not json"), "bad_payload")
	rejects(t, ctx, att.Call("sendACP", js.Global().Get("BigInt").Invoke(1)), "bad_payload")

	// An object and a JSON string both go out; the echo comes back.
	echo := map[string]any{"jsonrpc": "2.0", "id": 9001, "method": "_relaywasm/echo", "params": map[string]any{"ü": "✓"}}
	must(t, ctx, att.Call("sendACP", echo))
	must(t, ctx, att.Call("sendACP", `{"jsonrpc":"2.0","id":9002,"method":"_relaywasm/echo","params":[1,2]}`))
	if got := stringify(must(t, ctx, r.Call("response", 9001)).Get("result")); got != `{"ü":"✓"}` {
		t.Fatalf("echo result %s", got)
	}
	must(t, ctx, r.Call("response", 9002))
	before := r.Get("messages").Length()

	// An explicit resume from 0 delivers everything again, marked replay.
	rejects(t, ctx, att.Call("resume", -1), "bad_cursor")
	must(t, ctx, att.Call("resume", 0))
	must(t, ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
		return args[0].Get("messages").Length() >= 2*before
	}), "the replay"))
	metas := r.Get("metas")
	for i := before; i < 2*before; i++ {
		if m := metas.Index(i); !m.Get("replay").Bool() || m.Get("seq").Int() != i-before+1 {
			t.Fatalf("replayed message %d: %s", i-before, stringify(m))
		}
	}

	// The transcript holds what was sent, once, and what was received, once.
	h := must(t, ctx, att.Call("history"))
	out, in := 0, 0
	for i := range h.Length() {
		if h.Index(i).Get("out").Bool() {
			out++
		} else {
			in++
		}
	}
	if out != 2 || in != before {
		t.Fatalf("transcript: %d sent, %d received; want 2 and %d", out, in, before)
	}
}

// A handler that sends from inside onMessage, synchronously (an application
// answering the agent), does not stall the page: the send goes out once the
// delivery is done, and its answer arrives.
func TestAPISendFromTheHandler(t *testing.T) {
	ctx := testContext(t)
	r := recorder(t, nil)
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", attachOptions(t, r, "send-in-handler", nil)))
	defer func() { must(t, ctx, att.Call("detach")) }()
	sent := app(t).Call("sendFromHandler", att, map[string]any{"jsonrpc": "2.0", "id": 7001, "method": "_relaywasm/echo", "params": []any{"from the handler"}})
	must(t, ctx, app(t).Call("newSession", att, r))
	must(t, ctx, sent)
	if got := stringify(must(t, ctx, r.Call("response", 7001)).Get("result")); got != `["from the handler"]` {
		t.Fatalf("echo result %s", got)
	}
}

// Without IndexedDB the client works in memory and says so.
func TestAPIMemoryFallback(t *testing.T) {
	ctx := testContext(t)
	undo := faults(t).Call("hideIndexedDB")
	relay := loadRelay(t, ctx, nil)
	undo.Invoke()
	if got := relay.Get("storage").String(); got != "memory" {
		t.Fatalf("relay.storage = %q without IndexedDB", got)
	}
	r := recorder(t, nil)
	att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "memory", nil)))
	defer func() { must(t, ctx, att.Call("detach")) }()
	must(t, ctx, app(t).Call("newSession", att, r))
	states := r.Get("states")
	info := states.Index(states.Length() - 1).Index(1)
	if info.Get("storage").String() != "memory" || info.Get("reason").String() != "indexeddb_unavailable" {
		t.Fatalf("onState info %s", stringify(info))
	}
}

// A relay's close code reaches the page: another client (one that does not
// take the Web Lock, e.g. an older build in another tab) reclaims this
// attachment, and the relay closes this one with 4409, which the page sees as
// the end of the attachment with code "superseded".
func TestAPISupersededReachesThePage(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	r := recorder(t, nil)
	att := must(t, ctx, loadRelay(t, ctx, map[string]any{"database": db}).Call("attach", attachOptions(t, r, "sup", nil)))
	must(t, ctx, app(t).Call("newSession", att, r))

	store := jsbridge.OpenStore(ctx, db, nil)
	// The page's Store writes once its commit window has passed; the other
	// client reclaims what is stored by then.
	stored := client.Key{URL: env(t, "RELAY_ATTACH_URL"), Instance: env(t, "RELAY_INSTANCE"), Name: "sup"}
	for mustLoad(t, ctx, store, stored).Session != att.Get("session").String() {
		select {
		case <-ctx.Done():
			t.Fatal("the page's attachment id was never stored")
		case <-time.After(10 * time.Millisecond):
		}
	}
	key, err := relayKey(t)
	if err != nil {
		t.Fatal(err)
	}
	other, err := client.Attach(ctx, client.Options{
		URL: env(t, "RELAY_ATTACH_URL"), Instance: env(t, "RELAY_INSTANCE"), Name: "sup",
		Credential: func(context.Context) (string, error) { return env(t, "RELAY_TOKEN"), nil },
		RelayKey:   key, Store: store, Transport: jsbridge.Transport{},
		OnMessage: func(client.Message) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.Session() != att.Get("session").String() {
		t.Fatalf("the other client got %q, not the page's %q", other.Session(), att.Get("session").String())
	}
	must(t, ctx, r.Call("untilState", "closed"))
	states := r.Get("states")
	info := states.Index(states.Length() - 1).Index(1)
	if code := info.Get("code").String(); code != "superseded" {
		t.Fatalf("closed with %s, want code superseded", stringify(info))
	}
	if s := att.Get("state").String(); s != "closed" {
		t.Fatalf("state %q", s)
	}
	rejects(t, ctx, att.Call("sendACP", `{"jsonrpc":"2.0","method":"x"}`), "closed")
}

func relayKey(t *testing.T) (ed25519.PublicKey, error) {
	return librelay.ParsePublicKey(env(t, "RELAY_KEY"))
}

// storage: "memory" keeps nothing in IndexedDB and reports no fallback (it
// is asked for, not a failure); anything but the two names is refused.
func TestAPIMemoryStorageOnRequest(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	rejects(t, ctx, relayModule.Call("loadRelay", map[string]any{"database": db, "storage": "disk"}), "bad_options")

	relay := loadRelay(t, ctx, map[string]any{"database": db, "storage": "memory"})
	if got := relay.Get("storage").String(); got != "memory" {
		t.Fatalf("relay.storage = %q", got)
	}
	r := recorder(t, nil)
	att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "asked-memory", nil)))
	defer func() { must(t, ctx, att.Call("close")) }()
	must(t, ctx, app(t).Call("newSession", att, r))
	if settle(t, ctx, att, r) == 0 {
		t.Fatal("no message delivered")
	}
	info := r.Get("states").Index(r.Get("states").Length() - 1).Index(1)
	if info.Get("storage").String() != "memory" || !info.Get("reason").IsUndefined() {
		t.Fatalf("onState info %s: want memory storage and no fallback reason", stringify(info))
	}
	stored := mustLoad(t, ctx, jsbridge.OpenStore(ctx, db, nil), client.Key{
		URL: env(t, "RELAY_ATTACH_URL"), Instance: env(t, "RELAY_INSTANCE"), Name: att.Get("name").String(),
	})
	if stored != (client.Saved{}) {
		t.Fatalf("IndexedDB holds %+v for a memory-only relay", stored)
	}
}

// The relay's welcome signature is checked by the page's WebCrypto
// (Ed25519) where the engine has it, and by relay.wasm's own Ed25519 where
// it does not (or WebCrypto fails): either way a good key attaches and
// another relay's key is bad_relay_signature.
func TestAPIWelcomeSignatureByWebCrypto(t *testing.T) {
	ctx := testContext(t)
	relay := loadRelay(t, ctx, nil)
	r := recorder(t, nil)
	subtle := js.Global().Get("crypto").Get("subtle")
	verify := subtle.Get("verify")
	defer subtle.Set("verify", verify)
	other := "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

	// What WebCrypto answered, for each Ed25519 check made through it.
	var answers []bool
	spy := js.FuncOf(func(this js.Value, args []js.Value) any {
		p := verify.Call("apply", this, js.ValueOf(jsArgs(args)))
		if args[0].String() != "Ed25519" {
			return p
		}
		var note js.Func
		note = js.FuncOf(func(_ js.Value, v []js.Value) any {
			answers = append(answers, v[0].Bool())
			note.Release()
			return v[0]
		})
		return p.Call("then", note)
	})
	defer spy.Release()
	subtle.Set("verify", spy)

	att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "webcrypto", nil)))
	must(t, ctx, att.Call("detach"))
	rejects(t, ctx, relay.Call("attach", attachOptions(t, r, "webcrypto-other", map[string]any{"relayKey": other})), "bad_relay_signature")
	if ed25519InWebCrypto(t, ctx) {
		if len(answers) != 2 || !answers[0] || answers[1] {
			t.Fatalf("WebCrypto answered %v, want [true false]: the relay's key verifies there, another's does not", answers)
		}
	} else {
		t.Logf("this engine's WebCrypto has no Ed25519: relay.wasm checked both (%v)", answers)
	}

	// An engine whose WebCrypto cannot (a rejected Promise): relay.wasm's
	// check decides, with the same outcomes.
	refuse := js.FuncOf(func(js.Value, []js.Value) any {
		return js.Global().Get("Promise").Call("reject", js.Global().Get("DOMException").New("no Ed25519 here", "NotSupportedError"))
	})
	defer refuse.Release()
	subtle.Set("verify", refuse)
	att = must(t, ctx, relay.Call("attach", attachOptions(t, r, "webcrypto-refused", nil)))
	must(t, ctx, att.Call("detach"))
	rejects(t, ctx, relay.Call("attach", attachOptions(t, r, "webcrypto-refused-other", map[string]any{"relayKey": other})), "bad_relay_signature")
}

// ed25519InWebCrypto says whether the engine's WebCrypto imports the
// relay's Ed25519 key (Chromium 137, Firefox 129, Safari 17 and later).
func ed25519InWebCrypto(t *testing.T, ctx context.Context) bool {
	pub, err := relayKey(t)
	if err != nil {
		t.Fatal(err)
	}
	key := js.Global().Get("Uint8Array").New(len(pub))
	js.CopyBytesToJS(key, pub)
	usages := js.ValueOf([]any{"verify"})
	_, err = await(ctx, js.Global().Get("crypto").Get("subtle").Call("importKey", "raw", key, "Ed25519", false, usages))
	return err == nil
}

func jsArgs(vs []js.Value) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
