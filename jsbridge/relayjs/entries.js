// entries.js: transcript entries, packed as jsbridge/store.go's appendEntry
// packs them: a flags byte, the seq and the payload's length as uvarints,
// then the payload. The store keeps them without reading them; relay.js
// packs the ones it makes itself (worker mode's page, remote.js) and puts
// held payloads into the ones Go hands it (unhold).

import { ENTRY_HELD, ENTRY_LOST, ENTRY_OUTBOUND } from "./boundary.js";
import { take } from "./held.js";
import { REFS_PER_SOCKET } from "./records.js";

const encoder = new TextEncoder();

/**
 * packEntry is one inbound entry (flags 0) of seq with payload's JSON text
 * (none when payload is absent).
 */
export function packEntry(seq, payload) {
  const text = payload === undefined ? new Uint8Array(0) : encoder.encode(JSON.stringify(payload));
  const entry = new Uint8Array(1 + uvarintSize(seq) + uvarintSize(text.length) + text.length);
  const at = putUvarint(entry, putUvarint(entry, 1, seq), text.length); // entry[0]: flags 0
  entry.set(text, at);
  return entry;
}

// The entries unhold writes, in one buffer used again by every commit: a
// new array's memory costs the engine its first touch of every page.
let out = new Uint8Array(64 << 10);

/**
 * unhold returns the entries in bytes with each ENTRY_HELD entry's payload
 * put in (held.js take): [flags][seq][ref] becomes [flags without
 * ENTRY_HELD][seq][length][the text in UTF-8]. The view it returns is good
 * until the next call; the store copies it at once.
 */
export function unhold(bytes) {
  let off = 0;
  let at = 0;
  while (at < bytes.length) {
    const start = at;
    const flags = bytes[at];
    const seqEnd = skipUvarint(bytes, at + 1);
    const n = readUvarint(bytes, seqEnd); // the length, or the ref
    const end = skipUvarint(bytes, seqEnd);
    if (!(flags & ENTRY_HELD)) {
      at = end + n;
      off = put(bytes.subarray(start, at), off);
      continue;
    }
    at = end;
    const text = take(Math.floor(n / REFS_PER_SOCKET), n);
    if (text === undefined) console.error("relay.js: a transcript entry's payload was not held; it is kept empty");
    const head = off;
    off = put(bytes.subarray(start, seqEnd), off);
    out[head] = flags & ~ENTRY_HELD;
    off = putText(text ?? "", off);
  }
  return out.subarray(0, off);
}

/**
 * unrecorded returns the packed entries in parts that a transcript whose
 * stream is at cursor past holds already left out, and how many are kept:
 * it keeps the outbound ones, the losses (ENTRY_LOST, no message of any
 * seq), those with no seq, and those of a seq over past. parts is returned
 * as it is when it keeps every entry. (store.js: a page shown again from
 * the back/forward cache resumes from its own cursor, behind what the
 * tab's next page recorded.)
 */
export function unrecorded(parts, past) {
  const kept = [];
  let n = 0;
  let dropped = false;
  for (const bytes of parts) {
    let at = 0;
    let from = 0;
    while (at < bytes.length) {
      const start = at;
      const seqEnd = skipUvarint(bytes, at + 1);
      const seq = readUvarint(bytes, at + 1);
      at = skipUvarint(bytes, seqEnd);
      at += readUvarint(bytes, seqEnd);
      if (bytes[start] & (ENTRY_OUTBOUND | ENTRY_LOST) || seq === 0 || seq > past) {
        n++;
        continue;
      }
      dropped = true;
      if (start > from) kept.push(bytes.subarray(from, start));
      from = at;
    }
    if (from < bytes.length) kept.push(from === 0 ? bytes : bytes.subarray(from));
  }
  return dropped ? [kept, n] : [parts, n];
}

/**
 * unwritten returns the packed entries in bytes without the inbound ones
 * (no ENTRY_OUTBOUND, no ENTRY_LOST) that the page wrote itself, whose
 * seqs are written (in order), and how many entries it keeps: bytes itself
 * when it drops none, null when it keeps none. Each seq of written drops
 * one entry of that seq, the last ones first: the entries of the worker's
 * commit that the page's own commit of the same batches holds already
 * (remote.js _commitTail), which for a runtime that does not number its
 * messages (seq 0) only their count tells apart.
 */
export function unwritten(bytes, written) {
  const left = new Map(); // seq -> how many of it to drop
  for (const seq of written) left.set(seq, (left.get(seq) ?? 0) + 1);
  const all = [];
  for (let at = 0; at < bytes.length; ) {
    const start = at;
    const seqEnd = skipUvarint(bytes, at + 1);
    const seq = readUvarint(bytes, at + 1);
    at = skipUvarint(bytes, seqEnd);
    at += readUvarint(bytes, seqEnd);
    all.push({ start, end: at, seq, inbound: !(bytes[start] & (ENTRY_OUTBOUND | ENTRY_LOST)) });
  }
  let dropped = 0;
  for (let i = all.length - 1; i >= 0; i--) {
    const e = all[i];
    const n = e.inbound ? (left.get(e.seq) ?? 0) : 0;
    if (n === 0) continue;
    left.set(e.seq, n - 1);
    e.drop = true;
    dropped++;
  }
  if (dropped === 0) return [bytes, all.length];
  const kept = all.filter((e) => !e.drop);
  if (kept.length === 0) return [null, 0];
  const out = new Uint8Array(kept.reduce((n, e) => n + e.end - e.start, 0));
  let off = 0;
  for (const e of kept) {
    out.set(bytes.subarray(e.start, e.end), off);
    off += e.end - e.start;
  }
  return [out, kept.length];
}

// put appends bytes at off and returns the new end.
function put(bytes, off) {
  grow(off + bytes.length);
  out.set(bytes, off);
  return off + bytes.length;
}

// putText appends [uvarint length][text in UTF-8] at off: the length's room
// is that of the longest the text can be (3 bytes a character), and the
// bytes move down when the length takes less (an ASCII text of 43 to 127
// characters, or of 5,462 to 16,383: tests/browser's fake relay sends both).
function putText(text, off) {
  const room = uvarintSize(3 * text.length);
  grow(off + room + 3 * text.length);
  const n = encoder.encodeInto(text, out.subarray(off + room)).written;
  const size = uvarintSize(n);
  if (size < room) out.copyWithin(off + size, off + room, off + room + n);
  return putUvarint(out, off, n) + n;
}

function grow(need) {
  if (need <= out.length) return;
  const next = new Uint8Array(Math.max(need, 2 * out.length));
  next.set(out);
  out = next;
}

function uvarintSize(n) {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    size++;
  }
  return size;
}

// putUvarint writes v as a uvarint at off in dst and returns the offset after
// it. (Arithmetic, not bit operations: a seq or a ref may be over 2^32.)
function putUvarint(dst, off, v) {
  while (v >= 0x80) {
    dst[off++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  dst[off] = v;
  return off + 1;
}

// readUvarint reads the uvarint at at (skipUvarint finds its end). Go wrote
// bytes: past their end, reading stops.
function readUvarint(bytes, at) {
  let v = 0;
  let scale = 1;
  while (at < bytes.length) {
    const b = bytes[at++];
    v += (b & 0x7f) * scale;
    if (b < 0x80) break;
    scale *= 0x80;
  }
  return v;
}

function skipUvarint(bytes, at) {
  while (at < bytes.length && bytes[at++] >= 0x80);
  return at;
}
