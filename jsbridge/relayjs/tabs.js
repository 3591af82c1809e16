// tabs.js: one attachment per stream. Each stream (url, instance, name) is
// held by one attachment at a time in the whole browser profile, through a
// lock per slot (locks.js: a Web Lock, or a stand-in where a page has none):
// the first tab gets "name", a second tab (or a duplicated
// one) "name#2", and so on, so two tabs never reclaim each other's attachment
// id. A tab remembers its slot in sessionStorage, and a reloaded tab waits a
// little for the lock its previous page still held while unloading, so it
// gets its own stream back; it asks for that lock as it loads, before
// relay.wasm runs (lockRemembered).

import { lockManager } from "./locks.js";

const RELOAD_WAIT_MS = 3000;

// Where a tab's memory and its slots' locks are: the page's sessionStorage
// and navigation, and the page's locks (lockHere). In worker mode the page
// has them and the worker does not; worker.js points these at what the page
// sends it, and lock at a request to the page. The page holds the locks of
// its worker's slots: Safari does not let go of the Web Locks of a
// refreshed window's worker (WebKit bug 316904, web-platform-tests'
// web-locks/windows.https.window.js), so a reload in worker mode would wait
// RELOAD_WAIT_MS for its own slot and take name#2, while a page's locks go
// with the page.
// heldHere says whether a lock lock did not get is held by this page
// (forget's refusal names the holder: relay.js holdSlot).
export const tabEnv = { read: readSession, write: writeSession, reloading, lock: lockHere, heldHere };

// The locks this context holds, by name: how many of tryLock's grants of
// each are not let go yet. A page holds its worker's too (remote.js), so a
// page with a Relay in worker mode and one on the main thread knows that
// a lock one of them holds is not another tab's. On globalThis, as
// EARLY_SLOTS is: preload.js counts the early request's grant in its copy
// of this module, and takeEarly hands that lock to relay.js's copy, whose
// own count would not have it (forget would blame another tab).
const granted = (globalThis[Symbol.for("relaywasm.granted")] ??= new Map());

/**
 * heldHere says whether this context holds lockName (tryLock's): a lock it
 * was refused that it holds is held by another Relay of this page, not by
 * another tab.
 */
export function heldHere(lockName) {
  return granted.has(lockName);
}

/**
 * lockHere takes lockName in this context: the request the page made for it
 * as it loaded (lockRemembered) if there is one, else a lock of its own,
 * waiting at most waitMs. It resolves to release (see tryLock) or to null
 * when the lock is not free in time; it rejects with a NotSupportedError
 * where the context has no locks of any kind, and with the SecurityError of
 * a context refused them.
 */
export function lockHere(lockName, waitMs) {
  const locks = lockManager();
  if (!locks) return Promise.reject(new DOMException("no Web Locks and no BroadcastChannel", "NotSupportedError"));
  return takeEarly(lockName) ?? tryLock(locks, lockName, waitMs);
}

/**
 * takeSlot takes this page's slot for the stream: { name, release, leave,
 * ours, lost }. name is the stream's name in the slot (name, name#2 …);
 * release lets the slot go; leave says the attachment is letting it go
 * (detach or close called), before release can; ours() resolves to whether
 * the slot is still this page's, at once unless the page is back from the
 * back/forward cache and asking for its lock again (resumeSlots); lost is a
 * Promise that resolves when resumeSlots finds another tab holding the
 * slot's lock, and never otherwise. signal is the attach's.
 */
export async function takeSlot(url, instance, name, signal) {
  const memory = `relaywasm-slot:${url}\u0000${instance}\u0000${name}`;
  const preferred = Number(tabEnv.read(memory)) || 1;
  const slotName = (i) => (i === 1 ? name : `${name}#${i}`);
  const left = { now: false };
  const going = () => left.now || signal?.aborted === true;
  let lockName = slotLock(url, instance, slotName(preferred));
  let got;
  try {
    got = await claim(lockName, going, () => tabEnv.lock(lockName, tabEnv.reloading() ? RELOAD_WAIT_MS : 0));
  } catch (e) {
    if (e?.name === "SecurityError" || e?.name === "NotSupportedError") return unlocked(name);
    throw e;
  }
  let slot = preferred;
  for (let i = 1; !got; i++) {
    if (i === preferred) continue;
    lockName = slotLock(url, instance, slotName(i));
    const next = lockName;
    got = await claim(next, going, () => tabEnv.lock(next, 0));
    slot = i;
  }
  tabEnv.write(memory, String(slot));
  const h = holding(lockName, got.release);
  return { ...h, name: slotName(slot), leave: () => (left.now = true), release: () => h.release().finally(got.end) };
}

