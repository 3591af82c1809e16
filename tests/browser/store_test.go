//go:build js && wasm

package browser

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/jsbridge"
	"github.com/relaywasm/relaywasm/wasm/client"
)

//go:embed testdata/faults.js
var faultsJS string

// faults are the test-only helpers of testdata/faults.js.
var faults = testModule("faults.js", faultsJS)

// database names a fresh database per test, so tests share nothing: the
// same name for every call of one test, another for each of its runs
// (go test -count N runs it N times in the same browser profile).
func database(t *testing.T) string {
	runs.Lock()
	defer runs.Unlock()
	if name, ok := runs.names[t]; ok {
		return name
	}
	runs.n++
	name := fmt.Sprintf("relaywasm-test-%s-%d", t.Name(), runs.n)
	runs.names[t] = name
	return name
}

var runs = struct {
	sync.Mutex
	n     int
	names map[*testing.T]string
}{names: make(map[*testing.T]string)}

var testKey = client.Key{URL: "ws://relay.test/v1/attach", Instance: "demo", Name: "chat"}

// received makes n inbound entries with seqs from+1 … from+n.
func received(from uint64, n int) []client.Entry {
	out := make([]client.Entry, n)
	for i := range out {
		seq := from + uint64(i) + 1
		out[i] = client.Entry{Seq: seq, Payload: []byte(`{"seq":` + strconv.FormatUint(seq, 10) + `}`)}
	}
	return out
}

func openStore(t *testing.T, ctx context.Context, db string) *jsbridge.Store {
	t.Helper()
	s := jsbridge.OpenStore(ctx, db, func(f jsbridge.Fallback) {
		t.Errorf("unexpected fallback to memory: %s: %v", f.Reason, f.Err)
	})
	if s.Backend() != "indexeddb" {
		t.Fatalf("backend %q", s.Backend())
	}
	return s
}

func mustLoad(t *testing.T, ctx context.Context, s client.Store, k client.Key) client.Saved {
	t.Helper()
	saved, err := s.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	return saved
}

func mustHistory(t *testing.T, ctx context.Context, s client.Store, k client.Key) []client.Entry {
	t.Helper()
	h, err := s.History(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// describe renders a transcript compactly for comparisons.
func describe(h []client.Entry) string {
	s := ""
	for _, e := range h {
		dir := "in"
		if e.Out {
			dir = "out"
		}
		s += fmt.Sprintf("[%s %d %s]", dir, e.Seq, e.Payload)
	}
	return s
}

func TestStoreCommitLoadHistoryClear(t *testing.T) {
	ctx := testContext(t)
	s := openStore(t, ctx, database(t))
	if got := mustLoad(t, ctx, s, testKey); got != (client.Saved{}) {
		t.Fatalf("empty store loads %+v", got)
	}
	sent := client.Entry{Out: true, Payload: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)}
	in := received(0, 2)
	steps := [][]client.Entry{{sent}, in}
	for i, entries := range steps {
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att-1", Cursor: uint64(i * 2)}, entries, 10); err != nil {
			t.Fatal(err)
		}
	}
	other := testKey
	other.Name = "other"
	if err := s.Commit(ctx, other, client.Saved{Session: "att-2", Cursor: 7}, received(6, 1), 10); err != nil {
		t.Fatal(err)
	}

	if got, want := mustLoad(t, ctx, s, testKey), (client.Saved{Session: "att-1", Cursor: 2}); got != want {
		t.Fatalf("Load = %+v, want %+v", got, want)
	}
	want := describe(append([]client.Entry{sent}, in...))
	if got := describe(mustHistory(t, ctx, s, testKey)); got != want {
		t.Fatalf("History = %s, want %s", got, want)
	}
	if got := describe(mustHistory(t, ctx, s, other)); got != describe(received(6, 1)) {
		t.Fatalf("other stream's history = %s", got)
	}

	if err := s.Clear(ctx, testKey); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, ctx, s, testKey); got != (client.Saved{}) {
		t.Fatalf("after Clear, Load = %+v", got)
	}
	if h := mustHistory(t, ctx, s, testKey); len(h) != 0 {
		t.Fatalf("after Clear, History = %s", describe(h))
	}
	if got := mustLoad(t, ctx, s, other); got.Cursor != 7 {
		t.Fatalf("Clear touched another stream: %+v", got)
	}
}

