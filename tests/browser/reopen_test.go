//go:build js && wasm

package browser

import (
	"context"
	"errors"
	"strings"
	"syscall/js"
	"testing"

	"github.com/relaywasm/relaywasm/jsbridge"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// A connection to IndexedDB can close under a page that keeps running: the
// browser closes it when the site's storage is cleared, WebKit on iOS when
// its storage process went while the page was in the background
// ("Connection to Indexed Database server lost"), and the Store closes its
// own when another page deletes the database or upgrades its schema. The
// Store opens the database again and goes on writing there, so a reload
// after it resumes.
//
// A page cannot close another's connection as the browser does, so
// watchConnections (testdata/faults.js) does it step by step, in the
// standard's order: the connection stops taking transactions, those in
// flight abort, and it fires "close". tests/e2e clears the storage of a
// live page in Chromium, whose close is the browser's own.

// forceClose closes the connections to db that watch saw, as the browser
// does, and returns how many transactions that aborted.
func forceClose(t *testing.T, ctx context.Context, watch js.Value) int {
	t.Helper()
	v, err := await(ctx, watch.Call("forceClose"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Index(0).Int() == 0 {
		t.Fatal("no connection was seen to close: the test closes nothing")
	}
	return v.Index(1).Int()
}

// watchedStore is fallibleStore after watchConnections, returned with the
// watch; a fall back fails the test unless onFallback is given.
func watchedStore(t *testing.T, ctx context.Context, db string, onFallback func(jsbridge.Fallback)) (*jsbridge.Store, js.Value) {
	t.Helper()
	watch := faults(t).Call("watchConnections", db)
	t.Cleanup(func() { watch.Call("undo") })
	if onFallback == nil {
		onFallback = func(f jsbridge.Fallback) { t.Errorf("fell back to memory: %s: %v", f.Reason, f.Err) }
	}
	return fallibleStore(t, ctx, db, onFallback), watch
}

func commit(t *testing.T, ctx context.Context, s *jsbridge.Store, from uint64, n int) {
	t.Helper()
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: from + uint64(n)}, received(from, n), 10); err != nil {
		t.Fatal(err)
	}
}

func flush(t *testing.T, ctx context.Context, s *jsbridge.Store) {
	t.Helper()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// commitFlushed commits entries from+1 … from+n and waits until they are
// written (or kept in memory).
func commitFlushed(t *testing.T, ctx context.Context, s *jsbridge.Store, from uint64, n int) {
	t.Helper()
	commit(t, ctx, s, from, n)
	flush(t, ctx, s)
}

// Closed with a write in flight and another queued behind it: both are
// written over the reopened connection, each entry once, and a store
// opened after (the reloaded page's) reads all of it.
func TestStoreReopensAfterAForcedCloseMidWrite(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s, watch := watchedStore(t, ctx, db, nil)
	hold := holdFirstWrite(t, ctx, s) // entries 1-2, held in flight
	commit(t, ctx, s, 2, 3)           // entries 3-5, queued behind it
	if n := forceClose(t, ctx, watch); n == 0 {
		t.Fatal("the close aborted no transaction: the held write had ended")
	}
	hold.Call("release")
	flush(t, ctx, s)
	commitFlushed(t, ctx, s, 5, 1)
	if s.Backend() != "indexeddb" {
		t.Fatalf("backend %q after the close, want indexeddb", s.Backend())
	}
	untilWhole(t, ctx, openStore(t, ctx, db), 6, "after the close")
}

// Closed between writes: the next read opens the database again and reads
// what was stored before the close; writes go on.
func TestStoreReopensAfterAForcedCloseBetweenWrites(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s, watch := watchedStore(t, ctx, db, nil)
	commitFlushed(t, ctx, s, 0, 2)
	forceClose(t, ctx, watch)
	if got := describe(mustHistory(t, ctx, s, testKey)); got != describe(received(0, 2)) {
		t.Fatalf("read after the close: %s, want %s", got, describe(received(0, 2)))
	}
	commitFlushed(t, ctx, s, 2, 3)
	forceClose(t, ctx, watch) // again, now that the reopened connection has written
	commitFlushed(t, ctx, s, 5, 2)
	untilWhole(t, ctx, openStore(t, ctx, db), 7, "after two closes")
}

// Another page deletes the database, as clearing the site's storage does:
// the Store lets go of it (so the deletion is not blocked), and what comes
// after goes to the database made afresh. What was deleted stays deleted.
func TestStoreWritesOnAfterItsDatabaseIsDeleted(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s, _ := watchedStore(t, ctx, db, nil)
	commitFlushed(t, ctx, s, 0, 2)
	if _, err := await(ctx, faults(t).Call("deleteDatabase", db)); err != nil {
		t.Fatal(err) // a Store that held on would block this until its 10 s limit
	}
	commitFlushed(t, ctx, s, 2, 3)
	other := openStore(t, ctx, db)
	if got, want := mustLoad(t, ctx, other, testKey), (client.Saved{Session: "att", Cursor: 5}); got != want {
		t.Fatalf("after the deletion the database holds %+v, want %+v", got, want)
	}
	if got, want := describe(mustHistory(t, ctx, other, testKey)), describe(received(2, 3)); got != want {
		t.Fatalf("after the deletion the transcript is %s, want %s: only what came after", got, want)
	}
}

// A newer page upgraded the schema meanwhile: the reopen is refused, and
// the Store falls back to memory, saying why, with nothing it knew lost.
func TestStoreFallsBackWhenTheReopenIsRefused(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	var fell []jsbridge.Fallback
	s, _ := watchedStore(t, ctx, db, func(f jsbridge.Fallback) { fell = append(fell, f) })
	commitFlushed(t, ctx, s, 0, 2)
	if _, err := await(ctx, faults(t).Call("createAtVersion", db, 99)); err != nil {
		t.Fatal(err)
	}
	commitFlushed(t, ctx, s, 2, 3)
	var de *jsbridge.DOMError
	if len(fell) != 1 || fell[0].Reason != jsbridge.FallbackFailed || !errors.As(fell[0].Err, &de) || de.Name != "VersionError" {
		t.Fatalf("fallbacks reported: %+v, want one for %s (VersionError)", fell, jsbridge.FallbackFailed)
	}
	if s.Backend() != "memory" {
		t.Fatalf("backend %q, want memory", s.Backend())
	}
	if got, want := mustLoad(t, ctx, s, testKey), (client.Saved{Session: "att", Cursor: 5}); got != want {
		t.Fatalf("in memory the store holds %+v, want %+v", got, want)
	}
	if got, want := describe(mustHistory(t, ctx, s, testKey)), describe(received(2, 3)); got != want {
		t.Fatalf("in memory the transcript is %s, want %s (what it had not written)", got, want)
	}
}

// The page goes away while its Store opens the database again after a
// close, before the open ends (iOS: the page comes back from the
// background with its connection lost, and is hidden and killed again).
// WriteAll cannot write yet: it leaves a spill of what it holds at once,
// and the next page finishes it: a stream stored before the close, and one
// that was new (loaded, nothing stored) and first committed after it.
func TestStoreSpillsAFinalWriteWhileReopening(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	fell := make(chan jsbridge.Fallback, 1)
	s, watch := watchedStore(t, ctx, db, func(f jsbridge.Fallback) { fell <- f }) // the failed open below
	fresh := client.Key{URL: testKey.URL, Instance: testKey.Instance, Name: "fresh"}
	mustLoad(t, ctx, s, fresh)
	commitFlushed(t, ctx, s, 0, 2)
	forceClose(t, ctx, watch)
	hold := faults(t).Call("holdNextOpen", db)
	t.Cleanup(func() { hold.Call("undo") })
	commit(t, ctx, s, 2, 3) // queued: the next write opens the database again
	if err := s.Commit(ctx, fresh, client.Saved{Session: "new", Cursor: 2}, received(0, 2), 10); err != nil {
		t.Fatal(err)
	}
	jsbridge.WriteAll()
	if !hold.Get("seen").Truthy() {
		t.Fatal("the store did not open the database again: the test holds nothing")
	}
	if n := len(spills(db)); n != 1 {
		t.Fatalf("WriteAll while the store reopens left %d spills, want 1", n)
	}
	goneWhileOpening(t, ctx, hold, fell, db, 1) // the chunk flushed before the close
	next := openStore(t, ctx, db)
	untilWhole(t, ctx, next, 5, "after the next page finished the spill")
	if got, want := mustLoad(t, ctx, next, fresh), (client.Saved{Session: "new", Cursor: 2}); got != want {
		t.Fatalf("the stream new since the close is stored as %+v, want %+v", got, want)
	}
	if got, want := describe(mustHistory(t, ctx, next, fresh)), describe(received(0, 2)); got != want {
		t.Fatalf("the stream new since the close has the transcript %s, want %s", got, want)
	}
	if left := spills(db); len(left) != 0 {
		t.Fatalf("the spill outlived its finishing: %v", left)
	}
}

// As above, with the stream's first write in flight when the connection is
// lost: nothing of it is stored, and the spill must say where it starts
// (where the aborted write did), for the next page to write it.
func TestStoreSpillsTheWriteTheLossAbortedWhileReopening(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	fell := make(chan jsbridge.Fallback, 1)
	// The failed open below makes the store fall back.
	s, watch := watchedStore(t, ctx, db, func(f jsbridge.Fallback) { fell <- f })
	hold := holdFirstWrite(t, ctx, s) // entries 1-2, held in flight
	commit(t, ctx, s, 2, 3)           // entries 3-5, queued behind it
	opening := faults(t).Call("holdNextOpen", db)
	t.Cleanup(func() { opening.Call("undo") })
	if n := forceClose(t, ctx, watch); n == 0 {
		t.Fatal("the close aborted no transaction: the held write had ended")
	}
	hold.Call("release")
	if !opening.Get("seen").Truthy() {
		t.Fatal("the store did not open the database again for the aborted write: the test holds nothing")
	}
	jsbridge.WriteAll()
	spill := spills(db)
	if len(spill) != 1 || !strings.Contains(spill[0], `"start":0`) {
		t.Fatalf("WriteAll while the store reopens left the spills %q, want one starting the stream at 0", spill)
	}
	goneWhileOpening(t, ctx, opening, fell, db, 0)
	untilWhole(t, ctx, openStore(t, ctx, db), 5, "after the next page finished the spill")
}

// goneWhileOpening fails the open that hold holds, as the page's going away
// does, waits for the store to fall back for it, and checks that IndexedDB
// holds chunks chunks: the spill is all there is of the rest.
func goneWhileOpening(t *testing.T, ctx context.Context, hold js.Value, fell <-chan jsbridge.Fallback, db string, chunks int) {
	t.Helper()
	hold.Call("fail")
	select {
	case <-fell:
	case <-ctx.Done():
		t.Fatal("the store did not see its reopen fail")
	}
	if n, err := await(ctx, faults(t).Call("countChunks", db)); err != nil || n.Int() != chunks {
		t.Fatalf("IndexedDB holds %v chunks (%v), want %d", n, err, chunks)
	}
}
