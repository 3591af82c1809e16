// relay.js: the JavaScript API of relaywasm (relay.d.ts documents every
// name). This file is the public API only: loadRelay, Relay, Attachment and
// RelayError. The rest of relay.js is one module per concern:
//
//   boundary.js   the constants shared with relay.wasm (generated from Go)
//   bridge.js     the one object relay.wasm calls, and calls into Go
//   crossing.js   Go's callbacks, the byte buffers, the event-loop turn
//   sockets.js    the WebSockets and the delivery of parsed messages
//   records.js    a socket's messages as the records Go reads
//   held.js       a transcript's payload texts, held from the flush to the commit
//   entries.js    transcript entries: packed here, and held payloads put in
//   store.js      stream state in IndexedDB
//   tabs.js       one attachment per stream in the browser (Web Locks)
//   locks.js      Web Locks, or a stand-in where a page has none
//   lifecycle.js  online, offline, hidden and pagehide
//   load.js       starting relay.wasm
//   compile.js    fetching and compiling relay.wasm
//   preload.js    not imported: a page's own script that starts the compile early
//   errors.js     RelayError, and only Errors across the boundary
//   attachment.js what an Attachment is in either mode: handlers, token, checks
//   stream.js     att.stream(): the official ACP SDK's Stream over an attachment
//   remote.js     worker mode, the page's side: the worker and the proxies
//   worker.js     worker mode, the worker's side: relay.wasm in a Web Worker
//
// relay.wasm (Go) holds the client engine; these modules own what is
// cheaper, or only possible, on the JavaScript side. There is no eval and
// no new Function anywhere, so pages with a strict Content-Security-Policy
// can load them. They run as they are; each entry (relay.js, worker.js,
// preload.js) ships as one file holding what it imports (jsbridge/bundle).

import { BaseAttachment, checkAttach, checkCursor, meta, sendArgs, streamOf } from "./attachment.js";
import { ABORTED, CODE_BAD_OPTIONS, CODE_CANCELED, CODE_SUPERSEDED, DONE_OK } from "./boundary.js";
import { bridge } from "./bridge.js";
import { checkSignal, kindOf, RelayError, report, settling } from "./errors.js";
import { listenToLifecycle } from "./lifecycle.js";
import { pageURL } from "./compile.js";
import { start } from "./load.js";
import { lockManager } from "./locks.js";
import { DELIVERY, FINAL, startWorker } from "./remote.js";
import { openEarly } from "./store.js";
import { PAUSED } from "./stream.js";
import { holdEarlyWhile, lockRemembered, slotLock, tabEnv, takeSlot } from "./tabs.js";

export { RelayError };

const B = bridge();

let starting = null;

// earlyLocks asks for a reloaded page's slot locks now (tabs.js
// lockRemembered), and starts the stand-in for Web Locks of a page that has
// none, so that it has heard who holds what by the time it attaches
// (locks.js). Worker mode's worker needs no stand-in: its page holds its
// locks. A load keeps them EARLY_HOLD_MS past its end, if that is later
// (tabs.js holdEarlyWhile).
function earlyLocks() {
  if (typeof document === "object") lockManager();
  lockRemembered();
}

/**
 * Loads and starts relay.wasm (once per page) and returns a Relay. When the
 * page's Go program is already running and has registered the API (a page
 * that instantiated relay.wasm itself, or a Go test binary), nothing is
 * loaded. A call with the options of an earlier one (database, storage,
 * commitWindowMs, worker) gets that call's Relay: a component that loads on
 * every mount costs nothing after the first, where each call had made a
 * Store in relay.wasm, with a goroutine and an IndexedDB connection, for
 * the life of the page.
 */
export async function loadRelay(options = {}) {
  const [wanted, window] = relayOptions(options); // before anything loads, in either mode
  checkWasm(options.wasm);
  const { signal } = options;
  if (signal?.aborted) throw new RelayError(CODE_CANCELED, ABORTED);
  const database = typeof options.database === "string" ? options.database : ""; // relay.wasm reads another as ""
  const key = JSON.stringify([database, wanted, window, options.worker === true]);
  let made = relays.get(key);
  if (made === undefined) {
    const claimed = claimWasm(options.wasm);
    made = newRelay(options, database, wanted, window);
    relays.set(key, made);
    made.then(
      () => (wasmRuns = true),
      () => {
        if (relays.get(key) === made) relays.delete(key); // the next call tries again
        if (claimed && !wasmRuns && B.api === null) wasmFrom = null;
      },
    );
  }
  return signal ? untilAborted(made, signal) : made;
}