// A new Store on the same database is what a reloaded page gets.
func TestStoreReopenSeesState(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	for i := range 5 {
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: uint64(3 * (i + 1))}, received(uint64(3*i), 3), 100); err != nil {
			t.Fatal(err)
		}
	}
	mustLoad(t, ctx, s, testKey) // waits for the writes

	again := openStore(t, ctx, db)
	if got := mustLoad(t, ctx, again, testKey); got != (client.Saved{Session: "att", Cursor: 15}) {
		t.Fatalf("reopened Load = %+v", got)
	}
	if got, want := describe(mustHistory(t, ctx, again, testKey)), describe(received(0, 15)); got != want {
		t.Fatalf("reopened History = %s, want %s", got, want)
	}
}

func TestStoreBoundsTranscript(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	const keep = 7
	cursor := uint64(0)
	for i := range 40 {
		n := 1 + i%3
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: cursor + uint64(n)}, received(cursor, n), keep); err != nil {
			t.Fatal(err)
		}
		cursor += uint64(n)
		mustLoad(t, ctx, s, testKey) // one transaction per commit: the worst case for trimming
	}
	if got, want := describe(mustHistory(t, ctx, s, testKey)), describe(received(cursor-keep, keep)); got != want {
		t.Fatalf("History = %s, want the newest %d: %s", got, keep, want)
	}
	chunks, err := await(ctx, faults(t).Call("countChunks", db))
	if err != nil {
		t.Fatal(err)
	}
	if n := chunks.Int(); n > keep {
		t.Fatalf("%d transcript records stored for keep=%d: old ones are not trimmed", n, keep)
	}

	// A smaller keep trims at once; keep 0 drops the transcript.
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: cursor}, nil, 2); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(mustHistory(t, ctx, s, testKey)), describe(received(cursor-2, 2)); got != want {
		t.Fatalf("after keep=2, History = %s, want %s", got, want)
	}
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: cursor + 1}, received(cursor, 1), 0); err != nil {
		t.Fatal(err)
	}
	if h := mustHistory(t, ctx, s, testKey); len(h) != 0 {
		t.Fatalf("after keep=0, History = %s", describe(h))
	}
	chunks, err = await(ctx, faults(t).Call("countChunks", db))
	if err != nil {
		t.Fatal(err)
	}
	if n := chunks.Int(); n != 0 {
		t.Fatalf("%d transcript records left after keep=0", n)
	}
}

// chunkKinds is what the records of db's chunks store hold, in key order:
// "blob", "bytes" or "other" (faults.js).
func chunkKinds(t *testing.T, ctx context.Context, db string) []string {
	t.Helper()
	v, err := await(ctx, faults(t).Call("chunkKinds", db))
	if err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, v.Length())
	for i := range kinds {
		kinds[i] = v.Index(i).String()
	}
	return kinds
}

// commitRounds commits n entries per round, rounds times, each round written
// before the next (Flush), and returns the entries committed. The store's
// Blob probe is made right after the first round's write, so IndexedDB runs
// it before the second's, which waits for it (both write the chunks store),
// and the third round is written knowing how the probe ended.
func commitRounds(t *testing.T, ctx context.Context, s *jsbridge.Store, rounds, n int) []client.Entry {
	t.Helper()
	var all []client.Entry
	for i := range rounds {
		in := received(uint64(i*n), n)
		all = append(all, in...)
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: uint64((i + 1) * n)}, in, 1000); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// Transcript chunks go to IndexedDB as Blobs, once the store has found that
// the database takes them (the page then copies each chunk once, and the
// browser writes it); the first goes as bytes, written before the probe.
// Where the browser refuses Blobs (WebKit's WebDriver sessions here are
// ephemeral, as Safari's private browsing is) every chunk goes as bytes,
// and the store stays in IndexedDB. History reads both kinds, in order,
// and so does a reloaded page.
func TestStoreWritesChunksAsBlobs(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	takes, err := await(ctx, faults(t).Call("takesBlobs"))
	if err != nil {
		t.Fatal(err)
	}
	engine := env(t, "ENGINE")
	if !takes.Bool() && (engine == "chromium" || engine == "firefox") {
		t.Fatalf("%s refused a Blob in IndexedDB", engine) // then nothing here tests the Blob path
	}
	s := openStore(t, ctx, db)
	want := describe(commitRounds(t, ctx, s, 8, 5))
	kinds := chunkKinds(t, ctx, db)
	switch {
	case !takes.Bool():
		if len(kinds) != 8 || slices.ContainsFunc(kinds, func(k string) bool { return k != "bytes" }) {
			t.Fatalf("chunk records %v in a browser that refuses Blobs, want 8 of bytes", kinds)
		}
	case len(kinds) != 8 || kinds[0] != "bytes" || slices.ContainsFunc(kinds[2:], func(k string) bool { return k != "blob" }):
		// The second round's write may be made before the probe has ended.
		t.Fatalf("chunk records %v: want 8, the first bytes and Blobs from the third on", kinds)
	}
	if got := describe(mustHistory(t, ctx, s, testKey)); got != want {
		t.Fatalf("History = %s, want %s", got, want)
	}
	if got := describe(mustHistory(t, ctx, openStore(t, ctx, db), testKey)); got != want {
		t.Fatalf("a reopened store's History = %s, want %s", got, want)
	}
}

