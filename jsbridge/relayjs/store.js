// store.js: stream state in IndexedDB, all of it: the schema, opening,
// the commit window, writes, trimming, reads, and the fall back to memory.
// jsbridge.Store (Go) is a thin adapter over it, with the same operations as
// client.Store (load, commit, history, clear) plus flush.
//
// Schema (names in jsbridge/boundary):
//
//   STORE_STATE:  [url, instance, name]        -> {session, cursor, total, keep, open?}
//   STORE_CHUNKS: [url, instance, name, start] -> packed entries, a Blob or a Uint8Array
//
// A chunk is the transcript entries one write appended to a stream, packed
// by Go (this module looks inside one only to leave out what the stream's
// transcript holds already: skipRecorded); start counts the stream's
// entries since it began (total), so chunks sort in order and dropping the
// oldest is one range delete. A chunk is one record rather than one per
// entry because IndexedDB's cost is per record.
//
// A chunk goes to IndexedDB as a Blob where the database takes Blobs (see
// probeBlobs), and as a Uint8Array where it does not, and in the write the
// page makes as it goes away; reads take either. A Uint8Array is cloned into
// the put on the page's thread, where a Blob of the commits' bytes is one
// copy the browser then writes by itself: with a 20,000-message transcript
// streaming, the page's CPU per message went from 1.97x and 1.83x to 1.32x
// and 1.25x the raw WebSocket client's (two make bench runs of each,
// Chromium; README, "The transcript").
//
// Commits only queue. The commits of a commit window, for every stream of
// the store, go to IndexedDB in one readwrite transaction (about a
// millisecond of the page's main thread each, whatever it carries), and
// within it a stream's state and chunk are written together, so the stored
// cursor and transcript always agree. A commit with a new attachment id is
// written at once; flush, a read and clear write first; and writeAll (the
// page is hidden or goes away; going into the back/forward cache it only
// spills: see cached) issues every store's transaction before it returns
// and commits it at once, even while an earlier one is still being written:
// in an engine whose writes are slow (WebKitGTK's take 35-190 ms each here)
// the page would otherwise end with the commits queued behind the running
// write never issued. That transaction writes the running one's
// commits again, at the same keys (IndexedDB runs readwrite transactions
// over the same stores in the order they were made, and a put of the same
// key overwrites): the page going away may abort the running one and still
// commit this one (Firefox did), and the stored cursor must never pass the
// stored transcript.
//
// WebKit aborts every transaction not committed when the page is torn down,
// so a reload there could lose what the page showed last. writeAll also
// leaves a copy of what its transaction writes in sessionStorage (the
// spill, under STORE_SPILL: synchronous, and kept across a reload of the
// tab); the spill is dropped when the transaction commits. Every write marks
// the state records it writes with the page and the write's number. A store
// that opens the database finishes the spills of stores no longer alive (the
// previous page): an entry whose state record carries neither its mark nor a
// later one of the same page was never written, and is written now, unless
// the record is gone or ends before the entry starts, or another page wrote
// or deleted it since (movedOn), or the open created the database (the
// storage was cleared since: a spill never brings back what was deleted; a
// stream's first write spills from its start, and over a deleted database
// only the database's being new tells). There
// is no sessionStorage in a worker, and a spill over the origin's quota is
// not kept: then IndexedDB's transaction is all there is.
//
// When IndexedDB is missing or fails, the store keeps working in memory,
// seeded with what it knows, and reports why once (fallback). A transaction
// the engine aborts over a live connection is not yet a failure: WebKit
// aborts the running transactions of an iOS app going to the background
// (its storage process is suspended and lets go of its file locks), and of
// a suspended page whose transaction holds up another page's. A write
// aborted so is written again, a read made again, a few times, a little
// later each time (ABORT_RETRIES; #retry, #again), before the store falls back:
// else one trip to the background would leave the page storing nothing
// for the rest of its life, and the reload after iOS ended the tab resume
// from an old cursor, with the transcript missing all since. A connection
// that closes under the store (the storage cleared, iOS in the background,
// another page deleting or upgrading the database) is not a failure: the
// store opens the database again and writes there what the close
// interrupted (#adopt, #severed).

import {
  DEFAULT_COMMIT_WINDOW_MS,
  DONE_FAILED,
  DONE_OK,
  FALLBACK_BLOCKED,
  FALLBACK_FAILED,
  FALLBACK_QUOTA,
  FALLBACK_UNAVAILABLE,
  STORE_CHUNKS,
  STORE_DATABASE,
  STORE_SPILL,
  STORE_STATE,
  STORE_VERSION,
} from "./boundary.js";
import { atTurnEnd } from "./crossing.js";
import { unrecorded } from "./entries.js";
import { asError } from "./errors.js";

const OPEN_TIMEOUT_MS = 5000; // some private modes never answer an open (a late timer waits again: afterLimit)
// How long any of the store's transactions (finishing a spill, loading a
// stream's state or transcript, a write, a clear) may take to end. Another
// connection's transaction that never ends keeps them waiting for good:
// WebKit suspends the transactions of a page it puts in its back/forward
// cache, and a page navigated away from mid-write can hold the database
// until the cache drops it (in WebKitGTK 2.50 the next page of the tab hung
// in loadRelay, 1 navigation in 10 with three test suites side by side; a
// page already running would queue its writes for good, and its close()
// and detach() would never resolve). The store then works in memory, and
// says so, rather than hang. (No write of its own comes near the limit:
// WebKitGTK's, the slowest here, take 35-190 ms.)
const BLOCKED_LIMIT_MS = 10000;
const LATE_MS = 2000; // a limit's timer this late was suspended with its page (afterLimit)
const BLOCKED_ERROR = "BlockedError";
const REOPEN_RETRIES = 3; // an aborted reopen is tried again 100, 200 and 300 ms later (#reopen)
const REOPEN_RETRY_MS = 100;
// A transaction aborted by the engine (not by the store: its own give-up,
// a request that failed, the quota) is tried again up to ABORT_RETRIES
// times in a row, ABORT_RETRY_MS, then twice and three times that later
// (#retry, #again): a page in the background does not run its timers, so the
// tries are not spent while it is suspended.
const ABORT_RETRIES = 3;
const ABORT_RETRY_MS = 500;
const MAX_CHUNK_KEY = 2 ** 53; // above every start
const NOW = 1; // a flush or a read waits for the write
const FINAL = 2; // the page is going away

const all = new Set(); // the page's IndexedDB stores, for writeAll

// PAGE and stores name this page's spills, one per store; marks counts its
// writes.
const PAGE = `${Date.now().toString(36)}.${Math.random().toString(36).slice(2)}`;
let stores = 0;
let marks = 0;

// cached is set while the page is in the back/forward cache, from its
// pagehide (persisted) to its pageshow, and no transaction is made then.
// WebKitGTK 2.50 runs none made in that pagehide while the page is cached
// (a commit() in it neither), and one of the page's still running then (a
// write not yet committed, the Blob probe) ends only once the page is shown
// again: until then it holds the stores, and the chat page come back to by
// its URL waited BLOCKED_LIMIT_MS for it and fell back to memory, with a
// new attachment id and no transcript; shown again, the page found a write
// made in its pagehide reported complete without its puts. So the store
// aborts what it has in flight as the page is cached (crossed) and spills
// what it would write (#spillAhead): a next page of the tab finishes the
// spill, and the page shown again writes it all again. This listener is
// added as this module loads, before lifecycle.js's and remote.js's, which
// write the stores (writeAll).
//
// Only in WebKit (CACHE_HOLDS_WRITES): Chromium and Firefox run the write
// a page makes in its pagehide as it goes into the cache, and it is in
// IndexedDB then, for a page of another tab too; spilled instead, it would
// be in this tab's sessionStorage only, and a page left for another site,
// the chat opened again in another tab, would miss its last commits.
// navigator.vendor is WebCore's constant in every WebKit (Safari, every
// browser on iOS, WebKitGTK, WPE), "Google Inc." in Chromium's engines and
// "" in Firefox.
const CACHE_HOLDS_WRITES = globalThis.navigator?.vendor === "Apple Computer, Inc.";
let cached = false;
globalThis.addEventListener?.("pagehide", (ev) => {
  cached = ev.persisted === true && CACHE_HOLDS_WRITES;
  if (cached) for (const s of all) s.crossed();
});

