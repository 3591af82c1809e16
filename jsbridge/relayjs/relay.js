// relay.js: the JavaScript half of relaywasm.
//
// relay.wasm (Go) holds the client engine. This module loads it and owns what
// is cheaper, or only possible, on the JavaScript side of the boundary:
//
//   - The WebSocket event handlers. Crossing from JavaScript into Go costs far
//     more than the work done per frame, so incoming messages are queued here
//     and handed to Go once per event-loop turn, packed into one byte buffer.
//   - Parsing. Each message is parsed here, once, with JSON.parse; Go gets the
//     envelope of an acp.message (what its decisions need) and answers which
//     of the parsed messages to deliver (jsbridge/frames.go says why).
//   - Small helpers Go calls through one well-known global (BRIDGE below):
//     there is no eval and no new Function anywhere, so pages with a strict
//     Content-Security-Policy can load it.
//
// Go finds this module's helpers at globalThis[BRIDGE]; importing the module
// installs them. The version in the name changes whenever the contract between
// relay.js and relay.wasm does, so a mismatched pair fails loudly.

import { openStream, PAUSED } from "./stream.js";

const BRIDGE = "__relaywasm_bridge_v1";

// ---------------------------------------------------------------------------
// The bridge: what Go calls.

function makeBridge() {
  // Go's callbacks, registered once by Go (init). Each is a js.Func: calling
  // one crosses into Go, which is why they are few and called per batch.
  let goFrames = null; // (handle, byteLength, Uint8Array or null)
  let goSocket = null; // (handle, kind, code, text)
  let goDone = null; // (id, kind, value)
  let goTurn = null; // ()

  const sockets = new Map(); // handle -> socket record
  const dirty = new Set(); // sockets with queued messages
  let nextSocket = 1;
  let wantTurn = false;
  let posted = false;

  // One MessageChannel message per event-loop turn flushes every socket's
  // queue. A microtask would run after each event and give batches of one.
  const channel = new MessageChannel();
  channel.port1.onmessage = () => {
    posted = false;
    for (const s of [...dirty]) flush(s);
    if (wantTurn) {
      wantTurn = false;
      goTurn();
    }
  };
  const schedule = () => {
    if (!posted) {
      posted = true;
      channel.port2.postMessage(0);
    }
  };

  // The batch buffer: one record per message (jsbridge/frames.go), reused
  // across flushes and grown when a batch does not fit.
  //   REC_TEXT      [0][u32 n][UTF-8]                the message as it arrived
  //   REC_ACP       [1][f64 index][f64 seq][field×5] an acp.message, parsed here
  //   REC_ACP_TEXT  [2][f64 index][u32 n][UTF-8]     one parsed here, and its text
  //   REC_ACP_KEEP  [3][as REC_ACP][u32 n][UTF-8]    REC_ACP and the payload's text
  // A field is [u32 n][UTF-8] or [SAME] for the socket's previous REC_ACP value.
  const REC_TEXT = 0;
  const REC_ACP = 1;
  const REC_ACP_TEXT = 2;
  const REC_ACP_KEEP = 3;
  const SAME = 0xffffffff;
  const FIELDS = ["instance", "session", "id", "re", "trace"];
  // How a socket hands its messages over (Go's dial mode).
  const MODE_TEXT = 0; // as they arrived
  const MODE_PARSE = 1; // acp.messages parsed here, as REC_ACP when they can be
  const MODE_PARSE_KEEP = 2; // parsed here, with the payload's text too (a transcript keeps it)
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  let buf = new Uint8Array(64 << 10);
  let view = new DataView(buf.buffer);
  // Go keeps buf once it has been handed over: a call passes it only when
  // it is new (fresh), which spares Go a js.Value, and its finalizer, per call.
  let bufFresh = true;
  const fresh = () => {
    if (!bufFresh) return null;
    bufFresh = false;
    return buf;
  };
  let acpType = "acp.message"; // librelay.TypeACPMessage; Go says so at init
  let maxFrameBytes = 16 << 20; // librelay.MaxFrameBytes; likewise

  // room makes sure need bytes fit at off, keeping the used ones.
  const room = (off, need) => {
    if (buf.length >= off + need) return;
    const next = new Uint8Array(Math.max(off + need, buf.length * 2));
    next.set(buf.subarray(0, off));
    setBuf(next);
  };
  const setBuf = (b) => {
    buf = b;
    view = new DataView(buf.buffer);
    bufFresh = true;
  };

  // put appends the record of one message at off and returns the new end.
  const put = (s, m, off) => {
    if (typeof m !== "string") return putText(new Uint8Array(m), off, REC_TEXT, 0); // binary: bytes are bytes
    if (s.mode === MODE_TEXT) return putText(m, off, REC_TEXT, 0);
    let f;
    try {
      f = JSON.parse(m);
    } catch {
      return putText(m, off, REC_TEXT, 0); // Go parses it, and drops it
    }
    if (f === null || typeof f !== "object" || f.type !== acpType) return putText(m, off, REC_TEXT, 0);
    const index = s.base + s.frames.length;
    s.frames.push(f);
    if (plain(f) && m.length * 3 <= maxFrameBytes) {
      if (s.mode === MODE_PARSE) return putACP(s, f, index, off, null);
      const payload = payloadText(m, f);
      if (payload !== null) return putACP(s, f, index, off, payload);
    }
    return putText(m, off, REC_ACP_TEXT, index);
  };

  // payloadText finds the text of a parsed frame's payload in the message,
  // when it can tell for sure: the frame has no member but the known ones
  // and payload is the last, as the relay writes them. The key "payload"
  // followed by a colon cannot occur inside a JSON string (its quotes would
  // be escaped), so its first occurrence is the frame's own unless the
  // payload holds one too, which is sent as text instead. Null otherwise.
  const payloadText = (m, f) => {
    const keys = Object.keys(f);
    if (keys[keys.length - 1] !== "payload" || !keys.every((k) => KNOWN.has(k))) return null;
    const at = m.indexOf(PAYLOAD_KEY);
    if (at < 0 || m.indexOf(PAYLOAD_KEY, at + PAYLOAD_KEY.length) >= 0) return null;
    let start = at + PAYLOAD_KEY.length;
    let end = m.length;
    while (end > start && SPACE.has(m.charCodeAt(end - 1))) end--;
    if (m.charCodeAt(end - 1) !== 0x7d) return null; // the frame's closing brace
    end--;
    while (start < end && SPACE.has(m.charCodeAt(start))) start++;
    while (end > start && SPACE.has(m.charCodeAt(end - 1))) end--;
    return m.slice(start, end);
  };
  const KNOWN = new Set(["type", ...FIELDS, "seq", "payload"]);
  const PAYLOAD_KEY = '"payload":';
  const SPACE = new Set([0x20, 0x0a, 0x0d, 0x09]);

  // plain says whether an acp.message's envelope can be handed over as
  // REC_ACP: every field a string or absent, and seq an exact count. Anything
  // else goes as text, for Go to judge as it judges any frame.
  const plain = (f) =>
    (f.seq === undefined || (Number.isSafeInteger(f.seq) && f.seq >= 0)) &&
    str(f.instance) && str(f.session) && str(f.id) && str(f.re) && str(f.trace);
  const str = (v) => v === undefined || typeof v === "string";

  const putText = (m, off, kind, index) => {
    const head = kind === REC_TEXT ? 5 : 13;
    if (typeof m !== "string") {
      room(off, head + m.length);
      buf.set(m, off + head);
      return head_(off, kind, index, head, m.length);
    }
    // Encoding into what is left fails only when the message is longer in
    // UTF-8 than the room left; then make room for the worst case.
    room(off, head + m.length);
    let r = encoder.encodeInto(m, buf.subarray(off + head));
    if (r.read !== m.length) {
      room(off, head + m.length * 3);
      r = encoder.encodeInto(m, buf.subarray(off + head));
    }
    return head_(off, kind, index, head, r.written);
  };
  const head_ = (off, kind, index, head, n) => {
    buf[off] = kind;
    if (kind !== REC_TEXT) view.setFloat64(off + 1, index, true);
    view.setUint32(off + head - 4, n, true);
    return off + head + n;
  };

  // putACP writes REC_ACP, or REC_ACP_KEEP when payload (its text) is not null.
  const putACP = (s, f, index, off, payload) => {
    room(off, 17 + 4 * FIELDS.length);
    buf[off] = payload === null ? REC_ACP : REC_ACP_KEEP;
    view.setFloat64(off + 1, index, true);
    view.setFloat64(off + 9, f.seq ?? 0, true);
    off += 17;
    for (let i = 0; i < FIELDS.length; i++) {
      const v = f[FIELDS[i]] ?? "";
      if (v === s.prev[i]) {
        room(off, 4);
        view.setUint32(off, SAME, true);
        off += 4;
        continue;
      }
      s.prev[i] = v;
      off = putString(v, off);
    }
    return payload === null ? off : putString(payload, off);
  };
  const putString = (v, off) => {
    room(off, 4 + v.length * 3);
    const n = v === "" ? 0 : encoder.encodeInto(v, buf.subarray(off + 4)).written;
    view.setUint32(off, n, true);
    return off + 4 + n;
  };

  const flush = (s) => {
    dirty.delete(s);
    const q = s.queue;
    if (q.length === 0) return;
    s.queue = [];
    let off = 0;
    for (const m of q) off = put(s, m, off);
    goFrames(s.handle, off, fresh());
    shrink();
  };
  // A burst can grow the buffer a lot; do not hold on to it for good.
  const shrink = () => {
    if (buf.length > 8 << 20) setBuf(new Uint8Array(64 << 10));
  };

  // What Go hands over: a delivery's entries (per message [flags, index],
  // read as float64s) or a frame to send (UTF-8). Go fills it through
  // outBuffer, then calls deliver or send.
  let out = new ArrayBuffer(64 << 10);
  let outBytes = new Uint8Array(out);
  let outEntries = new Float64Array(out);

  const SOCKET_OPEN = 0;
  const SOCKET_CLOSE = 1;

  // Calls into the Go API: each returns a Promise that Go settles later
  // through resolve/reject with the call's id.
  const calls = new Map();
  let nextCall = 1;
  let registered;
  const ready = new Promise((resolve) => (registered = resolve));

  return {
    version: 1,
    api: null, // the Go API, once Go registered it
    ready, // resolves when it has
    attachments: new Map(), // handle -> Attachment, for Go's callbacks
    nextHandle: 1, // Relay and Attachment handles

    // register is Go handing over its API (jsbridge.Register).
    register(api) {
      this.api = api;
      registered(api);
    },

    // call invokes a Go API function with a fresh call id and returns the
    // Promise Go settles. args is the arguments after the id, or a function
    // that makes them just before the call. An AbortSignal cancels the Go
    // side's context.
    call(op, args, signal) {
      return new Promise((resolve, reject) => {
        if (signal?.aborted) {
          reject(new RelayError("canceled", "the operation was aborted"));
          return;
        }
        const id = nextCall++;
        calls.set(id, { resolve, reject });
        signal?.addEventListener("abort", () => this.api.cancel(id), { once: true });
        try {
          const fn = this.api[op]; // called without this: Go need not take it
          fn(id, ...(typeof args === "function" ? args() : args));
        } catch (e) {
          calls.delete(id);
          reject(e);
        }
      });
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

    // text puts a message to send into the buffer Go reads (api.send),
    // which copies it at once, and returns [its length, the buffer when Go
    // has not seen it yet].
    text(t) {
      room(0, t.length * 3);
      const n = encoder.encodeInto(t, buf).written;
      const b = fresh();
      if (buf.length > 8 << 20) queueMicrotask(shrink);
      return [n, b];
    },

    // outBuffer is Go asking for an out buffer of at least n bytes: a
    // bigger one, or a small one again after a burst (Go keeps the buffer,
    // so only Go may have it replaced).
    outBuffer(n) {
      const size = Math.ceil(Math.max(n, 64 << 10, out.byteLength < n ? 2 * out.byteLength : 0) / 8) * 8;
      if (size !== out.byteLength) {
        out = new ArrayBuffer(size);
        outBytes = new Uint8Array(out);
        outEntries = new Float64Array(out);
      }
      return outBytes;
    },

    // Callbacks of an attachment, from Go. Each routes to the Attachment
    // object; none throws back into Go.
    //
    // deliver hands n messages to onMessage: Go put [flags, index] for each
    // in the out buffer, index being that of the socket's parsed message, or
    // with flags & 2 the place of [seq, payload] in the JSON text slow (for
    // a message not parsed here; session is then the one it arrived on).
    deliver(handle, sock, n, waitID, session, slow) {
      const a = this.attachments.get(handle);
      if (!a) return 0;
      const s = sockets.get(sock);
      const texts = slow === null ? null : JSON.parse(slow);
      // Everything is read out of the shared buffer before any handler runs.
      const batch = new Array(n);
      const replay = new Uint8Array(n);
      let dropped = false;
      for (let i = 0; i < n; i++) {
        const flags = outEntries[2 * i];
        const v = outEntries[2 * i + 1];
        replay[i] = flags & 1;
        if (flags & 2) {
          const [seq, payload] = texts[v];
          batch[i] = { seq, session, payload };
          continue;
        }
        if (!dropped && s) {
          // The socket's messages before the first one delivered now will
          // never be delivered: Go delivers in order.
          dropped = true;
          if (v > s.base) {
            s.frames.splice(0, v - s.base);
            s.base = v;
          }
        }
        const f = s?.frames[v - s.base];
        if (f === undefined) {
          // Cannot happen; refusing the message fetches it again.
          console.error("relay.js: relay.wasm delivered a message this page does not hold");
          batch.length = i;
          break;
        }
        batch[i] = f;
      }
      return a._deliver(batch, replay, waitID);
    },
    state(handle, state, info) {
      this.attachments.get(handle)?._state(state, info);
    },
    evicted(handle, info) {
      this.attachments.get(handle)?._evicted(info);
    },
    token(handle, waitID) {
      const a = this.attachments.get(handle);
      if (!a) {
        goDone(waitID, 1, "the attachment is gone");
        return;
      }
      a._token().then(
        (t) => goDone(waitID, 0, t),
        (e) => goDone(waitID, 1, String(e?.message ?? e)),
      );
    },
    ended(handle) {
      this.attachments.get(handle)?._ended();
      this.attachments.delete(handle);
    },
    // done lets this module report to Go as an asynchronous reporter does.
    done(id, kind, value) {
      goDone(id, kind, value);
    },

    // init registers Go's callbacks and the names Go shares. Go calls it
    // once per process.
    init(frames, socket, done, turn, acp, maxFrame) {
      goFrames = toGo(frames);
      goSocket = toGo(socket);
      goDone = toGo(done);
      goTurn = toGo(turn);
      acpType = acp;
      maxFrameBytes = maxFrame;
    },

    // dial opens a WebSocket whose messages go to Go in mode (MODE_*), and
    // returns its handle. Throws (a SyntaxError) for a URL or subprotocol the
    // browser refuses outright. The socket is known by its handle until Go
    // closes it (close), or until it closes unopened: Go may still deliver
    // its messages after the close event.
    dial(url, protocols, mode) {
      const ws = new WebSocket(url, protocols);
      ws.binaryType = "arraybuffer";
      const s = {
        handle: nextSocket++,
        ws,
        mode,
        queue: [],
        opened: false,
        frames: [], // parsed acp.messages, s.base + i being frames[i]'s index
        base: 0,
        prev: FIELDS.map(() => ""), // the last REC_ACP's fields
      };
      sockets.set(s.handle, s);
      ws.onopen = () => {
        s.opened = true;
        goSocket(s.handle, SOCKET_OPEN, 0, ws.protocol);
      };
      ws.onmessage = (ev) => {
        s.queue.push(ev.data);
        if (!dirty.has(s)) {
          dirty.add(s);
          schedule();
        }
      };
      // Every message that arrived before the close reaches Go before the
      // close does: flush the queue first, synchronously.
      ws.onclose = (ev) => {
        flush(s);
        // A socket whose messages relay.js parsed stays known until Go has
        // delivered them and closes it; one that never opened has none.
        if (!s.opened || s.mode === MODE_TEXT) sockets.delete(s.handle);
        goSocket(s.handle, SOCKET_CLOSE, ev.code, ev.reason);
      };
      return s.handle;
    },

    // send writes the n bytes Go put in the out buffer as one text message;
    // false when the socket is not open, so Go knows the message did not
    // leave.
    send(handle, n) {
      const s = sockets.get(handle);
      if (!s || s.ws.readyState !== WebSocket.OPEN) return false;
      s.ws.send(decoder.decode(outBytes.subarray(0, n)));
      return true;
    },

    // close starts the closing handshake, and forgets the socket: Go is done
    // with it. Throws for a code script may not send (only 1000 and
    // 3000–4999 are allowed).
    close(handle, code, reason) {
      const s = sockets.get(handle);
      if (!s) return;
      sockets.delete(handle);
      dirty.delete(s);
      s.ws.close(code, reason);
    },

    // later calls Go's turn callback once, on the next event-loop turn, so
    // everything Go did during this turn can be handled as one batch.
    later() {
      wantTurn = true;
      schedule();
    },

    // write applies a batch of a Store's commits to IndexedDB in one
    // readwrite transaction and reports to Go through done(id): 0 when it
    // completed, 1 with what failed. streams is JSON (jsbridge/store.go
    // appendStream): [[url, instance, name, session, cursor, keep, total, n,
    // offset, length], …], total being -1 when it must be read first; chunks
    // holds every stream's new transcript entries, packed, or is null. final:
    // the page is going away: issue every request now and commit at once
    // (trimming waits for the next write).
    write(db, id, streams, chunks, final) {
      let tx;
      let failed = null;
      const fail = (e) => {
        failed ??= e ?? null;
        try {
          tx.abort();
        } catch {
          // already finished or aborted: onabort reports it
        }
      };
      try {
        tx = db.transaction([STORE_STATE, STORE_CHUNKS], "readwrite");
      } catch (e) {
        goDone(id, 1, e);
        return;
      }
      tx.oncomplete = () => goDone(id, 0, null);
      tx.onabort = () => goDone(id, 1, failed ?? tx.error);
      let reads = 0;
      try {
        const states = tx.objectStore(STORE_STATE);
        const store = tx.objectStore(STORE_CHUNKS);
        for (const [url, instance, name, session, cursor, keep, total, n, offset, length] of JSON.parse(streams)) {
          const key = [url, instance, name];
          const put = (total) => {
            if (keep <= 0) {
              if (total !== 0) store.delete(chunkRange(key, 0, MAX_CHUNK_KEY, false));
              total = 0;
            } else if (n > 0) {
              store.put(chunks.slice(offset, offset + length), [...key, total]);
              total += n;
              if (!final) trim(store, key, total - keep, fail);
            }
            states.put({ session, cursor, total, keep }, key);
          };
          if (total >= 0) {
            put(total);
            continue;
          }
          reads++;
          const req = states.get(key);
          req.onsuccess = () => {
            try {
              put(typeof req.result?.total === "number" ? req.result.total : 0);
            } catch (e) {
              fail(e);
            }
          };
        }
        if (final && reads === 0) tx.commit?.();
      } catch (e) {
        fail(e);
      }
    },

    // watch reports the events of an IndexedDB request or transaction to Go
    // as (id, kind, value): kind 0 success/complete (value: result), 1 error
    // or abort (value: the DOMException), 2 blocked, 3 upgradeneeded (value:
    // the database). Go awaits them on a channel; nothing here throws. For a
    // database it only arranges to close it on versionchange.
    watch(target, id) {
      if (target instanceof IDBDatabase) {
        // Never block a newer page that upgrades the schema; this page's
        // next transaction fails and its Store falls back to memory.
        target.onversionchange = () => target.close();
        return;
      }
      const fail = () => goDone(id, 1, target.error ?? null);
      if (target instanceof IDBTransaction) {
        target.oncomplete = () => goDone(id, 0, null);
        target.onabort = fail;
        return;
      }
      target.onsuccess = () => goDone(id, 0, target.result);
      target.onerror = (ev) => {
        // Stop the error from also aborting the enclosing transaction twice
        // over; the transaction's own abort is still reported.
        ev.stopPropagation();
        fail();
      };
      if (target instanceof IDBOpenDBRequest) {
        target.onblocked = () => goDone(id, 2, null);
        target.onupgradeneeded = () => goDone(id, 3, target.result);
      }
    },
  };
}

// The Store's object stores (jsbridge/store.go): state [url, instance, name]
// -> {session, cursor, total, keep}; chunks [url, instance, name, start] ->
// packed transcript entries, start counting entries since the stream began.
const STORE_STATE = "state";
const STORE_CHUNKS = "chunks";
const MAX_CHUNK_KEY = 2 ** 53;

function chunkRange(key, from, to, upperOpen) {
  return IDBKeyRange.bound([...key, from], [...key, to], false, upperOpen);
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

// toGo wraps a Go callback for calls from browser events: an exception must
// not escape into the event loop. The one expected exception is a Go program
// that has exited (a test binary at its end) while sockets still close.
function toGo(fn) {
  return (...args) => {
    try {
      return fn(...args);
    } catch (e) {
      if (e?.message !== "Go program has already exited") console.error("relay.js: relay.wasm failed:", e);
    }
  };
}

function bridge() {
  // The bridge is created once per page, however many times this module is
  // evaluated: Go registers its callbacks with it only once.
  let b = globalThis[BRIDGE];
  if (!b) {
    b = makeBridge();
    Object.defineProperty(globalThis, BRIDGE, { value: b });
  }
  return b;
}

const B = bridge();

// ---------------------------------------------------------------------------
// The public API. See relay.d.ts for the documentation of every name.

/** An error with a stable code; every rejection of this module is one. */
export class RelayError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "RelayError";
    this.code = code;
  }
}