// Where a put of a Blob fails, as in Safari's private browsing (thrown at
// once, or failing the transaction later), the store finds it out with a
// Blob of its own, not with a commit: chunks go as bytes, and the store
// stays in IndexedDB with its transcript whole.
func TestStoreKeepsBytesWhereBlobsAreRefused(t *testing.T) {
	for _, later := range []bool{false, true} {
		name := "thrown"
		if later {
			name = "failing the transaction"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			db := database(t)
			refused := faults(t).Call("refuseBlobs", later)
			defer refused.Call("undo")
			s := openStore(t, ctx, db) // fails the test if it falls back
			want := describe(commitRounds(t, ctx, s, 8, 5))
			if n := refused.Get("n").Int(); n != 1 {
				t.Fatalf("%d Blobs refused, want 1: the probe's alone", n)
			}
			if kinds := chunkKinds(t, ctx, db); len(kinds) != 8 || slices.ContainsFunc(kinds, func(k string) bool { return k != "bytes" }) {
				t.Fatalf("chunk records %v, want 8 of bytes", kinds)
			}
			if s.Backend() != "indexeddb" {
				t.Fatalf("backend %q", s.Backend())
			}
			if got := describe(mustHistory(t, ctx, openStore(t, ctx, db), testKey)); got != want {
				t.Fatalf("a reopened store's History = %s, want %s", got, want)
			}
		})
	}
}

