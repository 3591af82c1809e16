// remote.js: the page's side of worker mode (loadRelay({worker: true})):
// starting the worker (worker.js), and the proxies of its Relay and
// Attachments, which keep relay.d.ts's API. worker.js lists the messages.
//
// The page keeps what only the page has or should have: the application's
// handlers (onMessage gets a batch per postMessage and its count goes back,
// so a Promise it returns still holds the cursor), the token function, the
// lifecycle events a worker does not get (visibilitychange, pagehide,
// pageshow, freeze, resume; online and offline too, for the engines whose
// workers do not get them), the tab's sessionStorage and the locks of its
// slots (tabs.js's; the worker asks for them), and the stores: Go's calls
// on them come from the worker and are answered here (worker.js's
// PageStores), so that a reload writes them, and leaves their copy in
// sessionStorage, before the page goes, as on the main thread.
// att.stream() works as on the main thread: stream.js needs an attachment's
// onMessage, sendACP, close, state and _tap, which these proxies have.

import { BaseAttachment, checkAttach, checkCursor, meta, sendArgs, urlText } from "./attachment.js";
import { ABORTED, CODE_BAD_OPTIONS, CODE_CANCELED, CODE_WASM_EXITED, DONE_FAILED, DONE_OK } from "./boundary.js";
import { compileSource, handBack, pageURL, preloaded } from "./compile.js";
import { packEntry, unwritten } from "./entries.js";
import { RelayError, report, settling } from "./errors.js";
import { wasmExecBeside } from "./load.js";
import { concat, openEarly, Stores, writeAll } from "./store.js";
import { PAUSED } from "./stream.js";
import { heldHere, lockHere, rememberSlots } from "./tabs.js";

/**
 * DELIVERY is the attach option (worker.js's) that replaces an
 * Attachment's delivery of a batch (relay.js's _deliver).
 */
export const DELIVERY = Symbol("relaywasm: the delivery of a worker's attachment");

// Why a worker failed when the engine does not say.
const UNLOADED = "worker.js did not load (not found beside relay.js, a Content-Security-Policy without worker-src, or no module workers)";
// What a worker.js of another origin than the page's needs (makeWorker).
const elsewhere = (url) =>
  `worker.js is at ${url}, another origin than the page's: it loads in a blob: worker, so its server must allow the page's origin by CORS (as for relay.js) and a Content-Security-Policy must allow worker-src blob:`;

// What a worker.js of the page's origin needs on a cross-origin isolated
// page (connect).
const isolated = (url) =>
  `the page is cross-origin isolated, and worker.js (${url}) did not load as a worker of its own: its server must send a Cross-Origin-Embedder-Policy as the page's does; nor from a blob: URL, which has the page's: a Content-Security-Policy must allow worker-src blob:`;

// How long a worker may take to run its module; past that it counts as one
// that cannot start. A hang guard only: a loaded phone takes well under it.
const START_LIMIT_MS = 20000;

let worker = null; // the Worker connection, once started (a Promise)

/**
 * startWorker starts the page's worker (once) and asks it for a Relay.
 * It resolves to the Relay proxy, or rejects with why the worker could not
 * start or load relay.wasm: the caller falls back to the main thread.
 */
export async function startWorker(options) {
  // A worker's first relay.wasm is fetched and compiled here, while the
  // worker starts and loads its modules, and the compiled module crosses to
  // it; that had waited for the worker's module graph (and preload.js may
  // have started it earlier still). If it fails here the worker loads it
  // itself, and reports why that fails.
  const source = options.wasm ?? new URL("./relay.wasm", import.meta.url);
  const here = worker === null && (options.wasm === undefined || preloaded(source));
  const compiling = here ? compileSource(source) : undefined;
  try {
    return await startIn(options, compiling?.catch(() => undefined));
  } catch (e) {
    // The main thread takes over with the compile made here, not a second
    // fetch and compile of its own.
    if (compiling !== undefined && !e?.[FINAL]) handBack(source, compiling);
    throw e;
  }
}

