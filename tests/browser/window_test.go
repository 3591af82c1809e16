//go:build js && wasm

package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/jsbridge"
	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// The Store writes commits once per commit window (jsbridge.Store). These
// tests make the window an hour, so that what is not written yet cannot
// have been written by the window's end, and check what cuts it short and
// what a page that dies inside it gets back.

const longWindow = time.Hour

// untilStored waits until another Store on db loads want for k: the other
// Store has nothing queued, so it reads what IndexedDB holds. The wait is
// bounded by ctx (a liveness guard, not a measure of speed).
func untilStored(t *testing.T, ctx context.Context, other *jsbridge.Store, k client.Key, want client.Saved) {
	t.Helper()
	for {
		got := mustLoad(t, ctx, other, k)
		if got == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("IndexedDB holds %+v for %s, want %+v", got, k.Name, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// windowStores opens two Stores on a new database: s, with the long window
// and testKey loaded, and other, which reads what IndexedDB holds.
func windowStores(t *testing.T) (context.Context, *jsbridge.Store, *jsbridge.Store) {
	t.Helper()
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	s.SetCommitWindow(longWindow)
	other := openStore(t, ctx, db)
	mustLoad(t, ctx, s, testKey)
	return ctx, s, other
}

// A commit waits for the window unless the Store is asked to write (Flush,
// a read, WriteAll); a new attachment id does not wait at all.
func TestStoreCommitWindow(t *testing.T) {
	ctx, s, other := windowStores(t)

	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 0}, nil, 10); err != nil {
		t.Fatal(err)
	}
	untilStored(t, ctx, other, testKey, client.Saved{Session: "att"})

	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 3}, received(0, 3), 10); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, ctx, other, testKey); got.Cursor != 0 {
		t.Fatalf("a cursor-only commit was written before its window ended: %+v", got)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, ctx, other, testKey); got.Cursor != 3 {
		t.Fatalf("after Flush IndexedDB holds %+v, want cursor 3", got)
	}
	if got, want := describe(mustHistory(t, ctx, other, testKey)), describe(received(0, 3)); got != want {
		t.Fatalf("after Flush the transcript is %s, want %s", got, want)
	}

	// WriteAll (the page going away) starts the transaction before it
	// returns control to JavaScript: here, before this goroutine runs again.
	counter := faults(t).Call("countReadWrite", database(t))
	defer counter.Call("undo")
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, received(3, 2), 10); err != nil {
		t.Fatal(err)
	}
	jsbridge.WriteAll()
	runtime.Gosched()
	if n := counter.Get("n").Int(); n != 1 {
		t.Fatalf("WriteAll started %d transactions, want 1", n)
	}
	untilStored(t, ctx, other, testKey, client.Saved{Session: "att", Cursor: 5})
	if got, want := describe(mustHistory(t, ctx, other, testKey)), describe(received(0, 5)); got != want {
		t.Fatalf("after WriteAll the transcript is %s, want %s", got, want)
	}
}

// padded makes inbound entries with seqs from+1 … and payloads of the
// given sizes, each filled with a letter of its own.
func padded(from uint64, sizes ...int) []client.Entry {
	out := make([]client.Entry, len(sizes))
	for i, n := range sizes {
		seq := from + uint64(i) + 1
		head := `{"seq":` + strconv.FormatUint(seq, 10) + `,"pad":"`
		pad := strings.Repeat(string(rune('a'+seq%26)), max(0, n-len(head)-2))
		out[i] = client.Entry{Seq: seq, Payload: []byte(head + pad + `"}`)}
	}
	return out
}