// A page shown again from the back/forward cache reads its streams again
// as it writes them (Store.forget), and, in WebKit, writes what its
// pagehide spilled and any write #write held back while it was cached.
globalThis.addEventListener?.("pageshow", (ev) => {
  if (!ev.persisted) return;
  const was = cached;
  cached = false;
  for (const s of all) {
    s.forget(true);
    if (was) s.hurry(NOW);
  }
});

/** writeAll has every store write what it has queued, now (pagehide, hidden); in the back/forward cache, spill it (cached). */
export function writeAll() {
  for (const s of all) s.hurry(FINAL);
}

/**
 * Stores are the stores relay.wasm's Go opens, by handle, as its calls name
 * them (bridge.js's store* methods); done(id, kind, value, handle) settles
 * Go's waits. They live where sessionStorage is, since the copy a final
 * write leaves there is what survives a teardown that aborts the write: on
 * the main thread they are the bridge's, and in worker mode the page's
 * (remote.js), to which the worker forwards Go's calls (worker.js).
 */
const RUNS = new Set(["load", "history", "clear", "flush"]);

export class Stores {
  constructor(done) {
    this.done = done;
    this.m = new Map(); // handle -> Store
    this.next = 1;
  }

  /** open opens a store and returns its handle (h, when the caller picked it). */
  open(id, database, windowMs, fallbackID, h = this.next++) {
    const s = new Store(database, () => this.done(fallbackID, DONE_OK, null, h));
    if (windowMs >= 0) s.setWindow(windowMs);
    this.m.set(h, s);
    s.opened.then(() => this.done(id, DONE_OK, h, h));
    return h;
  }

  stream(h, url, instance, name) {
    return this.#get(h).stream(url, instance, name);
  }

  setWindow(h, ms) {
    this.#get(h).setWindow(ms);
  }

  backend(h) {
    return this.#get(h).backend;
  }

  fallback(h) {
    return this.#get(h).fallback;
  }

  /** info is [backend, fallback] of store h, or null when there is none. */
  info(h) {
    const s = this.m.get(h);
    return s ? [s.backend, s.fallback] : null;
  }

  /** state is what store h has been told of stream last ({session, cursor, open}), or null. */
  state(h, stream) {
    const rec = this.m.get(h)?.known.get(stream);
    return rec ? { session: rec.session, cursor: rec.cursor, open: rec.open === true } : null;
  }

  commit(h, stream, session, cursor, keep, n, bytes, open) {
    this.#get(h).commit(stream, session, cursor, keep, n, bytes, open === true);
  }

  /** run starts op (load, history, clear or flush) and reports its outcome to id. */
  run(h, id, op, ...args) {
    if (!RUNS.has(op)) throw new Error(`relay.js: no store operation ${op}`);
    this.#get(h)[op](...args).then(
      (v) => this.done(id, DONE_OK, v ?? null, h),
      (e) => this.done(id, DONE_FAILED, asError(e), h),
    );
  }

  writeAll() {
    writeAll();
  }

  #get(h) {
    const s = this.m.get(h);
    if (!s) throw new Error(`relay.js: no store ${h}`);
    return s;
  }
}

export class Store {
  /**
   * A store on the database (STORE_DATABASE when ""). onFallback() is
   * called once when it falls back to memory; opened resolves once the open
   * has settled either way.
   */
  constructor(database, onFallback) {
    this.window = DEFAULT_COMMIT_WINDOW_MS;
    this.onFallback = onFallback;
    this.fallback = null; // [reason, error name, message] once fallen back
    this.database = database || STORE_DATABASE;
    this.db = null;
    this.lost = false; // the connection closed under the store, not reopened yet (#connected)
    this.era = 0; // how many times the store has reopened the database
    this.mayReopen = true; // false from a reopen until a transaction on it completes
    this.mem = null; // once fallen back: stream -> {session, cursor, keep, chunks: [{n, bytes}]}
    this.keys = []; // stream number -> [url, instance, name]
    this.known = new Map(); // stream -> {session, cursor, total, keep, totalKnown, base}
    this.pending = []; // queued commits
    this.writing = false; // a write is scheduled or running
    this.flying = []; // the transactions issued and not yet ended, oldest first: {batch, bases, mark, final, db, era}
    this.unwritten = []; // the commits of writes the connection's loss ended, written again once reopened
    this.lostAt = { era: -1, bases: new Map() }; // where those writes started each stream (#noteLost)
    this.failed = null; // the error a write ended with, reported once the writes have drained
    this.aborts = 0; // the writes the engine aborted since one last committed (#retry)
    this.urgent = 0;
    this.timer = null;
    this.drained = []; // resolved when nothing is queued or written
    this.spillKey = ""; // this store's sessionStorage key, once open
    this.spilled = new Map(); // stream -> its entry in the spill
    this.blobs = BLOBS_UNKNOWN; // whether chunks go as Blobs (probeBlobs)
    this.probing = null; // probeBlobs's transaction, until it ends
    this.arena = new Arena(); // the bytes of the commits not yet written
    this.opened = this.#open();
  }

  get backend() {
    return this.mem ? "memory" : "indexeddb";
  }

  setWindow(ms) {
    this.window = Math.max(ms, 0);
  }

  /** stream numbers a stream's key for the calls below. */
  stream(url, instance, name) {
    this.keys.push([url, instance, name]);
    return this.keys.length - 1;
  }

  load(stream) {
    return this.#load(stream, 0);
  }

