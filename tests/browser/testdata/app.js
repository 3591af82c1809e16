// A small application for the browser tests: it uses relay.js's API the way
// a page would, and records what reaches it. The Go tests drive it through
// syscall/js and inspect what it recorded.

// recorder returns the handlers of one attachment and what they saw.
//   async:   onMessage returns a Promise that resolves a moment later
//   failSeq: onMessage throws the first time it sees this seq (0: an unsequenced message)
//   offlineAt: after accepting this many messages, the browser goes offline
//              (from inside the handler, so it happens mid-batch)
//   holdAt:  after accepting this many chunks, hold() (from inside the
//            handler: the rest of the batch waits, as for a page awaiting
//            a person, however much of the stream the batch holds)
export function recorder({ async = false, failSeq = -1, offlineAt = 0, holdAt = 0 } = {}) {
  const r = {
    messages: [], // accepted ACP messages, in order
    metas: [], // their meta
    byID: new Map(), // accepted responses by JSON-RPC id
    chunkCount: 0, // accepted agent_message_chunk updates
    attempts: 0, // onMessage calls, accepted or not
    states: [], // [state, info]
    evictions: [],
    waiters: [],
    held: null, // while set, onMessage waits for it (hold, release)
    holding: 0, // deliveries waiting on held
  };
  // hold makes the next deliveries wait (a page waiting on a person);
  // release lets them through.
  r.hold = () => {
    r.held = new Promise((resolve) => (r.release = () => ((r.held = null), resolve())));
  };
  r.onMessage = (msg, meta) => {
    r.attempts++;
    if (meta.seq === failSeq) {
      failSeq = -1;
      throw new Error("the test application fails on purpose");
    }
    const accept = () => {
      r.messages.push(msg);
      r.metas.push(meta);
      if (msg?.id !== undefined && msg.method === undefined) r.byID.set(msg.id, msg);
      if (isChunk(msg) && ++r.chunkCount === holdAt) r.hold();
      if (r.messages.length === offlineAt) fire("window", "offline");
      r.check();
    };
    if (r.held) {
      r.holding++;
      r.check();
      return r.held.then(accept);
    }
    if (!async) return accept();
    return new Promise((resolve) => setTimeout(() => (accept(), resolve()), 0));
  };
  r.onState = (state, info) => {
    r.states.push([state, info]);
    r.check();
  };
  r.onEvicted = (info) => {
    r.evictions.push(info);
    r.check();
  };
  // until resolves once pred(r) holds, checked after every event.
  r.until = (pred, what = "a condition") =>
    new Promise((resolve, reject) => {
      if (pred(r)) return resolve();
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), 15000);
      r.waiters.push({ pred, resolve: () => (clearTimeout(timer), resolve()) });
    });
  r.check = () => {
    if (r.waiters.length) r.waiters = r.waiters.filter((w) => (w.pred(r) ? (w.resolve(), false) : true));
  };
  r.response = (id) => r.until((r) => r.byID.has(id), `the response to ${id}`).then(() => r.byID.get(id));
  r.chunks = () => r.messages.filter(isChunk).map((m) => m.params.update.content.text);
  r.untilState = (state) => r.until((r) => r.states.some(([s]) => s === state), `state ${state}`);
  return r;
}

const isChunk = (m) => m?.method === "session/update" && m.params?.update?.sessionUpdate === "agent_message_chunk";

let nextID = 1;

// request sends a JSON-RPC request and resolves with its response.
export async function request(att, r, method, params) {
  const id = nextID++;
  await att.sendACP({ jsonrpc: "2.0", id, method, params });
  return r.response(id);
}

// newSession initializes ACP and opens a session; resolves with its id.
export async function newSession(att, r) {
  await request(att, r, "initialize", { protocolVersion: 1, clientCapabilities: {} });
  const res = await request(att, r, "session/new", { cwd: "/", mcpServers: [] });
  return res.result.sessionId;
}

// prompt sends a prompt without waiting; resolves with the request id.
export async function prompt(att, sessionId, text) {
  const id = nextID++;
  await att.sendACP(JSON.stringify({
    jsonrpc: "2.0", id, method: "session/prompt",
    params: { sessionId, prompt: [{ type: "text", text }] },
  }));
  return id;
}

// fire dispatches a browser event on window (online, offline) or document.
export function fire(target, type) {
  (target === "document" ? document : globalThis).dispatchEvent(new Event(type));
}

// sendFromHandler makes att's handler send msg itself, synchronously, when
// the next message arrives (as an application answering a request from the
// agent does); it resolves with what that sendACP resolved to.
export function sendFromHandler(att, msg) {
  const handler = att.onMessage;
  return new Promise((resolve, reject) => {
    att.onMessage = (m, meta) => {
      att.onMessage = handler;
      att.sendACP(msg).then(resolve, reject);
      return handler(m, meta);
    };
  });
}

// sent counts the frames this page's WebSockets send, by type (a frame is
// one text message; relay.js may send it as a string or as UTF-8 bytes).
export const sent = new Map();
let watching = false;
export function watchSends() {
  if (watching) return;
  watching = true;
  const proto = realSocket().prototype;
  const send = proto.send;
  const decoder = new TextDecoder();
  proto.send = function (data) {
    try {
      const text = typeof data === "string" ? data : decoder.decode(data);
      const type = JSON.parse(text).type;
      sent.set(type, (sent.get(type) ?? 0) + 1);
    } catch {
      // not a frame; counted nowhere
    }
    return send.call(this, data);
  };
}
export const sentCount = (type) => sent.get(type) ?? 0;

// stallAfter keeps the page's thread busy for ms right after the next frame
// of the type goes out, once: a page that stalls (a phone, a long redraw)
// while the answer to that frame arrives. Whatever the relay sends back
// meanwhile waits behind the stall, and so do the page's timers. It returns
// {done, cancel}: done resolves once the stall is over; cancel takes the
// stall back if it has not come (a test that failed before it).
export function stallAfter(type, ms) {
  const proto = realSocket().prototype;
  const send = proto.send;
  const decoder = new TextDecoder();
  let over;
  const done = new Promise((resolve) => (over = resolve));
  const stalling = function (data) {
    const r = send.call(this, data);
    const text = typeof data === "string" ? data : decoder.decode(data);
    if (text.includes(`"type":${JSON.stringify(type)}`)) {
      proto.send = send;
      queueMicrotask(() => {
        const end = performance.now() + ms;
        while (performance.now() < end);
        over();
      });
    }
    return r;
  };
  proto.send = stalling;
  return { done, cancel: () => proto.send === stalling && (proto.send = send) };
}

// realSocket is the browser's WebSocket, also where a stand-in (fakerelay.js,
// engines_test.go's error-only one) took its place for the rest of the
// page's life: each keeps the one it replaced as Real.
function realSocket() {
  return globalThis.WebSocket.Real ?? globalThis.WebSocket;
}
