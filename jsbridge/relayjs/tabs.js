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
  let release = await tryLock(locks, prefix + slotName(preferred), tabEnv.reloading() ? RELOAD_WAIT_MS : 0);
  let slot = preferred;
  for (let i = 1; !release; i++) {
    if (i === preferred) continue;
    release = await tryLock(locks, prefix + slotName(i), 0);
    slot = i;
  }
  tabEnv.write(memory, String(slot));
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