  // #load is load's try number tries (#again).
  async #load(stream, tries) {
    await this.#readable();
    if (this.mem) {
      const st = this.mem.get(stream);
      return st ? [st.session, st.cursor, st.open === true] : ["", 0, false];
    }
    const [db, era] = [this.db, this.era];
    try {
      const tx = db.transaction(STORE_STATE, "readonly");
      const raw = await bounded(request(tx.objectStore(STORE_STATE).get(this.keys[stream])), "reading the stream's state");
      const rec = readState(raw);
      this.mayReopen ||= era === this.era;
      // A queued write knows better, and reads the total itself.
      if (!this.#unsettled().some((c) => c.stream === stream)) this.known.set(stream, { ...rec, totalKnown: true, base: markOf(raw) });
      return [rec.session, rec.cursor, rec.open];
    } catch (e) {
      if (this.#severed(db, era)) return this.#load(stream, tries); // over the reopened connection
      if (await this.#again(e, tries)) return this.#load(stream, tries + 1);
      const err = this.#fallBackFor(e);
      if (err.name !== BLOCKED_ERROR) throw err;
      return this.#load(stream, tries); // from memory, as it now is
    }
  }

  /**
   * commit queues a stream's new state and its n new entries (bytes: packed,
   * or null). bytes is read during the call only: the store keeps a copy,
   * in its arena until it is written.
   */
  commit(stream, session, cursor, keep, n, bytes, open = false) {
    if (this.mem) {
      memCommit(this.mem, { stream, session, cursor, keep, n, bytes: bytes && bytes.slice(), open });
      return;
    }
    const c = { stream, session, cursor, keep, n, bytes: bytes && this.arena.copy(bytes), open };
    const rec = this.known.get(stream) ?? { session: "", cursor: 0, total: 0, keep: 0, totalKnown: false, open: false };
    const newSession = rec.session !== session;
    this.known.set(stream, { ...rec, session, cursor, open });
    this.pending.push(c);
    if (!this.writing) {
      this.writing = true;
      this.#wait();
    }
    // The attachment id is what makes the stream reclaimable after a crash:
    // it does not wait for the window.
    if (newSession) this.hurry(NOW);
  }

  /** history resolves to [keep, the stream's chunks one after the other, or null]. */
  history(stream) {
    return this.#history(stream, 0);
  }

  async #history(stream, tries) {
    await this.#readable();
    if (this.mem) {
      const st = this.mem.get(stream);
      return st ? [st.keep, concat(st.chunks.map((c) => c.bytes))] : [0, null];
    }
    const [db, era] = [this.db, this.era];
    try {
      const tx = db.transaction([STORE_STATE, STORE_CHUNKS], "readonly");
      const key = this.keys[stream];
      const state = request(tx.objectStore(STORE_STATE).get(key));
      const chunks = request(tx.objectStore(STORE_CHUNKS).getAll(chunkRange(key, 0, MAX_CHUNK_KEY, false)));
      const [rec, values] = await bounded(Promise.all([state, chunks]), "reading the stream's transcript");
      this.mayReopen ||= era === this.era;
      // WPE WebKit 2.38 (Safari 16's engine) can give undefined among the
      // values after a transaction that wrote the range aborted; no chunk
      // is there (TestStoreCursorAndTranscriptAgreeAfterInterruption).
      return [readState(rec).keep, await readChunks(values.filter((c) => c instanceof Uint8Array || c instanceof Blob))];
    } catch (e) {
      if (this.#severed(db, era)) return this.#history(stream, tries);
      if (await this.#again(e, tries)) return this.#history(stream, tries + 1);
      const err = this.#fallBackFor(e);
      if (err.name !== BLOCKED_ERROR) throw err;
      return this.#history(stream, tries); // from memory, as it now is
    }
  }

  clear(stream) {
    return this.#clear(stream, 0);
  }

  async #clear(stream, tries) {
    await this.#readable();
    if (this.mem) {
      this.mem.delete(stream);
      return;
    }
    const key = this.keys[stream];
    const [db, era] = [this.db, this.era];
    try {
      const tx = db.transaction([STORE_STATE, STORE_CHUNKS], "readwrite");
      tx.objectStore(STORE_STATE).delete(key);
      tx.objectStore(STORE_CHUNKS).delete(chunkRange(key, 0, MAX_CHUNK_KEY, false));
      // Blocked, the delete may still run once the database is free.
      await bounded(completed(tx), "clearing the stream");
      this.mayReopen ||= era === this.era;
    } catch (e) {
      if (this.#severed(db, era)) return this.#clear(stream, tries);
      if (await this.#again(e, tries)) return this.#clear(stream, tries + 1);
      if (e?.name !== BLOCKED_ERROR) throw e;
      this.#fallBackFor(e);
      return this.#clear(stream, tries); // in memory, as it now is
    }
    this.known.set(stream, { session: "", cursor: 0, total: 0, keep: 0, totalKnown: true, base: "", open: false });
  }

  /** flush resolves once every commit so far is written (or the store is in memory). */
  flush() {
    return this.#settle();
  }

  /**
   * hurry has the queued commits written without waiting for the window:
   * FINAL starts the transaction before it returns; NOW once the running
   * script (Go's included) yields, so that the commits of one turn still go
   * together.
   */
  hurry(how) {
    if (!this.writing || this.mem) return;
    this.urgent = Math.max(this.urgent, how);
    // The next write starts when this one ends, unless the page is going.
    if (this.flying.length > 0 && how !== FINAL) return;
    clearTimeout(this.timer);
    this.timer = null;
    if (how === FINAL) this.#write();
    else queueMicrotask(() => this.#write());
  }

  // #settle resolves once every commit so far is written.
  #settle() {
    if (!this.writing || this.mem) return this.opened;
    return new Promise((resolve) => {
      this.drained.push(resolve);
      this.hurry(NOW);
    });
  }

  // #readable resolves once every commit so far is written and the store
  // can read: it has a connection (opened again if it lost one; a flush
  // alone makes none) or is in memory.
  async #readable() {
    await this.#settle();
    await this.#connected();
  }

  // #wait starts the window; a window of 0 ends with the event-loop turn.
  #wait() {
    if (this.window > 0) this.timer = setTimeout(() => this.#write(), this.window);
    else atTurnEnd(() => this.#write());
  }

  // #write writes what is queued in one transaction, starting it before it
  // returns (writeAll relies on that), unless the open has not settled yet.
  // While a transaction is in flight only a FINAL write makes another, even
  // with nothing queued (it writes the running one's commits again, and
  // spills them), unless the newest in flight is a FINAL one already.
  #write() {
    if (!this.writing) return;
    if (cached) {
      if (this.urgent === FINAL) this.#spillAhead();
      this.urgent = 0;
      return;
    }
    if (this.flying.length > 0 && (this.urgent !== FINAL || (this.pending.length === 0 && this.flying.at(-1).final))) return;
    this.timer = null;
    if (!this.db && !this.mem) {
      if (this.urgent === FINAL) this.#spillAhead();
      this.#connected().then(() => this.#write());
      return;
    }
    const final = this.urgent === FINAL;
    this.urgent = 0;
    if (this.mem) {
      for (const c of this.pending.splice(0)) memCommit(this.mem, c);
      this.#drain();
      return;
    }
    const [batch, bases] = this.#next();
    if (batch.length === 0) return; // nothing that can go now: after the running write
    const streams = coalesce(batch);
    const f = { batch, bases: new Map(), mark: `${PAGE}/${++marks}`, final, db: this.db, era: this.era };
    this.flying.push(f); // before: a transaction that cannot be made ends at once
    for (const c of batch) (c.marks ??= new Set()).add(f.mark); // skipStored
    const blobs = !final && this.blobs === BLOBS_YES;
    f.tx = writeStreams(this.db, this.keys, this.known, streams, bases, f.mark, final, blobs, (err, foreign) => this.#ended(f, err, foreign));
    for (const c of streams) f.bases.set(c.stream, c.total); // -1: read within the transaction
    if (final) this.#spill(streams, f.mark);
    else if (this.flying.includes(f)) this.#probe(streams); // not when it could not be made
  }

  // #probe starts probeBlobs after the first write with a chunk (made after
  // that write, so as not to hold it up); chunks go as bytes until it has
  // passed.
  #probe(streams) {
    if (this.blobs !== BLOBS_UNKNOWN || !streams.some((c) => c.keep > 0 && c.n > 0)) return;
    const tx = (this.probing = probeBlobs(this.db));
    this.blobs = tx ? BLOBS_PROBING : BLOBS_NO;
    if (!tx) return;
    completed(tx).then(
      () => this.#probed(tx, BLOBS_YES),
      () => this.#probed(tx, BLOBS_NO),
    );
  }

  // #probed notes the outcome of probe tx, unless the store gave up on it
  // (crossed): then the next write with a chunk probes again.
  #probed(tx, blobs) {
    if (this.probing !== tx) return;
    this.probing = null;
    this.blobs = blobs;
  }

  // #spill leaves a copy of a final write in sessionStorage (see the top
  // of this file), with the entries of earlier final writes still in flight
  // for the streams this one does not write.
  #spill(streams, mark) {
    const storage = sessionStore();
    if (!storage || !this.spillKey) return;
    for (const c of streams) {
      const bytes = c.keep > 0 && c.n > 0 ? toBase64(c.chunk instanceof Uint8Array ? c.chunk : concat(c.parts)) : "";
      const { session, cursor, keep, n, open } = c;
      const start = c.total ?? -1;
      const base = this.known.get(c.stream)?.base ?? null;
      this.spilled.set(c.stream, { mark, key: this.keys[c.stream], session, cursor, keep, start, n, bytes, base, ...(open ? { open } : {}) });
    }
    this.#keepSpill(storage);
  }

  // #spillAhead spills what a final write that must wait for a connection
  // will write: the store lost its connection and is opening the database
  // again (iOS, back from the background, then hidden again), and the page
  // may be gone before the open ends. A stream goes from where a write the
  // loss aborted started it (it never committed), else from where the
  // oldest write in flight starts it (it may still commit, as a write does
  // over a connection the store closed itself), else from the total the
  // store knows. A stream whose start the write in flight reads is left
  // out, as #next leaves it queued.
  #spillAhead() {
    const bases = this.#bases();
    // The connection lost is of this era until the reopen begins (#connected counts it up).
    const lost = !this.db && this.lostAt.era === (this.lost ? this.era : this.era - 1) ? this.lostAt.bases : new Map();
    const startKnown = (c) => lost.has(c.stream) || !bases.has(c.stream) || bases.get(c.stream) >= 0;
    const streams = coalesce(this.#unsettled().filter(startKnown));
    for (const c of streams) {
      const rec = this.known.get(c.stream);
      c.total = lost.get(c.stream) ?? bases.get(c.stream) ?? (rec?.totalKnown ? rec.total : -1);
    }
    this.#spill(streams, `${PAGE}/${++marks}`);
  }

  // #noteLost keeps where f, a write its connection's loss aborted, started
  // each stream, for #spillAhead: the oldest such write of the newest lost
  // connection counts.
  #noteLost(f) {
    if (f.era < this.lostAt.era) return;
    if (f.era > this.lostAt.era) this.lostAt = { era: f.era, bases: new Map() };
    for (const [stream, total] of f.bases) if (!this.lostAt.bases.has(stream)) this.lostAt.bases.set(stream, total);
  }

