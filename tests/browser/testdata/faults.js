// Test-only helpers the browser tests load next to relay.js: ways to make
// IndexedDB fail or go missing, and to count what reaches it. Each returns a
// function that undoes it.

// countReadWrite counts the readwrite transactions started on the named
// database that write stream state: a store's writes, not the one that
// probes whether the database takes Blobs (it writes the chunks store
// alone), and not those of stores an earlier test left on other databases
// (one that kept its commits for an hour writes them at pagehide).
export function countReadWrite(name) {
  const orig = IDBDatabase.prototype.transaction;
  const counter = { n: 0 };
  IDBDatabase.prototype.transaction = function (stores, mode, ...rest) {
    if (this.name === name && mode === "readwrite" && [stores].flat().includes("state")) counter.n++;
    return orig.call(this, stores, mode, ...rest);
  };
  counter.undo = () => { IDBDatabase.prototype.transaction = orig; };
  return counter;
}

// throwOnPut makes put() into the named object store throw a DOMException
// with the given name, as a browser out of quota does.
export function throwOnPut(store, name) {
  const orig = IDBObjectStore.prototype.put;
  IDBObjectStore.prototype.put = function (...args) {
    if (this.name === store) throw new DOMException("injected by the test", name);
    return orig.apply(this, args);
  };
  return () => { IDBObjectStore.prototype.put = orig; };
}

// throwValueOnPut makes put() into the named object store throw something
// that is not an Error: the text itself, or a BigInt when bigint is true.
// JavaScript can throw any value, and Go's syscall/js cannot describe all.
export function throwValueOnPut(store, text, bigint) {
  const orig = IDBObjectStore.prototype.put;
  IDBObjectStore.prototype.put = function (...args) {
    if (this.name === store) throw bigint ? BigInt(text) : text;
    return orig.apply(this, args);
  };
  return () => { IDBObjectStore.prototype.put = orig; };
}

// abortAfterPut lets put() into the named object store go through and then
// aborts its transaction: an interruption between two writes of one commit.
export function abortAfterPut(store) {
  const orig = IDBObjectStore.prototype.put;
  IDBObjectStore.prototype.put = function (...args) {
    const req = orig.apply(this, args);
    if (this.name === store) this.transaction.abort();
    return req;
  };
  return () => { IDBObjectStore.prototype.put = orig; };
}

// hideIndexedDB makes the page look like one without IndexedDB.
export function hideIndexedDB() {
  const own = Object.getOwnPropertyDescriptor(globalThis, "indexedDB");
  Object.defineProperty(globalThis, "indexedDB", { value: undefined, configurable: true });
  return () => {
    delete globalThis.indexedDB;
    if (own) Object.defineProperty(globalThis, "indexedDB", own);
  };
}

// denyIndexedDB makes reading indexedDB throw a SecurityError, as a page
// whose storage is denied outright sees.
export function denyIndexedDB() {
  const own = Object.getOwnPropertyDescriptor(globalThis, "indexedDB");
  Object.defineProperty(globalThis, "indexedDB", {
    get() {
      throw new DOMException("storage is denied", "SecurityError");
    },
    configurable: true,
  });
  return () => {
    delete globalThis.indexedDB;
    if (own) Object.defineProperty(globalThis, "indexedDB", own);
  };
}

// createAtVersion creates (or upgrades) a database to version v and closes it.
export function createAtVersion(name, v) {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(name, v);
    req.onsuccess = () => { req.result.close(); resolve(); };
    req.onerror = () => reject(req.error);
  });
}

// countChunks counts the transcript records stored in a database: the
// values that are chunks. WPE WebKit 2.38 (Safari 16's engine) can leave a
// record whose value reads as undefined where an aborted transaction put
// one; store.js skips those as history does, and so does this count.
export async function countChunks(name) {
  return (await chunkKinds(name)).filter((k) => k !== "other").length;
}

// chunkKinds is what each record of a database's chunks store holds, in key
// order: "blob", "bytes" (a Uint8Array) or "other".
export function chunkKinds(name) {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(name);
    req.onerror = () => reject(req.error);
    req.onsuccess = () => {
      const db = req.result;
      const all = db.transaction("chunks").objectStore("chunks").getAll();
      const kind = (v) => (v instanceof Blob ? "blob" : v instanceof Uint8Array ? "bytes" : "other");
      all.onsuccess = () => { db.close(); resolve(all.result.map(kind)); };
      all.onerror = () => { db.close(); reject(all.error); };
    };
  });
}

