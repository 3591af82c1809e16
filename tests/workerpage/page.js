// page.js: a chat page in worker mode (loadRelay({worker: true})), driven by
// tests/e2e/worker_test.go through window.__w. It talks raw ACP to the dev
// agent and records every agent_message_chunk: the ones it finds in the
// transcript (history()) when it starts, and the ones delivered to
// onMessage, each with its seq, so the test can tell whether a reload lost
// or doubled one.
import { loadRelay } from "/relay.js";

const KEPT = "worker-e2e-session";
const W = (window.__w = { ready: false, error: null, mode: "", reason: "", hist: [], live: [], states: [], sessionId: null, relay: null, att: null });

const chunk = (m) => {
  const u = m?.method === "session/update" ? m.params?.update : null;
  return u?.sessionUpdate === "agent_message_chunk" && u.content?.type === "text" ? u.content.text : null;
};

let nextID = 1;
const waiting = new Map(); // id -> resolve
function request(method, params) {
  const id = nextID++;
  return new Promise((resolve, reject) => {
    waiting.set(id, resolve);
    W.att.sendACP({ jsonrpc: "2.0", id: `w${Date.now()}-${id}`, method, params }).catch(reject);
  });
}

// The transcript is read once, at the first delivery, while that delivery
// is held: what it holds is then exactly what was accepted before, and
// everything after it reaches onMessage.
let reading = null;
function onMessage(m, meta) {
  reading ??= this.history().then((h) => {
    for (const e of h) if (!e.out && chunk(e.message) !== null) W.hist.push([e.seq, chunk(e.message)]);
  });
  return reading.then(() => {
    const text = chunk(m);
    if (text !== null) W.live.push([meta.seq, text]);
    const id = typeof m?.id === "string" ? Number(m.id.split("-")[1]) : 0;
    if (m?.id !== undefined && m.method === undefined) waiting.get(id)?.(m);
  });
}

// kept is the tab's sessionStorage, or null in a frame of no origin of its
// own (sandboxed), which has none.
function kept() {
  try {
    return sessionStorage;
  } catch {
    return null;
  }
}

async function start() {
  const q = new URLSearchParams(location.search);
  // ?hold=ms: loadRelay waits that long after the page's modules ran.
  if (q.has("hold")) await new Promise((resolve) => setTimeout(resolve, Number(q.get("hold"))));
  W.loadCalled = performance.now();
  // ?window=ms: a commit window so long that only the write at pagehide
  // stores anything before a reload. ?memory: the state in memory.
  const relay = await loadRelay({
    worker: !q.has("main"),
    commitWindowMs: q.has("window") ? Number(q.get("window")) : undefined,
    storage: q.has("memory") ? "memory" : undefined,
  });
  W.relay = relay;
  W.mode = relay.mode;
  W.reason = relay.reason;
  W.att = await relay.attach({
    url: q.get("relay") ?? `ws://${location.host}/v1/attach`, // ?relay=: a relay elsewhere
    instance: "demo",
    token: async () => "dev-token", // a function: the worker asks the page
    name: "worker-e2e",
    history: 10000,
    onMessage,
    onState: (state, info) => {
      W.states.push(state);
      if (info.code) W.last = { code: info.code, message: info.message ?? "" }; // why the last connection ended
      if (state === "closed") W.ended = { code: info.code ?? "", message: info.message ?? "" };
    },
  });
  W.sessionId = kept()?.getItem(KEPT);
  if (!W.sessionId) {
    await request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    const s = await request("session/new", { cwd: "/", mcpServers: [] });
    W.sessionId = s.result.sessionId;
    kept()?.setItem(KEPT, W.sessionId);
  }
  W.ready = true;
}

W.prompt = (text) => {
  request("session/prompt", { sessionId: W.sessionId, prompt: [{ type: "text", text }] }).then((m) => (W.answer = m.result ?? m.error));
};

start().catch((e) => (W.error = { code: e?.code ?? "", message: String(e?.message ?? e) }));

// streamInitialize opens att.stream() (over the worker's attachment), sends
// initialize through its writable, and resolves with the first message its
// readable gives, which must be the response with the id as written.
W.streamInitialize = async () => {
  const s = W.att.stream();
  const writer = s.writable.getWriter();
  const reader = s.readable.getReader();
  await writer.write({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1 } });
  const { value } = await reader.read();
  await reader.cancel();
  writer.releaseLock();
  return value;
};
