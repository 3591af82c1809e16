// reopen.js: the sockets a reloaded page will dial, dialed before
// relay.wasm runs, and the slot locks its attachments will take, asked for
// as early. It imports only tabs.js, which imports nothing, so preload.js
// stays one small file.
//
// A reload waits for relay.wasm (fetched from the cache, compiled, started:
// about half of its time to live, make bench) and only then attaches, and
// the attach's dial was the largest part of what followed: a WebSocket's
// open took 11–17 ms of a 13–17 ms attach (loopback, Chromium, 2 cores),
// the hello → welcome 2. Which sockets the page will dial is known before
// relay.wasm runs: the ones it had open when it went away. So at pagehide
// remember writes their URLs and subprotocols to sessionStorage (the tab's
// own, kept by a reload), and as the reloaded page loads, reopen (from
// preload.js, else from loadRelay) dials them at once; sockets.js's dial
// then takes the one open or opening for its URL and subprotocols instead
// of dialing again, and the open has run while the module compiled. So for
// the Web Lock of each stream's slot (tabs.js), which the attach took before
// it dialed: reopen asks for the ones the page held, and the attach finds
// its lock granted.
//
// Nothing is sent on a reopened socket until Go takes it and says hello: the
// credential travels in the hello, never in what is kept here. A socket no
// attach takes costs the relay one pending hello until REOPEN_MS closes it,
// well inside the dev relay's HelloTimeout (10 s), and a lock none takes
// keeps another tab from that slot as long. What a page remembered is
// read once and only within REMEMBERED_MS of its pagehide, so a tab that
// comes back to the app much later dials nothing it was not asked to.

import { lockEarly } from "./tabs.js";

const KEY = "relaywasm.reopen";

/** REOPEN_MS is how long a reopened socket waits to be taken before it is closed. */
export const REOPEN_MS = 5000;

/** REMEMBERED_MS is how old, since its pagehide, a remembered list may be and still be dialed. */
export const REMEMBERED_MS = 30000;

/** REOPEN_MAX bounds the sockets one load reopens. */
export const REOPEN_MAX = 8;

// REOPENED holds the reopened sockets no dial has taken yet. It is kept on
// globalThis, not in this module, because preload.js and relay.js each ship
// as one file holding their own copy of it (as compile.js's EARLY).
const REOPENED = Symbol.for("relaywasm.reopened");

/**
 * remember keeps, for the next load of this tab, the URL and subprotocols of
 * each socket given ({url, protocols}, as dial was called) and the names of
 * the slot locks held; none clears it. Storage that is unavailable or full
 * keeps nothing: the next load dials and locks as it would have.
 */
export function remember(sockets, slots) {
  try {
    if (sockets.length === 0 && slots.length === 0) sessionStorage.removeItem(KEY);
    else sessionStorage.setItem(KEY, JSON.stringify({ at: Date.now(), sockets: sockets.slice(0, REOPEN_MAX), slots: slots.slice(0, REOPEN_MAX) }));
  } catch {
    // no sessionStorage (an opaque origin, storage denied, a worker)
  }
}

/**
 * reopen dials and locks what the previous load of this tab remembered, once
 * per page: the first call takes the list and later ones find it gone.
 */
export function reopen() {
  const { sockets: list, slots } = recall();
  lockEarly(slots, REOPEN_MS);
  if (list.length === 0 || typeof WebSocket !== "function") return;
  const reopened = (globalThis[REOPENED] ??= []);
  for (const { url, protocols } of list) {
    try {
      reopened.push(open(url, protocols));
    } catch {
      // a URL this page can no longer dial: the attach reports it, if any
    }
  }
  setTimeout(() => {
    for (const r of reopened.splice(0)) r.ws.close();
  }, REOPEN_MS);
}

const nothing = { sockets: [], slots: [] };

function recall() {
  try {
    const kept = sessionStorage.getItem(KEY);
    if (kept === null) return nothing;
    sessionStorage.removeItem(KEY);
    const { at, sockets, slots } = JSON.parse(kept);
    const age = Date.now() - at;
    if (!(age >= 0 && age <= REMEMBERED_MS) || !Array.isArray(sockets) || !Array.isArray(slots)) return nothing;
    return {
      sockets: sockets.filter((s) => typeof s?.url === "string" && Array.isArray(s.protocols)).slice(0, REOPEN_MAX),
      slots: slots.filter((s) => typeof s === "string").slice(0, REOPEN_MAX),
    };
  } catch {
    return nothing;
  }
}

function open(url, protocols) {
  const ws = new WebSocket(url, protocols);
  ws.binaryType = "arraybuffer";
  const r = { key: socketKey(url, protocols), ws, messages: [] };
  // Nothing should come before the hello; whatever does is kept for Go.
  ws.onmessage = (ev) => r.messages.push(ev.data);
  return r;
}

function socketKey(url, protocols) {
  return JSON.stringify([String(url), Array.from(protocols ?? [], String)]);
}

/**
 * take hands over the reopened socket for url and protocols, if one is
 * still opening or open, with the messages it got meanwhile; else null.
 * The caller sets the socket's handlers.
 */
export function take(url, protocols) {
  const reopened = globalThis[REOPENED];
  if (!reopened?.length) return null;
  const key = socketKey(url, protocols);
  for (let i = 0; i < reopened.length; i++) {
    const r = reopened[i];
    if (r.key !== key) continue;
    if (r.ws.readyState > WebSocket.OPEN) {
      reopened.splice(i--, 1); // closed meanwhile (the relay went away): dial afresh
      continue;
    }
    reopened.splice(i, 1);
    r.ws.onmessage = null;
    return r;
  }
  return null;
}
