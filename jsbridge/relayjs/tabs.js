// tabs.js: one attachment per stream. Each stream (url, instance, name) is
// held by one attachment at a time in the whole browser profile, through a
// Web Lock per slot: the first tab gets "name", a second tab (or a duplicated
// one) "name#2", and so on, so two tabs never reclaim each other's attachment
// id. A tab remembers its slot in sessionStorage, and a reloaded tab waits a
// little for the lock its previous page still held while unloading, so it
// gets its own stream back.

const RELOAD_WAIT_MS = 3000;

// Where a tab's memory is: the page's sessionStorage and navigation. In
// worker mode the page has them and the worker does not; worker.js points
// these at what the page sends it.
export const tabEnv = { read: readSession, write: writeSession, reloading };

export async function takeSlot(url, instance, name) {
  const locks = globalThis.navigator?.locks;
  if (!locks) return { name, release: async () => {} }; // no Web Locks (an insecure context)
  const prefix = `relaywasm:${url}\u0000${instance}\u0000`;
  const memory = `relaywasm-slot:${url}\u0000${instance}\u0000${name}`;
  const preferred = Number(tabEnv.read(memory)) || 1;
  const slotName = (i) => (i === 1 ? name : `${name}#${i}`);
  let lockName = prefix + slotName(preferred);
  let release = await (takeEarly(lockName) ?? tryLock(locks, lockName, tabEnv.reloading() ? RELOAD_WAIT_MS : 0));
  let slot = preferred;
  for (let i = 1; !release; i++) {
    if (i === preferred) continue;
    lockName = prefix + slotName(i);
    release = await tryLock(locks, lockName, 0);
    slot = i;
  }
  tabEnv.write(memory, String(slot));
  return { name: slotName(slot), release: holding(lockName, release) };
}

// held are the slots' locks this page holds, by lock name: what a reload
// of the page asks for early (heldSlots, lockEarly).
const held = new Set();

function holding(lockName, release) {
  held.add(lockName);
  return () => {
    held.delete(lockName);
    return release();
  };
}

/** heldSlots lists the locks of the slots this page holds now. */
export function heldSlots() {
  return [...held];
}

// EARLY_SLOTS maps a lock name to the request lockEarly made for it, until
// takeSlot takes it. On globalThis for the reason compile.js's EARLY is:
// preload.js and relay.js each hold a copy of this module.
const EARLY_SLOTS = Symbol.for("relaywasm.slots");

/**
 * lockEarly asks now for the slot locks a reloaded page held before
 * (reopen.js), as takeSlot would ask for them on a reload, so that the
 * attach finds its lock taken instead of waiting on the browser for it
 * (2–9 ms of a reload's attach, make bench). A lock no takeSlot takes
 * within holdMs is let go, so another tab is kept from the slot no longer.
 */
export function lockEarly(lockNames, holdMs) {
  const locks = globalThis.navigator?.locks;
  if (!locks || lockNames.length === 0) return;
  const early = (globalThis[EARLY_SLOTS] ??= new Map());
  for (const lockName of lockNames) {
    if (!early.has(lockName)) early.set(lockName, tryLock(locks, lockName, RELOAD_WAIT_MS).catch(() => null));
  }
  setTimeout(() => releaseEarly(lockNames), holdMs);
}

/**
 * releaseEarly lets go of the locks lockEarly asked for that no takeSlot
 * took (all of them when lockNames is omitted): worker mode's worker takes
 * its slots itself, and must not wait for the page's.
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