/**
 * slotLock is the name of the Web Lock of a stream's slot, name being the
 * slot's (name, name#2 …): takeSlot's, and relay.js's forget, which holds
 * it while it deletes the stream.
 */
export function slotLock(url, instance, name) {
  return `relaywasm:${url}\u0000${instance}\u0000${name}`;
}

// own maps the lock name of each slot this page holds, or is asking for,
// to that attach's claim: going() says whether the attachment is letting
// the slot go (its attach aborted, detach or close called), and gone
// resolves once it has, or never got it. Another attach of this page waits
// for a slot that is going, rather than taking the next one. React's
// StrictMode, in development, mounts a component, unmounts it and mounts
// it again at once: the second attach took name#2 while the first, aborted
// or detached, was still letting name go, and the chat of every tab moved
// to name#2. A slot this page holds and is not letting go is another
// attachment's of this page, and is skipped as before.
const own = new Map();

// claim asks for lockName with ask(), as this attach's claim on it, once an
// earlier claim of this page on it that is going has gone (at most
// RELOAD_WAIT_MS: a detach ends without waiting for the network). It
// resolves to { release, end } with the lock, end to be called when the
// attachment lets the slot go, or to null without it; the earlier claim,
// if it has not ended, is then the slot's again.
async function claim(lockName, going, ask) {
  const before = own.get(lockName);
  let gone;
  const mine = { going, gone: new Promise((resolve) => (gone = resolve)), ended: false };
  const end = () => {
    mine.ended = true;
    if (own.get(lockName) === mine) {
      if (before !== undefined && !before.ended) own.set(lockName, before);
      else own.delete(lockName);
    }
    gone();
  };
  own.set(lockName, mine);
  if (before?.going()) await Promise.race([before.gone, new Promise((resolve) => setTimeout(resolve, RELOAD_WAIT_MS))]);
  let release = null;
  try {
    release = await ask();
  } finally {
    if (!release) end();
  }
  return release ? { release, end } : null;
}

// A reload asks for its slots' locks as the page loads, not when the
// attach does: the attach of a reloaded page waited 2–9 ms for its lock to
// be granted after relay.wasm had started (timed in the bench's reloaded
// page, 2 cores; README "How fast and how small"), time the lock could have
// spent being granted while relay.wasm compiled. At pagehide rememberSlots
// writes the names of the locks the page holds to sessionStorage (the
// tab's own, kept by a reload: lock names hold the URL, the instance and
// the stream's name, never a credential); as the reloaded page loads,
// lockRemembered (from preload.js, else from loadRelay) asks for them,
// waiting for each as takeSlot does on a reload (the page that held it was
// this tab's, and may still be unloading), and takeSlot takes the request
// for its lock instead of making one. What was remembered is read once and
// only within REMEMBERED_MS of its pagehide, at most REMEMBER_MAX locks,
// and a lock no takeSlot takes within EARLY_HOLD_MS is let go, so another
// tab is kept from that slot no longer. That time runs from the end of
// loadRelay's load where one is under way (holdEarlyWhile): a load slower
// than EARLY_HOLD_MS (a phone; WebKitGTK in worker mode, starved, in
// make test) had its early lock let go before its attach took it.
const REMEMBERED = "relaywasm-slots";
const REMEMBERED_MS = 30000;
const REMEMBER_MAX = 8;
const EARLY_HOLD_MS = 5000;

// held are the slots this page holds, by lock name: each one's release
// of its lock, which suspendSlots and resumeSlots replace; whether the lock
// was let go by suspendSlots; back, from suspendSlots on, a Promise of
// whether resumeSlots got the lock again, settled by settle; and lose,
// which resolves the slot's lost.
const held = new Map();

function holding(lockName, release) {
  let lose;
  const lost = new Promise((resolve) => (lose = resolve));
  const slot = { release, suspended: false, back: null, settle: null, lose };
  held.set(lockName, slot);
  return {
    lost,
    release: () => {
      if (held.get(lockName) === slot) held.delete(lockName);
      const settle = slot.settle;
      slot.settle = null;
      settle?.(false);
      return slot.release();
    },
    ours: async () => slot.back === null || slot.back,
  };
}

