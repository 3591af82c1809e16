// bench.js: the page half of `make bench` (tests/bench). The harness drives
// it through window.bench over DevTools; every interval is timed here with
// performance.now(), so no DevTools round trip falls inside a measurement.
//
// Every figure is taken on two kinds of client of the same relay and runtime,
// behind one small interface (send, handler, fail):
//
//   - wasm: relay.wasm through relay.js, exactly as an application uses it;
//   - raw: a bare WebSocket doing the least a client can (the hello by hand,
//     one JSON.parse per message, no cursor, no store): the ceiling set by
//     Chromium's own frame handling, and so the baseline.
//
// The relay's frame names and the credential come from the harness
// (configure), which takes them from librelay and relayleg.

const CONFIG_KEY = "relaywasm-bench-config";
const RELOAD_KEY = "relaywasm-bench-reload"; // "wasm", "worker" or "raw" while reloads are measured
const RAW_STATE_KEY = "relaywasm-bench-raw"; // the raw client's {session, cursor}
const RELOAD_STREAM = "reload"; // the wasm reload client's stored stream
const RELOAD_ECHOES = 3; // frames left undelivered before each reload

let cfg = JSON.parse(sessionStorage.getItem(CONFIG_KEY) ?? "null");

// relay.js starts loading as the page starts, as an application's import
// of it would, except in the raw client's reloaded page: a reload without
// relay.wasm does not load it. (A static import made the raw baseline wait
// for relay.js: 40–50 ms of it in the baseline when it was 16 modules.)
const relayModule = sessionStorage.getItem(RELOAD_KEY) === "raw" ? null : import("./relay.js");

async function loadRelay(options) {
  return (await (relayModule ?? import("./relay.js"))).loadRelay(options);
}

let nextId = 1;

// ---------------------------------------------------------------------------
// Clients.

// rawClient opens a WebSocket, says hello asking for session back ("" for a
// fresh one) and resolves once welcomed. c.handler(payload, seq), which may
// be set from the start, receives every ACP message.
async function rawClient(session, c = {}) {
  const T = cfg.types;
  const ws = new WebSocket(cfg.url, cfg.protocols);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error("raw: the WebSocket did not open"));
  });
  const welcomed = new Promise((resolve, reject) => {
    ws.onmessage = (ev) => resolve(JSON.parse(ev.data));
    ws.onclose = (ev) => reject(new Error(`raw: closed ${ev.code} before the welcome`));
  });
  const hello = { protocol_version: cfg.version, instance: cfg.instance, agent: "relaywasm-bench-raw", nonce: nonce() };
  ws.send(JSON.stringify({ type: T.hello, id: "hello", instance: cfg.instance, session, payload: hello }));
  const w = await welcomed;
  if (w.type !== T.welcome) throw new Error(`raw: the hello was answered with ${JSON.stringify(w)}`);
  Object.assign(c, { kind: "raw", session: w.session, bytes: 0 });
  ws.onmessage = (ev) => {
    c.bytes += ev.data.length;
    const f = JSON.parse(ev.data);
    if (f.type === T.acp) c.handler?.(f.payload, f.seq);
    else if (f.type === T.heartbeat && f.id) ws.send(JSON.stringify({ type: T.ack, re: f.id }));
  };
  ws.onclose = (ev) => c.fail?.(new Error(`raw: the relay closed the socket ${ev.code} ${ev.reason}`));
  const frame = (type, payload, id) =>
    JSON.stringify({ type, id, instance: cfg.instance, session: c.session, payload });
  c.send = (msg) => {
    ws.send(frame(T.acp, msg));
    return Promise.resolve();
  };
  c.resume = (afterSeq) => ws.send(frame(T.resume, { after_seq: afterSeq }, "resume"));
  return c;
}

function nonce() {
  return btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
}

// wasmClient attaches through relay.wasm to the stored stream name; as with
// rawClient, c.handler may be set from the start.
async function wasmClient(relay, name, history, c = {}) {
  Object.assign(c, { kind: "wasm", bytes: 0 });
  c.att = await relay.attach({
    url: cfg.url,
    instance: cfg.instance,
    token: cfg.token,
    relayKey: cfg.relayKey,
    name,
    history,
    onMessage: (m, meta) => c.handler?.(m, meta.seq),
    onState: (state, info) => {
      // A measurement across a reconnect would measure the reconnect.
      if (state !== "open" && state !== "connecting") c.fail?.(new Error(`wasm ${name}: ${state} ${info.code ?? ""}`));
    },
  });
  c.send = (msg) => c.att.sendACP(msg);
  return c;
}

// memoryRelay loads a Relay whose store is in memory: the IndexedDB cursor
// off. The harness checks relay.storage.
function memoryRelay() {
  return loadRelay({ storage: "memory" });
}

// ---------------------------------------------------------------------------
// ACP over either client.

