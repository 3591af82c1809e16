// sockets.js: the page's WebSockets, owned here, and the delivery of the
// messages relay.js parsed.
//
// relay.wasm dials through dial and writes through send; the sockets' events
// go to Go through go.socket, and their messages are queued and flushed to Go
// once per event-loop turn, as records (records.js), through go.frames.
// Every message that arrived before a close reaches Go before the close.
//
// During a flood the flushes are spaced: once a flush carried FLOOD_BATCH
// messages or more, the next one waits until FLOOD_MS after it ended. Each
// flush crosses into Go, wakes its goroutines and commits, whatever its
// size; a visible page's turns are short, and a flood came in batches of
// 10–25 messages, at one per FLOOD_MS in batches of 100–170, which took
// 15–20% off the page's CPU per message (make bench). FLOOD_MS is one display
// frame at 60 Hz: a page still shows what arrives as soon as it can draw
// it. A message after a pause, a round trip's answer or a flood's first
// batch goes at the end of its turn. A hidden page's timers are slowed to
// one a second, so there no flush is spaced, and a spaced flush still
// waiting when the page was hidden goes with the next message's turn.

import { DELIVER_REPLAY, DELIVER_TEXT, FIELDS, FLOOD_BATCH, FLOOD_MS, MODE_PARSE_HOLD, MODE_TEXT, SOCKET_CLOSE, SOCKET_OPEN } from "./boundary.js";
import { atTurnEnd, fresh, go, outbuf, shrink } from "./crossing.js";
import { asError } from "./errors.js";
import { join } from "./held.js";
import { encode, REFS_PER_SOCKET } from "./records.js";

// visibility is the page's: on the main thread the document says; a worker
// has none, and worker.js keeps hidden as the page last said (remote.js).
export const visibility = { hidden: false };
const pageHidden = () => (globalThis.document ? document.hidden === true : visibility.hidden);

const sockets = new Map(); // handle -> socket record
let nextSocket = 1;
const decoder = new TextDecoder();

// refuseMixedContent throws, as Chromium's and Firefox's WebSocket
// constructors do, for a ws:// URL on a page (or in its worker) served over
// https:, unless it is to this machine (localhost, 127.0.0.0/8, [::1]: the
// engines let those through). WebKit, every iOS webview's engine, makes the
// socket and fails it with a bare error event, which is also what an
// unreachable relay gives, so the attachment was redialled for ever.
function refuseMixedContent(url) {
  // origin, not location: a worker made from a blob: URL has its page's.
  if (!String(globalThis.origin).startsWith("https:")) return;
  let u;
  try {
    u = new URL(url);
  } catch {
    return; // WebSocket's constructor says what is wrong with it
  }
  const h = u.hostname;
  if (u.protocol !== "ws:" || h === "localhost" || h.endsWith(".localhost") || h === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(h)) return;
  throw new DOMException("a page served over https: may open only wss:// WebSockets, except to this machine (mixed content)", "SecurityError");
}

// The page's Content-Security-Policy may leave the relay out of connect-src
// (or default-src). No engine's WebSocket says so: Chromium's makes the
// socket and fails it as an unreachable relay's, so the attachment was
// redialled for ever; Firefox's throws NS_ERROR_CONTENT_BLOCKED with no
// message, WebKit's a SecurityError, "The operation is insecure.". Each fires
// securitypolicyviolation in a later task, with the dial's URL as
// blockedURI, at the document (it reaches globalThis) or at a worker's
// global scope, where the socket of worker mode is (not WebKit: see thrown).
// A dial it names closes with a reason that says so, and Go ends the attach
// with bad_options.
const refusedByPolicy = new Set(); // blockedURIs of connect-src violations
globalThis.addEventListener?.("securitypolicyviolation", (ev) => {
  if (ev.disposition === "report") return; // a Report-Only policy's: the socket goes ahead
  if (ev.effectiveDirective !== "connect-src" && ev.effectiveDirective !== "default-src") return;
  refusedByPolicy.add(ev.blockedURI);
  for (const s of sockets.values()) if (!s.opened && names(ev.blockedURI, s.url)) s.policy = true;
});

// names reports whether a violation's blockedURI is url: the engines give
// the whole URL; an origin alone (as reports of another origin's redirect
// are cut) is taken too.
function names(blocked, url) {
  if (blocked === url) return true;
  try {
    const u = new URL(url);
    return blocked === u.href || blocked === u.origin;
  } catch {
    return false;
  }
}

