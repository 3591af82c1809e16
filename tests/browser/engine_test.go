//go:build js && wasm

package browser

import (
	"context"
	"strconv"
	"strings"
	"syscall/js"
	"testing"
	"time"
)

// These tests hold the engine to what it promises a page: a handler's
// Promise holds the cursor and nothing else, a runtime that does not resume
// (contenox as it ships) still chats and says what a drop or a reload cost,
// and the frame's trace id crosses.

// waitUntil polls cond until it holds; ctx is the hang guard.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitCursor waits until att's cursor is want: the engine moves it once the
// handler has returned, a moment after the handler saw the message.
func waitCursor(t *testing.T, ctx context.Context, att js.Value, want int) {
	t.Helper()
	waitUntil(t, ctx, "cursor "+strconv.Itoa(want), func() bool { return att.Get("cursor").Int() == want })
}

// A handler whose Promise does not settle costs nothing but the cursor:
// while it holds a delivery the engine keeps sending its heartbeats (every
// 100 ms here) and they are answered (a missing ack would drop the
// connection after a second), a send goes out, and the cursor waits;
// released, the page gets what came meanwhile in order. Held again, close()
// and detach() resolve while the Promise is still pending.
func TestAPIHeldHandlerCostsNothing(t *testing.T) {
	ctx := testContext(t)
	app(t).Call("watchSends")
	db := database(t)
	hb := map[string]any{"heartbeat": map[string]any{"intervalMs": 100, "timeoutMs": 5000}}
	r := recorder(t, nil)
	relay := loadRelay(t, ctx, map[string]any{"database": db})
	att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "held", hb)))
	sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
	before := r.Get("metas").Length()
	waitCursor(t, ctx, att, before)

	r.Call("hold")
	id := must(t, ctx, app(t).Call("prompt", att, sid, "ping")).Int()
	must(t, ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any { return args[0].Get("holding").Int() > 0 }), "a held delivery"))
	beats := app(t).Call("sentCount", "relay.heartbeat").Int()
	waitUntil(t, ctx, "heartbeats while the handler holds", func() bool {
		return app(t).Call("sentCount", "relay.heartbeat").Int() >= beats+5
	})
	id2 := must(t, ctx, app(t).Call("prompt", att, sid, "count 3")).Int() // a send while held
	if c := att.Get("cursor").Int(); c != before {
		t.Fatalf("cursor %d moved past %d while the handler held", c, before)
	}
	if s := att.Get("state").String(); s != "open" {
		t.Fatalf("state %q while the handler held", s)
	}
	r.Call("release")
	must(t, ctx, r.Call("response", id))
	must(t, ctx, r.Call("response", id2))
	if got := chunks(r); strings.Join(got, "") != "pong1\n2\n3\n" {
		t.Fatalf("chunks %q after the release", got)
	}
	held := r.Get("metas").Length()
	waitCursor(t, ctx, att, held)

	// close() while a delivery is held: it resolves, and the stored cursor
	// is the one before the held message, which the next page gets again.
	r.Call("hold")
	must(t, ctx, app(t).Call("prompt", att, sid, "ping"))
	must(t, ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any { return args[0].Get("holding").Int() > 1 }), "a second held delivery"))
	must(t, ctx, att.Call("close"))
	if c := att.Get("cursor").Int(); c != held {
		t.Fatalf("cursor %d after close, want %d (the held message was not accepted)", c, held)
	}
	r2 := recorder(t, nil)
	r2.Call("hold")
	att2 := must(t, ctx, reloadedRelay(t, ctx, db, relay).Call("attach", attachOptions(t, r2, "held", hb)))
	must(t, ctx, r2.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any { return args[0].Get("holding").Int() > 0 }), "the held message again"))
	must(t, ctx, att2.Call("detach")) // while held
	if s := att2.Get("state").String(); s != "closed" {
		t.Fatalf("state %q after detach", s)
	}
}

// The non-resuming runtime is a second demo (run.sh: -resume=false) that
// stamps no seq and leaves session.resume unanswered, as contenox v1.0.0
// does; the shipped runtime cannot run here.
func nonResumingOptions(t *testing.T, r js.Value, name string, extra map[string]any) map[string]any {
	o := attachOptions(t, r, name, extra)
	o["url"] = env(t, "RELAY_NORESUME_ATTACH_URL")
	o["relayKey"] = env(t, "RELAY_NORESUME_KEY")
	return o
}

func untilNotResumable(t *testing.T, ctx context.Context, r js.Value) {
	t.Helper()
	must(t, ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any {
		states := args[0].Get("states")
		n := states.Length()
		return n > 0 && states.Index(n-1).Index(1).Get("resumable").Equal(js.ValueOf(false))
	}), "resumable false"))
}