// A page kept in the back/forward cache is not running, and engines differ
// on its locks: Chromium keeps them, and drops the page from the cache when
// another page asks for one; WebKitGTK 2.50 lets them go, and gives them
// back to no one when the page is shown again; WPE WebKit 2.38 (Safari 16)
// keeps them, so the tab's next page, the same chat loaded again by a link,
// waited RELOAD_WAIT_MS for its own slot and took name#2. So the page lets
// its slots' locks go itself as it is cached (suspendSlots, at pagehide
// when persisted) and asks for them again when it is shown from the cache
// (resumeSlots, at pageshow when persisted). Without that, a page restored
// in WebKit went on with an attachment whose lock nobody held, and another
// tab attaching the same stream took slot 1, and with it the same
// attachment id, instead of name#2 (tests/e2e TestRestoredPageHoldsItsSlot).
//
// Another tab may take the slot while the page is cached, and attach with
// the slot's attachment id. The restored page must then not dial: its
// reclaim would supersede that tab. So from suspendSlots on, the slot's
// ours() waits for resumeSlots, and relay.js asks it before every dial
// (Attachment's token): a slot lost ends the page's attachment with the
// code "superseded", and the other tab goes on (tests/e2e
// TestRestoredPageGivesUpATakenSlot). A page whose socket outlived the
// cache (WebKit keeps a worker's open) does not dial, and the other tab may
// hold an attachment id of its own (its store had fallen back to memory):
// then nothing would end the page's, and both would go on in one slot. So
// relay.js also ends the attachment as soon as the slot is lost.

/** suspendSlots lets go of the locks of the slots this page holds, which stay its slots. */
export function suspendSlots() {
  for (const slot of held.values()) {
    if (slot.suspended) continue;
    const release = slot.release;
    slot.release = async () => {};
    slot.suspended = true;
    if (slot.settle === null) slot.back = new Promise((resolve) => (slot.settle = resolve));
    release();
  }
}

/**
 * resumeSlots asks again for the locks suspendSlots let go, waiting for
 * each as a reload does (the page that took it meanwhile may still be going
 * into the cache itself), and settles each slot's ours(). A lock another
 * tab holds by then stays that tab's, and the slot is no longer this
 * page's: ours() resolves to false.
 */
export async function resumeSlots() {
  const suspended = [...held].filter(([, slot]) => slot.suspended);
  await Promise.all(
    suspended.map(async ([lockName, slot]) => {
      slot.suspended = false;
      const release = await tabEnv.lock(lockName, RELOAD_WAIT_MS).catch(() => null);
      if (held.get(lockName) !== slot || slot.suspended) {
        release?.(); // let go meanwhile, or cached again: the next resumeSlots settles it
        return;
      }
      if (release) slot.release = release;
      else slot.lose();
      const settle = slot.settle;
      slot.settle = null;
      settle(release !== null);
    }),
  );
}

/**
 * rememberSlots keeps the names of the slot locks held now, and of those
 * lent (the page's locks for its worker's slots), for the next load of
 * this tab (pagehide). Storage disabled or full keeps nothing: the next
 * load then asks when it attaches.
 */
export function rememberSlots(lent = []) {
  const lockNames = [...held.keys(), ...lent];
  if (lockNames.length === 0) removeSession(REMEMBERED);
  else writeSession(REMEMBERED, JSON.stringify({ at: Date.now(), locks: lockNames.slice(0, REMEMBER_MAX) }));
}

// recallSlots takes what the previous load of this tab remembered, once.
function recallSlots() {
  const kept = readSession(REMEMBERED);
  if (kept == null) return [];
  removeSession(REMEMBERED);
  try {
    const { at, locks } = JSON.parse(kept);
    const age = Date.now() - at;
    if (!(age >= 0 && age <= REMEMBERED_MS) || !Array.isArray(locks)) return [];
    return locks.filter((l) => typeof l === "string" && l.startsWith("relaywasm:")).slice(0, REMEMBER_MAX);
  } catch {
    return []; // not what rememberSlots wrote
  }
}

// EARLY_SLOTS maps a lock name to the request lockRemembered made for it,
// until takeSlot takes it. On globalThis for the reason compile.js's EARLY
// is: preload.js and relay.js each hold a copy of this module.
const EARLY_SLOTS = Symbol.for("relaywasm.slots");
const EARLY_LOADING = Symbol.for("relaywasm.slotsLoading"); // holdEarlyWhile's

/**
 * holdEarlyWhile keeps the locks lockRemembered asked for until
 * EARLY_HOLD_MS after loading settles, if that is later than
 * EARLY_HOLD_MS after they were asked for.
 */
