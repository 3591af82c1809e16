// Test-only helpers the browser tests load next to relay.js: ways to make
// IndexedDB fail or go missing, and to count what reaches it. Each returns a
// function that undoes it.

// countReadWrite counts readwrite transactions started on any database.
export function countReadWrite() {
  const orig = IDBDatabase.prototype.transaction;
  const counter = { n: 0 };
  IDBDatabase.prototype.transaction = function (stores, mode, ...rest) {
    if (mode === "readwrite") counter.n++;
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
export function countChunks(name) {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(name);
    req.onerror = () => reject(req.error);
    req.onsuccess = () => {
      const db = req.result;
      const all = db.transaction("chunks").objectStore("chunks").getAll();
      all.onsuccess = () => { db.close(); resolve(all.result.filter((v) => v instanceof Uint8Array).length); };
      all.onerror = () => { db.close(); reject(all.error); };
    };
  });
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
    const store = tx.objectStore(Array.isArray(stores) ? stores[0] : stores);
    const spin = () => {
      if (!hold.released) store.count().onsuccess = spin;
    };
    spin();
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

// deleteDatabase deletes a database (its open connections close on the
// versionchange), as a user clearing the site's storage does.
export function deleteDatabase(name) {
  return new Promise((resolve, reject) => {
    const req = indexedDB.deleteDatabase(name);
    req.onsuccess = () => resolve();
    req.onerror = () => reject(req.error);
  });
}