// startIn is startWorker once the page's compile (early, if any) is under way.
async function startIn(options, early) {
  worker ??= connect().catch((e) => {
    worker = null;
    throw e;
  });
  // The Relay's database opens here, where its store will be, while the
  // worker starts.
  const database = options.database ?? "";
  if ((options.storage ?? "indexeddb") === "indexeddb" && typeof database === "string") openEarly(database);
  const w = await worker;
  // Only the worker's first load names relay.wasm: it runs there once, and
  // the page's loadRelay refused a load naming another (relay.js
  // checkWasm). A compiled module crosses as a copy, which the worker's
  // loadRelay could not tell from another module.
  const first = !w.named;
  w.named = true;
  const wasm = first ? ((await early) ?? (await portable(options.wasm))) : undefined;
  // The options the worker's loadRelay reads, as plain values: what the
  // application gave may not survive the structured clone.
  const o = {
    worker: false,
    database: typeof database === "string" ? database : "",
    storage: options.storage, // relay.js checked it, and commitWindowMs
    commitWindowMs: options.commitWindowMs,
  };
  if (wasm !== undefined) o.wasm = wasm;
  if (options.wasmExec !== undefined) o.wasmExec = pageURL(options.wasmExec);
  else if (w.fromBlob) o.wasmExec = String(wasmExecBeside());
  try {
    const { id, storage } = await w.call("relay", [o]);
    w.used = true;
    return new RemoteRelay(w, id, storage);
  } catch (e) {
    // A worker that never loaded relay.wasm is given up (the caller falls
    // back); one that did serves other Relays, and this error is final.
    if (w.used) throw Object.assign(e, { [FINAL]: true });
    w.end(e);
    worker = null;
    throw e;
  }
}

/** FINAL marks an error of a working worker: no fall back to the main thread. */
export const FINAL = Symbol("relaywasm: the worker's own answer");

// portable is the wasm option as it can cross to the worker: a URL resolved
// against the page (the worker's base is worker.js), a compiled module
// (it crosses as it is), or a Response's bytes.
async function portable(wasm) {
  if (wasm === undefined || wasm instanceof WebAssembly.Module) return wasm;
  if (wasm instanceof Response) return new Uint8Array(await wasm.clone().arrayBuffer()); // the body stays for a fall back
  return pageURL(wasm);
}

// connect starts worker.js and resolves to the Connection once its module
// runs. On a cross-origin isolated page (a Cross-Origin-Embedder-Policy,
// for SharedArrayBuffer) the engines refuse a worker script served without
// a policy of its own, all three saying only that it did not load; a
// worker made from a blob: URL has the page's policy. So there a worker.js
// of the page's origin that did not load is made again that way, once
// (viaBlob, makeWorker).
function connect(viaBlob = false) {
  return new Promise((resolve, reject) => {
    let made;
    try {
      made = makeWorker(viaBlob);
    } catch (e) {
      reject(e);
      return;
    }
    const w = made.worker;
    const end = () => {
      clearTimeout(timer);
      w.terminate();
      made.started();
    };
    const fail = (why) => {
      end();
      reject(new Error(why));
    };
    const timer = setTimeout(() => fail("the worker did not start"), START_LIMIT_MS);
    w.onerror = (ev) => {
      ev.preventDefault?.();
      if (!ev.message && !made.fromBlob && globalThis.crossOriginIsolated === true) {
        end();
        resolve(connect(true));
        return;
      }
      fail(`the worker failed: ${made.failed(ev.message)}`);
    };
    w.onmessage = ({ data }) => {
      if (data?.t !== "up") return;
      clearTimeout(timer);
      made.started();
      const c = new Connection(w, made.fromBlob);
      watch(c, data.alive);
      w.onerror = (ev) => {
        ev.preventDefault?.(); // c.failed reports it, once
        c.failed(errorOf(ev));
      };
      w.onmessageerror = () => c.failed("a message from it could not be read");
      w.onmessage = ({ data: m }) => c.receive(m);
      forwardLifecycle(w, c);
      resolve(c);
    };
  });
}

// watch tells the page a worker the browser ended without an event (out
// of memory, its process gone): the worker holds the Web Lock alive while
// it lives (worker.js up), so the page's request for it is granted once
// the worker is gone, in all three engines. Granted after the page ended
// it itself (Connection.end), or as the page goes away, it says nothing.
// A hung worker still holds it: that is not seen. WebKit drops the
// pending lock requests of a page put in the back/forward cache (as it
// does the slots', Connection.suspendLocks), so a restored page asks again
// (c.rewatch, on pageshow: forwardLifecycle), aborting the request where
// it survived; before, a worker ended after a restore went unnoticed in
// WebKit, its attachments never told.
function watch(c, alive) {
  if (typeof alive !== "string") return;
  let asked = null;
  c.rewatch = () => {
    asked?.abort();
    asked = new AbortController();
    try {
      const gone = () => c.failed("the browser ended it (no error event: out of memory, or its process went)", true);
      navigator.locks.request(alive, { signal: asked.signal }, gone).catch(() => {});
    } catch {
      // no Web Locks on the page: the worker had none either
    }
  };
  c.rewatch();
}

// errorOf is what a worker's error event says of the error the worker did
// not catch: the engine's message (WebKit's may be empty) and where.
function errorOf(ev) {
  const what = ev?.message || "an error it did not catch";
  return ev?.filename ? `${what} at ${ev.filename}:${ev.lineno ?? 0}` : what;
}