// Commits made in one event-loop turn reach IndexedDB as one transaction.
func TestStoreCoalescesATurn(t *testing.T) {
	ctx := testContext(t)
	s := openStore(t, ctx, database(t))
	mustLoad(t, ctx, s, testKey)
	counter := faults(t).Call("countReadWrite", database(t))
	defer counter.Call("undo")

	other := testKey
	other.Name = "other"
	for i := range 100 { // no await in between: all in this turn
		k := testKey
		if i%2 == 1 {
			k = other
		}
		if err := s.Commit(ctx, k, client.Saved{Session: "att", Cursor: uint64(i + 1)}, received(uint64(i), 1), 1000); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustLoad(t, ctx, s, testKey); got.Cursor != 99 {
		t.Fatalf("Load = %+v, want the last commit's cursor 99", got)
	}
	if n := counter.Get("n").Int(); n != 1 {
		t.Fatalf("100 commits in one turn took %d readwrite transactions, want 1", n)
	}
	if h := mustHistory(t, ctx, s, other); len(h) != 50 || h[49].Seq != 100 {
		t.Fatalf("other stream's history = %s", describe(h))
	}
}

// An interruption between the transcript write and the state write of one
// commit leaves both as they were: they never disagree.
func TestStoreCursorAndTranscriptAgreeAfterInterruption(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 3}, received(0, 3), 100); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, ctx, s, testKey)

	for _, fault := range []struct {
		name   string
		inject func() js.Value
		reason string
		says   string // in the fallback's error text, when set
	}{
		// Every try aborted: the store tries again a few times (an engine's
		// abort passes, TestStoreLivesThroughAnAbortItDidNotMake), then
		// falls back.
		{"abort after the transcript write, every time", func() js.Value { return faults(t).Call("abortAfterPut", "chunks") }, jsbridge.FallbackFailed, ""},
		{"quota exceeded on the transcript write", func() js.Value { return faults(t).Call("throwOnPut", "chunks", "QuotaExceededError") }, jsbridge.FallbackQuota, "injected by the test"},
		// Not Error objects: js.Error's own Error method would panic on these.
		{"a string thrown on the transcript write", func() js.Value { return faults(t).Call("throwValueOnPut", "chunks", "thrown text", false) }, jsbridge.FallbackFailed, "thrown text"},
		{"a BigInt thrown on the transcript write", func() js.Value { return faults(t).Call("throwValueOnPut", "chunks", "4242", true) }, jsbridge.FallbackFailed, "4242"},
	} {
		t.Run(fault.name, func(t *testing.T) {
			fell := make(chan jsbridge.Fallback, 1)
			s := jsbridge.OpenStore(ctx, db, func(f jsbridge.Fallback) { fell <- f })
			undo := fault.inject()
			err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, received(3, 2), 100)
			if err != nil {
				undo.Invoke()
				t.Fatal(err)
			}
			got := mustLoad(t, ctx, s, testKey) // waits for the failed write
			undo.Invoke()
			if got.Cursor != 5 {
				t.Fatalf("the store lost its own commit: Load = %+v", got)
			}
			select {
			case f := <-fell:
				if f.Reason != fault.reason {
					t.Fatalf("fallback reason %q (%v), want %q", f.Reason, f.Err, fault.reason)
				}
				if f.Err == nil || !strings.Contains(f.Err.Error(), fault.says) {
					t.Fatalf("fallback error %v, want one that says %q", f.Err, fault.says)
				}
			default:
				t.Fatal("no fallback reported")
			}
			if s.Backend() != "memory" {
				t.Fatalf("backend %q after a failed write", s.Backend())
			}

			reloaded := openStore(t, ctx, db)
			if got := mustLoad(t, ctx, reloaded, testKey); got.Cursor != 3 {
				t.Fatalf("after the interruption the stored cursor is %d, want 3", got.Cursor)
			}
			if got, want := describe(mustHistory(t, ctx, reloaded, testKey)), describe(received(0, 3)); got != want {
				t.Fatalf("after the interruption the stored transcript is %s, want %s", got, want)
			}
		})
	}
}

// A write the engine aborts over a live connection, as WebKit aborts the
// running transactions of an iOS app going to the background, is written
// again: the store stays on IndexedDB, and what it stores is whole, the
// cursor with the transcript up to it, and the writes after it go on from
// the right place. (It fell back to memory for the rest of the page's
// life, and the reload after iOS ended the tab resumed from an old cursor
// with the transcript missing all since.)
func TestStoreLivesThroughAnAbortItDidNotMake(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db) // fails the test on a fallback
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 3}, received(0, 3), 100); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, ctx, s, testKey)

	fault := engineFaults(t).Call("abortNext", db, "readwrite", "chunks", "put")
	defer fault.Call("undo")
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, received(3, 2), 100); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if fault.Get("n").Int() != 1 {
		t.Fatal("no write was aborted: the test holds nothing")
	}
	if s.Backend() != "indexeddb" {
		t.Fatalf("backend %q after one aborted write", s.Backend())
	}
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 6}, received(5, 1), 100); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	reloaded := openStore(t, ctx, db)
	if got := mustLoad(t, ctx, reloaded, testKey); got != (client.Saved{Session: "att", Cursor: 6}) {
		t.Fatalf("after the abort the stored state is %+v, want cursor 6", got)
	}
	if got, want := describe(mustHistory(t, ctx, reloaded, testKey)), describe(received(0, 6)); got != want {
		t.Fatalf("after the abort the stored transcript is %s, want %s", got, want)
	}
}