// policyRefusal is why a dial to url failed when the page's policy refused it.
const policyRefusal = (url) =>
  `the page's Content-Security-Policy (connect-src) does not allow ${JSON.stringify(url)}, the relay's URL: add its origin to connect-src`;

/**
 * dial opens a WebSocket whose messages go to Go in mode (MODE_*), and
 * returns its handle. Throws a SecurityError for a URL the page may not
 * open (mixed content; one its policy refused before). The socket is known
 * by its handle until Go closes it (close), or until it closes unopened: Go may
 * still deliver its messages after the close event. In MODE_PARSE_HOLD the
 * payloads' texts wait in the queue of attachment (Go's handle of it;
 * held.js). A socket the page's policy refused (see refusedByPolicy), or
 * whose constructor threw (a URL or subprotocol the browser refuses
 * outright), closes unopened with a reason, which a failed connection's
 * close never has: Go ends the attach with it.
 */
export function dial(url, protocols, mode, attachment) {
  refuseMixedContent(url);
  if ([...refusedByPolicy].some((b) => names(b, url))) throw new DOMException(policyRefusal(url), "SecurityError");
  let ws;
  try {
    ws = new WebSocket(url, protocols);
  } catch (e) {
    return refused(url, e);
  }
  ws.binaryType = "arraybuffer";
  const handle = nextSocket++;
  if (mode === MODE_PARSE_HOLD) join(handle, attachment);
  const s = {
    handle,
    ws,
    url,
    policy: false, // the page's policy refused it
    mode,
    queue: [],
    dirty: false,
    opened: false,
    closed: false, // the close was handed to Go (once: see onerror)
    frames: [], // parsed acp.messages: ref s.base + i is frames[i]
    base: handle * REFS_PER_SOCKET,
    prev: FIELDS.map(() => ""), // the last REC_ACP's fields
    flushed: 0, // when the last flush ended (performance.now())
    flood: false, // the last flush carried FLOOD_BATCH messages or more
    timer: null, // the spaced flush's, while one waits
  };
  sockets.set(handle, s);
  ws.onopen = () => {
    s.opened = true;
    go.socket(handle, SOCKET_OPEN, 0, ws.protocol);
  };
  ws.onmessage = (ev) => {
    s.queue.push(ev.data);
    // A spaced flush waiting in a page gone hidden may wait a second: the
    // next message has it go at the end of its turn instead.
    if (s.dirty && (s.timer === null || !pageHidden())) return;
    schedule(s);
  };
  ws.onclose = (ev) => {
    if (s.closed) return;
    s.closed = true;
    flush(s); // synchronously: the messages before the close go first
    // A socket whose messages relay.js parsed stays known until Go has
    // delivered them and closes it; one that never opened has none.
    if (!s.opened || s.mode === MODE_TEXT) sockets.delete(handle);
    go.socket(handle, SOCKET_CLOSE, ev.code, s.policy && !s.opened ? policyRefusal(url) : ev.reason);
  };
  // WebKit fires error and never close for a connection it refuses to make
  // (a port on Fetch's bad-ports list, such as ws://host:1), where Chromium
  // and Firefox fire both in one task, as the spec says. A socket that is
  // CLOSED after its error and saw no close in that task gets one (1006, as
  // the spec's would be), or Go's dial waits forever.
  ws.onerror = () => {
    setTimeout(() => {
      if (!s.closed && ws.readyState === WebSocket.CLOSED) ws.onclose({ code: 1006, reason: "" });
    }, 0);
  };
  return handle;
}

// refused stands for a socket whose constructor threw (a SyntaxError for a
// URL it does not take; for the page's policy, Firefox's
// NS_ERROR_CONTENT_BLOCKED with no message, WebKit's SecurityError): it
// closes unopened at the next turn, once the policy's violation, if it was
// one, has been heard, with the reason the policy's or the exception's
// name and message.
function refused(url, e) {
  const handle = nextSocket++;
  const s = { handle, ws: null, url, policy: false, opened: false, closed: false, queue: [] };
  sockets.set(handle, s);
  setTimeout(() => {
    if (sockets.get(handle) !== s) return; // Go gave up on it (close)
    sockets.delete(handle);
    s.closed = true;
    go.socket(handle, SOCKET_CLOSE, 1006, s.policy ? policyRefusal(url) : thrown(url, e));
  }, 0);
  return handle;
}