// The commits not yet written wait in the store's arena (store.js), one
// buffer reused from window to window. Commits queued behind a write in
// flight move to the front of the arena once it ended, and the commits
// after them are copied in behind them; a commit too large for the arena
// grows it, and a burst's large arena is given up once it is idle. All of
// it reaches IndexedDB byte for byte and in order.
func TestStoreArenaKeepsWhatIsNotWritten(t *testing.T) {
	ctx, s, other := windowStores(t)
	want := received(0, 2)
	commit := func(entries []client.Entry) {
		t.Helper()
		want = append(want, entries...)
		last := entries[len(entries)-1].Seq
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: last}, entries, 1000); err != nil {
			t.Fatal(err)
		}
	}
	flush := func() {
		t.Helper()
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hold := holdFirstWrite(t, ctx, s) // entries 1-2, at the arena's front, held in flight
	commit(padded(2, 2_000, 3_000))   // queued behind it
	hold.Call("release")
	untilStored(t, ctx, other, testKey, client.Saved{Session: "att", Cursor: 2})
	commit(padded(4, 5_000)) // copied in after the queued ones, moved down when the write ended
	flush()
	commit(padded(5, 20_000, 30_000))
	commit(padded(7, 150_000)) // grows the arena: the two before stay in the old buffer
	commit(padded(8, 10, 40_000))
	flush()
	commit(padded(10, 3_000_000)) // a burst: the arena grows past 4 MiB, and shrinks once written
	flush()
	commit(padded(11, 60_000))
	flush()
	got := mustHistory(t, ctx, other, testKey)
	if len(got) != len(want) {
		t.Fatalf("IndexedDB holds %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || string(got[i].Payload) != string(want[i].Payload) {
			t.Fatalf("entry %d: seq %d, %d payload bytes starting %.24q; want seq %d, %d bytes starting %.24q",
				i, got[i].Seq, len(got[i].Payload), got[i].Payload, want[i].Seq, len(want[i].Payload), want[i].Payload)
		}
	}
}

// WriteAll while a write is still in flight (an engine whose writes are
// slow) does not wait for it: the commits queued behind it go to IndexedDB
// in a transaction made at once, which IndexedDB runs after the first, and
// the stored transcript is whole and in order.
func TestStoreWriteAllWhileWriting(t *testing.T) {
	ctx, s, other := windowStores(t)
	db := database(t)
	mustLoad(t, ctx, other, testKey)
	hold := writeAllBehindHeldWrite(t, ctx, s, nil)
	spill := spills(db)
	if len(spill) != 1 {
		t.Fatalf("WriteAll left %d spills in sessionStorage, want 1", len(spill))
	}
	hold.Call("release")
	untilWhole(t, ctx, other, 5, "after WriteAll behind a write in flight")
	if left := spills(db); len(left) != 0 {
		t.Fatalf("the spill outlived the write that committed it: %v", left)
	}

	// Both ended: the store goes on from the right total.
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 6}, received(5, 1), 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(mustHistory(t, ctx, other, testKey)), describe(received(0, 6)); got != want {
		t.Fatalf("the next write after them left the transcript %s, want %s", got, want)
	}

	// A page that went away after that write committed and before it
	// could drop the spill: the store opened next leaves it alone, since
	// the state record carries its mark.
	for _, v := range spill {
		sessionStorage().Call("setItem", spillPrefix(db)+"gone:1", v)
	}
	next := openStore(t, ctx, db)
	if got := mustLoad(t, ctx, next, testKey); got != (client.Saved{Session: "att", Cursor: 6}) {
		t.Fatalf("a spill whose write had committed was written again: the state is %+v, want cursor 6", got)
	}
	if got, want := describe(mustHistory(t, ctx, next, testKey)), describe(received(0, 6)); got != want {
		t.Fatalf("a spill whose write had committed was written again: the transcript is %s, want %s", got, want)
	}
	if left := spills(db); len(left) != 0 {
		t.Fatalf("the store that opened kept the spill: %v", left)
	}
}

// A page torn down before its writes commit (WebKit aborts every
// transaction not committed then, this one's and WriteAll's): the next
// store to open the database, as the reloaded page's does, finishes the
// spill WriteAll left in sessionStorage, once, and the transcript is whole.
// A page torn down tries nothing again: here every later try of the store's
// aborts too, until it falls back.
func TestStoreSpillFinishesWhatThePageLost(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	fell := make(chan jsbridge.Fallback, 1)
	s := fallibleStore(t, ctx, db, func(f jsbridge.Fallback) { fell <- f }) // the aborts make it fall back
	var undo js.Value
	hold := writeAllBehindHeldWrite(t, ctx, s, func() {
		undo = faults(t).Call("abortAfterPut", boundary.StoreChunks) // WriteAll's transaction, and every try after
	})
	hold.Call("abort")
	select {
	case <-fell:
		undo.Invoke()
	case <-ctx.Done():
		undo.Invoke()
		t.Fatal("the store did not see its writes abort")
	}
	if n, err := await(ctx, faults(t).Call("countChunks", db)); err != nil || n.Int() != 0 {
		t.Fatalf("IndexedDB holds %v chunks (%v) after both writes aborted, want none", n, err)
	}
	if len(spills(db)) != 1 {
		t.Fatalf("WriteAll left %d spills, want 1", len(spills(db)))
	}

	reloaded := openStore(t, ctx, db)
	untilWhole(t, ctx, reloaded, 5, "after the spill was finished")
	if left := spills(db); len(left) != 0 {
		t.Fatalf("the spill outlived its finishing: %v", left)
	}
	again := openStore(t, ctx, db)
	untilWhole(t, ctx, again, 5, "with a second store opened after")
}