let starting = null;

/**
 * Loads and starts relay.wasm (once per page) and returns a Relay. When the
 * page's Go program is already running and has registered the API (a page
 * that instantiated relay.wasm itself, or a Go test binary), nothing is
 * loaded.
 */
export async function loadRelay(options = {}) {
  if (!B.api) {
    starting ??= start(options).catch((e) => {
      starting = null;
      throw e;
    });
    await starting;
  }
  const wanted = options.storage ?? "indexeddb";
  if (wanted !== "indexeddb" && wanted !== "memory") {
    throw new RelayError("bad_options", `storage must be "indexeddb" or "memory", not ${JSON.stringify(wanted)}`);
  }
  const window = options.commitWindowMs ?? -1; // -1: the default
  if (options.commitWindowMs !== undefined && !(Number.isFinite(window) && window >= 0)) {
    throw new RelayError("bad_options", "commitWindowMs must be a duration in milliseconds");
  }
  const handle = B.nextHandle++;
  const storage = await B.call("relay", [handle, options.database ?? "", wanted, window]);
  return new Relay(handle, storage);
}

async function start(options) {
  try {
    if (typeof globalThis.Go !== "function") {
      // wasm_exec.js is a classic script that defines globalThis.Go; it
      // evaluates as a module just as well, with no eval involved.
      await import(String(options.wasmExec ?? new URL("./wasm_exec.js", import.meta.url)));
    }
    const go = new globalThis.Go();
    const source = options.wasm ?? new URL("./relay.wasm", import.meta.url);
    const instance = await instantiate(source, go.importObject);
    const exited = go.run(instance).then(() => {
      throw new RelayError("wasm_exited", "relay.wasm exited");
    });
    await Promise.race([B.ready, exited]);
  } catch (e) {
    if (e instanceof RelayError) throw e;
    throw new RelayError("wasm_load_failed", `could not start relay.wasm: ${e?.message ?? e}`);
  }
}