// untilAborted is loading, or canceled once signal aborts. The load goes
// on (what fetches relay.wasm takes no signal): a later loadRelay with the
// same options waits for it.
function untilAborted(loading, signal) {
  return new Promise((resolve, reject) => {
    const call = settling(signal, () => reject(new RelayError(CODE_CANCELED, ABORTED)), resolve, reject);
    loading.then(call.resolve, call.reject);
  });
}

const relays = new Map(); // loadRelay's options (its key) -> the Promise of their Relay

// The default relay.wasm, beside relay.js (as load.js and remote.js load
// it); where relay.js's own URL is no base (a Go test binary's page), just
// that.
function wasmBeside() {
  try {
    return new URL("./relay.wasm", import.meta.url).href;
  } catch {
    return "relay.wasm beside relay.js";
  }
}

// relay.wasm runs once per page, so a wasm option other than the one the
// page loaded it from cannot be honoured: it is refused, not quietly
// ignored. What a load asked for (wasmOf) is kept from the first load on,
// and let go only if that load failed before relay.wasm ran.
let wasmFrom = null;
let wasmRuns = false; // a loadRelay succeeded

// wasmOf is what identifies a wasm option: a URL's absolute href (the
// default's when none), a Response's url, or else the object itself.
function wasmOf(wasm) {
  if (wasm === undefined) return wasmBeside();
  if (wasm instanceof WebAssembly.Module) return wasm;
  if (wasm instanceof Response) return wasm.url || wasm;
  try {
    return pageURL(wasm);
  } catch {
    return wasm; // not a URL: the load reports it
  }
}

// checkWasm refuses a wasm option other than the one relay.wasm is loaded
// (or loading) from. A call without one takes whatever the page loaded.
function checkWasm(wasm) {
  if (wasm === undefined || wasmFrom === null) return;
  const asked = wasmOf(wasm);
  if (asked === wasmFrom) return;
  const name = (w) => (typeof w === "string" ? w : w instanceof WebAssembly.Module ? "a WebAssembly.Module" : "a Response");
  throw new RelayError(
    CODE_BAD_OPTIONS,
    `wasm is ${name(asked)}, but this page loads relay.wasm from ${name(wasmFrom)}: it runs once per page, and every Relay shares it (give the same wasm, or none)`,
  );
}

// claimWasm makes a load's wasm the page's, if no load has yet; it says
// whether it did.
function claimWasm(wasm) {
  if (wasmFrom !== null) return false;
  wasmFrom = wasmOf(wasm);
  return true;
}

// newRelay is loadRelay's work for options it has not been called with.
async function newRelay(options, database, wanted, window) {
  let reason = "";
  if (options.worker === true && typeof Worker === "function" && typeof document === "object") {
    earlyLocks(); // the page holds its worker's slot locks (tabs.js tabEnv)
    try {
      const started = startWorker(options);
      holdEarlyWhile(started);
      return await started;
    } catch (e) {
      if (e?.[FINAL]) throw e;
      // The worker could not start (a Content-Security-Policy, no module
      // workers, a failed load): the main thread does the work instead.
      reason = String(e?.message ?? e);
      console.warn("relay.js: worker mode failed, running on the main thread:", reason);
    }
  } else if (options.worker === true) {
    reason = "this context has no Web Workers";
  }
  if (!B.api) {
    // The slot locks and the Relay's database, while relay.wasm loads.
    earlyLocks();
    if (wanted === "indexeddb") openEarly(database);
    starting ??= start(B, options).catch((e) => {
      starting = null;
      throw e;
    });
    holdEarlyWhile(starting);
    await starting;
  }
  const handle = B.nextHandle++;
  const storage = await B.call("relay", [handle, database, wanted, window]);
  return new Relay(handle, storage, reason);
}

// relayOptions checks what loadRelay's Relay is made with: [storage,
// commit window (-1: the default)]. Checked before relay.wasm loads, so a
// bad option in worker mode is refused as it is on the main thread, not
// taken for a worker that cannot start (which had the main thread load
// relay.wasm for nothing).
function relayOptions(options) {
  if (typeof options !== "object" || options === null) {
    throw new RelayError(CODE_BAD_OPTIONS, `loadRelay's options must be an object, not ${kindOf(options)}`);
  }
  const wanted = options.storage ?? "indexeddb";
  if (wanted !== "indexeddb" && wanted !== "memory") {
    throw new RelayError(CODE_BAD_OPTIONS, `storage must be "indexeddb" or "memory", not ${JSON.stringify(wanted)}`);
  }
  checkSignal(options.signal);
  const window = options.commitWindowMs ?? -1; // -1: the default
  if (options.commitWindowMs !== undefined && !(Number.isFinite(window) && window >= 0)) {
    throw new RelayError(CODE_BAD_OPTIONS, "commitWindowMs must be a duration in milliseconds");
  }
  return [wanted, window];
}