  // #unspill drops the entries of a final write that committed.
  #unspill(mark) {
    const storage = sessionStore();
    if (!storage || this.spilled.size === 0) return;
    for (const [stream, e] of this.spilled) if (e.mark === mark) this.spilled.delete(stream);
    this.#keepSpill(storage);
  }

  #keepSpill(storage) {
    try {
      if (this.spilled.size === 0) storage.removeItem(this.spillKey);
      else storage.setItem(this.spillKey, JSON.stringify([...this.spilled.values()]));
    } catch {
      // over the quota, or storage refused: IndexedDB's transaction is all there is
    }
  }

  // #next takes what the next transaction writes: the queued commits, and
  // with a transaction in flight also the commits of every one in flight,
  // each stream's from where the oldest of them starts writing it (bases:
  // stream -> its total then). A stream whose start is not known yet (the
  // oldest reads it) stays queued for after them.
  #next() {
    const bases = this.#bases();
    const now = (c) => !bases.has(c.stream) || bases.get(c.stream) >= 0;
    const batch = [...new Set(this.#inFlight())].filter(now);
    const later = [];
    for (const c of this.pending) (now(c) ? batch : later).push(c);
    this.pending = later;
    for (const [stream, total] of bases) if (total < 0) bases.delete(stream);
    return [batch, bases];
  }

  // #bases maps each stream a transaction in flight writes to its total
  // where the oldest of them starts writing it (-1: that one reads it).
  #bases() {
    const bases = new Map();
    for (const f of this.flying) {
      for (const [stream, total] of f.bases) if (!bases.has(stream)) bases.set(stream, total);
    }
    return bases;
  }

  // #unsettled are the commits not known to be written, each once, oldest
  // first: those the connection's loss ended, those in flight, the queued.
  #unsettled() {
    return [...new Set([...this.unwritten, ...this.#inFlight()]), ...this.pending];
  }

  // #inFlight are the commits of the transactions in flight, oldest first;
  // a commit is in each one that writes it.
  #inFlight() {
    return this.flying.flatMap((f) => f.batch);
  }

  // #ended follows a transaction in flight, f (they end in the order they
  // were made, but for one that cannot be made at all, which ends at once).
  // The last to end starts the next write, or drains. What a write lost
  // with its connection held is written again over the reopened one, once
  // the writes in flight have ended (#severed); what a write the engine
  // aborted (foreign) held, over the same connection, a little later
  // (#retry).
  #ended(f, err, foreign) {
    let retry = false;
    if (err && this.#severed(f.db, f.era)) {
      this.unwritten.push(...f.batch);
      this.#noteLost(f);
    } else if (f.crossed) {
      this.unwritten.push(...f.batch);
      this.#recount(f);
    } else if (err && foreign && transient(err) && this.aborts < ABORT_RETRIES) {
      this.aborts++;
      this.unwritten.push(...f.batch);
      this.#recount(f);
      retry = true;
    } else if (err) {
      this.#fallBack(); // replays every batch still in flight
      this.failed ??= err;
    } else {
      this.aborts = 0;
      this.mayReopen ||= f.era === this.era;
      // A later write holds the commits of those in flight when it was made.
      if (this.unwritten.length > 0) this.unwritten = this.unwritten.filter((c) => !f.batch.includes(c));
      if (f.final) this.#unspill(f.mark);
      this.#stored(f);
    }
    this.flying.splice(this.flying.indexOf(f), 1);
    if (this.flying.length > 0) return;
    if (!this.mem && this.unwritten.length > 0) {
      this.pending = [...new Set(this.unwritten), ...this.pending];
      this.unwritten = [];
      if (!retry) this.urgent = Math.max(this.urgent, NOW);
    }
    if (!this.mem) this.arena.keep(this.pending); // all that is not written yet
    if (!this.mem && this.pending.length > 0) {
      if (retry && this.urgent !== FINAL) this.#retry();
      else if (this.urgent) this.#write();
      else this.#wait();
      return;
    }
    this.#drain();
    if (this.failed) this.#report(reasonFor(this.failed), this.failed);
  }

  /**
   * crossed aborts the writes in flight, and the Blob probe, as the page
   * goes into the back/forward cache (see cached): each write is made again
   * once the page is shown again and its abort is heard (#ended), over a
   * read of what is stored (#recount), leaving out what is stored already:
   * WebKitGTK often commits the write all the same (its abort comes too
   * late, and it reports complete once shown), and the stored state
   * record's mark then is that write's (skipStored). Its seqs do not tell
   * (forget, skipRecorded): a runtime that numbers no messages (seq 0)
   * had the restored page store a whole run of messages twice (2 restored
   * pages in 10 in WebKitGTK, both modes).
   */
  crossed() {
    for (const f of this.flying) {
      f.crossed = true;
      try {
        f.tx?.abort();
      } catch {
        // ended already: #ended hears of it when the page is shown again
      }
    }
    if (this.probing) {
      try {
        this.probing.abort();
      } catch {
        // ended already
      }
      this.probing = null;
      this.blobs = BLOBS_UNKNOWN;
    }
  }

  // #stored notes f's mark as what its streams' records hold now, for the
  // spills made from now on (movedOn): a record found without it later was
  // written, or deleted, by another page. Not for a stream whose record
  // the store no longer knows (forget): its next write reads it again.
  #stored(f) {
    for (const c of f.batch) {
      const rec = this.known.get(c.stream);
      if (typeof rec?.base === "string") rec.base = f.mark;
    }
  }

  // #recount has the next write of each stream f wrote read the stream's
  // total within its transaction: f, aborted, did not add its entries, and
  // a write at the total counted with them would leave a gap in the
  // transcript. (The base stays: the record is as f found it.)
  #recount(f) {
    for (const c of f.batch) {
      const rec = this.known.get(c.stream);
      if (!rec) continue;
      rec.totalKnown = false;
      rec.made = (rec.made ?? 0) + 1; // a read in flight no longer sets it
    }
  }

  // #retry writes the queue again after a write the engine aborted, a
  // little later than the last time; a flush, a read or a new attachment
  // id write at once (hurry), the page going away too.
  #retry() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.#write(), this.aborts * ABORT_RETRY_MS);
  }

  // #again tells whether a read or a clear that failed with e, on try
  // number tries, is made again: once a little time has passed, when the
  // engine aborted it and it has tries left (see ABORT_RETRIES).
  async #again(e, tries) {
    if (this.mem || tries >= ABORT_RETRIES || !transient(e)) return false;
    await new Promise((resolve) => setTimeout(resolve, (tries + 1) * ABORT_RETRY_MS));
    return true;
  }

  #drain() {
    this.writing = false;
    for (const d of this.drained.splice(0)) d();
  }

  // #fallBack moves the store to memory after a failure: the memory starts
  // from the state of every stream this store has seen and replays the
  // batches still in flight and anything queued since. Transcripts already
  // in IndexedDB are not carried over.
  #fallBack() {
    if (this.mem) return;
    this.mem = new Map();
    for (const [stream, rec] of this.known) {
      this.mem.set(stream, { session: rec.session, cursor: rec.cursor, keep: 0, chunks: [], open: rec.open === true });
    }
    for (const c of this.#unsettled()) memCommit(this.mem, { ...c, bytes: c.bytes && c.bytes.slice() });
    this.pending = [];
    this.unwritten = [];
    this.arena = null;
    all.delete(this);
  }

  // #fallBackFor moves the store to memory for a read's or a clear's
  // failure e, reports it, and returns it as an Error.
  #fallBackFor(e) {
    const err = asError(e);
    this.#fallBack();
    this.#report(reasonFor(err), err);
    return err;
  }

  // #connected resolves once the store has a connection or is in memory:
  // at once, once the first open has settled, or once a connection that
  // closed under the store is opened again.
  #connected() {
    if (this.db || this.mem || !this.lost) return this.opened;
    this.lost = false;
    this.mayReopen = false;
    this.era++;
    this.opened = this.#reopen();
    return this.opened;
  }

  // #severed tells whether a failure over db (opened in era) came from
  // losing it, and the store may open the database again for what failed.
  // The connection is then closed or closing: a forced close aborts its
  // transactions before its close event, and a transaction can no longer be
  // made on it. A store reopens once, until a transaction over the new
  // connection completes: a database that loses each connection at once
  // sends it to memory, as any other failure does.
  #severed(db, era) {
    if (this.mem || (db && !closing(db))) return false;
    if (era < this.era) return true; // reopened since
    this.#lose(db);
    return this.mayReopen;
  }

  // #adopt makes db the store's connection. A connection can close under
  // the store: the browser closes it (its storage was cleared, or, on
  // iOS, WebKit's storage process went while the page was in the
  // background: "Connection to Indexed Database server lost"), or another
  // page deletes the database or upgrades its schema, and the store closes
  // it so as not to block that. The store then opens the database again
  // when it next needs it (#connected), rather than keep to memory for the
  // rest of the page's life: a deleted database is made afresh, and a newer
  // schema refuses the open, and the store falls back to memory then.
  #adopt(db) {
    db.onversionchange = () => this.#lose(db);
    db.onclose = () => this.#lose(db);
    this.db = db;
  }

  #lose(db) {
    try {
      db?.close();
    } catch {
      // closed already
    }
    if (!db || this.db !== db) return;
    this.db = null;
    this.lost = true;
  }

  // #reopen opens the database again for #connected. Every stream's total
  // is read again by its next write: the database may have been made
  // afresh. An open made while the browser is still clearing the storage
  // can be aborted (Chromium: AbortError, "The connection was closed", 7
  // of 28 opens made within milliseconds of DevTools' clear): such an open
  // is tried again, a few times, a little later each time.
  async #reopen() {
    let outcome = await connect(this.database);
    for (let i = 1; i <= REOPEN_RETRIES && Array.isArray(outcome) && outcome[1]?.name === "AbortError"; i++) {
      await new Promise((resolve) => setTimeout(resolve, i * REOPEN_RETRY_MS));
      outcome = await connect(this.database);
    }
    if (!(await this.#take(outcome))) return;
    this.forget();
  }

  /**
   * forget has each stream's next write read what is stored, in its own
   * transaction, rather than trust what the store knows of it: after a
   * reopen (the database may have been made afresh), and when the page is
   * shown again from the back/forward cache, whose slots the tab's next
   * page took as this one let them go (tabs.js suspendSlots), and wrote.
   * A write at a total known before would put its entries among that
   * page's, out of order, and over some of them. A page so restored
   * (restored) resumes from its own cursor, behind what that page
   * recorded: its next write leaves out what is recorded already
   * (skipRecorded).
   */
  forget(restored = false) {
    for (const rec of this.known.values()) {
      Object.assign(rec, { totalKnown: false, base: undefined, made: (rec.made ?? 0) + 1, restored: restored || rec.restored === true });
    }
  }

  #report(reason, err) {
    if (this.fallback) return;
    this.fallback = [reason, err?.name ?? "Error", err?.message ?? String(err)];
    this.onFallback?.();
  }

  async #open() {
    if (!(await this.#take(await (takeEarly(this.database) ?? connect(this.database))))) return;
    this.spillKey = `${spillPrefix(this.database)}${PAGE}:${++stores}`;
    all.add(this);
  }

  // #take makes outcome (connect's) the store's connection once the spills
  // of pages gone are finished over it, or falls back to memory; it says
  // whether it did the former.
  async #take(outcome) {
    if (Array.isArray(outcome)) {
      this.#fallBack();
      this.#report(outcome[0], asError(outcome[1]));
      return false;
    }
    try {
      await finishSpills(outcome, spillPrefix(this.database), created.has(outcome));
    } catch (e) {
      // Blocked: the spill stays for a later page to finish.
      outcome.close();
      this.#fallBack();
      this.#report(FALLBACK_BLOCKED, e);
      return false;
    }
    this.#adopt(outcome);
    return true;
  }
}

