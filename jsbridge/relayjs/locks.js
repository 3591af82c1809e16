// locks.js: the locks tabs.js keeps stream slots with. They are Web Locks
// (navigator.locks) where the page has them. A page that is not a secure
// context (http from another machine: the demo opened from a phone on the
// same network) has none, and without a stand-in a second tab took the
// first one's stored stream and ended its attachment (superseded). The
// stand-in, ChannelLocks, keeps the part of LockManager that tabs.js uses,
// request(name, {ifAvailable} or {signal}, callback), over a BroadcastChannel
// every page and worker of the origin shares.
//
// It has no arbiter. To take a lock a context asks the others (ask) and
// takes it if, for ASK_MS, none answers that it holds it (held). Of two
// contexts asking at once, the one whose id sorts first goes on asking and
// answers the other's ask as a holder would, since the other may have
// heard the first's ask before it began asking and let it by; the other,
// hearing the first's ask while asking, gives up too. One that took the
// lock before reading an ask answers it once it does, and an asker waits
// for that, or for its free; unless it told that one to wait, since it
// may have read the ask before asking and let it by. A holder answers
// every ask while it holds the lock, and says when it lets go (free),
// which a waiting request takes as its cue to ask again. A context that
// goes away (a closed tab, a reload, a crash) stops answering, so its
// locks are free with it.
//
// A holder slow to answer (its thread busy with a long task, its process
// starved of CPU: WebKitGTK's two tabs under load, tests/e2e
// TestInsecureContext) was taken for gone after ASK_MS, and both tabs held
// the stream. So each context keeps what it has heard of who holds what
// (known): holders say so when they take a lock (took), when they answer
// an ask (held), and to each context that starts (who, answered by have),
// which relay.js makes early, while relay.wasm loads. An ask for a lock
// known to be held waits KNOWN_MS for its holder, not ASK_MS, and less
// once the holder says it let go (free).
//
// What it cannot do: a holder this context has not heard of, busy for
// longer than ASK_MS, or a known one busy for longer than KNOWN_MS,
// answers too late, and the asker takes the lock too. Both tabs then hold
// the stream, and the later attach supersedes the earlier, as every attach
// did on such a page before. A holder that went away without a word (a
// crashed tab, a worker ended with its page) costs a context that had
// heard of it one wait of KNOWN_MS. A context's own requests are settled
// without asking anyone.

const CHANNEL = "relaywasm-locks";
const ASK_MS = 250; // how long an ask waits for an answer
const KNOWN_MS = 2000; // how long it waits for a holder it has heard of
const RETRY_MS = 500; // how often a waiting request asks again, besides on free

// One ChannelLocks per context, as one LockManager is: preload.js and
// relay.js each hold a copy of this module (compile.js's EARLY says why).
const SHARED = Symbol.for("relaywasm.locks");

/**
 * lockManager is the context's LockManager, or a ChannelLocks where there
 * is none but there are BroadcastChannels, or null.
 */
export function lockManager() {
  const locks = globalThis.navigator?.locks;
  if (locks) return locks;
  if (typeof BroadcastChannel !== "function") return null;
  return (globalThis[SHARED] ??= new ChannelLocks());
}

/** ChannelLocks is a LockManager's request over a BroadcastChannel (above). */
export class ChannelLocks {
  #id = `${Date.now().toString(36)}.${Math.random().toString(36).slice(2)}`;
  #channel = new BroadcastChannel(CHANNEL);
  #held = new Set(); // the names this context holds
  #asking = new Map(); // name -> the ask under way: its lose, hurry and heed
  #waiting = new Map(); // name -> the retries of the requests waiting for it
  #known = new Map(); // name -> the id of the context heard holding it

  constructor() {
    this.#channel.onmessage = ({ data }) => this.#heard(data);
    this.#channel.unref?.(); // Node's: the channel alone does not keep it running
    this.#channel.postMessage({ t: "who" });
  }