// thrown is why WebSocket's constructor threw e for url, no violation of the
// policy heard: its name and message and, for the exceptions the engines
// throw for a policy's refusal, that hint. WebKit fires no
// securitypolicyviolation for a worker's refused socket, at the worker or
// the page; there, and with another exception, no engine says more.
function thrown(url, thrownValue) {
  const e = asError(thrownValue); // a page's code may throw a string or a BigInt from a WebSocket of its own
  const name = e.name || "Error";
  const what = e.message ? `${name}: ${e.message}` : name;
  if (name !== "SecurityError" && name !== "NS_ERROR_CONTENT_BLOCKED") return what;
  return `${what} (most likely ${policyRefusal(url)})`;
}

// schedule has the socket's queue flushed at the end of this turn or, after
// a flood's batch in a page that is not hidden, FLOOD_MS after that flush.
function schedule(s) {
  clearTimeout(s.timer);
  s.timer = null;
  s.dirty = true;
  const wait = s.flood && !pageHidden() ? s.flushed + FLOOD_MS - performance.now() : 0;
  if (wait > 0) s.timer = setTimeout(() => flush(s), wait);
  else atTurnEnd(() => flush(s));
}

function flush(s) {
  s.dirty = false;
  clearTimeout(s.timer);
  s.timer = null;
  const q = s.queue;
  if (q.length === 0) return;
  s.queue = [];
  s.flood = q.length >= FLOOD_BATCH;
  const n = encode(s, q); // one record per message
  go.frames(s.handle, n, fresh(), q.length);
  shrink();
  // Go has taken the batch (go.frames returns once Go is idle): a spaced
  // flush waits FLOOD_MS from here, however long this one took.
  s.flushed = performance.now();
}

/**
 * send writes the n bytes Go put in the out buffer as one text message;
 * false when the socket is not open, so Go knows the message did not leave.
 */
export function send(handle, n) {
  const s = sockets.get(handle);
  if (!s || s.ws?.readyState !== WebSocket.OPEN) return false;
  s.ws.send(decoder.decode(outbuf.bytes.subarray(0, n)));
  return true;
}

/**
 * close starts the closing handshake, and forgets the socket: Go is done
 * with it. Throws for a code script may not send (only 1000 and 3000–4999).
 */
export function close(handle, code, reason) {
  const s = sockets.get(handle);
  if (!s) return;
  sockets.delete(handle);
  s.queue = [];
  s.ws?.close(code, reason);
}

/**
 * closeAll closes every socket (close) once relay.wasm has exited: no Go is
 * left to read their messages or answer the relay's heartbeats, and the
 * messages would pile up unread. The relay keeps each attachment for its
 * grace, as after any drop, rather than until its heartbeat gives up.
 */
export function closeAll(reason) {
  for (const handle of [...sockets.keys()]) close(handle, 1000, reason);
}

/**
 * messages reads a delivery out of the out buffer: n entries [flags, ref],
 * ref being a parsed message's, or with DELIVER_TEXT the place of [seq,
 * payload] in the JSON text slow (a message relay.js did not parse; session
 * is then the one it arrived on). It returns the messages ({seq, session,
 * payload}) and whether each is a replay, or a shorter list when a ref is
 * unknown (which cannot happen; refusing the message fetches it again).
 */
export function messages(n, session, slow) {
  const texts = slow === null ? null : JSON.parse(slow);
  const batch = new Array(n);
  const replay = new Uint8Array(n);
  let pruned = null;
  for (let i = 0; i < n; i++) {
    const flags = outbuf.entries[2 * i];
    const ref = outbuf.entries[2 * i + 1];
    replay[i] = flags & DELIVER_REPLAY ? 1 : 0;
    if (flags & DELIVER_TEXT) {
      const [seq, payload, trace] = texts[ref];
      batch[i] = { seq, session, payload, trace };
      continue;
    }
    const s = sockets.get(Math.floor(ref / REFS_PER_SOCKET));
    if (s && s !== pruned) {
      // The socket's messages before the first one delivered now will
      // never be delivered: Go delivers a socket's messages in order.
      pruned = s;
      if (ref > s.base) {
        s.frames.splice(0, ref - s.base);
        s.base = ref;
      }
    }
    const f = s?.frames[ref - s.base];
    if (f === undefined) {
      console.error("relay.js: relay.wasm delivered a message this page does not hold");
      batch.length = i;
      return [batch, replay];
    }
    batch[i] = f;
  }
  return [batch, replay];
}