// A page chats with a runtime that does not resume: the sends made before
// the resume was given up on go out, everything arrives once, unsequenced,
// and the state info and att.resumable say the runtime does not resume.
func TestAPINonResumingChat(t *testing.T) {
	ctx := testContext(t)
	r := recorder(t, nil)
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", nonResumingOptions(t, r, "nr-chat", map[string]any{"history": 100})))
	if !att.Get("resumable").Bool() {
		t.Fatal("resumable false before any resume went unanswered")
	}
	sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
	untilNotResumable(t, ctx, r)
	if att.Get("resumable").Bool() {
		t.Fatal("att.resumable is true against a runtime that never answered a resume")
	}
	id := must(t, ctx, app(t).Call("prompt", att, sid, "count 300")).Int()
	must(t, ctx, r.Call("response", id))
	checkCount(t, chunks(r), 300)
	metas := r.Get("metas")
	for i := range metas.Length() {
		if seq := metas.Index(i).Get("seq").Int(); seq != 0 {
			t.Fatalf("message %d has seq %d from a runtime that stamps none", i, seq)
		}
	}
	if ev := r.Get("evictions"); ev.Length() != 0 {
		t.Fatalf("evictions on a first connection: %s", stringify(ev))
	}
	must(t, ctx, att.Call("detach"))
}

// A drop mid-stream and a reload against a runtime that does not resume:
// nothing arrives twice, what the runtime sent while the page was away is
// gone and onEvicted says so (not_resumed), and the chat goes on on the
// same ACP session.
func TestAPINonResumingDropAndReload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	db := database(t)
	r := recorder(t, map[string]any{"offlineAt": 200})
	relay := loadRelay(t, ctx, map[string]any{"database": db})
	// The test acts on nothing while the resume's answer, which never
	// comes, is awaited (after the drop, after the reload): each wait is
	// 1 s, not the default 3 s, and only delays the report.
	quick := map[string]any{"resumeTimeoutMs": 1000}
	att := must(t, ctx, relay.Call("attach", nonResumingOptions(t, r, "nr-drop", quick)))
	sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
	must(t, ctx, app(t).Call("prompt", att, sid, "count 5000"))
	must(t, ctx, r.Call("untilState", "offline"))
	app(t).Call("fire", "window", "online")
	must(t, ctx, r.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any { return args[0].Get("evictions").Length() > 0 }), "the loss reported"))
	ev := r.Get("evictions").Index(0)
	if ev.Get("reason").String() != "not_resumed" {
		t.Fatalf("eviction %s", stringify(ev))
	}
	// The chat goes on after the drop: a new prompt (which ends the count
	// if it is still running) is answered.
	id := must(t, ctx, app(t).Call("prompt", att, sid, "ping")).Int()
	must(t, ctx, r.Call("response", id))
	got := chunks(r)
	if len(got) == 0 || got[len(got)-1] != "pong" {
		t.Fatalf("the last chunk after the drop is not the new prompt's pong: %q", got[max(0, len(got)-3):])
	}
	checkIncreasing(t, got[:len(got)-1], 5000)

	// A reload: a new Relay on the same database attaching with the same
	// name gets its attachment id back, and the loss is reported there too.
	session := att.Get("session").String()
	must(t, ctx, att.Call("close"))
	r2 := recorder(t, nil)
	att2 := must(t, ctx, reloadedRelay(t, ctx, db, relay).Call("attach", nonResumingOptions(t, r2, "nr-drop", quick)))
	if got := att2.Get("session").String(); got != session {
		t.Fatalf("the reloaded page got attachment %q, want %q", got, session)
	}
	must(t, ctx, r2.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any { return args[0].Get("evictions").Length() > 0 }), "the reload's loss reported"))
	if ev := r2.Get("evictions").Index(0); ev.Get("reason").String() != "not_resumed" {
		t.Fatalf("eviction after the reload %s", stringify(ev))
	}
	id = must(t, ctx, app(t).Call("prompt", att2, sid, "count 20")).Int()
	must(t, ctx, r2.Call("response", id))
	checkCount(t, chunks(r2), 20)
	must(t, ctx, att2.Call("detach"))
}

// checkIncreasing fails unless texts are count chunks from 1..n, each at
// most once and in order: some may be missing (sent while the page was
// away), none twice.
func checkIncreasing(t *testing.T, texts []string, n int) {
	t.Helper()
	last := 0
	for _, text := range texts {
		k, err := strconv.Atoi(strings.TrimSuffix(text, "\n"))
		if err != nil || k <= last || k > n {
			t.Fatalf("chunk %q after %d", text, last)
		}
		last = k
	}
	t.Logf("%d of the %d chunks arrived; the rest were sent while the page was away", len(texts), n)
}

// sendACP takes the frame's trace id as an option, refusing one that is not
// a trace id before anything is sent; what arrives has meta.trace ("" when
// the runtime sent none, as the dev agent does).
func TestAPITrace(t *testing.T) {
	ctx := testContext(t)
	r := recorder(t, nil)
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", attachOptions(t, r, "trace", nil)))
	msg := `{"jsonrpc":"2.0","id":900,"method":"initialize","params":{"protocolVersion":1}}`
	rejects(t, ctx, att.Call("sendACP", msg, map[string]any{"trace": "not a trace"}), "bad_options")
	must(t, ctx, att.Call("sendACP", msg, map[string]any{"trace": "turn-1_a"}))
	must(t, ctx, r.Call("response", 900))
	if m := r.Get("metas").Index(0); m.Get("trace").Type() != js.TypeString || m.Get("trace").String() != "" {
		t.Fatalf("meta %s: want trace \"\"", stringify(m))
	}
	must(t, ctx, att.Call("detach"))
}

