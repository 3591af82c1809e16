// crossing.js: what crosses between relay.js and relay.wasm, and when.
//
// Crossing from JavaScript into Go costs far more than the work done per
// frame (notes: every js.Value handed over gets a finalizer, and the glue
// encodes strings), so relay.js crosses into Go rarely: Go's callbacks are
// registered once (go below), incoming messages are queued and handed over
// once per event-loop turn (atTurnEnd; during a flood less often, as
// sockets.js says), and bytes cross through two buffers Go keeps a
// reference to instead of a new value per call.

// Go's callbacks, registered once by Go (bridge init). Each is a js.Func:
// calling one crosses into Go.
export const go = {
  frames: null, // (socket, byteLength, the in buffer when new or null, records)
  socket: null, // (socket, kind, code, text)
  done: null, // (id, kind, value): an asynchronous outcome Go waits for
};

// One MessageChannel message per event-loop turn runs what waits for the
// turn's end. A microtask would run after each event and give batches of one.
// The channel is made at the first use, not as the module loads: importing
// relay.js must leave nothing running, and in Node (a server rendering the
// app's pages, a test runner) a port that listens keeps the process alive.
const tasks = [];
let channel = null;

/** atTurnEnd runs fn once the current event-loop turn has ended. */
export function atTurnEnd(fn) {
  if (tasks.length === 0) (channel ??= turnChannel()).port2.postMessage(0);
  tasks.push(fn);
}

function turnChannel() {
  const c = new MessageChannel();
  c.port1.onmessage = () => {
    const run = tasks.splice(0);
    for (const t of run) t();
  };
  return c;
}

// The in buffer: JavaScript fills it (a flushed batch of records, a message
// to send) and Go copies out of it during the call that says so. Go keeps it
// once it has been handed over: a call passes it only when it is new
// (fresh), which spares Go a js.Value, and its finalizer, per call.
export const inbuf = {
  bytes: new Uint8Array(64 << 10),
  view: null,
  isNew: true,
};
inbuf.view = new DataView(inbuf.bytes.buffer);

/** fresh is the in buffer when Go has not seen it yet, else null. */
export function fresh() {
  if (!inbuf.isNew) return null;
  inbuf.isNew = false;
  return inbuf.bytes;
}

/** room makes sure need bytes fit at off in the in buffer, keeping the used ones. */
export function room(off, need) {
  if (inbuf.bytes.length >= off + need) return;
  const next = new Uint8Array(Math.max(off + need, inbuf.bytes.length * 2));
  next.set(inbuf.bytes.subarray(0, off));
  setIn(next);
}

function setIn(b) {
  inbuf.bytes = b;
  inbuf.view = new DataView(b.buffer);
  inbuf.isNew = true;
}

/** shrink gives up a buffer a burst made big. */
export function shrink() {
  if (inbuf.bytes.length > 8 << 20) setIn(new Uint8Array(64 << 10));
}

const encoder = new TextEncoder();

/**
 * text puts a message to send into the in buffer, which Go copies at once,
 * and returns [its length, the buffer when Go has not seen it yet].
 */
export function text(t) {
  room(0, t.length * 3);
  const n = encoder.encodeInto(t, inbuf.bytes).written;
  const b = fresh();
  if (inbuf.bytes.length > 8 << 20) queueMicrotask(shrink);
  return [n, b];
}

// The out buffer: Go fills it (a delivery's entries, a frame to send, a
// commit's entries) just before the call that reads it. Only Go asks for
// a new one (outBuffer), since Go keeps it.
export const outbuf = {
  buffer: new ArrayBuffer(64 << 10),
  bytes: null,
  entries: null, // the same bytes as float64s
};
setOut(outbuf.buffer);

function setOut(b) {
  outbuf.buffer = b;
  outbuf.bytes = new Uint8Array(b);
  outbuf.entries = new Float64Array(b);
}

/**
 * outBuffer is Go asking for an out buffer of at least n bytes: a bigger one,
 * or a small one again after a burst.
 */
export function outBuffer(n) {
  const size = Math.ceil(Math.max(n, 64 << 10, outbuf.buffer.byteLength < n ? 2 * outbuf.buffer.byteLength : 0) / 8) * 8;
  if (size !== outbuf.buffer.byteLength) setOut(new ArrayBuffer(size));
  return outbuf.bytes;
}