  /**
   * request takes the lock name, as LockManager.request does with one of
   * its options: ifAvailable (callback(null) when another holds it) or a
   * signal (wait until the lock is free; the request rejects with the
   * signal's reason if it aborts first). The lock is held until the
   * callback's result settles; the request resolves with that result.
   */
  request(name, options, callback) {
    return new Promise((resolve, reject) => {
      const lock = { name, mode: "exclusive" };
      const granted = (held) => {
        const result = Promise.resolve().then(() => callback(held ? lock : null));
        if (held) result.finally(() => this.#free(name)).catch(() => {});
        result.then(resolve, reject);
      };
      if (options.ifAvailable) {
        this.#ask(name).then(granted);
        return;
      }
      this.#wait(name, options.signal).then(() => granted(true), reject);
    });
  }

  // #wait resolves once name is this context's, asking again at every free
  // and every RETRY_MS; it rejects with the signal's reason if the signal
  // aborts first.
  #wait(name, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      let timer = 0;
      let asking = false;
      const retry = () => {
        clearTimeout(timer);
        if (asking) return;
        asking = true;
        this.#ask(name).then((ok) => {
          asking = false;
          if (ok && signal?.aborted) this.#free(name);
          if (signal?.aborted) return;
          if (ok) {
            stop();
            resolve();
          } else timer = setTimeout(retry, RETRY_MS);
        });
      };
      const abort = () => {
        stop();
        reject(signal.reason);
      };
      const stop = () => {
        clearTimeout(timer);
        const waiting = this.#waiting.get(name);
        waiting.delete(retry);
        if (waiting.size === 0) this.#waiting.delete(name);
        signal?.removeEventListener("abort", abort);
      };
      if (!this.#waiting.has(name)) this.#waiting.set(name, new Set());
      this.#waiting.get(name).add(retry);
      signal?.addEventListener("abort", abort, { once: true });
      retry();
    });
  }

  // #ask resolves to whether this context took name: nobody answered its
  // ask within ASK_MS (KNOWN_MS for a lock known held) that they hold it or
  // are asking first.
  #ask(name) {
    if (this.#held.has(name) || this.#asking.has(name)) return Promise.resolve(false);
    return new Promise((resolve) => {
      let timer = 0;
      const wait = (ms) => {
        clearTimeout(timer);
        timer = setTimeout(() => settle(true), ms);
      };
      const settle = (ok) => {
        clearTimeout(timer);
        if (this.#asking.get(name) !== asking) return;
        this.#asking.delete(name);
        if (ok) {
          this.#held.add(name);
          this.#known.delete(name); // silent: gone, or never there
          this.#channel.postMessage({ t: "took", name, id: this.#id });
        }
        resolve(ok);
      };
      const asking = {
        lose: () => settle(false),
        hurry: () => wait(ASK_MS),
        heed: () => wait(KNOWN_MS),
        rivals: new Set(), // the askers this ask told to wait (held, holds false)
      };
      wait(this.#known.has(name) ? KNOWN_MS : ASK_MS);
      this.#asking.set(name, asking);
      this.#channel.postMessage({ t: "ask", name, id: this.#id });
    });
  }

  #free(name) {
    if (!this.#held.delete(name)) return;
    this.#channel.postMessage({ t: "free", name, id: this.#id });
    this.#wake(name);
  }

  #wake(name) {
    for (const retry of this.#waiting.get(name) ?? []) retry();
  }

  #heard(m) {
    if (m?.t === "who") {
      if (this.#held.size > 0) this.#channel.postMessage({ t: "have", names: [...this.#held], id: this.#id });
      return;
    }
    if (m?.t === "have") {
      for (const name of Array.isArray(m.names) ? m.names : []) this.#heardHolding(name, m.id);
      return;
    }
    if (typeof m?.name !== "string") return;
    const asking = this.#asking.get(m.name);
    switch (m.t) {
      case "ask":
        if (this.#held.has(m.name) || (this.#asking.has(m.name) && this.#id < m.id)) {
          asking?.rivals.add(m.id);
          this.#channel.postMessage({ t: "held", name: m.name, to: m.id, id: this.#id, holds: this.#held.has(m.name) });
        } else {
          asking?.lose(); // the other asker goes first
        }
        break;
      case "held":
        if (m.holds === true) this.#heardHolding(m.name, m.id);
        if (m.to === this.#id) asking?.lose();
        break;
      case "took":
        // It took the lock before reading this ask. Its answer (held) comes
        // once it reads it, or its free if it let go first: wait for either.
        // Not from a rival told to wait: that one may have read this ask
        // before asking, and will not answer it.
        if (asking?.rivals.has(m.id)) asking.lose();
        this.#heardHolding(m.name, m.id);
        break;
      case "free":
        if (this.#known.get(m.name) === m.id) {
          this.#known.delete(m.name);
          asking?.hurry(); // no longer waiting KNOWN_MS for it
        }
        this.#wake(m.name);
        break;
    }
  }

  // #heardHolding notes that the context id holds name. An ask for it
  // under way waits KNOWN_MS from now: the news came before its answer.
  #heardHolding(name, id) {
    if (typeof name !== "string" || typeof id !== "string" || id === this.#id) return;
    if (this.#known.get(name) !== id) this.#asking.get(name)?.heed();
    this.#known.set(name, id);
  }
}