async function instantiate(source, imports) {
  if (source instanceof WebAssembly.Module) return WebAssembly.instantiate(source, imports);
  const response = source instanceof Response ? source : await fetch(source);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${response.url}`);
  try {
    return (await WebAssembly.instantiateStreaming(response.clone(), imports)).instance;
  } catch (e) {
    // A server that does not send application/wasm: compile from the bytes.
    if (!(e instanceof TypeError)) throw e;
    return (await WebAssembly.instantiate(await response.arrayBuffer(), imports)).instance;
  }
}

class Relay {
  #handle;

  constructor(handle, storage) {
    this.#handle = handle;
    /** Where stream state is kept: "indexeddb", or "memory" when IndexedDB failed. */
    this.storage = storage;
  }

  async attach(options) {
    const o = normalise(options);
    listenToLifecycle();
    const slot = await takeSlot(o.url, o.instance, o.name);
    const a = new Attachment(B.nextHandle++, slot, options);
    B.attachments.set(a._handle, a);
    try {
      await B.call("attach", [this.#handle, a._handle, { ...o, name: slot.name }], options.signal);
    } catch (e) {
      B.attachments.delete(a._handle);
      await slot.release();
      throw e;
    }
    return a;
  }
}

function normalise(options) {
  const bad = (what) => {
    throw new RelayError("bad_options", what);
  };
  if (typeof options !== "object" || options === null) bad("attach needs an options object");
  const { url, instance, token, relayKey, name = "default", history = 0 } = options;
  if (typeof url !== "string" || url === "") bad("url is required");
  if (typeof instance !== "string" || instance === "") bad("instance is required");
  if (typeof token !== "string" && typeof token !== "function") bad("token must be a string or a function");
  if (typeof options.onMessage !== "function") bad("onMessage is required");
  if (typeof name !== "string" || name === "") bad("name must be a non-empty string");
  if (!Number.isSafeInteger(history) || history < 0) bad("history must be a count");
  const ms = (v) => (v === undefined ? 0 : Number.isFinite(v) && v > 0 ? v : bad("durations are positive milliseconds"));
  return {
    url,
    instance,
    name,
    history,
    relayKey: relayKey ?? "",
    handshakeTimeoutMs: ms(options.handshakeTimeoutMs),
    backoffInitialMs: ms(options.backoff?.initialMs),
    backoffMaxMs: ms(options.backoff?.maxMs),
    heartbeatIntervalMs: ms(options.heartbeat?.intervalMs),
    heartbeatTimeoutMs: ms(options.heartbeat?.timeoutMs),
    sendQueue: options.sendQueue ?? 0,
  };
}

class Attachment {
  #slot;
  #token;
  #last = ["connecting", 0, ""]; // state, cursor, session: kept for after the end
  _tap = null; // the open stream() (stream.js): it takes the deliveries while set

  constructor(handle, slot, options) {
    this._handle = handle;
    this.#slot = slot;
    this.#token = options.token;
    this.onMessage = options.onMessage;
    this.onState = options.onState ?? null;
    this.onEvicted = options.onEvicted ?? null;
  }

  /** The stream's name as stored: the name asked for, or name#2, #3 … in another tab. */
  get name() {
    return this.#slot.name;
  }
  get state() {
    return this.#info()[0];
  }
  get cursor() {
    return this.#info()[1];
  }
  get session() {
    return this.#info()[2];
  }
  #info() {
    const live = B.attachments.has(this._handle) ? B.api.info(this._handle) : null;
    if (live) this.#last = live;
    return this.#last;
  }

  sendACP(message, options = {}) {
    let text = message;
    if (typeof message !== "string") {
      try {
        text = JSON.stringify(message);
      } catch (e) {
        return Promise.reject(new RelayError("bad_payload", `message is not JSON: ${e.message}`));
      }
      if (text === undefined) return Promise.reject(new RelayError("bad_payload", "message is not JSON"));
    }
    // The text crosses as UTF-8 in the bridge's buffer, not as a string
    // Go would have to take and encode itself.
    return B.call("send", () => [this._handle, ...B.text(text)], options.signal);
  }

  /** The ACP SDK's Stream over this attachment (stream.js). */
  stream(options) {
    return openStream(this, options, RelayError);
  }

  resume(afterSeq) {
    if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) {
      return Promise.reject(new RelayError("bad_cursor", "afterSeq must be a seq (a non-negative integer)"));
    }
    return B.call("resume", [this._handle, afterSeq]);
  }

  async history() {
    const text = await B.call("history", [this._handle]);
    return JSON.parse(text).map(([out, seq, message]) => ({ out: out === 1, seq, message }));
  }

  async detach() {
    await this.#end("detach");
  }

  async close() {
    await this.#end("close");
  }

  async #end(op) {
    try {
      if (B.attachments.has(this._handle)) await B.call(op, [this._handle]);
    } finally {
      await this.#slot.release();
    }
  }

  // Delivery of one batch: parsed frames ({seq, session, payload}) and
  // whether each is a replay. Returns how many the handler accepted, or -1
  // when a handler returned a Promise; the count then goes to Go when the
  // batch is done. A message counts as accepted once its handler returned, or
  // its Promise resolved, without throwing: only those move the cursor.
  _deliver(batch, replay, waitID, from = 0) {
    for (let i = from; i < batch.length; i++) {
      const f = batch[i];
      let r;
      try {
        r = (this._tap ?? this).onMessage(f.payload ?? null, { seq: f.seq ?? 0, session: f.session ?? "", replay: replay[i] === 1 });
      } catch (e) {
        report("onMessage", e);
        return this.#delivered(i, waitID, from);
      }
      if (r !== null && typeof r === "object" && typeof r.then === "function") {
        Promise.resolve(r).then(
          () => this._deliver(batch, replay, waitID, i + 1),
          (e) => {
            if (e !== PAUSED) report("onMessage", e);
            B.done(waitID, 0, i);
          },
        );
        return -1;
      }
    }
    return this.#delivered(batch.length, waitID, from);
  }
  #delivered(n, waitID, from) {
    // Called from a Promise continuation, the count must be sent; called
    // from Go's synchronous call (from 0), it is returned.
    if (from > 0) B.done(waitID, 0, n);
    return n;
  }

  _state(state, info) {
    this.#last = [state, this.#last[1], this.#last[2]];
    this._tap?.state(state, info);
    if (this.onState) guard("onState", () => this.onState(state, info));
  }

  _evicted(info) {
    this._tap?.evicted(info);
    if (this.onEvicted) guard("onEvicted", () => this.onEvicted(info));
  }

  async _token() {
    const t = typeof this.#token === "function" ? await this.#token() : this.#token;
    if (typeof t !== "string") throw new TypeError("the token function must resolve to a string");
    return t;
  }

  // The attachment ended (detach, close or a fatal error): keep its last
  // state, cursor and session for the getters, and free its slot.
  _ended() {
    this.#info();
    this.#slot.release();
  }
}

function guard(what, fn) {
  try {
    const r = fn();
    if (r && typeof r.then === "function") r.then(undefined, (e) => report(what, e));
  } catch (e) {
    report(what, e);
  }
}

// An application handler failed: say so on the console, never throw into Go.
function report(what, e) {
  console.error(`relay.js: the ${what} handler failed:`, e);
}

// ---------------------------------------------------------------------------
// Tabs. Each stream (url, instance, name) is held by one attachment at a time
// in the whole browser profile, through a Web Lock per slot: the first tab
// gets "name", a second tab (or a duplicated one) "name#2", and so on, so two
// tabs never reclaim each other's attachment id. A tab remembers its slot in
// sessionStorage, and a reloaded tab waits a little for the lock its previous
// page still held while unloading, so it gets its own stream back.

const RELOAD_WAIT_MS = 3000;

async function takeSlot(url, instance, name) {
  const locks = globalThis.navigator?.locks;
  if (!locks) return { name, release: async () => {} }; // no Web Locks (an insecure context)
  const prefix = `relaywasm:${url}\u0000${instance}\u0000`;
  const memory = `relaywasm-slot:${url}\u0000${instance}\u0000${name}`;
  const preferred = Number(readSession(memory)) || 1;
  const slotName = (i) => (i === 1 ? name : `${name}#${i}`);
  let release = await tryLock(locks, prefix + slotName(preferred), reloading() ? RELOAD_WAIT_MS : 0);
  let slot = preferred;
  for (let i = 1; !release; i++) {
    if (i === preferred) continue;
    release = await tryLock(locks, prefix + slotName(i), 0);
    slot = i;
  }
  writeSession(memory, String(slot));
  return { name: slotName(slot), release };
}