// makeWorker starts worker.js. The engines run a worker's script only
// from the page's own origin: where relay.js, or the bundle holding it, is
// served from another (a CDN's), they refuse it, Chromium and WebKit by
// throwing and Firefox by failing the worker later. There the worker is
// made from a blob: URL, which is the page's, holding one line that loads
// worker.js, which its server then serves by CORS as it serves relay.js.
// That worker is a classic one, which import()s a module worker.js: on a
// page of no origin of its own (a sandboxed frame) Chromium runs no module
// worker from a blob: URL. The import's failure is thrown again, uncaught,
// for the page to hear it as the worker's error. failed says why the
// worker failed, given the engine's message (none, for a script that did
// not load, whatever the cause); started is called once it ran or failed.
// viaBlob makes it from a blob: URL whatever worker.js's origin (connect).
function makeWorker(viaBlob) {
  const { url, options } = workerSource();
  const mine = new URL(url).origin === globalThis.origin;
  if (mine && !viaBlob) {
    return { worker: newWorker(url, options), failed: (m) => m || UNLOADED, fromBlob: false, started() {} };
  }
  const needs = mine ? isolated(url) : elsewhere(url);
  const blob = URL.createObjectURL(new Blob([loader(url, options)], { type: "text/javascript" }));
  const started = () => URL.revokeObjectURL(blob);
  try {
    const worker = newWorker(blob, { ...options, type: "classic" });
    return { worker, failed: (m) => `${m || "worker.js did not load"} (${needs})`, fromBlob: true, started };
  } catch (e) {
    started();
    throw new Error(`the worker failed: ${e?.message ?? e} (${needs})`);
  }
}

// loader is the script of makeWorker's blob: worker, which loads worker.js
// from url: import() for a module worker.js, importScripts for a classic
// one (webpack's). The blob: worker has the page's policy, so where the
// page requires Trusted Types (newWorker) importScripts takes url only as a
// TrustedScriptURL, from a policy of the worker's own under the same name
// that vouches for url alone; import() is not one of the checked calls.
function loader(url, options) {
  const u = JSON.stringify(url);
  if (options?.type === "module") return `import(${u}).catch((e) => setTimeout(() => { throw e; }));`;
  const name = JSON.stringify(POLICY);
  return `const u = ${u}; importScripts(self.trustedTypes ? trustedTypes.createPolicy(${name}, { createScriptURL: () => u }).createScriptURL(u) : u);`;
}

// POLICY is the name of relay.js's Trusted Types policy (newWorker): a page
// that requires Trusted Types lists it in its Content-Security-Policy's
// trusted-types directive for worker mode.
const POLICY = "relaywasm";

let policy = null; // POLICY, once made; only this module holds it

// newWorker is new Worker(url, options), on pages that require Trusted
// Types too (require-trusted-types-for 'script'). There the engines take a
// worker's URL only as a TrustedScriptURL, made by a policy whose name the
// page's trusted-types directive allows, and refuse a string: worker mode
// fell back to the main thread in all three engines. Where the engine has
// Trusted Types, the URL is made one by relay.js's own policy, so a page
// that requires them gets no violation report for it. The policy vouches
// for whatever it is given, but no other code can reach it: it is given
// worker.js's URL, as the bundler wrote it, and the blob: URL made here. A
// page whose directive does not allow the name (or a second copy of
// relay.js, which cannot make it again) gets the string: the Worker is then
// refused only where Trusted Types are required, and the error says what
// the directive must allow.
function newWorker(url, options) {
  let refused = null;
  if (globalThis.trustedTypes !== undefined) {
    try {
      policy ??= trustedTypes.createPolicy(POLICY, { createScriptURL: (u) => u });
      return new Worker(policy.createScriptURL(url), options);
    } catch (e) {
      if (policy !== null) throw e;
      refused = e;
    }
  }
  try {
    return new Worker(url, options);
  } catch (e) {
    if (refused === null || !(e instanceof TypeError)) throw e;
    throw new Error(`${e.message} (the page requires Trusted Types: for worker mode its Content-Security-Policy's trusted-types must allow the policy ${POLICY}, with 'allow-duplicates' where the page holds two copies of relay.js; making it failed: ${refused.message})`);
  }
}

// workerSource is the URL and options of the one new Worker(...) below, as
// written or as a bundler rewrote them (Vite and webpack put the URL of the
// file they emitted there, and webpack options of its own). Bundlers know
// the call only in this form, and its URL must be known before a worker is
// made from it, so it runs with a stand-in for Worker that records what it
// is given; nothing else can run before the engine's Worker is back.
function workerSource() {
  const engine = globalThis.Worker;
  let source;
  globalThis.Worker = function record(url, options) {
    source = { url: String(url), options };
  };
  try {
    // Written out like this so that bundlers emit worker.js and its imports.
    new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  } finally {
    globalThis.Worker = engine;
  }
  return source;
}