// A spill outlives the storage it continues (the page went before the
// write that committed it could drop it, and the site's IndexedDB was
// cleared since): the store that opens next drops it, and the stream starts
// afresh instead of coming back from sessionStorage. So too when the spill
// holds the stream from its start, as a page's first write does (Firefox
// left one behind in a full run: the chat came back after the deletion),
// and when only the stream was cleared, in a database that is still there.
func TestStoreSpillOverClearedStorageIsDropped(t *testing.T) {
	for _, c := range []struct {
		name   string
		stored uint64 // entries flushed before the spilled write
		stream bool   // clear the stream (Clear), not the whole database
	}{
		{"after what was stored", 2, false},
		{"from the stream's start", 0, false},
		{"the stream cleared", 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := testContext(t)
			db := database(t)
			s := fallibleStore(t, ctx, db, nil) // the deletion makes it fall back
			if c.stored > 0 {
				if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: c.stored}, received(0, int(c.stored)), 10); err != nil {
					t.Fatal(err)
				}
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, received(c.stored, 5-int(c.stored)), 10); err != nil {
				t.Fatal(err)
			}
			jsbridge.WriteAll()
			spill := spills(db)
			if len(spill) != 1 {
				t.Fatalf("WriteAll left %d spills, want 1", len(spill))
			}
			if want := fmt.Sprintf(`"start":%d`, c.stored); !strings.Contains(spill[0], want) {
				t.Fatalf("the spill %s does not hold %s", spill[0], want)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if c.stream {
				if err := s.Clear(ctx, testKey); err != nil {
					t.Fatal(err)
				}
			} else if _, err := await(ctx, faults(t).Call("deleteDatabase", db)); err != nil {
				t.Fatal(err)
			}
			sessionStorage().Call("setItem", spillPrefix(db)+"gone:1", spill[0])

			next := openStore(t, ctx, db)
			if got := mustLoad(t, ctx, next, testKey); got != (client.Saved{}) {
				t.Fatalf("over cleared storage the spill brought back %+v", got)
			}
			if h := mustHistory(t, ctx, next, testKey); len(h) != 0 {
				t.Fatalf("over cleared storage the spill brought back the transcript %s", describe(h))
			}
			if left := spills(db); len(left) != 0 {
				t.Fatalf("the dropped spill is still there: %v", left)
			}
		})
	}
}

// A spill left by a page of this tab that went away is not finished over
// a record another page wrote since that page began the stream (store.js
// movedOn): another tab that took the free slot and went on (its later
// cursor stays), or detached the stream (it stays detached; with no
// transcript every spill starts at 0, so "start > total" did not tell).
// Before, the spill took the record back to the gone page's cursor, or
// brought back the detached stream.
func TestStoreSpillOverAnotherPagesWriteIsDropped(t *testing.T) {
	for _, c := range []struct {
		name string
		keep int
	}{
		{"another tab wrote on", 10},
		{"another tab detached", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := testContext(t)
			db := database(t)
			s := fallibleStore(t, ctx, db, nil)
			entries := func(from uint64, n int) []client.Entry {
				if c.keep == 0 {
					return nil
				}
				return received(from, n)
			}
			mustLoad(t, ctx, s, testKey) // as an attach does
			if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 3}, entries(0, 3), c.keep); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, entries(3, 2), c.keep); err != nil {
				t.Fatal(err)
			}
			jsbridge.WriteAll()
			spill := spills(db)
			if len(spill) != 1 {
				t.Fatalf("WriteAll left %d spills, want 1", len(spill))
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			// The page went before it heard its last write commit; its
			// spill stays, under marks of its own page, not this one's.
			gone := regexp.MustCompile(`"mark":"[^"/]*/`).ReplaceAllString(spill[0], `"mark":"gonepage.x/`)

			other := openStore(t, ctx, db) // another tab, the slot free
			mustLoad(t, ctx, other, testKey)
			want := client.Saved{}
			if c.keep == 0 {
				if err := other.Clear(ctx, testKey); err != nil {
					t.Fatal(err)
				}
			} else {
				want = client.Saved{Session: "att", Cursor: 8}
				if err := other.Commit(ctx, testKey, want, received(5, 3), c.keep); err != nil {
					t.Fatal(err)
				}
				if err := other.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			sessionStorage().Call("setItem", spillPrefix(db)+"gone:1", gone)

			next := openStore(t, ctx, db) // the first tab's next page
			if got := mustLoad(t, ctx, next, testKey); got != want {
				t.Fatalf("after the other tab's write the stream loads %+v, want %+v: the gone page's spill was written over it", got, want)
			}
			if c.keep > 0 {
				if got, w := describe(mustHistory(t, ctx, next, testKey)), describe(received(0, 8)); got != w {
					t.Fatalf("the transcript is %s, want %s", got, w)
				}
			}
			if left := spills(db); len(left) != 0 {
				t.Fatalf("the dropped spill is still there: %v", left)
			}
		})
	}
}

