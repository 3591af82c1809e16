//go:build js && wasm

package browser

import (
	"context"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/wasm/client"
)

// Faults of the engine's making that the store lives through: a
// transaction WebKit aborts under a live connection (iOS suspends its
// storage process as the app goes to the background), and a page whose
// timers ran late while IndexedDB opened.

// engineFaults are test-only helpers, loaded next to relay.js as
// testdata/faults.js is.
var engineFaults = testModule("engine faults", `
// abortNext has the next call of IDBObjectStore's method (put, get …) on
// the named object store of database db, in a transaction of mode, go
// through and then aborts its transaction, once, as an engine aborts a
// transaction it suspends: the page did not ask for it, it comes between
// two of the page's tasks, and the connection stays open. It counts the
// aborts it made (0 or 1).
export function abortNext(db, mode, store, method) {
  const orig = IDBObjectStore.prototype[method];
  const fault = { n: 0 };
  fault.undo = () => { IDBObjectStore.prototype[method] = orig; };
  IDBObjectStore.prototype[method] = function (...args) {
    const req = orig.apply(this, args);
    const tx = this.transaction;
    if (tx.db.name === db && tx.mode === mode && this.name === store) {
      fault.undo();
      fault.n++;
      queueMicrotask(() => tx.abort());
    }
    return req;
  };
  return fault;
}

// busyOpen has the next open of database db run behind a main thread kept
// busy for ms milliseconds, as a page's is when it starts (or a phone
// suspends it) just after the open began: the open's answer reaches the
// page after every timer that came due meanwhile. The upgrade, which must
// be answered at once, goes through as it comes.
export function busyOpen(db, ms) {
  const orig = IDBFactory.prototype.open;
  const fault = { undo: () => { IDBFactory.prototype.open = orig; }, seen: false };
  IDBFactory.prototype.open = function (name, ...rest) {
    if (name !== db) return orig.call(this, name, ...rest);
    fault.undo();
    fault.seen = true;
    const real = orig.call(this, name, ...rest);
    const req = {
      get result() { return real.result; },
      get error() { return real.error; },
      get readyState() { return real.readyState; },
    };
    // An answer that comes before the thread is busy (the open can be that
    // quick) is held until it is no longer: it arrives during the busy time.
    let busy = true;
    const held = [];
    const later = (what) => (ev) => {
      const deliver = () => setTimeout(() => req[what]?.(ev), 1); // after the timers due meanwhile (a delay of 0 may run first in Chromium)
      if (busy) held.push(deliver);
      else deliver();
    };
    real.onupgradeneeded = (ev) => req.onupgradeneeded?.(ev);
    real.onsuccess = later("onsuccess");
    real.onerror = (ev) => { ev.preventDefault(); later("onerror")(ev); };
    real.onblocked = later("onblocked");
    setTimeout(() => {
      const until = performance.now() + ms;
      while (performance.now() < until) {} // the page's thread, busy
      busy = false;
      for (const deliver of held.splice(0)) deliver();
    }, 0);
    return req;
  };
  return fault;
}
`)

// The page's thread busy just after the open began (an app starting; a
// phone suspending the page does the same to its timers): the open's
// timer fires late, and is not taken for an open that never answers. The
// store is on IndexedDB, and what is stored there loads. (It fell back to
// memory for the whole page: its attach started a fresh stream, with an
// empty transcript.)
func TestStoreOpenBehindABusyThreadStaysOnIndexedDB(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := database(t)
	before := openStore(t, ctx, db)
	if err := before.Commit(ctx, testKey, client.Saved{Session: "att", Cursor: 2}, received(0, 2), 10); err != nil {
		t.Fatal(err)
	}
	if err := before.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// Longer than the open's 5 s limit and the 2 s a timer may run late
	// before the store takes it for a suspended page's.
	fault := engineFaults(t).Call("busyOpen", db, 9000)
	defer fault.Call("undo")
	s := openStore(t, ctx, db) // fails the test on a fallback
	if !fault.Get("seen").Bool() {
		t.Fatal("the store's open was not held up: the test holds nothing")
	}
	if got := mustLoad(t, ctx, s, testKey); got != (client.Saved{Session: "att", Cursor: 2}) {
		t.Fatalf("the store opened behind a busy thread loads %+v, want the stored cursor 2", got)
	}
}
