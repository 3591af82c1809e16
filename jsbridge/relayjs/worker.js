// worker.js: the worker's side of worker mode (loadRelay({worker: true})).
// relay.wasm runs here, in a dedicated module Web Worker, with its sockets:
// the whole protocol leaves the page's main thread. Its stores do not: they
// stay on the page (PageStores below), where sessionStorage is and pagehide
// comes, as on the main thread; nor do its slots' locks (tabs.js tabEnv).
// The page (remote.js) holds proxies of the Relay and its Attachments and
// talks to this module by messages:
//
//   page -> worker  {t: "call", id, op, args}  an API call; answered by
//                   {t: "reply", id, ok, value | code, message}
//                   {t: "abort", id}           its AbortSignal fired
//                   {t: "done", waitID, n}     the page's handlers accepted n
//                                              messages of a batch
//                   {t: "token", id, ok, value | message}  a token asked for
//                   {t: "life", ev}            a lifecycle event of the page
//                   {t: "stored", id, kind, value, h, info}  a store's
//                                              outcome for Go's wait id, and
//                                              [backend, fallback] of store h
//   worker -> page  {t: "up", alive}          the module runs; alive: the
//                                              name of the Web Lock it holds
//                                              while it lives (up below)
//                   (attach's reply: {name, now, place}, place being where
//                   the stream is stored: [store handle, stream], or null)
//                   {t: "batch", h, batch, replay, waitID, now}
//                   {t: "state" | "evicted", h, state, info, now}
//                   ({now}: [state, cursor, session], for the getters)
//                   {t: "token", h, id}        call the token function
//                   {t: "session", key, value} remember a tab's slot
//                   {t: "lock", id, name, waitMs}  take a slot's lock on
//                                              the page (tabs.js lockHere);
//                                              answered by {t: "locked", id,
//                                              ok, held, here | name, message}
//                                              (here: not held, but the page
//                                              holds it: tabs.js heldHere)
//                   {t: "unlock", id}          let it go; answered by
//                                              {t: "unlocked", id} once free
//                   {t: "store", op, h, args, after}  a call of Go's on
//                                              the page's store h (store.js's
//                                              Stores); a commit made while Go
//                                              took the page's count for
//                                              batch waitID has after: waitID
//
// A batch of delivered messages is one postMessage: the attachment's
// delivery (relay.js's _deliver) is replaced by one that posts the batch and
// returns -1, so the engine waits for the page's count, exactly as it waits
// for a handler's Promise on the main thread; the cursor moves only past
// what the page's onMessage accepted.

import { CODE_BAD_OPTIONS, CODE_CLOSED, DONE_OK } from "./boundary.js";
import { bridge } from "./bridge.js";
import { loadRelay, RelayError } from "./relay.js";
import { DELIVERY } from "./remote.js";
import { visibility } from "./sockets.js";
import { resumeSlots, suspendSlots, tabEnv } from "./tabs.js";

const B = bridge();
const relays = new Map(); // id -> Relay
const atts = new Map(); // handle -> Attachment (the page's handle is the worker's)
const controllers = new Map(); // call id -> AbortController
const tokens = new Map(); // token request id -> {resolve, reject}
let nextRelay = 1;
let nextToken = 1;

// What the page remembers for tabs.js: its sessionStorage's slots, sent with
// every attach, and whether it was reloaded. The page holds the slots' locks.
const session = new Map();
tabEnv.read = (key) => session.get(key) ?? null;
tabEnv.write = (key, value) => {
  session.set(key, value);
  post({ t: "session", key, value });
};
tabEnv.lock = lockOnPage;
tabEnv.heldHere = (name) => heldByPage.has(name);

const locking = new Map(); // lock request id -> {name, resolve, reject}, until the page answers
const heldByPage = new Set(); // names of locks refused that the page said it holds (its last answer for each)
const freeing = new Map(); // lock request id -> resolve, until the page has let it go
let nextLock = 1;

// lockOnPage is tabs.js's lockHere, made on the page: it resolves to a
// release that has the page let go, or to null.
function lockOnPage(name, waitMs) {
  return new Promise((resolve, reject) => {
    const id = nextLock++;
    locking.set(id, { name, resolve, reject });
    post({ t: "lock", id, name, waitMs });
  });
}

function locked(m) {
  const w = locking.get(m.id);
  locking.delete(m.id);
  if (w && m.ok) heldByPage[m.here ? "add" : "delete"](w.name);
  if (!m.ok) w?.reject(new DOMException(m.message, m.name));
  else if (!m.held) w?.resolve(null);
  else {
    let freed = null;
    w?.resolve(() => {
      freed ??= new Promise((resolve) => {
        freeing.set(m.id, resolve);
        post({ t: "unlock", id: m.id });
      });
      return freed;
    });
  }
}