func sessionStorage() js.Value { return js.Global().Get("sessionStorage") }

// spillPrefix begins the sessionStorage keys of db's spills (store.js).
func spillPrefix(db string) string {
	return boundary.StoreSpill + ":" + js.Global().Call("encodeURIComponent", db).String() + ":"
}

// spills are the values of db's spills in sessionStorage.
func spills(db string) []string {
	var out []string
	st := sessionStorage()
	for i := range st.Length() {
		if k := st.Call("key", i).String(); strings.HasPrefix(k, spillPrefix(db)) {
			out = append(out, st.Call("getItem", k).String())
		}
	}
	return out
}

// The page going away may abort the write in flight and still commit the
// one WriteAll made (Firefox did): that one holds the aborted one's commits
// too, so the stored cursor never passes the stored transcript.
func TestStoreWriteAllWhileWritingSurvivesAnAbort(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := fallibleStore(t, ctx, db, nil) // the abort makes it fall back
	other := openStore(t, ctx, db)
	mustLoad(t, ctx, other, testKey)
	hold := writeAllBehindHeldWrite(t, ctx, s, nil)
	hold.Call("abort")
	untilWhole(t, ctx, other, 5, "with the first write aborted")
}

// WriteAll with a write in flight and nothing queued behind it still makes
// a transaction, writing the running one's commits again (and spilling
// them): the page going away may abort the running one.
func TestStoreWriteAllWithOnlyAWriteInFlight(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := fallibleStore(t, ctx, db, nil) // the abort makes it fall back
	other := openStore(t, ctx, db)
	mustLoad(t, ctx, other, testKey)
	hold := holdFirstWrite(t, ctx, s)
	if n := writeAllCounted(t); n != 1 {
		t.Fatalf("WriteAll with only a write in flight started %d transactions, want 1", n)
	}
	if len(spills(db)) != 1 {
		t.Fatalf("WriteAll left %d spills, want 1", len(spills(db)))
	}
	hold.Call("abort")
	untilWhole(t, ctx, other, 2, "with the write in flight aborted")
}

// untilWhole waits until other loads cursor for testKey and checks that
// its transcript then holds entries 1 to cursor, each once, in order.
func untilWhole(t *testing.T, ctx context.Context, other *jsbridge.Store, cursor int, when string) {
	t.Helper()
	untilStored(t, ctx, other, testKey, client.Saved{Session: "att", Cursor: uint64(cursor)})
	if got, want := describe(mustHistory(t, ctx, other, testKey)), describe(received(0, cursor)); got != want {
		t.Fatalf("%s the transcript is %s, want %s", when, got, want)
	}
}

// writeAllBehindHeldWrite holds the first write (holdFirstWrite), then
// commits entries 2-4
// (cursor 5), calls fault when not nil, and calls WriteAll, which must make
// its transaction at once. It returns the hold (holdNextReadWrite) for the
// caller to end.
func writeAllBehindHeldWrite(t *testing.T, ctx context.Context, s *jsbridge.Store, fault func()) js.Value {
	t.Helper()
	hold := holdFirstWrite(t, ctx, s)
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, received(2, 3), 10); err != nil {
		t.Fatal(err)
	}
	if fault != nil {
		fault()
	}
	if n := writeAllCounted(t); n != 1 {
		t.Fatalf("WriteAll with a write in flight started %d transactions, want 1", n)
	}
	return hold
}