// exchange sends one request and resolves with its response; onOther sees
// every other message meanwhile. A client failure rejects.
function exchange(c, method, params, onOther = null) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const done = (f, v) => {
      c.handler = c.fail = null;
      f(v);
    };
    c.fail = (e) => done(reject, e);
    c.handler = (m) => {
      if (m.id !== id) onOther?.(m);
      else if (m.error) done(reject, new Error(`${method}: ${JSON.stringify(m.error)}`));
      else done(resolve, m.result);
    };
    c.send({ jsonrpc: "2.0", id, method, params }).catch(c.fail);
  });
}

async function startChat(c) {
  await exchange(c, "initialize", { protocolVersion: 1 });
  c.sid = (await exchange(c, "session/new", { cwd: "/", mcpServers: [] })).sessionId;
}

// ---------------------------------------------------------------------------
// The figures.

const clients = {};

// setup attaches the five inbound variants and opens an ACP session on each.
async function setup() {
  const idb = await loadRelay();
  const mem = await memoryRelay();
  clients.raw = await rawClient("");
  clients.wasm = await wasmClient(idb, "bench", 0);
  clients.memory = await wasmClient(mem, "bench-memory", 0);
  clients.transcript = await wasmClient(idb, "bench-transcript", cfg.history);
  // Worker mode: relay.wasm in a Web Worker, the page only gets the batches.
  const wk = await loadRelay({ worker: true });
  if (wk.mode !== "worker") throw new Error(`worker mode did not start: ${wk.reason}`);
  clients.worker = await wasmClient(wk, "bench-worker", 0);
  for (const c of Object.values(clients)) await startChat(c);
  return { wasm: idb.storage, memory: mem.storage };
}

// stream asks the dev agent for frames messages (frames-1 chunks of size
// bytes, then the prompt's response) and times them from the send to the
// response's delivery. Every message must arrive.
async function stream(variant, frames, size) {
  const c = clients[variant];
  const bytes = c.bytes;
  let n = 0;
  const prompt = { sessionId: c.sid, prompt: [{ type: "text", text: `count ${frames - 1} size ${size}` }] };
  const start = performance.now();
  await exchange(c, "session/prompt", prompt, () => n++);
  const ms = performance.now() - start;
  if (n + 1 !== frames) throw new Error(`${variant}: stream incomplete, ${n + 1} of ${frames} messages`);
  return { ms, frames, bytes: c.bytes - bytes };
}

// roundTrips times n sequential echo requests, each from the send to its
// response's delivery, in milliseconds. With mark, each is also a measure
// ("rt <variant>") in a trace the harness records (trace.go).
async function roundTrips(variant, n, mark = false) {
  const c = clients[variant];
  const out = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await exchange(c, cfg.echoMethod, { i });
    const end = performance.now();
    out.push(end - start);
    if (mark) performance.measure(`rt ${variant}`, { start, end });
  }
  return out;
}

// ---------------------------------------------------------------------------
// Reload to live. Before each reload the page leaves frames undelivered on
// purpose (arm: the handler holds them, so the cursor stays before them);
// the reloaded page loads, attaches, resumes, and the first frame the resume
// replays is "live". The mode survives the reload in sessionStorage.

let reloadClient = null;

// arm makes sure a reload client of the kind is attached, sends echo
// requests and resolves once their first response has reached the handler,
// which then holds it and every later one.
async function arm(kind) {
  sessionStorage.setItem(RELOAD_KEY, kind);
  reloadClient ??= kind === "raw" ? await reloadRaw(null) : await reloadWasm(await reloadRelay(kind), null, kind);
  const c = reloadClient;
  const arrived = new Promise((resolve, reject) => {
    c.arrived = resolve;
    c.fail = reject;
  });
  c.holding = true;
  for (let i = 0; i < RELOAD_ECHOES; i++) {
    c.send({ jsonrpc: "2.0", id: nextId++, method: cfg.echoMethod, params: {} }).catch(c.fail);
  }
  await arrived;
  if (kind === "raw") sessionStorage.setItem(RAW_STATE_KEY, JSON.stringify({ session: c.session, cursor: c.cursor }));
}

// reloadHandler accepts messages (moving the cursor) unless holding; the
// first message of the page's life is noted as live.
function reloadHandler(c, first) {
  return (m, seq) => {
    first?.({ at: performance.now(), seq });
    first = null;
    if (!c.holding) {
      c.cursor = seq;
      return undefined;
    }
    c.arrived?.();
    // Not accepted until released (stopReloads): relay.wasm keeps its cursor.
    return new Promise((resolve) => (c.release = resolve));
  };
}

// reloadRelay loads the Relay of a reload client: on the main thread
// ("wasm") or in a worker ("worker").
async function reloadRelay(kind) {
  const relay = await loadRelay({ worker: kind === "worker" });
  if (kind === "worker" && relay.mode !== "worker") throw new Error(`worker mode did not start: ${relay.reason}`);
  return relay;
}

