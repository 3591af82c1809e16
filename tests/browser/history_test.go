//go:build js && wasm

package browser

import (
	"fmt"
	"reflect"
	"strings"
	"syscall/js"
	"testing"

	"github.com/relaywasm/relaywasm/jsbridge"
	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// history() keeps a loss where it happened, so a page redrawn from it after
// any number of reloads shows that part of the conversation is missing
// there: a reload against a runtime that does not resume loses what the
// runtime sent meanwhile (not_resumed), and the transcript holds that loss
// as an entry {out: false, seq: 0, lost: {reason, afterSeq, fromSeq}}
// between the answer before the reload and the prompt after it, with no
// message. In IndexedDB it is still there, in its place, for a page loaded
// after that (relay.history, and the attachment's history()); in memory
// storage for the next attach in the same page.
func TestHistoryKeepsTheLoss(t *testing.T) {
	for _, storage := range []string{"indexeddb", "memory"} {
		t.Run(storage, func(t *testing.T) {
			ctx := testContext(t)
			db := database(t)
			var kept js.Value
			loads := 0
			// A reloaded page; in memory storage the same one. Each page's
			// commit window differs, as loadRelay with the same options
			// gives the same Relay back (reloadedRelay).
			page := func() js.Value {
				if storage == "memory" && !kept.IsUndefined() {
					return kept
				}
				loads++
				kept = loadRelay(t, ctx, map[string]any{"database": db, "storage": storage, "commitWindowMs": boundary.DefaultCommitWindowMs - loads})
				return kept
			}
			name := "nr-lost-" + storage
			r := recorder(t, nil)
			att := must(t, ctx, page().Call("attach", nonResumingOptions(t, r, name, map[string]any{"history": 1000})))
			sid := must(t, ctx, app(t).Call("newSession", att, r)).String()
			must(t, ctx, r.Call("response", must(t, ctx, app(t).Call("prompt", att, sid, "count 20"))))
			before := must(t, ctx, att.Call("history")).Length()
			must(t, ctx, att.Call("close"))

			// The reloaded page acts on nothing while the resume's answer,
			// which never comes, is awaited: 1 s, not the default 3 s.
			r2 := recorder(t, nil)
			att2 := must(t, ctx, page().Call("attach", nonResumingOptions(t, r2, name, map[string]any{"history": 1000, "resumeTimeoutMs": 1000})))
			must(t, ctx, r2.Call("until", js.FuncOf(func(_ js.Value, args []js.Value) any { return args[0].Get("evictions").Length() > 0 }), "the reload's loss reported"))
			told := r2.Get("evictions").Index(0)
			must(t, ctx, r2.Call("response", must(t, ctx, app(t).Call("prompt", att2, sid, "count 5"))))
			want := stringify(must(t, ctx, att2.Call("history")))
			checkLossAt(t, must(t, ctx, att2.Call("history")), before, told)
			must(t, ctx, att2.Call("close"))

			stream := map[string]any{"url": env(t, "RELAY_NORESUME_ATTACH_URL"), "instance": env(t, "RELAY_INSTANCE"), "name": name}
			if storage == "memory" {
				// What this page's attachments wrote; no other page sees it.
				if got := stringify(must(t, ctx, page().Call("history", stream))); got != want {
					t.Fatalf("relay.history after close:\n%s\nthe attachment's:\n%s", got, want)
				}
				return
			}
			if got := stringify(must(t, ctx, page().Call("history", stream))); got != want {
				t.Fatalf("relay.history of a page loaded after:\n%s\nthe attachment's:\n%s", got, want)
			}
		})
	}
}

// checkLossAt fails unless h holds one loss, entry at, as told (onEvicted's
// info), with no message, and a prompt after it.
func checkLossAt(t *testing.T, h js.Value, at int, told js.Value) {
	t.Helper()
	losses := 0
	for i := range h.Length() {
		if e := h.Index(i); !e.Get("lost").IsUndefined() {
			losses++
			if i != at {
				t.Errorf("a loss at entry %d, want it at %d, after the answer before the reload: %s", i, at, stringify(e))
			}
		}
	}
	if losses != 1 || at >= h.Length() {
		t.Fatalf("history() holds %d losses, want 1 at entry %d: %s", losses, at, stringify(h))
	}
	e := h.Index(at)
	lost := e.Get("lost")
	for _, k := range []string{"reason", "afterSeq", "fromSeq"} {
		if !lost.Get(k).Equal(told.Get(k)) {
			t.Fatalf("the loss entry is %s; onEvicted told %s", stringify(e), stringify(told))
		}
	}
	if lost.Get("reason").String() != "not_resumed" || e.Get("out").Bool() || e.Get("seq").Int() != 0 {
		t.Fatalf("the loss entry is %s, want {out: false, seq: 0, lost: {reason: \"not_resumed\", …}}", stringify(e))
	}
	if !e.Get("message").IsUndefined() {
		t.Fatalf("the loss entry has a message: %s", stringify(e))
	}
	if next := h.Index(at + 1); !next.Get("out").Bool() || !strings.Contains(stringify(next.Get("message")), "count 5") {
		t.Fatalf("the entry after the loss is %s, want the prompt sent after the reload", stringify(next))
	}
}

// jsbridge's Store keeps a loss as an entry of its own (boundary.EntryLost),
// with its fields, in its place among the messages of the same commit and of
// others, and counts it toward keep; read through PlaceLosses (as
// Attachment.History and relay.history read it), a not_resumed loss is back
// in the place its connection recorded, and places are left out, for a
// store reopened (a reloaded page) too.
func TestStoreKeepsLosses(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	place := client.Entry{Lost: &client.Eviction{}}
	tooLarge := client.Entry{Lost: &client.Eviction{AfterSeq: 3, FromSeq: 5, Reason: client.EvictedFrameTooLarge}}
	notResumed := client.Entry{Lost: &client.Eviction{AfterSeq: 1 << 40, Reason: client.EvictedNotResumed}}
	in := received(0, 6)
	commits := [][]client.Entry{
		{in[0], in[1], in[2], tooLarge, in[3]},
		{place, in[4]},
		{in[5], notResumed},
	}
	for i, entries := range commits {
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att-1", Cursor: uint64(i + 1)}, entries, 100); err != nil {
			t.Fatal(err)
		}
	}
	want := []client.Entry{in[0], in[1], in[2], tooLarge, in[3], notResumed, in[4], in[5]}
	for what, store := range map[string]*jsbridge.Store{"the store": s, "a store reopened": openStore(t, ctx, db)} {
		if got := client.PlaceLosses(mustHistory(t, ctx, store, testKey)); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s's History = %s, want %s", what, describeLosses(got), describeLosses(want))
		}
	}
	// keep counts losses and places: the newest 4 entries stored are
	// place, in[4], in[5] and the loss.
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att-1", Cursor: 4}, nil, 4); err != nil {
		t.Fatal(err)
	}
	if got, want := client.PlaceLosses(mustHistory(t, ctx, s, testKey)), []client.Entry{notResumed, in[4], in[5]}; !reflect.DeepEqual(got, want) {
		t.Fatalf("kept 4: History = %s, want %s", describeLosses(got), describeLosses(want))
	}
}

func describeLosses(h []client.Entry) string {
	s := ""
	for _, e := range h {
		if e.Lost != nil {
			s += fmt.Sprintf("[lost %+v]", *e.Lost)
		} else {
			s += describe([]client.Entry{e})
		}
	}
	return s
}