// fallibleStore opens a Store on db that may fall back to memory (the
// test's faults make it), calling onFallback when not nil, with the long
// window and testKey loaded.
func fallibleStore(t *testing.T, ctx context.Context, db string, onFallback func(jsbridge.Fallback)) *jsbridge.Store {
	t.Helper()
	if onFallback == nil {
		onFallback = func(jsbridge.Fallback) {}
	}
	s := jsbridge.OpenStore(ctx, db, onFallback)
	s.SetCommitWindow(longWindow)
	mustLoad(t, ctx, s, testKey)
	return s
}

// holdFirstWrite commits entries 0-1 (cursor 2, a new attachment id:
// written at once) and holds that write open (holdNextReadWrite), for the
// caller to end.
func holdFirstWrite(t *testing.T, ctx context.Context, s *jsbridge.Store) js.Value {
	t.Helper()
	hold := faults(t).Call("holdNextReadWrite")
	t.Cleanup(func() { hold.Call("release") })
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 2}, received(0, 2), 10); err != nil {
		t.Fatal(err)
	}
	for !hold.Get("held").Bool() { // the new id's write is made once Go yields
		select {
		case <-ctx.Done():
			t.Fatal("the commit with a new attachment id made no transaction")
		case <-time.After(time.Millisecond):
		}
	}
	return hold
}

// writeAllCounted calls WriteAll and says how many readwrite transactions
// it started before this goroutine ran again (WriteAll starts its
// transaction before it returns control to JavaScript).
func writeAllCounted(t *testing.T) int {
	t.Helper()
	counter := faults(t).Call("countReadWrite", database(t))
	defer counter.Call("undo")
	jsbridge.WriteAll()
	runtime.Gosched()
	return counter.Get("n").Int()
}

// Through the JavaScript API: pagehide writes at once, within the event,
// and close() resolves only once the cursor is stored.
func TestAPIPagehideAndCloseWrite(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	relay := loadRelay(t, ctx, map[string]any{"database": db, "commitWindowMs": float64(longWindow / time.Millisecond)})
	rejects(t, ctx, relayModule.Call("loadRelay", map[string]any{"database": db, "commitWindowMs": -1}), "bad_options")
	r := recorder(t, nil)
	att := must(t, ctx, relay.Call("attach", attachOptions(t, r, "window", map[string]any{"history": 100})))
	k := client.Key{URL: env(t, "RELAY_ATTACH_URL"), Instance: env(t, "RELAY_INSTANCE"), Name: "window"}
	other := openStore(t, ctx, db)
	session := att.Get("session").String()
	untilStored(t, ctx, other, k, client.Saved{Session: session}) // a new id is written at once

	must(t, ctx, app(t).Call("newSession", att, r))
	cursor := settle(t, ctx, att, r)
	if got := mustLoad(t, ctx, other, k); got.Cursor != 0 {
		t.Fatalf("the cursor was written before its window ended: %+v", got)
	}
	counter := faults(t).Call("countReadWrite", database(t))
	defer counter.Call("undo")
	app(t).Call("fire", "window", "pagehide")
	if n := counter.Get("n").Int(); n != 1 {
		t.Fatalf("pagehide started %d transactions before it returned, want 1", n)
	}
	untilStored(t, ctx, other, k, client.Saved{Session: session, Cursor: uint64(cursor)})

	must(t, ctx, app(t).Call("request", att, r, "_relaywasm/echo", map[string]any{}))
	cursor = settle(t, ctx, att, r)
	must(t, ctx, att.Call("close"))
	if got := mustLoad(t, ctx, other, k); got != (client.Saved{Session: session, Cursor: uint64(cursor)}) {
		t.Fatalf("after close() IndexedDB holds %+v, want cursor %d", got, cursor)
	}
	if h := mustHistory(t, ctx, other, k); len(h) == 0 || h[len(h)-1].Seq != uint64(cursor) {
		t.Fatalf("after close() the transcript ends at %s, want seq %d", describe(h[max(0, len(h)-1):]), cursor)
	}
}