// Connection is the page's end of the worker's messages.
class Connection {
  constructor(worker, fromBlob) {
    this.worker = worker;
    // Made from a blob: URL (makeWorker): the worker's location is then
    // that URL, and a bundler's code that finds its files from there
    // (webpack's automatic publicPath) looks for wasm_exec.js on the
    // page's origin, so the page, which knows where it is, says.
    this.fromBlob = fromBlob;
    this.calls = new Map();
    this.nextCall = 1;
    this.lifecycle = new AbortController(); // ends the page's listeners for it (forwardLifecycle)
    this.ended = null; // why the worker was given up (end): a call made after fails with it
    this.attachments = new Map(); // handle -> RemoteAttachment
    this.nextHandle = 1;
    this.used = false; // relay.wasm loaded in the worker
    this.named = false; // a load has told the worker where relay.wasm is (startIn)
    this.stores = new Stores((id, kind, value, h) => this.#stored(id, kind, value, h));
    this.locks = new Map(); // lock request id -> {name, release}: the worker's slots (tabs.js tabEnv)
    this.away = false; // from a pagehide into the back/forward cache to the pageshow from it (forwardLifecycle)
    this.rewatch = () => {}; // asks again for the worker's lock (watch)
  }

  // end gives up a worker that never loaded relay.wasm (startIn), or one
  // that failed (failed). Every call still waiting on it fails with err (a
  // load then falls back as the first did): terminate drops the answers
  // the worker may have posted, and a second loadRelay made meanwhile
  // waited for good. Its lifecycle listeners go too.
  end(err) {
    this.ended = err;
    this.worker.terminate();
    for (const call of this.calls.values()) call.reject(err);
    this.calls.clear();
    this.lifecycle.abort();
  }

  // failed gives up a worker that failed after it started, as relay.wasm's
  // exit is told on the main thread (bridge.js exited): an error the worker
  // did not catch (a trap out of relay.wasm, an exception of worker.js's;
  // the worker's own Go exit it tells itself, by the attachments' states
  // and the calls' answers) or a message from it that could not be read.
  // Either leaves relay.wasm's state, or the messages' order, unknown, so
  // the worker is ended: every call waiting on it rejects with wasm_exited,
  // and every call after at once; every attachment the application has is
  // told, once, with onState("closed", {code: "wasm_exited"}), and keeps
  // its last cursor and session; what its handlers accepted that the
  // worker had not committed is committed here, and written, as at
  // pagehide; the slots' locks the page held for the worker go, so that
  // another tab may take the streams. A worker the browser ended without an
  // event (gone) is told so too, once its lock is let go (watch).
  failed(why, gone = false) {
    if (this.ended) return;
    const err = new RelayError(CODE_WASM_EXITED, `the worker running relay.wasm failed: ${why}${gone ? "" : " (relay.js ended it)"}: load the page again`);
    console.error(err);
    this.end(err);
    this.suspendLocks();
    const live = [...this.attachments.values()];
    this.attachments.clear();
    for (const a of live) a._exited(err, this.stores);
    writeAll();
  }

  /** lockNames are the names of the locks the page holds for the worker. */
  lockNames() {
    return [...this.locks.values()].map((l) => l.name);
  }

  // #lock takes a lock for the worker's slot (tabs.js lockHere), and lets
  // it go when the worker says. One not free is said to be held here when
  // the page holds it (a Relay of the page on the main thread, tabs.js
  // heldHere), for the worker's forget to name the holder.
  #lock(m) {
    const reply = (a) => this.worker.postMessage({ t: "locked", id: m.id, ...a });
    lockHere(m.name, m.waitMs).then(
      (release) => {
        // Granted after the worker was given up (it failed, or never
        // loaded relay.wasm): nothing would ever let it go for the page.
        if (release && this.ended) return void release();
        if (release) this.locks.set(m.id, { name: m.name, release });
        reply({ ok: true, held: release !== null, here: release === null && heldHere(m.name) });
      },
      (e) => reply({ ok: false, name: e?.name ?? "Error", message: String(e?.message ?? e) }),
    );
  }

  // suspendLocks lets go of the locks the page holds for the worker as the
  // page goes into the back/forward cache. The worker lets its slots go
  // too (suspend), but its word comes back as a message, which a page
  // frozen in the cache may never read: WPE 2.38 kept the locks then, and
  // the tab's next page took name#2 (tests/e2e TestReloadLocksEarly). Its
  // "unlock" later finds them gone; on pageshow it asks for them again.
  suspendLocks() {
    for (const l of this.locks.values()) l.release();
    this.locks.clear();
  }

