// remote.js: the page's side of worker mode (loadRelay({worker: true})):
// starting the worker (worker.js), and the proxies of its Relay and
// Attachments, which keep relay.d.ts's API. worker.js lists the messages.
//
// The page keeps what only the page has or should have: the application's
// handlers (onMessage gets a batch per postMessage and its count goes back,
// so a Promise it returns still holds the cursor), the token function, the
// lifecycle events a worker does not get (visibilitychange, pagehide,
// pageshow, freeze, resume; online and offline too, for the engines whose
// workers do not get them), and the tab's sessionStorage (tabs.js's slots).
// att.stream() works as on the main thread: stream.js needs an attachment's
// onMessage, sendACP, close, state and _tap, which these proxies have.

import { BaseAttachment, checkCursor, meta, sendArgs } from "./attachment.js";
import { CODE_BAD_OPTIONS, CODE_CANCELED } from "./boundary.js";
import { compileSource, preloaded } from "./compile.js";
import { RelayError, report } from "./errors.js";
import { PAUSED } from "./stream.js";

/**
 * DELIVERY is the attach option (worker.js's) that replaces an
 * Attachment's delivery of a batch (relay.js's _deliver).
 */
export const DELIVERY = Symbol("relaywasm: the delivery of a worker's attachment");

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
  const early = here ? compileSource(source).catch(() => undefined) : undefined;
  worker ??= connect().catch((e) => {
    worker = null;
    throw e;
  });
  const w = await worker;
  const wasm = (await early) ?? (await portable(options.wasm));
  const o = { ...options, worker: false, signal: undefined };
  if (wasm !== undefined) o.wasm = wasm;
  if (options.wasmExec !== undefined) o.wasmExec = String(new URL(String(options.wasmExec), location.href));
  try {
    const { id, storage } = await w.call("relay", [o]);
    w.used = true;
    return new RemoteRelay(w, id, storage);
  } catch (e) {
    // A worker that never loaded relay.wasm is given up (the caller falls
    // back); one that did serves other Relays, and this error is final.
    if (w.used) throw Object.assign(e, { [FINAL]: true });
    w.worker.terminate();
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
  return String(new URL(String(wasm), location.href));
}

function connect() {
  return new Promise((resolve, reject) => {
    let w;
    try {
      // Written out like this so that bundlers emit worker.js and its imports.
      w = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
    } catch (e) {
      reject(e);
      return;
    }
    const fail = (why) => {
      w.terminate();
      reject(new Error(why));
    };
    const timer = setTimeout(() => fail("the worker did not start"), START_LIMIT_MS);
    w.onerror = (ev) => {
      ev.preventDefault?.();
      clearTimeout(timer);
      fail(`the worker failed: ${ev.message || "it could not load (a Content-Security-Policy, or no module workers)"}`);
    };
    w.onmessage = ({ data }) => {
      if (data?.t !== "up") return;
      clearTimeout(timer);
      const c = new Connection(w);
      w.onerror = (ev) => console.error("relay.js: the worker failed:", ev.message ?? ev);
      w.onmessage = ({ data: m }) => c.receive(m);
      forwardLifecycle(w);
      resolve(c);
    };
  });
}

// Connection is the page's end of the worker's messages.
class Connection {
  constructor(worker) {
    this.worker = worker;
    this.calls = new Map();
    this.nextCall = 1;
    this.attachments = new Map(); // handle -> RemoteAttachment
    this.nextHandle = 1;
    this.used = false; // relay.wasm loaded in the worker
  }

  call(op, args, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(new RelayError(CODE_CANCELED, "the operation was aborted"));
        return;
      }
      const id = this.nextCall++;
      this.calls.set(id, { resolve, reject });
      signal?.addEventListener("abort", () => this.worker.postMessage({ t: "abort", id }), { once: true });
      this.worker.postMessage({ t: "call", id, op, args });
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
        if (!a) {
          this.worker.postMessage({ t: "done", waitID: m.waitID, n: 0 });
          break;
        }
        a._deliver(m.batch, m.replay, m.now).then((n) => this.worker.postMessage({ t: "done", waitID: m.waitID, n }));
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
// them. pagehide and hidden make the worker write its stores at once.
function forwardLifecycle(w) {
  const send = (ev) => w.postMessage({ t: "life", ev });
  addEventListener("online", () => send("online"));
  addEventListener("offline", () => send("offline"));
  addEventListener("pagehide", () => send("pagehide"));
  addEventListener("pageshow", (ev) => ev.persisted && send("pageshow"));
  document.addEventListener("freeze", () => send("freeze"));
  document.addEventListener("resume", () => send("resume"));
  document.addEventListener("visibilitychange", () => send(document.visibilityState === "visible" ? "visible" : "hidden"));
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

  /** attach: relay.d.ts's; options are checked by the worker's relay.js. */
  async attach(options) {
    if (typeof options !== "object" || options === null) return this.#bad("attach needs an options object");
    if (typeof options.onMessage !== "function") return this.#bad("onMessage is required");
    const c = this.#c;
    const h = c.nextHandle++;
    const a = new RemoteAttachment(c, h, options);
    c.attachments.set(h, a);
    const o = {};
    for (const [k, v] of Object.entries(options)) {
      if (typeof v !== "function" && k !== "signal") o[k] = v;
    }
    if (typeof options.token === "function") o.token = null;
    else if (typeof options.token !== "string") return this.#bad("token must be a string or a function");
    try {
      const { name, now } = await c.call("attach", [this.#id, h, o, slots(), reloading()], options.signal);
      a._attached(name, now);
    } catch (e) {
      c.attachments.delete(h);
      throw e;
    }
    return a;
  }

  #bad(what) {
    return Promise.reject(new RelayError(CODE_BAD_OPTIONS, what));
  }
}

class RemoteAttachment extends BaseAttachment {
  #c;
  #name = "";
  #now = ["connecting", 0, ""]; // state, cursor, session, as the worker last said

  constructor(c, h, options) {
    super(h, options);
    this.#c = c;
  }

  _attached(name, now) {
    this.#name = name;
    if (now) this.#now = now;
  }

  get name() {
    return this.#name;
  }
  get state() {
    return this.#now[0];
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
    await this.#c.call("detach", [this._handle]);
  }

  async close() {
    await this.#c.call("close", [this._handle]);
  }

  // One batch from the worker: resolves to how many messages the handlers
  // accepted (returned, or resolved a returned Promise, without throwing),
  // as relay.js's _deliver counts them.
  async _deliver(batch, replay, now) {
    if (now) this.#now = now;
    for (let i = 0; i < batch.length; i++) {
      const f = batch[i];
      const seq = f.seq ?? 0;
      try {
        const r = (this._tap ?? this).onMessage(f.payload ?? null, meta(f, replay[i] === 1));
        if (r !== null && typeof r === "object" && typeof r.then === "function") await r;
      } catch (e) {
        if (e !== PAUSED) report("onMessage", e);
        return i;
      }
      if (seq > this.#now[1]) this.#now = [this.#now[0], seq, this.#now[2]];
    }
    return batch.length;
  }

  _state(state, info, now) {
    this.#now = now ?? [state, this.#now[1], this.#now[2]];
    this.#now[0] = state;
    if (state === "closed") this.#c.attachments.delete(this._handle);
    super._state(state, info);
  }
}