async function reloadWasm(relay, first, kind) {
  const c = { holding: false, cursor: 0 };
  c.handler = reloadHandler(c, first);
  return wasmClient(relay, `${RELOAD_STREAM}-${kind}`, 0, c);
}

// reloadRaw attaches the raw client, asking for its stored session back and
// resuming after its stored cursor, as relay.js does for a reloaded page.
async function reloadRaw(first) {
  const saved = JSON.parse(sessionStorage.getItem(RAW_STATE_KEY) ?? '{"session":"","cursor":0}');
  const c = { holding: false, cursor: saved.cursor };
  c.handler = reloadHandler(c, first);
  await rawClient(saved.session, c);
  if (saved.session && c.session !== saved.session) throw new Error("raw: the relay did not give the session back");
  if (saved.session) c.resume(saved.cursor);
  return c;
}

// measureReload runs on the load of a reloaded page: the timeline, in
// milliseconds since navigation start (performance.timeOrigin).
async function measureReload(kind) {
  const marks = {};
  const live = new Promise((resolve) => (marks.first = resolve));
  if (kind !== "raw") {
    if (kind === "wasm") watchInstantiate(marks); // a worker's is out of sight
    marks.loadStart = performance.now();
    const relay = await reloadRelay(kind);
    marks.loadEnd = performance.now();
    reloadClient = await reloadWasm(relay, marks.first, kind);
  } else {
    marks.loadStart = marks.loadEnd = performance.now();
    reloadClient = await reloadRaw(marks.first);
  }
  marks.attachEnd = performance.now();
  const first = await live;
  const wasm = performance.getEntriesByName(new URL("relay.wasm", location.href).href)[0];
  return {
    live: first.at,
    seq: first.seq,
    loadStart: marks.loadStart,
    loadEnd: marks.loadEnd,
    attachEnd: marks.attachEnd,
    wasmFetchStart: wasm?.startTime ?? 0,
    wasmFetchEnd: wasm?.responseEnd ?? 0,
    instantiateEnd: marks.instantiateEnd ?? 0,
    relayJS: performance.getEntriesByName(new URL("relay.js", location.href).href).length > 0,
  };
}

// moduleBytes times what relay.wasm costs before any of relay.js runs:
// fetching its bytes as a reload does (revalidated, then read from the
// HTTP cache) and compiling them. The harness runs it in the raw page, which
// has no relay.wasm of its own, between reloads: the floor under the
// module's share of reload to live.
async function moduleBytes() {
  const t0 = performance.now();
  const bytes = await (await fetch("relay.wasm")).arrayBuffer();
  const t1 = performance.now();
  await WebAssembly.compile(bytes);
  return { fetch: t1 - t0, compile: performance.now() - t1 };
}

// watchInstantiate notes when relay.js's WebAssembly.instantiate (of the
// module it compiled while streaming it) resolves: with the resource timing
// of relay.wasm, the share of reload to live that is fetching, compiling
// and instantiating the module.
function watchInstantiate(marks) {
  const instantiate = WebAssembly.instantiate;
  WebAssembly.instantiate = async (...args) => {
    try {
      return await instantiate.apply(WebAssembly, args);
    } finally {
      marks.instantiateEnd = performance.now();
    }
  };
}

// keepMemory keeps the linear memory of every module instantiated in the
// page (relay.wasm exports Go's as "mem"), for bench.memory.
const memories = [];
function keepMemory() {
  for (const name of ["instantiateStreaming", "instantiate"]) { // relay.js, and pages that instantiate it themselves
    const original = WebAssembly[name];
    WebAssembly[name] = async (...args) => {
      const r = await original.apply(WebAssembly, args);
      const exports = (r.instance ?? r).exports;
      if (exports?.mem instanceof WebAssembly.Memory) memories.push(exports.mem);
      return r;
    };
  }
}
keepMemory();

const reloading = sessionStorage.getItem(RELOAD_KEY);

window.bench = {
  configure(c) {
    cfg = c;
    sessionStorage.setItem(CONFIG_KEY, JSON.stringify(c));
  },
  setup,
  stream,
  // memory is the largest linear memory of the page's modules, in bytes:
  // Go's wasm memory only grows, so it is the high-water mark.
  memory: () => Math.max(0, ...memories.map((m) => m.buffer.byteLength)),
  roundTrips,
  arm,
  // reloaded resolves with the timeline of this page's load, when it is a
  // reload under measurement.
  reloaded: () => (reloading ? measured : Promise.reject(new Error("not a measured reload"))),
  moduleBytes,
  // stopReloads ends the reload measurements of this tab.
  stopReloads() {
    sessionStorage.removeItem(RELOAD_KEY);
    sessionStorage.removeItem(RAW_STATE_KEY);
    if (reloadClient) reloadClient.holding = false;
    reloadClient?.release?.();
    return reloadClient?.att?.detach();
  },
};

// Started at once, before the harness can ask: the page's load is what is
// measured.
const measured = reloading ? measureReload(reloading) : null;
measured?.catch(() => {}); // reported when the harness asks