export function holdEarlyWhile(loading) {
  const after = () => new Promise((resolve) => setTimeout(resolve, EARLY_HOLD_MS));
  globalThis[EARLY_LOADING] = Promise.resolve(loading).then(after, after);
}

/**
 * lockRemembered asks now for the slot locks the previous load of this tab
 * held (rememberSlots), once per page: a second call finds nothing kept.
 */
export function lockRemembered() {
  const lockNames = recallSlots();
  const locks = lockNames.length > 0 ? lockManager() : null; // none made for nothing
  if (!locks) return;
  const early = (globalThis[EARLY_SLOTS] ??= new Map());
  for (const lockName of lockNames) {
    if (!early.has(lockName)) early.set(lockName, tryLock(locks, lockName, RELOAD_WAIT_MS).catch(() => null));
  }
  setTimeout(() => Promise.resolve(globalThis[EARLY_LOADING]).then(() => releaseEarly(lockNames)), EARLY_HOLD_MS);
}

/**
 * releaseEarly lets go of the locks lockRemembered asked for that no takeSlot
 * took (all of them when lockNames is omitted).
 */
export function releaseEarly(lockNames) {
  const early = globalThis[EARLY_SLOTS];
  for (const lockName of lockNames ?? [...(early?.keys() ?? [])]) {
    const request = early?.get(lockName);
    if (request === undefined) continue;
    early.delete(lockName);
    request.then((release) => release?.());
  }
}

// unlocked is the slot of a page without locks: a page of no origin of its
// own (a sandboxed frame, a file: page in some webviews) is refused Web
// Locks with a SecurityError, and has no storage another page shares
// either (store.js falls back to memory there). A page that is not a
// secure context has no Web Locks, and takes ChannelLocks instead
// (locks.js).
function unlocked(name) {
  return { name, release: async () => {}, leave() {}, ours: async () => true, lost: new Promise(() => {}) };
}

function takeEarly(lockName) {
  const request = globalThis[EARLY_SLOTS]?.get(lockName);
  if (request !== undefined) globalThis[EARLY_SLOTS].delete(lockName);
  return request;
}

// tryLock takes a lock and holds it until release() is called (release then
// resolves once the lock is free again), or resolves to null when the lock is
// not free within waitMs.
function tryLock(locks, lockName, waitMs) {
  return new Promise((resolve, reject) => {
    let unlock;
    const held = new Promise((r) => (unlock = r));
    const [signal, stopTimer] = waitMs > 0 ? timeoutSignal(waitMs) : [null, () => {}];
    const opts = signal ? { signal } : { ifAvailable: true };
    let freed;
    const request = locks.request(lockName, opts, (lock) => {
      stopTimer();
      if (!lock) {
        resolve(null);
        return undefined;
      }
      let released = false;
      granted.set(lockName, (granted.get(lockName) ?? 0) + 1);
      resolve(async () => {
        if (!released) {
          released = true;
          const n = granted.get(lockName) - 1;
          if (n > 0) granted.set(lockName, n);
          else granted.delete(lockName);
          unlock();
        }
        await freed;
      });
      return held;
    });
    freed = request.then(
      () => {},
      (e) => {
        stopTimer();
        if (e?.name === "TimeoutError" || e?.name === "AbortError") resolve(null);
        else reject(e);
      },
    );
  });
}

// timeoutSignal is [an AbortSignal that aborts after ms, a stop to its
// timer], AbortSignal.timeout made by hand: Safari 15.4–15.8, Chrome
// 69–102 and Firefox 96–99 have Web Locks and no AbortSignal.timeout, and
// calling it there threw, so every lock a reload waits for was refused:
// the reloaded page took name#2, its conversation empty, and a page back
// from the back/forward cache ended its attachment as superseded. The
// request rejects with an AbortError where abort() takes no reason; either
// is the wait timing out (tryLock). The timer stops once the lock is
// granted, so it keeps no page busy meanwhile.
function timeoutSignal(ms) {
  const c = new AbortController();
  const timer = setTimeout(() => c.abort(new DOMException("the lock was not free in time", "TimeoutError")), ms);
  return [c.signal, () => clearTimeout(timer)];
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
    // storage disabled or full: the tab just does not remember
  }
}

function removeSession(key) {
  try {
    globalThis.sessionStorage?.removeItem(key);
  } catch {
    // storage disabled: there is nothing to remove
  }
}