function post(m, transfer) {
  try {
    self.postMessage(m, transfer ?? []);
  } catch {
    // A value the structured clone refuses (a state's info with a function
    // in it): send what JSON keeps of it.
    self.postMessage(JSON.parse(JSON.stringify(m)));
  }
}

// PageStores stand for the page's stores (remote.js hosts them) in Go's
// calls, with Stores' methods. The page's store answers from IndexedDB as
// it would on the main thread, and it writes and leaves its copy in
// sessionStorage at pagehide itself: WebKit ends a page's worker before the
// worker hears of the pagehide, so a store here lost the last commit window
// on a reload (and a worker has no sessionStorage). Go's commits cross as
// they are made, the entries' bytes transferred; what Go reads
// synchronously (a stream's number, backend, fallback) is answered here:
// stream numbers count up on both sides in the order of the calls, and
// backend and fallback are what the page said with its last outcome.
class PageStores {
  constructor() {
    this.answering = 0; // the waitID whose count Go is taking, or 0
    this.next = 1;
    this.streams = new Map(); // h -> streams numbered so far
    this.info = new Map(); // h -> [backend, fallback]
  }

  open(id, database, windowMs, fallbackID) {
    const h = this.next++;
    this.streams.set(h, 0);
    this.info.set(h, ["indexeddb", null]); // a store's until it falls back
    post({ t: "store", op: "open", h, args: [id, database, windowMs, fallbackID, h] });
    return h;
  }

  stream(h, url, instance, name) {
    const n = this.streams.get(h);
    this.streams.set(h, n + 1);
    post({ t: "store", op: "stream", h, args: [h, url, instance, name] });
    return n;
  }

  setWindow(h, ms) {
    post({ t: "store", op: "setWindow", h, args: [h, ms] });
  }

  backend(h) {
    return this.info.get(h)?.[0] ?? "memory";
  }

  fallback(h) {
    return this.info.get(h)?.[1] ?? null;
  }

  commit(h, stream, session, cursor, keep, n, view, open) {
    const bytes = view && view.slice(); // view is the out buffer's: a copy of its own crosses
    const m = { t: "store", op: "commit", h, args: [h, stream, session, cursor, keep, n, bytes, open], after: this.answering };
    post(m, bytes ? [bytes.buffer] : []);
  }

  run(h, id, op, ...args) {
    post({ t: "store", op: "run", h, args: [h, id, op, ...args] });
  }

  writeAll() {
    post({ t: "store", op: "writeAll", h: 0, args: [] });
  }

  // stored takes the page's outcome for Go's wait id.
  stored(m) {
    if (m.info) this.info.set(m.h, m.info);
    const v = m.kind === DONE_OK ? m.value : Object.assign(new Error(m.value?.message ?? ""), { name: m.value?.name ?? "Error" });
    B.done(m.id, m.kind, v);
  }
}

const stores = new PageStores();
B.stores = stores;

// The delivery of the attachment the page calls h: one postMessage per
// batch, with the attachment's state, cursor and session.
function delivery(h) {
  return function (batch, replay, waitID) {
    post({ t: "batch", h, batch, replay, waitID, now: live(this) });
    return -1;
  };
}

// live is [state, cursor, session] of a running attachment, else null.
function live(a) {
  return B.attachments.has(a._handle) ? B.api.info(a._handle) : null;
}

const ops = {
  async relay(options) {
    if (options.wasm instanceof Uint8Array) {
      options.wasm = new Response(options.wasm, { headers: { "content-type": "application/wasm" } });
    }
    const relay = await loadRelay({ ...options, worker: false });
    const id = nextRelay++;
    relays.set(id, relay);
    return { id, storage: relay.storage };
  },
  async attach(relayID, h, o, entries, reloading, signal) {
    for (const [k, v] of entries) session.set(k, v);
    tabEnv.reloading = () => reloading;
    const att = await relayOf(relayID).attach({
      ...o,
      signal,
      token: o.token ?? (() => askToken(h)),
      onMessage() {}, // never called: DELIVERY takes the batches
      onState(state, info) {
        // An attachment that ends on its own (superseded, unauthorized on a
        // redial) is dropped by the page (remote.js), whose close() or
        // detach() then never comes here: it is let go now.
        if (state === "closed") atts.delete(h);
        post({ t: "state", h, state, info, now: live(this) });
      },
      onEvicted: (info) => post({ t: "evicted", h, info }),
      [DELIVERY]: delivery(h),
    });
    if (att.state !== "closed") atts.set(h, att); // not if it ended already
    return { name: att.name, now: [att.state, att.cursor, att.session], place: att._place ?? null };
  },
  stored: (relayID, stream) => relayOf(relayID).history(stream),
  forget: (relayID, stream) => relayOf(relayID).forget(stream),
  send: (h, text, trace, signal) => att(h).sendACP(text, { trace, signal }),
  resume: (h, afterSeq) => att(h).resume(afterSeq),
  history: (h) => att(h).history(),
  detach: (h) => atts.get(h)?.detach().finally(() => atts.delete(h)),
  close: (h) => atts.get(h)?.close().finally(() => atts.delete(h)),
  // How many attachments the worker holds (for tests: those that ended are
  // let go, though the page never calls close() or detach() for them).
  attachments: () => atts.size,
};

