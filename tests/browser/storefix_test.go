//go:build js && wasm

package browser

// Faults of the engine's making that the store lives through: a
// transaction WebKit aborts under a live connection (iOS suspends its
// storage process as the app goes to the background), and a page whose
// timers ran late while IndexedDB opened.

// engineFaults are test-only helpers, loaded next to relay.js as
// testdata/faults.js is.
var engineFaults = testModule("storefix faults", `
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
    const later = (what) => (ev) => setTimeout(() => req[what]?.(ev), 0);
    real.onupgradeneeded = (ev) => req.onupgradeneeded?.(ev);
    real.onsuccess = later("onsuccess");
    real.onerror = (ev) => { ev.preventDefault(); later("onerror")(ev); };
    real.onblocked = later("onblocked");
    setTimeout(() => {
      const until = performance.now() + ms;
      while (performance.now() < until) {} // the page's thread, busy
    }, 0);
    return req;
  };
  return fault;
}
`)