// takesBlobs says whether this browser's IndexedDB stores a Blob: WebKit's
// does not in an ephemeral session (Safari's private browsing, and
// WebKitWebDriver's sessions here), where the put fails its transaction
// with "UnknownError: Error preparing Blob/File data to be stored in object
// store". It puts one into a scratch database of its own.
export function takesBlobs() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open("relaywasm-test-takes-blobs", 1);
    req.onupgradeneeded = () => req.result.createObjectStore("blobs");
    req.onerror = () => reject(req.error);
    req.onsuccess = () => {
      const db = req.result;
      const tx = db.transaction("blobs", "readwrite");
      try {
        tx.objectStore("blobs").put(new Blob(["blob"]), 1);
      } catch {
        db.close();
        resolve(false);
        return;
      }
      tx.oncomplete = () => { db.close(); resolve(true); };
      tx.onabort = () => { db.close(); resolve(false); };
    };
  });
}

// refuseBlobs makes a put of a Blob fail as Safari's private browsing has
// it fail (webkit.org/b/156347): thrown as a DataCloneError when later is
// false, else in the transaction (its put goes through and the transaction
// then aborts), as a network process that cannot write the Blob does. It
// counts the Blobs refused.
export function refuseBlobs(later) {
  const orig = IDBObjectStore.prototype.put;
  const refused = { n: 0 };
  IDBObjectStore.prototype.put = function (value, ...rest) {
    if (!(value instanceof Blob)) return orig.call(this, value, ...rest);
    refused.n++;
    if (!later) throw new DOMException("Failed to store record in an IDBObjectStore: BlobURLs are not yet supported.", "DataCloneError");
    const req = orig.call(this, value, ...rest);
    this.transaction.abort();
    return req;
  };
  refused.undo = () => { IDBObjectStore.prototype.put = orig; };
  return refused;
}

// throwOnWebSocket makes new WebSocket(…) throw something that is not an
// Error: the text itself, or a BigInt when bigint is true.
export function throwOnWebSocket(text, bigint) {
  const orig = globalThis.WebSocket;
  globalThis.WebSocket = function () {
    throw bigint ? BigInt(text) : text;
  };
  globalThis.WebSocket.OPEN = orig.OPEN;
  return () => { globalThis.WebSocket = orig; };
}

// holdNextReadWrite keeps the next readwrite transaction started on any
// database from ending until release() is called, as a slow engine does
// (WebKitGTK's writes take tens of milliseconds): it keeps the transaction
// busy with reads of its first store.
export function holdNextReadWrite() {
  const orig = IDBDatabase.prototype.transaction;
  const hold = { held: false, released: false };
  IDBDatabase.prototype.transaction = function (stores, mode, ...rest) {
    const tx = orig.call(this, stores, mode, ...rest);
    if (mode !== "readwrite" || hold.held) return tx;
    hold.held = true;
    hold.tx = tx;
    IDBDatabase.prototype.transaction = orig;
    keepBusy(tx.objectStore(Array.isArray(stores) ? stores[0] : stores), hold);
    return tx;
  };
  hold.release = () => {
    hold.released = true;
    IDBDatabase.prototype.transaction = orig;
  };
  // abort aborts the held transaction, as a page going away may.
  hold.abort = () => {
    hold.released = true;
    IDBDatabase.prototype.transaction = orig;
    hold.tx?.abort();
  };
  return hold;
}

// pagehideAsNextWriteCompletes dispatches a pagehide into the back/forward
// cache (persisted) as the next readwrite transaction started on any
// database completes, before the store hears that it did: as WebKitGTK
// does, whose abort of a write as the page is cached often comes too late,
// and which reports the write complete once the page is shown again. done
// is set once it has.
export function pagehideAsNextWriteCompletes() {
  const orig = IDBDatabase.prototype.transaction;
  const hook = { done: false };
  IDBDatabase.prototype.transaction = function (stores, mode, ...rest) {
    const tx = orig.call(this, stores, mode, ...rest);
    if (mode !== "readwrite") return tx;
    IDBDatabase.prototype.transaction = orig;
    // Added before the store sets oncomplete, so heard first.
    tx.addEventListener("complete", () => {
      hook.done = true;
      dispatchEvent(new PageTransitionEvent("pagehide", { persisted: true }));
    });
    return tx;
  };
  hook.undo = () => {
    IDBDatabase.prototype.transaction = orig;
  };
  return hook;
}

// keepBusy keeps store's transaction from ending with one read after
// another until hold.released. A transaction ended under it (its page torn
// down mid-test) ends the reads instead of throwing TransactionInactiveError
// from an event handler, which the runner reports as an uncaught error.
function keepBusy(store, hold) {
  const spin = () => {
    if (hold.released) return;
    try {
      store.count().onsuccess = spin;
    } catch {
      // the transaction is over: nothing left to keep busy
    }
  };
  spin();
}