// settle waits until att's cursor has caught up with the last sequenced
// message recorder r accepted, and returns it.
func settle(t *testing.T, ctx context.Context, att, r js.Value) int {
	t.Helper()
	metas := r.Get("metas")
	last := 0
	for i := range metas.Length() {
		if seq := metas.Index(i).Get("seq").Int(); seq > 0 {
			last = seq
		}
	}
	waitCursor(t, ctx, att, last)
	return last
}

// A reloaded page that stalls right after it asks to resume (a phone, a long
// redraw): the runtime's answer arrives during the stall, and so does the
// end of the resume's wait. The answer must win. Before, the timer could
// reach Go first (the answer still in relay.js's queue, or in the same
// wake-up as it) and the attachment said the runtime does not resume, and
// reported what it had missed as lost (not_resumed), though the runtime had
// answered within a few milliseconds and then delivered all of it.
func TestAPIResumeAnsweredDuringAStall(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	opts := map[string]any{"resumeTimeoutMs": 300}
	r := recorder(t, nil)
	relay := loadRelay(t, ctx, map[string]any{"database": db})
	att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "stalled-resume", opts)))
	sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
	must(t, ctx, r.Call("response", must(t, ctx, app(t).Call("prompt", att, sid, "count 20")).Int()))
	must(t, ctx, att.Call("close"))

	stall := app(t).Call("stallAfter", "session.resume", 1500)
	defer stall.Call("cancel")
	r2 := recorder(t, nil)
	att2 := must(t, ctx, reloadedRelay(t, ctx, db, relay).Call("attach", attachOptions(t, r2, "stalled-resume", opts)))
	must(t, ctx, stall.Get("done"))
	id := must(t, ctx, app(t).Call("prompt", att2, sid, "ping")).Int()
	must(t, ctx, r2.Call("response", id))
	if got := chunks(r2); len(got) != 1 || got[0] != "pong" {
		t.Fatalf("after the stall the page received %q, want the ping's pong alone", got)
	}
	if !att2.Get("resumable").Bool() {
		t.Error("att.resumable is false: the stall was taken for a runtime that does not resume")
	}
	states := r2.Get("states")
	for i := range states.Length() {
		if st := states.Index(i); st.Index(1).Get("resumable").Equal(js.ValueOf(false)) {
			t.Errorf("state %d (%s) says the runtime does not resume", i, stringify(st))
		}
	}
	if ev := r2.Get("evictions"); ev.Length() != 0 {
		t.Errorf("evictions after a resume the runtime answered: %s", stringify(ev))
	}
	must(t, ctx, att2.Call("detach"))
}

// A page that stalls (a phone, a long redraw) right after a heartbeat goes
// out: the relay's ack arrives during the stall, and so does the end of the
// heartbeat's wait. The ack must win: the connection was alive all along,
// and taking it for dead costs a reconnect and a resume. Before, the timer
// could reach Go first and the client dropped the socket (heartbeat
// timeout) and redialled.
func TestAPIHeartbeatAnsweredDuringAStall(t *testing.T) {
	ctx := testContext(t)
	r := recorder(t, nil)
	// A 2 s wait gives an ack the loaded relay sends late room; the stall
	// outlasts it by a second, so the wait still ends during the stall.
	opts := map[string]any{"heartbeat": map[string]any{"intervalMs": 200, "timeoutMs": 2000}}
	att := must(t, ctx, loadRelay(t, ctx, nil).Call("attach", attachOptions(t, r, "stalled-heartbeat", opts)))
	sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
	app(t).Call("watchSends")
	stall := app(t).Call("stallAfter", "relay.heartbeat", 3000)
	defer stall.Call("cancel")
	must(t, ctx, stall.Get("done"))
	// Three heartbeats after the stall: the client went on with the same
	// connection, or redialled (the states say which).
	after := app(t).Call("sentCount", "relay.heartbeat").Int()
	for app(t).Call("sentCount", "relay.heartbeat").Int() < after+3 {
		if ctx.Err() != nil {
			t.Fatal("fewer than three heartbeats went out after the stall")
		}
		time.Sleep(50 * time.Millisecond)
	}
	must(t, ctx, r.Call("response", must(t, ctx, app(t).Call("prompt", att, sid, "ping")).Int()))
	states := r.Get("states")
	opened := false
	for i := range states.Length() {
		st := states.Index(i)
		if opened && st.Index(0).String() != "open" {
			t.Errorf("state %d is %s: the stalled page took a live connection for dead", i, stringify(st))
		}
		opened = opened || st.Index(0).String() == "open"
	}
	must(t, ctx, att.Call("detach"))
}