const early = new Map(); // database -> the connect started by openEarly, until a Store takes it
const created = new WeakSet(); // the connections whose open created their database

/**
 * openEarly starts opening database (STORE_DATABASE when empty) before any
 * Store asks for it: loadRelay calls it before it fetches relay.wasm, so
 * that the open runs while the module downloads and compiles rather than
 * after Go has started (on a reload, a few milliseconds of the time to
 * live). The first Store on the database takes the connection; a failure
 * is that Store's fallback, as if it had opened the database itself.
 */
export function openEarly(database) {
  database ||= STORE_DATABASE;
  if (!early.has(database)) early.set(database, connect(database));
}

function takeEarly(database) {
  const c = early.get(database);
  early.delete(database);
  return c;
}

// connect opens database and resolves with the connection, or with
// [reason, error] (FALLBACK_*) when it cannot be used. It never rejects.
function connect(database) {
  let req;
  try {
    // Reading indexedDB itself throws where storage is denied outright.
    const factory = globalThis.indexedDB;
    if (!factory) return Promise.resolve([FALLBACK_UNAVAILABLE, new Error("this page has no indexedDB")]);
    req = factory.open(database, STORE_VERSION);
  } catch (e) {
    return Promise.resolve([FALLBACK_UNAVAILABLE, e]); // e.g. a SecurityError in an opaque origin
  }
  return new Promise((resolve) => {
    // A page suspended, or its thread busy (an app starting), as the open
    // runs finds the timer late, and waits again: a late timer taken for an
    // open that never answers kept the page in memory for good, and its
    // attach started a fresh stream with an empty transcript.
    const stop = afterLimit(() => settle([FALLBACK_FAILED, new DOMException("opening IndexedDB took too long", "TimeoutError")]), OPEN_TIMEOUT_MS);
    const settle = (v) => {
      stop();
      if (Array.isArray(v)) {
        // An open given up on may still succeed: close it then, so that
        // it does not block the next page in turn.
        req.onsuccess = () => req.result.close();
      }
      resolve(v);
    };
    req.onupgradeneeded = (ev) => {
      if (ev.oldVersion === 0) created.add(req.result);
      try {
        createSchema(req.result);
      } catch (e) {
        settle([FALLBACK_FAILED, e]);
      }
    };
    req.onblocked = () => settle([FALLBACK_BLOCKED, new DOMException("another connection blocks opening IndexedDB", BLOCKED_ERROR)]);
    req.onerror = (ev) => {
      ev.preventDefault?.();
      settle([FALLBACK_FAILED, req.error]);
    };
    req.onsuccess = () => {
      // Never block a newer page that upgrades the schema; this page's
      // next transaction fails and the store falls back to memory.
      req.result.onversionchange = () => req.result.close();
      settle(req.result);
    };
  });
}