// A stream the runtime restarted (cursor_evicted: the same attachment, its
// seqs from 1 again) keeps every entry of its new run when a write must read
// the stream's total first, as the retry of an aborted write does: only a
// page shown again from the back/forward cache leaves out what the stored
// cursor has passed (TestStoreRestoredPageWritesAfterTheNextPage), and the
// restarted run's seqs are behind the stored cursor and all new.
func TestStoreRestartedStreamKeepsItsNewRun(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 5}, received(0, 5), 100); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, ctx, s, testKey)
	fault := engineFaults(t).Call("abortNext", db, "readwrite", "chunks", "put")
	defer fault.Call("undo")
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 2}, received(0, 2), 100); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if fault.Get("n").Int() != 1 {
		t.Fatal("no write was aborted: the test holds nothing")
	}
	reloaded := openStore(t, ctx, db)
	if got := mustLoad(t, ctx, reloaded, testKey); got != (client.Saved{Session: "att", Cursor: 2}) {
		t.Fatalf("after the restart the stored state is %+v, want cursor 2", got)
	}
	if got, want := describe(mustHistory(t, ctx, reloaded, testKey)), describe(received(0, 5))+describe(received(0, 2)); got != want {
		t.Fatalf("after the restart the stored transcript is %s, want %s", got, want)
	}
}

// So are a read and a clear the engine aborts: made again, over IndexedDB.
func TestStoreReadsThroughAnAbortItDidNotMake(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 3}, received(0, 3), 100); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		name, mode, store, method string
		run                       func(*jsbridge.Store) error
	}{
		{"load", "readonly", "state", "get", func(s *jsbridge.Store) error {
			got, err := s.Load(ctx, testKey)
			if err == nil && got != (client.Saved{Session: "att", Cursor: 3}) {
				err = fmt.Errorf("Load = %+v", got)
			}
			return err
		}},
		{"history", "readonly", "chunks", "getAll", func(s *jsbridge.Store) error {
			h, err := s.History(ctx, testKey)
			if got, want := describe(h), describe(received(0, 3)); err == nil && got != want {
				err = fmt.Errorf("History = %s, want %s", got, want)
			}
			return err
		}},
		{"clear", "readwrite", "state", "delete", func(s *jsbridge.Store) error {
			if err := s.Clear(ctx, testKey); err != nil {
				return err
			}
			if got := mustLoad(t, ctx, openStore(t, ctx, db), testKey); got != (client.Saved{}) {
				return fmt.Errorf("after Clear the stream loads as %+v", got)
			}
			return nil
		}},
	} {
		fresh := openStore(t, ctx, db) // knows nothing yet: it reads
		fault := engineFaults(t).Call("abortNext", db, op.mode, op.store, op.method)
		err := op.run(fresh)
		fault.Call("undo")
		if err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if fault.Get("n").Int() != 1 {
			t.Fatalf("%s: nothing was aborted: the test holds nothing", op.name)
		}
		if fresh.Backend() != "indexeddb" {
			t.Fatalf("%s: backend %q after one aborted transaction", op.name, fresh.Backend())
		}
	}
}

func TestStoreFallsBackWithoutIndexedDB(t *testing.T) {
	ctx := testContext(t)
	undo := faults(t).Call("hideIndexedDB")
	defer undo.Invoke()
	checkFallsBack(t, ctx, database(t), jsbridge.FallbackUnavailable, "")
}

// Storage denied outright (reading indexedDB throws): the early open does
// not throw, and the Store falls back saying why.
func TestStoreFallsBackWhenIndexedDBIsDenied(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	undo := faults(t).Call("denyIndexedDB")
	defer undo.Invoke()
	relayjsModule(t, "store.js").Call("openEarly", db)
	checkFallsBack(t, ctx, db, jsbridge.FallbackUnavailable, "SecurityError")
}

func TestStoreFallsBackWhenOpenFails(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	// A database at a newer version than the Store's: its open fails with a
	// VersionError, as an open refused by the browser would.
	if _, err := await(ctx, faults(t).Call("createAtVersion", db, 99)); err != nil {
		t.Fatal(err)
	}
	checkFallsBack(t, ctx, db, jsbridge.FallbackFailed, "VersionError")
}

