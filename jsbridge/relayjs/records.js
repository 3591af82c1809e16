// records.js: a socket's queued messages as the records of one flushed
// batch (jsbridge/boundary says what each record is; jsbridge/frames.go
// reads them).
//
// Each message is parsed here, once, with JSON.parse. Of an acp.message Go
// gets the envelope only (what the engine decides on) and the ref under
// which the socket keeps the parsed object; delivery names that ref again,
// and the object goes to onMessage as it is. Everything else Go reads from
// the message's text. With a transcript, the payload's text goes with the
// envelope (MODE_PARSE_KEEP), or stays here for the store (MODE_PARSE_HOLD,
// held.js).

import {
  ACP_TYPE,
  FIELDS,
  MAX_FRAME_BYTES,
  MODE_PARSE,
  MODE_PARSE_HOLD,
  MODE_TEXT,
  REC_ACP,
  REC_ACP_KEEP,
  REC_ACP_TEXT,
  REC_TEXT,
  SAME_FIELD,
} from "./boundary.js";
import { inbuf, room } from "./crossing.js";
import { hold } from "./held.js";

const encoder = new TextEncoder();

// REFS_PER_SOCKET spaces the refs of two sockets apart: a ref is the
// socket's handle times this plus the message's number on the socket, so it
// names the message across sockets and stays an exact number (< 2^53).
export const REFS_PER_SOCKET = 2 ** 32;

/**
 * encode writes the records of messages (as they arrived) into the in
 * buffer and returns the number of bytes written. The socket s keeps each
 * parsed acp.message in s.frames (ref s.base + i is s.frames[i]).
 */
export function encode(s, messages) {
  let off = 0;
  for (const m of messages) off = put(s, m, off);
  return off;
}

// put appends the record of one message at off and returns the new end.
function put(s, m, off) {
  if (typeof m !== "string") return putText(new Uint8Array(m), off, REC_TEXT, 0); // binary: bytes are bytes
  if (s.mode === MODE_TEXT) return putText(m, off, REC_TEXT, 0);
  let f;
  try {
    f = JSON.parse(m);
  } catch {
    return putText(m, off, REC_TEXT, 0); // Go parses it, and drops it
  }
  if (f === null || typeof f !== "object" || f.type !== ACP_TYPE) return putText(m, off, REC_TEXT, 0);
  const ref = s.base + s.frames.length;
  s.frames.push(f);
  if (plain(f) && m.length * 3 <= MAX_FRAME_BYTES) {
    if (s.mode === MODE_PARSE) return putACP(s, f, ref, off, null);
    const payload = payloadText(m, f);
    if (payload !== null && s.mode === MODE_PARSE_HOLD) {
      hold(s.handle, ref, payload);
      return putACP(s, f, ref, off, null);
    }
    if (payload !== null) return putACP(s, f, ref, off, payload);
  }
  if (s.mode === MODE_PARSE_HOLD) hold(s.handle, ref, null); // Go reads the payload from the text
  return putText(m, off, REC_ACP_TEXT, ref);
}

// payloadText finds the text of a parsed frame's payload in the message,
// when it can tell for sure: the frame has no member but the known ones
// and payload is the last, as the relay writes them. The key "payload"
// followed by a colon cannot occur inside a JSON string (its quotes would
// be escaped), so its first occurrence is the frame's own unless the
// payload holds one too, which is sent as text instead. Null otherwise.
function payloadText(m, f) {
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
}
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

function putText(m, off, kind, ref) {
  const head = kind === REC_TEXT ? 5 : 13;
  if (typeof m !== "string") {
    room(off, head + m.length);
    inbuf.bytes.set(m, off + head);
    return head_(off, kind, ref, head, m.length);
  }
  // Encoding into what is left fails only when the message is longer in
  // UTF-8 than the room left; then make room for the worst case.
  room(off, head + m.length);
  let r = encoder.encodeInto(m, inbuf.bytes.subarray(off + head));
  if (r.read !== m.length) {
    room(off, head + m.length * 3);
    r = encoder.encodeInto(m, inbuf.bytes.subarray(off + head));
  }
  return head_(off, kind, ref, head, r.written);
}

function head_(off, kind, ref, head, n) {
  inbuf.bytes[off] = kind;
  if (kind !== REC_TEXT) inbuf.view.setFloat64(off + 1, ref, true);
  inbuf.view.setUint32(off + head - 4, n, true);
  return off + head + n;
}

// putACP writes REC_ACP, or REC_ACP_KEEP when payload (its text) is not null.
function putACP(s, f, ref, off, payload) {
  room(off, 17 + 4 * FIELDS.length);
  inbuf.bytes[off] = payload === null ? REC_ACP : REC_ACP_KEEP;
  inbuf.view.setFloat64(off + 1, ref, true);
  inbuf.view.setFloat64(off + 9, f.seq ?? 0, true);
  off += 17;
  for (let i = 0; i < FIELDS.length; i++) {
    const v = f[FIELDS[i]] ?? "";
    if (v === s.prev[i]) {
      room(off, 4);
      inbuf.view.setUint32(off, SAME_FIELD, true);
      off += 4;
      continue;
    }
    s.prev[i] = v;
    off = putString(v, off);
  }
  return payload === null ? off : putString(payload, off);
}

function putString(v, off) {
  room(off, 4 + v.length * 3);
  const n = v === "" ? 0 : encoder.encodeInto(v, inbuf.bytes.subarray(off + 4)).written;
  inbuf.view.setUint32(off, n, true);
  return off + 4 + n;
}