// closing tells whether db is closed or closing: a transaction can no
// longer be made on it.
function closing(db) {
  try {
    db.transaction(STORE_STATE, "readonly");
    return false;
  } catch {
    return true;
  }
}

function createSchema(db) {
  for (const name of [STORE_STATE, STORE_CHUNKS]) {
    if (!db.objectStoreNames.contains(name)) db.createObjectStore(name);
  }
}

// coalesce merges the commits of one stream, keeping the streams' order:
// the last state wins and the chunks are concatenated (no chunk is kept
// when the last keep is 0).
function coalesce(batch) {
  const out = [];
  const at = new Map();
  for (const c of batch) {
    const i = at.get(c.stream);
    if (i === undefined) {
      at.set(c.stream, out.length);
      out.push({ ...c, parts: c.bytes ? [c.bytes] : [], from: [c] });
      continue;
    }
    const m = out[i];
    Object.assign(m, { session: c.session, cursor: c.cursor, keep: c.keep, open: c.open });
    if (c.keep <= 0) {
      m.parts = [];
      m.n = 0;
      m.from = [];
    } else if (c.bytes) {
      m.parts.push(c.bytes);
      m.n += c.n;
      m.from.push(c);
    }
  }
  return out;
}

// writeStreams writes coalesced commits in one readwrite transaction and
// calls done(null), or done(error) when it failed; it returns the
// transaction (undefined when none could be made). A stream whose total
// this store does not know reads it first, within the transaction. The
// state records carry mark. A final write issues every request now and
// commits at once (trimming waits for the next write). Chunks go as Blobs
// when blobs is set, else as bytes.
//
// known is brought up to date as the transaction is made, not when it
// ends, so that a transaction made while this one is in flight (and run
// after it by IndexedDB) counts this one's entries. A total read here is
// known once the read returns, unless a later transaction has been made for
// the stream since (that one reads it in turn). After a failure the store
// is in memory, and known's totals no longer matter.
function writeStreams(db, keys, known, streams, bases, mark, final, blobs, done) {
  let tx;
  let failed = null;
  const fail = (e) => {
    // A request on a transaction another aborted (the engine) meanwhile:
    // that abort, foreign, is what ends it.
    if (e?.name === "TransactionInactiveError") return;
    failed ??= asError(e);
    try {
      tx.abort();
    } catch {
      // already finished or aborted: onabort reports it
    }
  };
  try {
    tx = db.transaction([STORE_STATE, STORE_CHUNKS], "readwrite");
  } catch (e) {
    done(asError(e));
    return;
  }
  // A write that another connection keeps from ending is given up on: it
  // is aborted, and ends now, whether or not the engine ever tells of the
  // abort (a commit after that writes what it holds, and nothing passes
  // the stored cursor). The store then falls back to memory (#ended).
  let ended = false;
  const end = (err, foreign = false) => {
    if (ended) return;
    ended = true;
    limit();
    done(err, foreign);
  };
  const limit = afterLimit(() => {
    fail(blockedError("a write of the streams' state"));
    end(failed);
  });
  tx.oncomplete = () => end(null);
  // An abort the store did not make (failed unset) is the engine's, or
  // a request's that failed in it: foreign, which #ended may try again.
  tx.onabort = () => end(failed ?? asError(tx.error ?? new DOMException("the transaction was aborted", "AbortError")), failed === null);
  let reads = 0;
  try {
    const states = tx.objectStore(STORE_STATE);
    const chunks = tx.objectStore(STORE_CHUNKS);
    for (const c of streams) {
      const key = keys[c.stream];
      const rec = known.get(c.stream);
      c.total = bases.has(c.stream) ? bases.get(c.stream) : rec.totalKnown ? rec.total : -1;
      if (c.total >= 0 && rec.past > 0) rec.past = skipRecorded(c, rec.past);
      const made = (rec.made = (rec.made ?? 0) + 1);
      rec.keep = c.keep;
      rec.totalKnown = c.total >= 0 || c.keep <= 0;
      if (rec.totalKnown) rec.total = c.keep <= 0 ? 0 : c.total + c.n;
      const put = (total) => {
        if (c.keep <= 0) {
          if (total !== 0) chunks.delete(chunkRange(key, 0, MAX_CHUNK_KEY, false));
          total = 0;
        } else if (c.n > 0) {
          c.chunk = chunkOf(c, blobs); // once its entries are known (skipRecorded)
          chunks.put(c.chunk, [...key, total]);
          total += c.n;
          if (!final) trim(chunks, key, total - c.keep, fail);
        }
        states.put(stateRecord(c, total, mark), key);
      };
      if (c.total >= 0) {
        put(c.total);
        continue;
      }
      reads++;
      const restored = rec.restored === true;
      const req = states.get(key);
      req.onsuccess = () => {
        try {
          c.total = typeof req.result?.total === "number" ? req.result.total : 0;
          skipStored(c, markOf(req.result));
          const past = restored ? skipRecorded(c, recordedBy(req.result, c)) : 0;
          const now = known.get(c.stream); // a commit since replaced rec
          if (now.made === made) Object.assign(now, { total: c.keep <= 0 ? 0 : c.total + c.n, totalKnown: true, base: now.base ?? markOf(req.result), past, restored: false });
          put(c.total);
        } catch (e) {
          fail(e);
        }
      };
    }
    if (final && reads === 0) tx.commit?.();
  } catch (e) {
    fail(e);
  }
  return tx;
}

// chunkOf is the chunk of coalesced commits c: a Blob when blobs is set.
function chunkOf(c, blobs) {
  return blobs && c.parts.length > 0 ? new Blob(c.parts) : concat(c.parts);
}