  #unlock(m) {
    const lock = this.locks.get(m.id);
    this.locks.delete(m.id);
    Promise.resolve(lock?.release()).finally(() => this.worker.postMessage({ t: "unlocked", id: m.id }));
  }

  // #stored answers Go's wait id in the worker, with what store h says of
  // its backend and fallback now, which Go reads right after.
  #stored(id, kind, value, h) {
    const info = this.stores.info(h);
    if (kind !== DONE_OK) value = { name: value?.name ?? "Error", message: String(value?.message ?? value) };
    this.worker.postMessage({ t: "stored", id, kind, value, h, info });
  }

  // #store runs one of Go's calls on the page's stores. One that throws
  // (no such store: cannot happen) fails the wait it was for, if any. A
  // commit made as Go took a batch's count stores that batch and those
  // before it, less what the page committed of them itself (_unwritten).
  #store(m) {
    try {
      const mine = m.op === "commit" && m.after ? this.#storing(m.args[0], m.args[1]) : [];
      let args = m.args;
      for (const a of mine) args = a._unwritten(args, m.after);
      this.stores[m.op](...args);
      for (const a of mine) a._committed(m.after);
    } catch (e) {
      const id = m.op === "open" ? m.args[0] : m.op === "run" ? m.args[1] : 0;
      if (id) this.#stored(id, DONE_FAILED, e, m.h);
      else console.error("relay.js: a store call from the worker failed:", e);
    }
  }

  // #storing are the attachments whose stream is stream of store h.
  #storing(h, stream) {
    return [...this.attachments.values()].filter((a) => a._stores(h, stream));
  }

  call(op, args, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted || this.ended) {
        reject(this.ended ?? new RelayError(CODE_CANCELED, ABORTED));
        return;
      }
      const id = this.nextCall++;
      try {
        this.worker.postMessage({ t: "call", id, op, args });
      } catch (e) {
        // A value structured clone cannot copy (a DOM node, a class of the
        // platform's) does not reach the worker.
        reject(new RelayError(CODE_BAD_OPTIONS, `${op}: an argument cannot be passed to the worker: ${e?.message ?? e}`));
        return;
      }
      this.calls.set(id, settling(signal, () => this.worker.postMessage({ t: "abort", id }), resolve, reject));
    });
  }

  receive(m) {
    switch (m.t) {
      case "reply": {
        const c = this.calls.get(m.id);
        this.calls.delete(m.id);
        if (m.ok) c?.resolve(m.value);
        else c?.reject(new RelayError(m.code, m.message));
        break;
      }
      case "batch": {
        const a = this.attachments.get(m.h);
        if (a) a._deliver(m);
        else this.worker.postMessage({ t: "done", waitID: m.waitID, n: 0 });
        break;
      }
      case "state":
        this.attachments.get(m.h)?._state(m.state, m.info, m.now);
        break;
      case "evicted":
        this.attachments.get(m.h)?._evicted(m.info);
        break;
      case "token": {
        const a = this.attachments.get(m.h);
        const reply = (ok, value) => this.worker.postMessage({ t: "token", id: m.id, ok, value, message: value });
        if (!a) reply(false, "the attachment is gone");
        else a._token().then((t) => reply(true, t), (e) => reply(false, String(e?.message ?? e)));
        break;
      }
      case "store":
        this.#store(m);
        break;
      case "lock":
        this.#lock(m);
        break;
      case "unlock":
        this.#unlock(m);
        break;
      case "session":
        try {
          sessionStorage.setItem(m.key, m.value);
        } catch {
          // storage disabled: the tab just does not remember its slot
        }
        break;
    }
  }
}

// The lifecycle events the worker cannot see, as worker.js's life names
// them. pagehide, freeze and hidden write the page's stores at once, here,
// as lifecycle.js does on the main thread, and pagehide remembers the
// slots' locks the page holds for the worker; a pagehide into the
// back/forward cache has the worker let its slots' locks go (suspend), and
// pageshow from it has the worker ask for them again (tabs.js
// suspendSlots), and the page ask again for the worker's own (watch).
//
// At every pagehide the page commits itself what its handlers took that
// the worker has not committed yet (_commitTail), and, until it is shown
// again, what they take after (c.away): a page kept in the back/forward
// cache keeps its worker, whose commits of those come only if the page is
// shown again, and a page come back to by its URL is a new one, which
// missed them (against a runtime that does not resume, they were lost).
// The worker's commits of them that come after store them once only
// (RemoteAttachment._unwritten).
function forwardLifecycle(w, c) {
  const send = (ev) => w.postMessage({ t: "life", ev });
  const hide = (ev) => {
    for (const a of c.attachments.values()) a._commitTail(c.stores);
    if (ev.persisted) {
      c.away = true;
      send("suspend");
    }
    writeAll();
    rememberSlots(c.lockNames());
    if (ev.persisted) c.suspendLocks();
  };
  const show = (ev) => {
    if (!ev.persisted) return;
    c.away = false;
    send("pageshow");
    c.rewatch();
  };
  const visibility = () => {
    if (document.visibilityState === "visible") send("visible");
    else {
      send("hidden");
      writeAll();
    }
  };
  const on = { signal: c.lifecycle.signal }; // until the worker is given up (Connection.end)
  addEventListener("online", () => send("online"), on);
  addEventListener("offline", () => send("offline"), on);
  addEventListener("pagehide", hide, on);
  addEventListener("pageshow", show, on);
  document.addEventListener("freeze", () => writeAll(), on);
  document.addEventListener("resume", () => send("resume"), on);
  document.addEventListener("visibilitychange", visibility, on);
  if (document.visibilityState !== "visible") send("hidden");
}

