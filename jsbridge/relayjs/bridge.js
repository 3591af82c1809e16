// bridge.js: the one object relay.wasm talks to, installed once per page at
// globalThis[BRIDGE_GLOBAL]. Every method Go calls is here (and nowhere
// else), each made to throw nothing but Errors (errors.js guarded); every
// call into Go goes through api (what Go registered) or the callbacks in
// crossing.js's go.
//
// The bridge carries the boundary's VERSION, and Go carries its own: a
// relay.wasm refuses a bridge of another version (and says so through
// refuse), and the bridge refuses a relay.wasm that registers with another,
// so a relay.js and a relay.wasm from different builds never misread each
// other; loadRelay rejects with wasm_load_failed.

import { ABORTED, BRIDGE_GLOBAL, CODE_CANCELED, CODE_WASM_LOAD_FAILED, DONE_FAILED, DONE_OK, VERSION } from "./boundary.js";
import { go, outbuf, outBuffer, text } from "./crossing.js";
import { unhold } from "./entries.js";
import { asError, guarded, RelayError, settling, toGo } from "./errors.js";
import { release } from "./held.js";
import { close, closeAll, dial, messages, send } from "./sockets.js";
import { Stores, writeAll } from "./store.js";

/** bridge returns the page's bridge, installing it on first use. */
export function bridge() {
  let b = globalThis[BRIDGE_GLOBAL];
  if (!b) {
    b = makeBridge();
    Object.defineProperty(globalThis, BRIDGE_GLOBAL, { value: b });
  }
  return b;
}