// holdDatabase opens a connection of its own to the named database and
// keeps a readwrite transaction over both stores running until release()
// is called: another page's transaction that never ends, as WebKit's
// back/forward cache leaves one. It resolves once the transaction runs.
export function holdDatabase(name) {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(name);
    req.onerror = () => reject(req.error);
    req.onsuccess = () => {
      const db = req.result;
      const hold = { released: false };
      const tx = db.transaction(["state", "chunks"], "readwrite");
      tx.oncomplete = tx.onabort = () => db.close();
      const state = tx.objectStore("state");
      state.count().onsuccess = () => {
        keepBusy(state, hold);
        resolve(hold);
      };
      hold.release = () => { hold.released = true; };
    };
  });
}

// holdNextOpen keeps the next open of the named database from answering
// until fail(), which fails it, as an open fails when its page is torn down
// first: it hands the page a request of its own, which never opens.
export function holdNextOpen(name) {
  const orig = IDBFactory.prototype.open;
  const held = {};
  const hold = { undo: () => { IDBFactory.prototype.open = orig; } };
  IDBFactory.prototype.open = function (db, ...rest) {
    if (db !== name) return orig.call(this, db, ...rest);
    hold.undo();
    hold.fail = () => {
      held.error = new DOMException("the page went away before the open ended", "UnknownError");
      held.onerror?.(new Event("error"));
    };
    hold.seen = true;
    return held;
  };
  return hold;
}

// skewClock moves Date.now() ms ahead, as a page suspended for that long
// finds it when it runs again; it returns what undoes it.
export function skewClock(ms) {
  const orig = Date.now;
  Date.now = () => orig.call(Date) + ms;
  return () => { Date.now = orig; };
}

// deleteDatabase deletes a database (its open connections close on the
// versionchange), as a user clearing the site's storage does.
export function deleteDatabase(name) {
  return new Promise((resolve, reject) => {
    const req = indexedDB.deleteDatabase(name);
    req.onsuccess = () => resolve();
    req.onerror = () => reject(req.error);
  });
}

// watchConnections records the connections to the named database that make
// a transaction from now on, with their transactions that have not ended.
// forceClose() then closes them as a browser forcibly closes a connection
// (its storage cleared; in iOS, WebKit's storage process gone while the page
// was in the background): the connection stops taking transactions, those
// in flight abort, and then it fires "close". A page cannot close another's
// connection that way itself, so this does it step by step: it aborts the
// transactions, closes the connection as the first abort reaches the page
// (before the page's own handlers see it: the connection is closing by
// then, as the standard has it), and fires a "close" event once they have
// all ended. (Closing first, WebKitGTK fires no abort event at all for a
// transaction aborted after its connection's close().)
export function watchConnections(name) {
  const orig = IDBDatabase.prototype.transaction;
  const seen = new Map(); // connection -> its transactions that have not ended
  const forced = new WeakSet();
  IDBDatabase.prototype.transaction = function (...args) {
    const tx = orig.apply(this, args);
    if (this.name !== name) return tx;
    const db = this;
    const open = seen.get(db) ?? new Set();
    seen.set(db, open);
    const entry = { tx };
    entry.ended = new Promise((resolve) => {
      tx.addEventListener("complete", resolve);
      tx.addEventListener("abort", () => {
        if (forced.has(db)) db.close();
        resolve();
      });
    }).then(() => open.delete(entry));
    open.add(entry);
    return tx;
  };
  const watch = { undo: () => { IDBDatabase.prototype.transaction = orig; } };
  // forceClose resolves with how many connections it closed and how many
  // transactions it aborted, once every "close" event has fired.
  watch.forceClose = async () => {
    let aborted = 0;
    const closes = [];
    for (const [db, open] of seen) {
      seen.delete(db);
      forced.add(db);
      let mine = 0;
      for (const { tx } of open) {
        try {
          tx.abort();
          mine++;
        } catch {
          // it had just ended
        }
      }
      if (mine === 0) db.close();
      aborted += mine;
      // WebKitGTK drops the abort events still due to a connection's
      // transactions once it is closed (under load, when they come in
      // tasks of their own): a transaction whose abort has not been seen
      // within a second is not waited for.
      const ends = Promise.race([Promise.all([...open].map((e) => e.ended)), new Promise((resolve) => setTimeout(resolve, 1000))]);
      closes.push(ends.then(() => new Promise((resolve) => setTimeout(() => resolve(db.dispatchEvent(new Event("close"))), 0))));
    }
    await Promise.all(closes);
    return [closes.length, aborted];
  };
  return watch;
}