// The tab's remembered slots (tabs.js), which the worker cannot read.
function slots() {
  const out = [];
  try {
    for (let i = 0; i < sessionStorage.length; i++) {
      const k = sessionStorage.key(i);
      if (k.startsWith("relaywasm-slot:")) out.push([k, sessionStorage.getItem(k)]);
    }
  } catch {
    // storage disabled
  }
  return out;
}

function reloading() {
  const type = performance.getEntriesByType?.("navigation")?.[0]?.type;
  return type === "reload" || type === "back_forward";
}

// commitTail commits messages a page's handlers accepted (tail: {seq,
// session, payload, replay}) into stream of the page's store h, as the
// worker's Go commits them (jsbridge/store.go Commit and appendEntry): the
// cursor at the last seq, and with a transcript (keep > 0) one entry per
// message not replayed, its payload as JSON text. The payload crossed from
// the worker as an object, so its text is JSON.stringify's, the same JSON
// as the runtime's though maybe not the same bytes. It returns the session
// and cursor it committed, or null. What the engine recorded before those
// messages is not among them (a place where a connection opened again, a
// loss told, a resume answered), nor a cursor gone back to the stream's
// start (cursor_evicted): the worker commits those before it delivers the
// batch after them, so they reached the page's store first (wasm/client's
// commitFirst).
function commitTail(stores, h, stream, keep, tail) {
  if (stores.info(h) === null) return null; // cannot happen: the place is the page's store
  const known = stores.state(h, stream);
  const session = tail.at(-1).session ?? "";
  let cursor = known && known.session === session ? known.cursor : 0;
  const parts = [];
  for (const { seq = 0, payload, replay } of tail) {
    cursor = Math.max(cursor, seq);
    if (keep > 0 && (seq === 0 || !replay)) parts.push(packEntry(seq, payload));
  }
  const entries = parts.slice(Math.max(0, parts.length - keep));
  stores.commit(h, stream, session, cursor, keep, entries.length, concat(entries), known?.open === true); // the engine's commits say whether a place is open
  return { session, cursor };
}

// entrySeqs are the seqs of the entries commitTail packs of a batch's
// first n messages, and the worker's Go of them (jsbridge/store.go).
function entrySeqs(batch, replay, n, keep) {
  const seqs = [];
  if (keep <= 0) return seqs;
  for (let i = 0; i < n; i++) {
    const seq = batch[i].seq ?? 0;
    if (seq === 0 || replay[i] !== 1) seqs.push(seq);
  }
  return seqs;
}

class RemoteRelay {
  #c;
  #id;

  constructor(c, id, storage) {
    this.#c = c;
    this.#id = id;
    this.storage = storage;
    this.mode = "worker";
    this.reason = "";
  }

  /**
   * attach: relay.d.ts's. Its options are checked here as on the main
   * thread (attachment.js checkAttach), and only what that makes of them
   * crosses to the worker: plain values, never the application's objects.
   */
  async attach(options) {
    const o = checkAttach(options);
    const c = this.#c;
    const h = c.nextHandle++;
    const a = new RemoteAttachment(c, h, options);
    c.attachments.set(h, a);
    try {
      const { name, now, place } = await c.call("attach", [this.#id, h, o, slots(), reloading()], options.signal);
      if (c.ended) throw c.ended; // the worker failed as its answer came (Connection.failed)
      a._attached(name, now, place);
    } catch (e) {
      c.attachments.delete(h);
      throw e;
    }
    return a;
  }

  /** history: relay.d.ts's; the stream's names are checked by the worker's relay.js. */
  history(stream) {
    if (typeof stream !== "object" || stream === null) return this.#bad("history needs an options object");
    const { url, instance, name } = stream; // an attach's options may hold functions, which cannot cross
    return this.#c.call("stored", [this.#id, { url: urlText(url), instance, name }]);
  }

  /** forget: relay.d.ts's; done by the worker's relay.js (Relay.forget), as on the main thread. */
  async forget(stream) {
    if (typeof stream !== "object" || stream === null) return this.#bad("forget needs an options object");
    const { url, instance, name } = stream;
    await this.#c.call("forget", [this.#id, { url: urlText(url), instance, name }]);
  }

  #bad(what) {
    return Promise.reject(new RelayError(CODE_BAD_OPTIONS, what));
  }
}

class RemoteAttachment extends BaseAttachment {
  #c;
  #name = "";
  #now = ["connecting", 0, ""]; // state, cursor, session, as the worker last said
  #over = false; // close() or detach() was called, or the attachment closed: no more deliveries
  #busy = null; // the batch being delivered: {waitID, batch, replay, n accepted, held by a Promise, done: #end's wait}
  #ending = null; // the outcome of close() or detach()
  #attached = false; // attach resolved: the application has it
  #closed = false; // close() was called: state says "closed" from then on, as on the main thread
  #quiet = false; // close() or detach() was called: the application hears no state but "closed", and no loss