// recordedBy is the cursor up to which the stored state record holds the
// transcript of coalesced commits c's stream: a page shown again from the
// back/forward cache resumes from its own cursor, and brings again what the
// tab's next page, which took its slots meanwhile, received and recorded
// (Store.forget). 0 for a record of another attachment, whose seqs are
// not c's. Only for such a page's first write: a stream the runtime
// restarted (cursor_evicted) counts its seqs from 1 again on the same
// attachment, behind its own stored cursor, and they are all new.
function recordedBy(stored, c) {
  const state = readState(stored);
  return state.session === c.session ? state.cursor : 0;
}

// skipRecorded drops from coalesced commits c the entries a transcript
// at cursor past holds already (entries.js unrecorded), so that they are
// not stored twice, and keeps the stored cursor from going back to c's. It
// returns what the stream's later writes must still skip: nothing once c
// reaches past, as later entries come after c's cursor.
function skipRecorded(c, past) {
  if (past <= 0 || c.keep <= 0) return 0;
  [c.parts, c.n] = unrecorded(c.parts, past);
  const behind = c.cursor < past;
  c.cursor = Math.max(c.cursor, past);
  return behind ? past : 0;
}

// skipStored drops from coalesced commits c, read over a stored state
// record marked stored, the commits a write of that mark held: that write
// committed, and they are in the transcript already. A write that did not
// commit left another mark (or none), and its commits are all kept. Only
// this page's marks match: each commit notes those of the writes that held
// it (#write). (A write the store had given up on, as the page went into
// WebKit's back/forward cache, may have committed all the same: crossed.)
function skipStored(c, stored) {
  if (!stored || !c.from.some((x) => x.marks?.has(stored))) return;
  c.from = c.from.filter((x) => !x.marks?.has(stored));
  c.parts = c.from.flatMap((x) => (x.bytes ? [x.bytes] : []));
  c.n = c.from.reduce((n, x) => n + x.n, 0);
}

// trim deletes the chunks of key that hold only entries before index first.
// The chunk holding entry first starts at or before it; every chunk before
// that one ends before first.
function trim(store, key, first, fail) {
  if (first <= 0) return;
  const req = store.openKeyCursor(chunkRange(key, 0, first, false), "prev");
  req.onsuccess = () => {
    try {
      const from = req.result?.key[3] ?? 0;
      if (from > 0) store.delete(chunkRange(key, 0, from, true));
    } catch (e) {
      fail(e);
    }
  };
}

// spillPrefix begins the spill keys of the stores on a database.
function spillPrefix(database) {
  return `${STORE_SPILL}:${encodeURIComponent(database)}:`;
}

// sessionStore is the page's sessionStorage, or null (a worker, or storage
// refused: reading the property can throw).
function sessionStore() {
  try {
    return globalThis.sessionStorage ?? null;
  } catch {
    return null;
  }
}

// finishSpills writes what the spills under prefix hold and IndexedDB does
// not, and drops them; the spills of this page's live stores are theirs.
// A spill that cannot be written is put back, for the next page. Over a
// database its open created (fresh) every spill is dropped unwritten.
async function finishSpills(db, prefix, fresh) {
  const storage = sessionStore();
  if (!storage) return;
  const live = new Set([...all].map((s) => s.spillKey));
  const taken = [];
  try {
    for (let i = 0; i < storage.length; i++) {
      const k = storage.key(i);
      if (k?.startsWith(prefix) && !live.has(k)) taken.push([k, storage.getItem(k)]);
    }
    for (const [k] of taken) storage.removeItem(k);
  } catch {
    return;
  }
  const entries = fresh ? [] : taken.flatMap(([, v]) => readSpill(v));
  if (entries.length === 0) return;
  try {
    await bounded(completed(writeSpill(db, entries)), "finishing the previous page's writes");
  } catch (e) {
    try {
      for (const [k, v] of taken) storage.setItem(k, v);
    } catch {
      // nothing more to be done
    }
    if (e?.name === BLOCKED_ERROR) throw e;
  }
}

// writeSpill writes, in one transaction, each spilled entry whose final
// write did not commit (see the top of this file) and which continues what
// is stored, where that write would have (start -1: after what is stored).
function writeSpill(db, entries) {
  const tx = db.transaction([STORE_STATE, STORE_CHUNKS], "readwrite");
  const states = tx.objectStore(STORE_STATE);
  const chunks = tx.objectStore(STORE_CHUNKS);
  for (const e of entries) {
    const req = states.get(e.key);
    req.onsuccess = () => {
      if (written(req.result?.mark, e.mark)) return;
      // A spill continues what is stored: with the record gone (the storage
      // was cleared since) or short of where it starts, it is not written;
      // nor over a record another page wrote since the spill's page last
      // knew it (base): another tab's later cursor, or its detach.
      if (movedOn(req.result, e)) return;
      const stored = readState(req.result);
      if (e.start < 0 ? req.result == null : e.start > stored.total) return;
      let total = e.start >= 0 ? e.start : stored.total;
      if (e.keep <= 0) {
        chunks.delete(chunkRange(e.key, 0, MAX_CHUNK_KEY, false));
        total = 0;
      } else if (e.n > 0 && e.bytes) {
        chunks.put(fromBase64(e.bytes), [...e.key, total]);
        total += e.n;
      }
      states.put(stateRecord(e, total, e.mark), e.key);
    };
  }
  return tx;
}

// written tells whether a state record marked stored holds the write
// marked mark: it is that write's, or a later one's of the same page.
function written(stored, mark) {
  if (typeof stored !== "string") return false;
  const page = pageOf(mark);
  return stored.startsWith(page) && Number(stored.slice(page.length)) >= Number(mark.slice(page.length));
}

// pageOf is the page part of a write's mark ("page/"), which its number follows.
function pageOf(mark) {
  return mark.slice(0, mark.lastIndexOf("/") + 1);
}

// movedOn tells whether the state record stored is another's than the one
// spill entry e's page last knew there (e.base: the mark of its own last
// write known to have committed, or of the record as it found it, "" for
// none; null when it did not know), and not one of that page's own later
// writes.
function movedOn(stored, e) {
  if (typeof e.base !== "string") return false;
  const mark = markOf(stored);
  return mark !== e.base && !mark.startsWith(pageOf(e.mark));
}

// markOf is the mark of a state record, or "" for none (or one unmarked).
function markOf(v) {
  return typeof v?.mark === "string" ? v.mark : "";
}

// readSpill is the entries of a spill's text, or none when it is not one.
function readSpill(text) {
  try {
    const v = JSON.parse(text);
    return Array.isArray(v) ? v.filter(isSpillEntry) : [];
  } catch {
    return [];
  }
}

function isSpillEntry(e) {
  const num = (x) => typeof x === "number" && Number.isSafeInteger(x);
  return (
    e !== null && typeof e === "object" && typeof e.mark === "string" && Array.isArray(e.key) && e.key.length === 3 &&
    typeof e.session === "string" && num(e.cursor) && num(e.keep) && num(e.start) && num(e.n) && typeof e.bytes === "string"
  );
}