function makeBridge() {
  // Calls into the Go API: each returns a Promise that Go settles later
  // through resolve/reject with the call's id.
  const calls = new Map();
  let nextCall = 1;
  let registered, refused;
  const ready = new Promise((resolve, reject) => {
    registered = resolve;
    refused = reject;
  });
  ready.catch(() => {}); // loadRelay reports it

  // What Go calls: only Errors are thrown back (guarded).
  const forGo = {
    // register is Go handing over its API (jsbridge.Register) and the
    // boundary version it was built with.
    register(api, version) {
      if (version !== VERSION) {
        const e = mismatch(version);
        refused(e);
        throw e;
      }
      b.api = api;
      registered(api);
    },
    // refuse is Go saying that this bridge's version is not its own.
    refuse(version) {
      refused(mismatch(version));
    },
    // init registers Go's callbacks, once per process.
    init(frames, socket, done) {
      go.frames = toGo(frames);
      go.socket = toGo(socket);
      go.done = toGo(done);
    },
    resolve(id, value) {
      const c = calls.get(id);
      calls.delete(id);
      c?.resolve(value);
    },
    reject(id, code, message) {
      const c = calls.get(id);
      calls.delete(id);
      c?.reject(new RelayError(code, message));
    },
    outBuffer,
    dial,
    send,
    close,

    // Callbacks of an attachment, from Go. Each routes to the Attachment
    // object; none throws back into Go.
    //
    // deliver hands n messages to onMessage (sockets.js messages reads
    // which) and returns how many the handler accepted, or -1 when a
    // handler returned a Promise: the count then goes to Go through
    // done(waitID) when the batch is done.
    deliver(handle, n, waitID, session, slow) {
      const a = b.attachments.get(handle);
      if (!a) return 0;
      const [batch, replay] = messages(n, session, slow);
      return a._deliver(batch, replay, waitID);
    },
    state(handle, state, info) {
      b.attachments.get(handle)?._state(state, info);
    },
    evicted(handle, info) {
      b.attachments.get(handle)?._evicted(info);
    },
    token(handle, waitID) {
      const a = b.attachments.get(handle);
      if (!a) {
        go.done(waitID, DONE_FAILED, new Error("the attachment is gone"));
        return;
      }
      a._token().then(
        (t) => go.done(waitID, DONE_OK, t),
        (e) => go.done(waitID, DONE_FAILED, asError(e)),
      );
    },
    ended(handle) {
      b.attachments.get(handle)?._ended();
      b.attachments.delete(handle);
    },
    // releaseHeld lets the payloads held for the attachment go: it has ended.
    releaseHeld: (handle) => release(handle),

    // The stores (store.js's Stores: this thread's, or in worker mode the
    // page's, b.stores), by handle. Each asynchronous operation reports to
    // done(id): DONE_OK with its result, or DONE_FAILED with an Error.
    // fallbackID hears (DONE_OK, null) when the store falls back to memory.
    storeOpen: (id, database, windowMs, fallbackID) => b.stores.open(id, database, windowMs, fallbackID),
    storeStream: (h, url, instance, name) => b.stores.stream(h, url, instance, name),
    storeWindow: (h, ms) => b.stores.setWindow(h, ms),
    storeBackend: (h) => b.stores.backend(h),
    storeFallback: (h) => b.stores.fallback(h),
    // storeCommit's entries are the len bytes Go put in the out buffer,
    // which the store copies during the call; held of them are ENTRY_HELD,
    // whose payloads relay.js holds (held.js) and puts in first.
    // open is client.Saved.PlaceOpen.
    storeCommit(h, stream, session, cursor, keep, n, len, held, open) {
      let bytes = len > 0 ? outbuf.bytes.subarray(0, len) : null;
      if (bytes !== null && held > 0) bytes = unhold(bytes);
      b.stores.commit(h, stream, session, cursor, keep, n, bytes, open === true);
    },
    storeLoad: (h, id, stream) => b.stores.run(h, id, "load", stream),
    storeHistory: (h, id, stream) => b.stores.run(h, id, "history", stream),
    storeClear: (h, id, stream) => b.stores.run(h, id, "clear", stream),
    storeFlush: (h, id) => b.stores.run(h, id, "flush"),
    storeWriteAll: () => b.stores.writeAll(),
  };
  for (const [name, fn] of Object.entries(forGo)) forGo[name] = guarded(fn);

  const b = {
    version: VERSION,
    ...forGo,
    api: null, // the Go API, once Go registered it
    stores: new Stores((id, kind, value) => go.done(id, kind, value)), // worker.js puts the page's in their place
    ready, // resolves when it has; rejects when relay.wasm is from another build
    attachments: new Map(), // handle -> Attachment, for Go's callbacks
    nextHandle: 1, // Relay and Attachment handles
    text, // a message to send, into the buffer Go reads (api.send)
    writeAll,

    gone: null, // the wasm_exited RelayError, once relay.wasm exited (exited)

    // exited is relay.wasm having exited (a Go panic; out of memory, as a
    // phone's tab may run into): nothing Go was to settle ever will, so every
    // call waiting for Go rejects with err, and every call after at once;
    // every live attachment is told, once, with onState("closed", {code:
    // "wasm_exited"}) and keeps its last state, cursor and session for its
    // getters. What calls into Go on its own (the lifecycle listeners, a
    // call's AbortSignal) then calls nothing: Go's functions throw once it
    // has exited. Its sockets are closed (sockets.js closeAll).
    exited(err) {
      if (b.gone) return;
      b.gone = err;
      b.api = EXITED_API;
      closeAll("relay.wasm exited");
      for (const c of calls.values()) c.reject(err);
      calls.clear();
      const live = [...b.attachments.values()];
      b.attachments.clear();
      for (const a of live) a._exited(err);
    },

    // call invokes a Go API function with a fresh call id and returns the
    // Promise Go settles. args is the arguments after the id, or a function
    // that makes them just before the call. An AbortSignal cancels the Go
    // side's context.
    call(op, args, signal) {
      return new Promise((resolve, reject) => {
        if (b.gone) {
          reject(b.gone);
          return;
        }
        if (signal?.aborted) {
          reject(new RelayError(CODE_CANCELED, ABORTED));
          return;
        }
        const id = nextCall++;
        const call = settling(signal, () => b.api.cancel(id), resolve, reject);
        calls.set(id, call);
        try {
          const fn = b.api[op]; // called without this: Go need not take it
          fn(id, ...(typeof args === "function" ? args() : args));
        } catch (e) {
          calls.delete(id);
          call.reject(e);
        }
      });
    },

    // done lets the public API report to Go as an asynchronous reporter does.
    done(id, kind, value) {
      go.done(id, kind, value);
    },
  };
  return b;
}

// EXITED_API stands for Go's API once relay.wasm exited: each function
// does nothing and returns null (an attachment's info then is its last).
const EXITED_API = new Proxy(Object.freeze({}), { get: (_, k) => (k === "then" ? undefined : () => null) });

function mismatch(version) {
  return new RelayError(
    CODE_WASM_LOAD_FAILED,
    `relay.wasm speaks boundary version ${version} and relay.js ${VERSION}: they are from different builds (serve the relay.js, relay.wasm and wasm_exec.js of one build together)`,
  );
}