  constructor(c, h, options) {
    super(h, options);
    this.#c = c;
    this._history = Number.isSafeInteger(options.history) && options.history > 0 ? options.history : 0;
  }

  _attached(name, now, place) {
    this.#attached = true;
    this.#name = name;
    if (now) this.#now = now;
    this.#place = place ?? null;
  }

  // What the handlers accepted and the worker has not committed yet: the
  // worker commits as it takes a batch's count (worker.js), and the page
  // hears of it after, so a page that goes away in between would lose
  // those messages from the transcript against a runtime that does not
  // resume. At pagehide, the page commits them itself (_commitTail).
  // Not what the app sent: the worker commits a send it has written
  // before it tells the page the send resolved, so a send the page saw
  // resolve is stored. One the worker wrote while the page waited for its
  // answer, whose commit had not reached the page when it went away, is
  // missing from the transcript (not from the runtime): the page cannot
  // tell it from one still waiting in the worker's queue, which it must
  // not record.
  #tail = []; // [{waitID, batch, replay, n}]: the first n of each batch
  #place = null; // [store handle, stream] in the page's stores, or null
  // What _commitTail committed whose commits from the worker are still to
  // come: the worker, cached with the page, sends them if it is shown
  // again, and Chromium may run them as the page goes into the cache.
  #wrote = []; // [{waitID, seqs}]: the seqs of the entries committed of batch waitID
  #wroteAt = null; // {session, cursor} of the last of those commits