// checkFallsBack opens a Store on db and fails the test unless it fell back
// to memory once, for reason, with a DOMException named domError as the
// error ("" for an error of any kind), and then works in memory.
func checkFallsBack(t *testing.T, ctx context.Context, db, reason, domError string) {
	t.Helper()
	var fell []jsbridge.Fallback
	s := jsbridge.OpenStore(ctx, db, func(f jsbridge.Fallback) { fell = append(fell, f) })
	var de *jsbridge.DOMError
	if len(fell) != 1 || fell[0].Reason != reason || domError != "" && (!errors.As(fell[0].Err, &de) || de.Name != domError) {
		t.Fatalf("fallbacks reported: %+v, want one for %s (%s)", fell, reason, domError)
	}
	checkMemoryStore(t, ctx, s)
}

func checkMemoryStore(t *testing.T, ctx context.Context, s *jsbridge.Store) {
	t.Helper()
	if s.Backend() != "memory" {
		t.Fatalf("backend %q", s.Backend())
	}
	if err := s.Commit(ctx, testKey, client.Saved{Session: "m", Cursor: 2}, received(0, 2), 10); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, ctx, s, testKey); got != (client.Saved{Session: "m", Cursor: 2}) {
		t.Fatalf("memory Load = %+v", got)
	}
	if got := describe(mustHistory(t, ctx, s, testKey)); got != describe(received(0, 2)) {
		t.Fatalf("memory History = %s", got)
	}
}

// loadRelay opens the Relay's database while relay.wasm loads (openEarly):
// the first Store on it takes that connection instead of opening its own,
// and a failed early open is that Store's fallback.
func TestStoreTakesTheEarlyOpen(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	factory := js.Global().Get("indexedDB")
	open := factory.Get("open")
	opens := 0
	spy := js.FuncOf(func(this js.Value, args []js.Value) any {
		if args[0].String() == db {
			opens++
		}
		return open.Call("apply", this, js.ValueOf(jsArgs(args)))
	})
	defer spy.Release()
	factory.Set("open", spy)
	// An own property, deleted after: setting the native open back would
	// leave an own property that hides IDBFactory.prototype's for good.
	defer js.Global().Get("Reflect").Call("deleteProperty", factory, "open")
	store := relayjsModule(t, "store.js")

	store.Call("openEarly", db)
	store.Call("openEarly", db) // once per database
	s := openStore(t, ctx, db)
	if opens != 1 {
		t.Fatalf("%d opens of the database, want the early one alone", opens)
	}
	if err := s.Commit(ctx, testKey, client.Saved{Session: "early", Cursor: 3}, received(0, 3), 10); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, ctx, s, testKey) // waits for the write
	again := openStore(t, ctx, db)
	if opens != 2 {
		t.Fatalf("%d opens, want 2: the early connection serves one Store", opens)
	}
	if got := mustLoad(t, ctx, again, testKey); got != (client.Saved{Session: "early", Cursor: 3}) {
		t.Fatalf("what was written on the early connection loads as %+v", got)
	}

	refused := db + "-refused"
	if _, err := await(ctx, faults(t).Call("createAtVersion", refused, 99)); err != nil {
		t.Fatal(err)
	}
	store.Call("openEarly", refused)
	checkFallsBack(t, ctx, refused, jsbridge.FallbackFailed, "VersionError")
}