function toBase64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function fromBase64(text) {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/**
 * Arena keeps the bytes of a store's commits from the commit to the write:
 * one buffer, reused from window to window, rather than an array of its
 * own per commit. A new array's memory is new to the page too, and the
 * engine pays for every page of it again (a 700 KB array took 1.7 ms to
 * make and fill here, the same bytes copied into a used one 0.07 ms).
 */
class Arena {
  constructor() {
    this.buf = new Uint8Array(0); // made on the first copy
    this.end = 0;
  }

  /** copy returns a view of the arena that holds a copy of bytes. */
  copy(bytes) {
    if (this.end + bytes.length > this.buf.length) {
      // The views of the old buffer stay valid: nothing writes it again.
      this.buf = new Uint8Array(Math.max(ARENA_MIN, 2 * this.buf.length, 2 * bytes.length));
      this.end = 0;
    }
    const view = this.buf.subarray(this.end, this.end + bytes.length);
    view.set(bytes);
    this.end += bytes.length;
    return view;
  }

  /**
   * keep moves the bytes of commits, the only ones still needed, to the
   * start of the arena and points the commits at them; the rest of the
   * arena is free again. Bytes in a buffer copy has since replaced stay
   * where they are, valid, until their commits are written. A buffer a
   * burst left large is replaced by a small one once a quarter is in use.
   */
  keep(commits) {
    const here = commits.filter((c) => c.bytes?.buffer === this.buf.buffer).sort((a, b) => a.bytes.byteOffset - b.bytes.byteOffset);
    const size = here.reduce((n, c) => n + c.bytes.length, 0);
    const from = this.buf;
    if (from.length > ARENA_MAX && 4 * size < from.length) this.buf = new Uint8Array(Math.max(ARENA_MIN, 2 * size));
    let off = 0;
    for (const c of here) {
      // In order, each moves down to where no other waits to be moved.
      const { byteOffset, length } = c.bytes;
      if (this.buf === from) this.buf.copyWithin(off, byteOffset, byteOffset + length);
      else this.buf.set(c.bytes, off);
      c.bytes = this.buf.subarray(off, off + length);
      off += length;
    }
    this.end = off;
  }
}
const ARENA_MIN = 64 << 10;
const ARENA_MAX = 4 << 20; // larger, it shrinks once a quarter is in use

// A store's knowledge of whether its database takes Blobs.
const BLOBS_UNKNOWN = 0; // not probed: no chunk written yet
const BLOBS_PROBING = 1;
const BLOBS_YES = 2;
const BLOBS_NO = 3;

// PROBE_KEY is where probeBlobs puts its Blob: no stream's chunk range
// holds it ([url] sorts before every [url, instance, name, start]).
const PROBE_KEY = ["relaywasm:probe"];

/**
 * probeBlobs finds whether db takes a Blob in a put: it puts one, and
 * deletes it, in a transaction of its own, which it returns (null when
 * none could be made); it completes where Blobs go. Safari's private browsing
 * refuses Blobs in IndexedDB (webkit.org/b/156347): its put throws a
 * DataCloneError, and a network process that cannot write the Blob fails
 * the transaction instead. Either way the chunks then go as bytes, as they
 * always could, rather than failing a transaction that holds the cursor.
 */
function probeBlobs(db) {
  try {
    const tx = db.transaction(STORE_CHUNKS, "readwrite");
    const chunks = tx.objectStore(STORE_CHUNKS);
    chunks.put(new Blob([new Uint8Array(1)]), PROBE_KEY).onerror = (ev) => ev.stopPropagation(); // the abort reports it
    chunks.delete(PROBE_KEY);
    return tx;
  } catch {
    return null;
  }
}

/** readChunks is the bytes of chunks (Blobs and Uint8Arrays) one after the other, or null for none. */
async function readChunks(chunks) {
  if (!chunks.some((c) => c instanceof Blob)) return concat(chunks);
  return new Uint8Array(await new Blob(chunks).arrayBuffer());
}

function chunkRange(key, from, to, upperOpen) {
  return IDBKeyRange.bound([...key, from], [...key, to], false, upperOpen);
}

// memCommit applies a commit to a store in memory, keeping whole chunks
// while the newer ones hold fewer than keep entries (Go trims the rest).
function memCommit(mem, c) {
  const st = mem.get(c.stream) ?? { session: "", cursor: 0, keep: 0, chunks: [] };
  mem.set(c.stream, st);
  st.session = c.session;
  st.cursor = c.cursor;
  st.keep = c.keep;
  st.open = c.open === true;
  if (c.keep <= 0) {
    st.chunks = [];
    return;
  }
  if (c.bytes && c.n > 0) st.chunks.push({ n: c.n, bytes: c.bytes });
  let n = st.chunks.reduce((sum, ch) => sum + ch.n, 0);
  while (st.chunks.length > 1 && n - st.chunks[0].n >= c.keep) n -= st.chunks.shift().n;
}

function readState(v) {
  const num = (x) => (typeof x === "number" ? x : 0);
  if (v === null || typeof v !== "object") return { session: "", cursor: 0, total: 0, keep: 0, open: false };
  return { session: typeof v.session === "string" ? v.session : "", cursor: num(v.cursor), total: num(v.total), keep: num(v.keep), open: v.open === true };
}

// stateRecord is the state record of c (a commit, or a spilled one) at
// total, written by mark. open (client.Saved.PlaceOpen) is there only when
// set: a record without it, as every record written before it was kept,
// reads as no place open.
function stateRecord(c, total, mark) {
  const rec = { session: c.session, cursor: c.cursor, total, keep: c.keep, mark };
  if (c.open === true) rec.open = true;
  return rec;
}

// transient tells whether a transaction's failure err, not of the store's
// making, may not happen again: an abort (AbortError: the engine's, or
// another script's), or WebKit's UnknownError for what its storage process
// could not do (the requests of a transaction it aborted for a suspension
// fail so). A refused value, a key out of order, the quota happen again.
function transient(err) {
  return err?.name === "AbortError" || err?.name === "UnknownError";
}

function reasonFor(err) {
  if (err?.name === BLOCKED_ERROR) return FALLBACK_BLOCKED;
  return err?.name === "QuotaExceededError" ? FALLBACK_QUOTA : FALLBACK_FAILED;
}

// bounded settles as p does, or fails with a BlockedError once
// BLOCKED_LIMIT_MS have passed: what for says what was waiting.
function bounded(p, what) {
  let stop;
  const limit = new Promise((_, reject) => {
    stop = afterLimit(() => reject(blockedError(what)));
  });
  return Promise.race([p, limit]).finally(() => stop());
}

// afterLimit calls fn once the page has waited ms (BLOCKED_LIMIT_MS
// unless given), and returns what cancels it. A timer that fires late
// starts the wait over: the page was suspended (a phone's background tab,
// the back/forward cache, a frozen page) and its transactions with it, or
// its thread was busy (an app starting) while IndexedDB's answer waited
// behind it, which is not another connection's doing, nor an open that
// never answers; a running page's timer fires on time, give or take its
// load.
function afterLimit(fn, ms = BLOCKED_LIMIT_MS) {
  let timer;
  const arm = () => {
    const due = Date.now() + ms;
    timer = setTimeout(() => (Date.now() - due > LATE_MS ? arm() : fn()), ms);
  };
  arm();
  return () => clearTimeout(timer);
}

function blockedError(what) {
  return new DOMException(`${what} waited ${BLOCKED_LIMIT_MS / 1000} s for another connection to IndexedDB (another page's unfinished transaction)`, BLOCKED_ERROR);
}

/**
 * concat is the parts one after the other, or null for none: a part of its
 * own, or a new array. Never a view of a larger buffer: IndexedDB would
 * store all of that buffer.
 */
export function concat(parts) {
  if (parts.length === 0) return null;
  if (parts.length === 1 && parts[0].byteLength === parts[0].buffer.byteLength) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = (ev) => {
      ev.stopPropagation(); // the transaction's own abort is reported by who waits for it
      reject(asError(req.error));
    };
  });
}

function completed(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(asError(tx.error ?? new DOMException("the transaction was aborted", "AbortError")));
  });
}