// A page that dies inside the window (nothing flushed: no close, no
// pagehide) is reloaded: the new page gets its attachment back, resumes from
// the cursor stored before the window, and is delivered again what the dead
// page had: nothing lost, and the stored transcript plus what the resume
// delivers holds every message exactly once.
func TestReloadInsideTheWindowReplays(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	const n = 200
	k := client.Key{URL: env(t, "RELAY_ATTACH_URL"), Instance: env(t, "RELAY_INSTANCE"), Name: "crash"}

	first := openStore(t, ctx, db)
	first.SetCommitWindow(longWindow)
	app1 := &goApp{}
	a1 := app1.attach(t, ctx, first, k.Name)
	reloaded := openStore(t, ctx, db)
	untilStored(t, ctx, reloaded, k, client.Saved{Session: a1.Session()})
	sid := app1.newSession(t, ctx, a1)
	if err := first.Flush(ctx); err != nil { // what the reloaded page will redraw
		t.Fatal(err)
	}
	app1.request(t, ctx, a1, "session/prompt", `{"sessionId":`+strconv.Quote(sid)+`,"prompt":[{"type":"text","text":"count `+strconv.Itoa(n)+`"}]}`)
	// The handler has seen the response; the cursor moves over a batch once
	// the whole batch is handled, so wait for it (in WebKit under load the
	// turn's 201 messages came in one batch, and the cursor was read before).
	msgs := app1.messages()
	died := msgs[len(msgs)-1].Seq
	app1.until(t, ctx, "the cursor over the response", func() bool { return a1.Cursor() >= died })
	stored := mustLoad(t, ctx, reloaded, k)
	if stored.Cursor == 0 || stored.Cursor >= died {
		t.Fatalf("stored cursor %d, delivered %d: want the cursor of the flush, before the window", stored.Cursor, died)
	}
	var seqs []uint64 // what the reloaded page redraws, then what it is delivered
	for _, e := range mustHistory(t, ctx, reloaded, k) {
		if !e.Out {
			seqs = append(seqs, e.Seq)
		}
	}
	// The first page is gone without a word: its Store never writes again
	// (its window is an hour), and the relay hands its attachment to the
	// reloaded page.
	app2 := &goApp{}
	a2 := app2.attach(t, ctx, reloaded, k.Name)
	if a2.Session() != a1.Session() {
		t.Fatalf("the reloaded page got attachment %q, want %q back", a2.Session(), a1.Session())
	}
	app2.until(t, ctx, "the replay", func() bool { return a2.Cursor() >= died })

	for _, m := range app2.messages() {
		if m.Seq > 0 {
			seqs = append(seqs, m.Seq)
		}
	}
	for i, seq := range seqs {
		if seq != uint64(i)+1 {
			t.Fatalf("transcript + delivered after the reload: seq %d at place %d (%v…)", seq, i, seqs[:i+1])
		}
	}
	if uint64(len(seqs)) < died {
		t.Fatalf("transcript + delivered after the reload reach seq %d, the dead page had %d", len(seqs), died)
	}
	if again := app2.messages(); len(again) == 0 || again[0].Seq != stored.Cursor+1 {
		t.Fatalf("the reloaded page's first message has seq %d, want %d (after the stored cursor)", again[0].Seq, stored.Cursor+1)
	}
}

// goApp is an application of the Go API (client.Attach): it keeps what is
// delivered and sends JSON-RPC requests.
type goApp struct {
	mu     sync.Mutex
	msgs   []client.Message
	nextID int
}