// tryLock takes a lock and holds it until release() is called (release then
// resolves once the lock is free again), or resolves to null when the lock is
// not free within waitMs.
function tryLock(locks, lockName, waitMs) {
  return new Promise((resolve, reject) => {
    let unlock;
    const held = new Promise((r) => (unlock = r));
    const opts = waitMs > 0 ? { signal: AbortSignal.timeout(waitMs) } : { ifAvailable: true };
    let freed;
    const request = locks.request(lockName, opts, (lock) => {
      if (!lock) {
        resolve(null);
        return undefined;
      }
      let released = false;
      resolve(async () => {
        if (!released) {
          released = true;
          unlock();
        }
        await freed;
      });
      return held;
    });
    freed = request.then(
      () => {},
      (e) => {
        if (e?.name === "TimeoutError" || e?.name === "AbortError") resolve(null);
        else reject(e);
      },
    );
  });
}

function reloading() {
  const type = globalThis.performance?.getEntriesByType?.("navigation")?.[0]?.type;
  return type === "reload" || type === "back_forward";
}

function readSession(key) {
  try {
    return globalThis.sessionStorage?.getItem(key);
  } catch {
    return null; // storage disabled
  }
}

function writeSession(key, value) {
  try {
    globalThis.sessionStorage?.setItem(key, value);
  } catch {
    // storage disabled: the tab just does not remember its slot
  }
}

// ---------------------------------------------------------------------------
// Browser lifecycle, for every attachment of the page: redial at once when
// the network comes back, close the socket when it goes (a browser does not
// close a socket on its own when offline), probe the connection when the
// page becomes visible (a sleeping tab may have lost it unnoticed), and
// write the stored cursors at once when it is hidden or goes away (pagehide:
// a reload, a navigation; hidden: a phone may kill a background tab without
// another event), instead of at the end of the commit window. Nothing else
// happens on pagehide: no detach, so a reload finds the attachment id still
// held by the relay and reclaims it.

let listening = false;

function listenToLifecycle() {
  if (listening || typeof addEventListener !== "function") return;
  listening = true;
  addEventListener("online", () => B.api.online(true));
  addEventListener("offline", () => B.api.online(false));
  addEventListener("pagehide", () => B.api.hidden());
  globalThis.document?.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") B.api.probe();
    else B.api.hidden();
  });
}