// A page shown again from the back/forward cache writes its streams after
// what the tab's next page wrote meanwhile (it took the slots this page let
// go as it was cached), not at the totals this page knew before: those
// writes landed among that page's entries, over some of them, and the
// transcript read back out of order (1…6, 6, 7, 8, 7, 8, 9). The restored
// page resumes from its own cursor, so its resume brings again what the
// other page received and recorded: those entries are not stored twice, and
// the stored cursor does not go back; its own prompt among them is kept.
// Over another attachment's record (the other page attached the name anew)
// its seqs are not that record's, and nothing is dropped.
func TestStoreRestoredPageWritesAfterTheNextPage(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	first := openStore(t, ctx, db)
	mustLoad(t, ctx, first, testKey)
	commit := func(s *jsbridge.Store, cursor uint64, entries []client.Entry) {
		t.Helper()
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: cursor}, entries, 100); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	commit(first, 3, received(0, 3))

	next := openStore(t, ctx, db) // the tab's next page, while the first is cached
	mustLoad(t, ctx, next, testKey)
	commit(next, 5, received(3, 2))
	commit(next, 8, received(5, 3))

	other := testKey
	other.Name = "anew"
	if err := first.Commit(ctx, other, client.Saved{Session: "att", Cursor: 2}, received(0, 2), 100); err != nil {
		t.Fatal(err)
	}
	if err := first.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := next.Commit(ctx, other, client.Saved{Session: "att-2", Cursor: 5}, received(0, 5), 100); err != nil {
		t.Fatal(err)
	}
	if err := next.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	ev := js.Global().Get("PageTransitionEvent").New("pageshow", map[string]any{"persisted": true})
	js.Global().Call("dispatchEvent", ev) // the first page is back; its resume brings 4… again
	prompt := client.Entry{Out: true, Payload: []byte(`{"jsonrpc":"2.0","id":9,"method":"session/prompt"}`)}
	commit(first, 6, append(received(3, 2), prompt, received(5, 1)[0]))
	if got := mustLoad(t, ctx, openStore(t, ctx, db), testKey); got != (client.Saved{Session: "att", Cursor: 8}) {
		t.Fatalf("after the restored page's first write the stream loads as %+v, want the cursor of 8 recorded", got)
	}
	commit(first, 9, received(6, 3))
	if err := first.Commit(ctx, other, client.Saved{Session: "att", Cursor: 3}, received(2, 1), 100); err != nil {
		t.Fatal(err)
	}
	if err := first.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	got := describe(mustHistory(t, ctx, openStore(t, ctx, db), testKey))
	if want := describe(received(0, 8)) + describe([]client.Entry{prompt}) + describe(received(8, 1)); got != want {
		t.Fatalf("the transcript is\n%s, want\n%s", got, want)
	}
	got = describe(mustHistory(t, ctx, openStore(t, ctx, db), other))
	if want := describe(received(0, 2)) + describe(received(0, 5)) + describe(received(2, 1)); got != want {
		t.Fatalf("over another attachment's record the transcript is\n%s, want\n%s", got, want)
	}
}

// A write the store gave up on as the page went into WebKit's back/forward
// cache, but which committed all the same (WebKitGTK's abort often comes
// too late), is not written again once the page is shown: the stored state
// record's mark is that write's. One that the abort did end is written
// then. The entries carry no seq (a runtime that numbers no messages), so
// only the mark tells: the restored page had stored a whole run of
// messages twice. Only WebKit gives up on its writes so (store.js
// CACHE_HOLDS_WRITES); elsewhere the events change nothing here.
func TestStoreWriteCommittedAsThePageWasCachedIsNotWrittenAgain(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	mustLoad(t, ctx, s, testKey)
	page := func(ev string) {
		js.Global().Call("dispatchEvent", js.Global().Get("PageTransitionEvent").New(ev, map[string]any{"persisted": true}))
	}
	until := func(v js.Value, what string) {
		t.Helper()
		for !v.Get(what).Bool() {
			select {
			case <-ctx.Done():
				t.Fatalf("no %s", what)
			case <-time.After(time.Millisecond):
			}
		}
	}
	commit := func(entries []client.Entry) {
		t.Helper()
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att"}, entries, 100); err != nil {
			t.Fatal(err)
		}
	}

	hook := faults(t).Call("pagehideAsNextWriteCompletes")
	t.Cleanup(func() { hook.Call("undo") })
	commit(unnumbered(0, 2)) // a new attachment id: written at once
	until(hook, "done")
	page("pageshow")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	hold := faults(t).Call("holdNextReadWrite")
	t.Cleanup(func() { hold.Call("release") })
	commit(unnumbered(2, 2)) // written once the commit window ends
	until(hold, "held")
	page("pagehide") // aborts the held write (WebKit), which never committed
	page("pageshow")
	hold.Call("release") // elsewhere it ran on
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	got := describe(mustHistory(t, ctx, openStore(t, ctx, db), testKey))
	if want := describe(unnumbered(0, 4)); got != want {
		t.Fatalf("the transcript is\n%s, want\n%s", got, want)
	}
}

// unnumbered are n received entries with no seq, as a runtime that numbers
// no messages sends them, told apart by their payloads ({"i":from+1}…).
func unnumbered(from, n int) []client.Entry {
	out := make([]client.Entry, n)
	for i := range out {
		out[i] = client.Entry{Payload: []byte(`{"i":` + strconv.Itoa(from+i+1) + `}`)}
	}
	return out
}