func (g *goApp) attach(t *testing.T, ctx context.Context, store *jsbridge.Store, name string) *client.Attachment {
	t.Helper()
	key, err := relayKey(t)
	if err != nil {
		t.Fatal(err)
	}
	a, err := client.Attach(ctx, client.Options{
		URL: env(t, "RELAY_ATTACH_URL"), Instance: env(t, "RELAY_INSTANCE"), Name: name, History: 1000,
		Credential: func(context.Context) (string, error) { return env(t, "RELAY_TOKEN"), nil },
		RelayKey:   key, Store: store, Transport: jsbridge.Transport{},
		OnMessage: func(m client.Message) error {
			m.Payload = append([]byte(nil), m.Payload...)
			g.mu.Lock()
			g.msgs = append(g.msgs, m)
			g.mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func (g *goApp) messages() []client.Message {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]client.Message(nil), g.msgs...)
}

// until polls cond, bounded by ctx.
func (g *goApp) until(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// request sends a JSON-RPC request and returns its response's result.
func (g *goApp) request(t *testing.T, ctx context.Context, a *client.Attachment, method, params string) json.RawMessage {
	t.Helper()
	g.mu.Lock()
	g.nextID++
	id := g.nextID
	g.mu.Unlock()
	msg := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":` + strconv.Quote(method) + `,"params":` + params + `}`
	if err := a.SendACP(ctx, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	var result json.RawMessage
	g.until(t, ctx, "the response to "+method, func() bool {
		for _, m := range g.messages() {
			var r struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
			}
			if json.Unmarshal(m.Payload, &r) == nil && r.ID != nil && *r.ID == id && r.Method == "" {
				result = r.Result
				return true
			}
		}
		return false
	})
	return result
}

// newSession initializes ACP and opens a session; it returns its id.
func (g *goApp) newSession(t *testing.T, ctx context.Context, a *client.Attachment) string {
	t.Helper()
	g.request(t, ctx, a, "initialize", `{"protocolVersion":1}`)
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(g.request(t, ctx, a, "session/new", `{"cwd":"/","mcpServers":[]}`), &r); err != nil || r.SessionID == "" {
		t.Fatalf("session/new: %v", err)
	}
	return r.SessionID
}

// Another connection's transaction that never ends keeps a new store's
// first transactions from starting: WebKit suspends the transactions of a
// page it puts in its back/forward cache, and the next page of the tab hung
// in loadRelay behind one. Here holdDatabase's transaction plays that
// page's. The new store does not wait for good: after 10 s (store.js's
// BLOCKED_LIMIT_MS) it works in memory and says why (indexeddb_blocked).
// First what waits is the write of a spill a page left (it stays in
// sessionStorage), then, with no spill, the read of the stream's state.
// Once the database is free, a store opens on it, finishes the spill and
// reads what was written.
func TestStoreBlockedByAnotherConnectionWorksInMemory(t *testing.T) {
	_, s, _ := windowStores(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // two waits of 10 s
	defer cancel()
	db := database(t)
	// WriteAll behind a held write, as in TestStoreWriteAllWhileWriting,
	// for the spill a page going away leaves. (Stores of the tests before
	// may still be alive in this page, so WriteAll's transactions are not
	// counted here.)
	hold := holdFirstWrite(t, ctx, s)
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, received(2, 3), 10); err != nil {
		t.Fatal(err)
	}
	jsbridge.WriteAll()
	if n := len(spills(db)); n != 1 {
		t.Fatalf("WriteAll left %d spills, want 1", n)
	}
	left := spillPrefix(db) + "gone:1"
	sessionStorage().Call("setItem", left, spills(db)[0])
	hold.Call("release")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	blocker := holdDatabase(t, ctx, db)

	blocked := func(what string) jsbridge.Fallback {
		t.Helper()
		var fell []jsbridge.Fallback
		next := jsbridge.OpenStore(ctx, db, func(f jsbridge.Fallback) { fell = append(fell, f) })
		got := mustLoad(t, ctx, next, testKey)
		checkBlocked(t, what, fell)
		if got != (client.Saved{}) {
			t.Fatalf("%s: the store in memory loads %+v, want nothing", what, got)
		}
		checkMemoryStore(t, ctx, next)
		return fell[0]
	}
	f := blocked("a spill to finish")
	if v := sessionStorage().Call("getItem", left); v.IsNull() {
		t.Fatalf("the spill blocked from being written is gone from sessionStorage (%v)", f.Err)
	}
	spill := sessionStorage().Call("getItem", left)
	sessionStorage().Call("removeItem", left)
	blocked("no spill")

	sessionStorage().Call("setItem", left, spill)
	blocker.Call("release")
	checkFreed(t, ctx, db, 5)
	if v := sessionStorage().Call("getItem", left); !v.IsNull() {
		t.Fatal("the store that opened on the free database left the spill")
	}
}

// A store already running is blocked as a new one is: a write, a read of a
// transcript or a clear that another connection keeps from ending is given
// up on after 10 s, and the store works in memory from then on and says
// why, rather than queue its writes for good and never resolve a Flush
// (close, detach). Its memory holds every commit, and what IndexedDB holds
// is what was written before, cursor and transcript together.
//
// A page that was suspended meanwhile (a phone's background tab, the
// back/forward cache) finds its timers late, and its own transactions were
// suspended with it: the wait starts over then. Here the clock jumps 60 s
// while the write waits, as a suspended page finds it: that store is still
// on IndexedDB when the others fall back, and falls back 10 s later.
func TestStoreBlockedLaterWorksInMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // waits of 10 s and 20 s
	defer cancel()
	db := database(t)
	var mu sync.Mutex
	fell := map[string][]jsbridge.Fallback{}
	open := func(name string) *jsbridge.Store {
		s := jsbridge.OpenStore(ctx, db, func(f jsbridge.Fallback) {
			mu.Lock()
			defer mu.Unlock()
			fell[name] = append(fell[name], f)
		})
		mustLoad(t, ctx, s, testKey)
		return s
	}
	writer, reader, clearer := open("writer"), open("reader"), open("clearer")
	if err := writer.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 2}, received(0, 2), 10); err != nil {
		t.Fatal(err)
	}
	if err := writer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	blocker := holdDatabase(t, ctx, db)

	made := faults(t).Call("countReadWrite", database(t))
	if err := writer.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, received(2, 3), 10); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- writer.Flush(ctx) }()
	for made.Get("n").Int() == 0 { // the write is made once Go yields
		select {
		case <-ctx.Done():
			t.Fatal("Flush made no transaction")
		case <-time.After(time.Millisecond):
		}
	}
	made.Call("undo")
	undoSkew := faults(t).Call("skewClock", 60_000)
	defer undoSkew.Invoke()

	other := make(chan error, 2)
	go func() {
		_, err := reader.History(ctx, testKey)
		other <- err
	}()
	go func() {
		other <- clearer.Clear(ctx, client.Key{URL: testKey.URL, Instance: testKey.Instance, Name: "other"})
	}()
	for range 2 {
		if err := <-other; err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"reader", "clearer"} {
		mu.Lock()
		checkBlocked(t, name, fell[name])
		mu.Unlock()
	}
	if b := writer.Backend(); b != "indexeddb" {
		t.Fatalf("the writer, whose clock jumped while it waited, fell back to %s with the others: %+v", b, fell["writer"])
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	checkBlocked(t, "writer", fell["writer"])
	mu.Unlock()
	if got := mustLoad(t, ctx, writer, testKey); got != (client.Saved{Session: "att", Cursor: 5}) {
		t.Fatalf("the writer in memory loads %+v, want cursor 5", got)
	}

	blocker.Call("release")
	checkFreed(t, ctx, db, 2) // what was written before
}