  // Only a batch the worker commits for is kept: one that moves the cursor
  // (a message with a seq, not replayed) or adds to the transcript. Others
  // (contenox as it ships stamps no seq) would stay for good.
  _accepted(waitID, batch, replay, n) {
    if (this.#place === null) return;
    for (let i = 0; i < n; i++) {
      const commits = (batch[i].seq ?? 0) > 0 ? replay[i] !== 1 : this._history > 0;
      if (commits) {
        this.#tail.push({ waitID, batch, replay, n });
        return;
      }
    }
  }

  _stores(h, stream) {
    return this.#place !== null && this.#place[0] === h && this.#place[1] === stream;
  }

  _committed(waitID) {
    while (this.#tail.length > 0 && this.#tail[0].waitID <= waitID) this.#tail.shift(); // waitIDs only grow
  }

  /** _commitTail commits the tail into the page's stores, as the worker's Go would have. */
  _commitTail(stores) {
    if (this.#tail.length === 0 || this.#place === null) return;
    const [h, stream] = this.#place;
    const tail = this.#tail.flatMap((t) => t.batch.slice(0, t.n).map((f, i) => ({ ...f, replay: t.replay[i] === 1 })));
    const batches = this.#tail;
    this.#tail = [];
    const at = commitTail(stores, h, stream, this._history, tail);
    if (at === null) return;
    this.#wroteAt = at;
    for (const t of batches) this.#wrote.push({ waitID: t.waitID, seqs: entrySeqs(t.batch, t.replay, t.n, this._history) });
  }

  /**
   * _unwritten is the arguments of the worker's commit (Stores.commit's)
   * made as Go took the count of batch after, less what _commitTail
   * committed of the batches up to it: their entries (entries.js
   * unwritten), and a cursor behind the one committed then, which would
   * take the stream's back (a page come back to would resume from there,
   * and get those messages again).
   */
  _unwritten(args, after) {
    const mine = this.#wrote.filter((w) => w.waitID <= after);
    if (mine.length === 0) return args;
    this.#wrote = this.#wrote.filter((w) => w.waitID > after);
    let [h, stream, session, cursor, keep, n, bytes, ...rest] = args;
    if (bytes) [bytes, n] = unwritten(bytes, mine.flatMap((w) => w.seqs));
    const at = this.#wroteAt;
    if (at !== null && at.session === session) cursor = Math.max(cursor, at.cursor);
    return [h, stream, session, cursor, keep, n, bytes, ...rest];
  }

  get name() {
    return this.#name;
  }
  get state() {
    return this.#closed ? "closed" : this.#now[0];
  }
  get cursor() {
    return this.#now[1];
  }
  get session() {
    return this.#now[2];
  }

  sendACP(message, options = {}) {
    try {
      return this.#c.call("send", [this._handle, ...sendArgs(message, options)], options.signal);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  resume(afterSeq) {
    try {
      checkCursor(afterSeq);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#c.call("resume", [this._handle, afterSeq]);
  }

  history() {
    return this.#c.call("history", [this._handle]);
  }

  async detach() {
    await this.#end("detach");
  }

  async close() {
    await this.#end("close");
  }

  // #end is close() or detach(), once: a second call, or one after the
  // attachment ended, gets the first's outcome, as on the main thread, where
  // close() ends the attachment within the call: state says "closed" at
  // once, whatever the worker reported before it hears the close. The
  // worker hears the count of the batch being delivered first, so that
  // those accepted are not delivered again to the stream's next attach:
  // at once when a handler's Promise holds the batch, else (the call came
  // from a handler) once that handler has returned.
  #end(op) {
    if (this.#ending === null) {
      this.#over = true;
      this._quit = true;
      this.#closed = op === "close";
      this.#quiet = true;
      if (this.#busy?.held) this.#report(this.#busy);
      const end = () => (this.#c.attachments.has(this._handle) ? this.#c.call(op, [this._handle]) : Promise.resolve());
      const busy = this.#busy; // called from a handler, which has yet to return
      // The call goes now, before anything the page does next (an attach of
      // the same stream, which takes its slot), unless that handler's count
      // must go first.
      this.#ending = busy ? new Promise((resolve) => (busy.done = resolve)).then(end) : end();
    }
    return this.#ending;
  }

  // One batch from the worker. The count of messages its handlers accepted
  // (returned, or resolved a returned Promise, without throwing), as
  // relay.js's _deliver counts them, goes back once they are done, or
  // sooner when close() or detach() is called (#end). No message is
  // delivered once either is.
  async _deliver({ waitID, batch, replay, now }) {
    if (now) this.#now = now;
    const busy = { waitID, batch, replay, n: 0, held: false, done: null };
    this.#busy = busy;
    for (let i = 0; i < batch.length && !this.#over; i++) {
      const f = batch[i];
      try {
        const r = (this._tap ?? this).onMessage(f.payload ?? null, meta(f, replay[i] === 1));
        if (r !== null && typeof r === "object" && typeof r.then === "function") {
          busy.held = true;
          if (this.#over) this.#report(busy); // the handler awaits its own close()
          await r;
          busy.held = false;
        }
      } catch (e) {
        if (e !== PAUSED && this.#busy === busy) report("onMessage", e);
        break;
      }
      if (this.#busy !== busy) return; // counted by #end meanwhile
      busy.n = i + 1;
      const seq = f.seq ?? 0;
      if (seq > this.#now[1]) this.#now = [this.#now[0], seq, this.#now[2]];
    }
    this.#report(busy);
  }

  #report(busy) {
    if (this.#busy !== busy) return;
    this.#busy = null;
    this._accepted(busy.waitID, busy.batch, busy.replay, busy.n);
    this.#c.worker.postMessage({ t: "done", waitID: busy.waitID, n: busy.n });
    if (this.#c.away || this.#c.ended) {
      // Taken after the page went into the back/forward cache, or after the
      // worker failed (a handler's Promise held the batch): committed here
      // too, and written, as at its pagehide (forwardLifecycle).
      this._commitTail(this.#c.stores);
      writeAll();
    }
    busy.done?.(); // #end waits for it
  }

  // The worker failed (Connection.failed): what the handlers accepted that
  // it had not committed is committed here, and an attachment the
  // application has is told it ended, as on the main thread when relay.wasm
  // exits (relay.js _exited); one still attaching is not, its attach
  // rejects.
  _exited(err, stores) {
    this._commitTail(stores);
    if (this.#attached) this._closedBy(err);
    else this.#over = true;
  }

  // A state the worker sent before it heard close() (it was busy, or the
  // message was on its way) reaches the page after the call: the
  // application is not told it, as on the main thread, where close() ends
  // the attachment within the call and onState hears only its "closed".
  // Nor a loss told then (_evicted). The same after detach(), which ends
  // the attachment within the call on the main thread too, though state
  // says "closed" only once the worker has (the getter).
  _state(state, info, now) {
    this.#now = now ?? [state, this.#now[1], this.#now[2]];
    this.#now[0] = state;
    if (state === "closed") {
      this.#over = true;
      this.#c.attachments.delete(this._handle);
    } else if (this.#quiet) return;
    super._state(state, info);
  }

  _evicted(info) {
    if (!this.#quiet) super._evicted(info);
  }
}