class Relay {
  #handle;

  constructor(handle, storage, reason) {
    this.#handle = handle;
    /** Where stream state is kept: "indexeddb", or "memory" when IndexedDB failed. */
    this.storage = storage;
    /** Where relay.wasm runs: "main" here; remote.js's Relay says "worker". */
    this.mode = "main";
    /** Why not in a worker when one was asked for, else "". */
    this.reason = reason;
  }

  async attach(options) {
    const o = normalise(options);
    if (B.gone) throw B.gone; // before a slot is taken for nothing
    listenToLifecycle(B);
    const inst = instanceKey(o.url, o.instance);
    let slot;
    const taking = (async () => {
      await forgetting.get(inst)?.catch(() => {}); // a forget of the instance's under way ends first
      slot = await takeSlot(o.url, o.instance, o.name, options.signal);
    })();
    track(attaching, inst, taking); // a forget of the instance's waits for the slot to be taken
    await taking;
    const a = new Attachment(B.nextHandle++, slot, options);
    a._stream = slotLock(o.url, o.instance, slot.name);
    B.attachments.set(a._handle, a);
    try {
      a._place = await B.call("attach", [this.#handle, a._handle, { ...o, name: slot.name }], options.signal);
      a._attached = true;
    } catch (e) {
      B.attachments.delete(a._handle);
      await slot.release();
      throw e;
    }
    return a;
  }

  /**
   * history reads a stream's stored transcript, as its attachment's
   * history() would, without attaching: no socket, no slot. attach resolves
   * only once the relay has answered, so a page reloaded offline, or while
   * the relay is down, draws the conversation from this meanwhile.
   */
  async history(stream) {
    const key = streamOf(stream, "history");
    return parseHistory(await B.call("stored", [this.#handle, key.url, key.instance, key.name]));
  }

  /**
   * forget deletes what this Relay's storage holds of a stream (its state
   * and transcript), without a socket: see relay.d.ts. The stream's slot is
   * held meanwhile, so no attach of this page or another tab reads it half
   * deleted; an attachment that holds it, here or in another tab, refuses
   * the forget at once (no wait: a logout closes its attachments first, and
   * close() and detach() resolve once the slot is free).
   */
  async forget(stream) {
    const key = streamOf(stream, "forget");
    const lock = slotLock(key.url, key.instance, key.name);
    const inst = instanceKey(key.url, key.instance);
    const taking = attaching.get(inst);
    const before = forgetting.get(inst);
    const done = (async () => {
      await Promise.allSettled([taking, before]);
      if (attachedHere(lock)) refuse("an attachment of this page", key.name);
      const release = await holdSlot(lock, key.name);
      try {
        await B.call("stored", [this.#handle, key.url, key.instance, key.name, true]); // Store.Clear (api.go apiStored)
      } finally {
        await release();
      }
    })();
    track(forgetting, inst, done);
    await done;
  }
}

// The slots this page is taking (attach, until takeSlot gave the
// attachment one) and the forgets under way, by relay and instance: an
// attach waits for the instance's forgets under way, and a forget for the
// instance's attaches taking a slot, before it looks whether this page
// holds the stream. By instance, not by stream: an attach of "chat" may
// take "chat#2" (takeSlot), which a forget of "chat#2" would otherwise
// hold, and the attach take "chat#3". Taking a slot is quick (a lock), so
// the waits are short, though an attach may wait for the forget of another
// stream of its instance.
const attaching = new Map(); // instanceKey -> all its slots being taken settled
const forgetting = new Map(); // instanceKey -> all its forgets under way settled

// track adds p to what waits[key] stands for, until every p added settled.
function track(waits, key, p) {
  const all = Promise.allSettled([waits.get(key), p]);
  waits.set(key, all);
  all.then(() => {
    if (waits.get(key) === all) waits.delete(key);
  });
}

function instanceKey(url, instance) {
  return `${url}\u0000${instance}`;
}

// attachedHere says whether an attachment of this page holds the stream
// whose slot is lock.
function attachedHere(lock) {
  return [...B.attachments.values()].some((a) => a._stream === lock);
}

// refuse rejects a forget of the stream name that an attachment holds.
function refuse(who, name) {
  throw new RelayError(CODE_BAD_OPTIONS, `forget: ${who} holds the stream ${JSON.stringify(name)}: close() or detach() it first`);
}

// holdSlot takes the slot lock of the stream forget is to delete, and
// resolves to its release. The page's own attaches wait for the forget
// (attach), so a lock that is not free is held elsewhere: another tab's
// attachment, or one of another Relay of this page, one in worker mode
// beside one on the main thread (two relay.wasm, each with attachments of
// its own), which the page's locks tell (tabs.js heldHere). Where the page has no locks (tabs.js unlocked: a page of no
// origin of its own), no other page shares its storage either.
async function holdSlot(lock, name) {
  let release;
  try {
    release = await tabEnv.lock(lock, 0);
  } catch (e) {
    if (e?.name === "SecurityError" || e?.name === "NotSupportedError") return async () => {};
    throw e;
  }
  if (release === null) refuse(tabEnv.heldHere(lock) ? "an attachment of another Relay of this page" : "an attachment in another tab", name);
  return release;
}

// parseHistory reads relay.wasm's transcript text ([[out, seq, payload], …],
// a loss [0, 0, null, {reason, afterSeq, fromSeq}]).
function parseHistory(text) {
  return JSON.parse(text).map(([out, seq, message, lost]) => (lost ? { out: false, seq, lost } : { out: out === 1, seq, message }));
}

// normalise is attach's options as relay.wasm takes them: checked as in
// either mode (attachment.js checkAttach), 0 standing for a default.
function normalise(options) {
  const o = checkAttach(options);
  const or0 = (v) => v ?? 0;
  return {
    url: o.url,
    instance: o.instance,
    name: o.name,
    history: o.history,
    relayKey: o.relayKey ?? "",
    handshakeTimeoutMs: or0(o.handshakeTimeoutMs),
    resumeTimeoutMs: or0(o.resumeTimeoutMs),
    backoffInitialMs: or0(o.backoff.initialMs),
    backoffMaxMs: or0(o.backoff.maxMs),
    heartbeatIntervalMs: or0(o.heartbeat.intervalMs),
    heartbeatTimeoutMs: or0(o.heartbeat.timeoutMs),
    sendQueue: or0(o.sendQueue),
    maxSendBytes: or0(o.maxSendBytes),
  };
}

// Why a page's attachment ended when another tab took its slot (tabs.js).
const TAKEN = "another tab took this stream while the page was in the back/forward cache";

class Attachment extends BaseAttachment {
  #slot;
  #last = { state: "connecting", cursor: 0, session: "" }; // kept for after the end
  #over = false; // close() or detach() was called, or the attachment ended: no more deliveries
  #held = null; // {waitID, n}: the batch a handler's Promise holds, n of it accepted before
  // The seq and session of the last message the handlers accepted in the
  // delivery under way (seq 0: none), which Go counts only when it ends.
  #tookSeq = 0;
  #tookSession = "";
  _attached = false; // attach resolved: the application has it
  _stream = ""; // its slot's lock name (slotLock): forget refuses the stream while it is held

  constructor(handle, slot, options) {
    super(handle, options);
    this.#slot = slot;
    if (options[DELIVERY]) this._deliver = options[DELIVERY]; // worker.js's: batches go to the page
    // A slot lost while the socket stayed open: no dial is refused, so the
    // attachment is ended here. One already ended, or ending by a refused
    // dial, rejects the call, and that is all.
    slot.lost.then(() => B.call("lose", [this._handle, TAKEN]).catch(() => {}));
  }

  // Before every dial: the slot must still be this page's. A page back from
  // the back/forward cache whose slot another tab took meanwhile would take
  // the stream from that tab; its attachment ends instead (tabs.js).
  async _token() {
    if (!(await this.#slot.ours())) throw new RelayError(CODE_SUPERSEDED, TAKEN);
    return super._token();
  }

  /** The stream's name as stored: the name asked for, or name#2, #3 … in another tab. */
  get name() {
    return this.#slot.name;
  }
  get state() {
    return this.#info().state;
  }
  get cursor() {
    return this.#info().cursor;
  }
  get session() {
    return this.#info().session;
  }
  // #info is the last state, cursor and session: Go's, but during a
  // delivery the cursor is the last seq the handlers accepted (a handler
  // reading it sees the message before its own, as in worker mode), which
  // Go learns when the batch ends.
  #info() {
    const last = this.#last;
    const live = B.attachments.has(this._handle) ? B.api.info(this._handle) : null;
    if (live) [last.state, last.cursor, last.session] = live;
    if (this.#tookSeq > last.cursor && (this.#tookSession === last.session || this.#tookSession === "")) last.cursor = this.#tookSeq;
    return last;
  }

  // #accepted keeps a message the handler accepted as the last known
  // cursor and session: what the getters say once relay.wasm has exited,
  // when Go can no longer be asked.
  #accepted(f) {
    const last = this.#last;
    const seq = f.seq ?? 0;
    if (seq > 0) {
      this.#tookSeq = seq;
      this.#tookSession = f.session ?? "";
    }
    if (f.session && f.session !== last.session) Object.assign(last, { cursor: seq, session: f.session });
    else if (seq > last.cursor) last.cursor = seq;
  }

  sendACP(message, options = {}) {
    let text, trace;
    try {
      [text, trace] = sendArgs(message, options);
    } catch (e) {
      return Promise.reject(e);
    }
    // The text crosses as UTF-8 in the bridge's buffer, not as a string
    // Go would have to take and encode itself.
    return B.call("send", () => [this._handle, ...B.text(text), trace], options.signal);
  }

  resume(afterSeq) {
    try {
      checkCursor(afterSeq);
    } catch (e) {
      return Promise.reject(e);
    }
    return B.call("resume", [this._handle, afterSeq]);
  }

  async history() {
    return parseHistory(await B.call("history", [this._handle]));
  }

  async detach() {
    await this.#end("detach");
  }

  async close() {
    await this.#end("close");
  }

  async #end(op) {
    this.#over = true;
    this._quit = true;
    this.#counted();
    this.#slot.leave(); // another attach of this page may wait for it (tabs.js)
    try {
      if (B.attachments.has(this._handle)) await B.call(op, [this._handle]);
    } finally {
      await this.#slot.release();
      this._stream = ""; // the slot is free: forget may take it
    }
  }

  // Delivery of one batch: parsed frames ({seq, session, payload}) and
  // whether each is a replay. Returns how many the handler accepted, or -1-i
  // when the handler of message i returned a Promise; the count then goes to Go when the
  // batch is done. A message counts as accepted once its handler returned, or
  // its Promise resolved, without throwing: only those move the cursor.
  // Once close() or detach() is called, even from a handler, the rest of the
  // batch is not delivered: the next attach of the stream gets it, and Go
  // has counted what came before (a Promise still pending then does not
  // count, and its message comes again too).
  _deliver(batch, replay, waitID, from = 0) {
    for (let i = from; i < batch.length; i++) {
      if (this.#over) return this.#delivered(i, waitID, from);
      const f = batch[i];
      let r;
      try {
        r = (this._tap ?? this).onMessage(f.payload ?? null, meta(f, replay[i] === 1));
      } catch (e) {
        report("onMessage", e);
        return this.#delivered(i, waitID, from);
      }
      if (r !== null && typeof r === "object" && typeof r.then === "function") {
        const held = (this.#held = { waitID, n: i });
        // still: the batch is this Promise's to go on with, unless close()
        // or detach() counted it meanwhile (#counted).
        const still = () => {
          if (this.#held !== held) return false;
          this.#held = null;
          return true;
        };
        Promise.resolve(r).then(
          () => still() && (this.#accepted(f), this._deliver(batch, replay, waitID, i + 1)),
          (e) => {
            if (!still()) return;
            if (e !== PAUSED) report("onMessage", e);
            this.#tookSeq = 0; // Go has the count
            B.done(waitID, DONE_OK, i);
          },
        );
        return -1 - i; // later; i were accepted before it (Go counts them if it stops waiting)
      }
      this.#accepted(f);
    }
    return this.#delivered(batch.length, waitID, from);
  }

  // #counted tells Go how many of the batch a handler's Promise holds were
  // accepted, before close() or detach() reaches it: Go stops waiting for
  // the batch then, and a count it never had would have the stream's next
  // attach deliver those messages again.
  #counted() {
    const held = this.#held;
    this.#held = null;
    if (!held) return;
    this.#tookSeq = 0; // Go has the count
    B.done(held.waitID, DONE_OK, held.n);
  }
  #delivered(n, waitID, from) {
    // Called from a Promise continuation, the count must be sent; called
    // from Go's synchronous call (from 0), it is returned.
    this.#tookSeq = 0; // Go has the count
    if (from > 0) B.done(waitID, DONE_OK, n);
    return n;
  }

  _state(state, info) {
    this.#last.state = state;
    super._state(state, info);
  }

  // relay.wasm exited (bridge.js exited): an attachment the application
  // has is told it ended; one still attaching is not, its attach rejects.
  _exited(err) {
    if (this._attached) this._closedBy(err);
    this._ended();
  }

  // The attachment ended (detach, close or a fatal error): keep its last
  // state, cursor and session for the getters, and free its slot.
  _ended() {
    this.#over = true;
    this._quit = true;
    this.#held = null;
    this.#tookSeq = 0; // what Go counted is all that counts now
    this.#info();
    this.#slot.release();
  }
}