// checkFreed opens a store on db, once another connection no longer
// blocks it, and checks that testKey's stored cursor and transcript are
// cursor and entries 1 … cursor.
func checkFreed(t *testing.T, ctx context.Context, db string, cursor uint64) {
	t.Helper()
	free := openStore(t, ctx, db)
	if got := mustLoad(t, ctx, free, testKey); got != (client.Saved{Session: "att", Cursor: cursor}) {
		t.Fatalf("once the database is free, a store loads %+v, want cursor %d", got, cursor)
	}
	if got, want := describe(mustHistory(t, ctx, free, testKey)), describe(received(0, int(cursor))); got != want {
		t.Fatalf("once the database is free, the transcript is %s, want %s", got, want)
	}
}

// checkBlocked fails unless fell is one fallback for indexeddb_blocked
// with a BlockedError.
func checkBlocked(t *testing.T, what string, fell []jsbridge.Fallback) {
	t.Helper()
	var de *jsbridge.DOMError
	if len(fell) != 1 || fell[0].Reason != jsbridge.FallbackBlocked || !errors.As(fell[0].Err, &de) || de.Name != "BlockedError" {
		t.Fatalf("%s: fallbacks reported %+v, want one for %s (BlockedError)", what, fell, jsbridge.FallbackBlocked)
	}
}

// holdDatabase has another connection hold db (faults.js) until the test
// ends or the value returned is released.
func holdDatabase(t *testing.T, ctx context.Context, db string) js.Value {
	t.Helper()
	hold := must(t, ctx, faults(t).Call("holdDatabase", db))
	t.Cleanup(func() { hold.Call("release") })
	return hold
}