// codeOf is the RelayError code the page rejects a call with: a
// RelayError's own, "error" for anything else (a DOMException's code is a
// number, and "" is no code at all).
function codeOf(e) {
  return typeof e?.code === "string" && e.code !== "" ? e.code : "error";
}

function relayOf(id) {
  const relay = relays.get(id);
  if (!relay) throw new RelayError(CODE_BAD_OPTIONS, "no such Relay");
  return relay;
}

// att is the attachment the page calls h. One that ended was let go (its
// onState): a call on it fails as relay.js's would, with wasm_exited once
// relay.wasm has exited; close() and detach() of it do nothing (ops), as
// they do for an attachment that ended, which the page may not know yet.
function att(h) {
  const a = atts.get(h);
  if (!a) throw B.gone ?? new RelayError(CODE_CLOSED, "the attachment is closed");
  return a;
}

function askToken(h) {
  return new Promise((resolve, reject) => {
    const id = nextToken++;
    tokens.set(id, { resolve, reject });
    post({ t: "token", h, id });
  });
}

const life = {
  online: () => B.api?.online(true),
  offline: () => B.api?.online(false),
  visible: () => {
    visibility.hidden = false;
    B.api?.probe();
  },
  hidden: () => {
    visibility.hidden = true;
  },
  resume: () => B.api?.probe(),
  // The page going into the back/forward cache and back (lifecycle.js).
  suspend: () => suspendSlots(),
  pageshow: () => {
    resumeSlots();
    B.api?.probe();
  },
};

self.onmessage = ({ data: m }) => {
  switch (m.t) {
    case "call": {
      const c = new AbortController();
      controllers.set(m.id, c);
      Promise.resolve()
        .then(() => ops[m.op](...m.args, c.signal))
        .then(
          (value) => post({ t: "reply", id: m.id, ok: true, value: value ?? null }),
          (e) => post({ t: "reply", id: m.id, ok: false, code: codeOf(e), message: String(e?.message ?? e) }),
        )
        .finally(() => controllers.delete(m.id));
      break;
    }
    case "abort":
      controllers.get(m.id)?.abort();
      break;
    case "done":
      // Go commits what the count moved before it returns (and before it
      // awaits the next batch): those commits are the batch's.
      stores.answering = m.waitID;
      try {
        B.done(m.waitID, DONE_OK, m.n);
      } finally {
        stores.answering = 0;
      }
      break;
    case "token": {
      const w = tokens.get(m.id);
      tokens.delete(m.id);
      if (m.ok) w?.resolve(m.value);
      else w?.reject(new Error(m.message));
      break;
    }
    case "life":
      life[m.ev]?.();
      break;
    case "stored":
      stores.stored(m);
      break;
    case "locked":
      locked(m);
      break;
    case "unlocked":
      freeing.get(m.id)?.();
      freeing.delete(m.id);
      break;
  }
};

// up tells the page the module runs, once it holds a Web Lock of its own
// for as long as it lives: the engines fire no event on the page for a
// worker they end themselves (out of memory, its process gone), but all
// three let its locks go, and the page asks for this one (remote.js
// watch). Without Web Locks (not a secure context; a page refused them) it
// says so at once, and such an end goes unseen, as before.
function up() {
  const alive = `relaywasm-worker:${Date.now()}:${Math.random()}`;
  let said = false;
  const say = (m) => said || ((said = true), post(m));
  try {
    self.navigator.locks.request(alive, () => (say({ t: "up", alive }), new Promise(() => {}))).catch(() => say({ t: "up" }));
  } catch {
    say({ t: "up" });
  }
}

up();
