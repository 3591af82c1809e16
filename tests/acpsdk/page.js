// page.js: an ACP client app on the official SDK over att.stream(), driven by
// tests/e2e/sdk_test.go through window.__acp. It is what a web app does, plus
// what the tests read: every message the SDK read, the conversation as the
// app shows it, and how each SDK connection ended.
//
// A reloaded page (it kept its sessionId in sessionStorage) rebuilds its
// conversation the ACP way: initialize, then session/load, whose replay of
// session/update notifications becomes the conversation.
import { loadRelay } from "/relay.js";
import { client, methods } from "@agentclientprotocol/sdk";

const KEPT = "acp-e2e-session";
const q = new URLSearchParams(location.search);

const A = (window.__acp = {
  ready: false, // attached, connected, initialized, and a session new or loaded
  error: null, // how start() failed
  sessionId: null,
  init: null, // the initialize response
  read: [], // the text of every agent_message_chunk the SDK read, in order
  reads: 0, // messages the SDK read
  limit: Infinity, // how many messages the SDK may read (the tests' gate)
  conversation: [], // what the app shows: {role: "user"|"agent", text, session}
  dropped: 0, // session/updates before the replay of a session/load began
  others: [], // what onMessage got: messages the stream did not take
  states: [], // {state, code, reads}
  asked: [], // session/request_permission params the SDK handed the app
  permission: "allow", // the option the app chooses
  hold: false, // the app leaves permission requests unanswered until answer()
  holding: [], // resolves the permission requests held, with the option chosen
  deaf: false, // a held permission request stays unanswered even when cancelled
  fileSize: 10, // the length of the file the app reads for fs/read_text_file
  fileReads: 0, // fs/read_text_file requests the SDK handed the app
  closed: null, // how the last SDK connection ended: {code, message}
  connections: 0,
  att: null,
  ctx: null,
});

// answer answers the permission requests held (A.hold) with optionId.
A.answer = (optionId) => A.holding.splice(0).forEach((resolve) => resolve({ outcome: { outcome: "selected", optionId } }));

const waiting = [];
const wakeAll = () => waiting.splice(0).forEach((r) => r());
A.setLimit = (n) => {
  A.limit = n;
  wakeAll();
};

// gated passes the stream's messages on one per read of the SDK, and only
// while the SDK has read fewer than A.limit: it has no queue of its own, so
// what the SDK has not read stays unread in att.stream() too.
function gated(inner) {
  const reader = inner.getReader();
  let cancelled = false;
  return new ReadableStream(
    {
      async pull(c) {
        while (A.reads >= A.limit && !cancelled) await new Promise((r) => waiting.push(r));
        if (cancelled) return;
        const { value, done } = await reader.read();
        if (done) {
          c.close();
          return;
        }
        A.reads++;
        const u = value?.method === "session/update" ? value.params?.update : null;
        if (u?.sessionUpdate === "agent_message_chunk" && u.content?.type === "text") A.read.push(u.content.text);
        c.enqueue(value);
      },
      cancel(reason) {
        cancelled = true;
        wakeAll();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

// The conversation: after a session/load is sent, the session's updates
// count only from the replay's first entry on (a replay starts with the
// user's first prompt): live chunks of a turn still running may arrive
// between the request and the replay, and the replay holds them too.
let awaitingReplay = null; // the sessionId being loaded
function onUpdate({ params }) {
  const u = params.update;
  if (params.sessionId !== A.sessionId) return;
  if (awaitingReplay === params.sessionId) {
    if (u.sessionUpdate !== "user_message_chunk") {
      A.dropped++;
      return;
    }
    awaitingReplay = null;
  }
  if (u.content?.type !== "text") return;
  if (u.sessionUpdate === "agent_message_chunk") A.conversation.push({ role: "agent", text: u.content.text });
  if (u.sessionUpdate === "user_message_chunk") A.conversation.push({ role: "user", text: u.content.text });
}

A.attach = async () => {
  const relay = await loadRelay();
  A.url = q.get("relay") ?? `ws://${location.host}/v1/attach`;
  A.instance = q.get("instance") ?? "demo";
  A.att = await relay.attach({
    url: A.url,
    instance: A.instance,
    token: q.get("token") ?? "dev-token",
    name: "sdk",
    history: 20000,
    onMessage(m) {
      A.others.push(m);
    },
    onState(state, info) {
      A.states.push({ state, code: info.code ?? "", reads: A.reads });
    },
  });
};

// connect opens a stream and an SDK connection over it; A.ctx calls the
// agent until A.end() (or the connection closes).
A.connect = () => {
  const s = A.att.stream();
  A.closed = null;
  A.connections++;
  let end, opened;
  const ended = new Promise((r) => (end = r));
  A.end = end;
  A.opened = new Promise((r) => (opened = r));
  const app = client({ name: "relaywasm-e2e" })
    .onNotification(methods.client.session.update, onUpdate)
    .onRequest(methods.client.session.requestPermission, ({ params, signal }) => {
      A.asked.push(params);
      if (!A.hold) return { outcome: { outcome: "selected", optionId: A.permission } };
      return new Promise((resolve) => {
        A.holding.push(resolve);
        // The request was cancelled, or the SDK's connection closed.
        signal?.addEventListener("abort", () => {
          if (A.deaf) return;
          A.holding = A.holding.filter((r) => r !== resolve);
          resolve({ outcome: { outcome: "cancelled" } });
        });
      });
    })
    .onRequest(methods.client.fs.readTextFile, () => {
      A.fileReads++;
      return { content: "y".repeat(A.fileSize) };
    });
  A.connection = app
    .connectWith({ readable: gated(s.readable), writable: s.writable }, async (ctx) => {
      A.ctx = ctx;
      opened(ctx);
      await ended;
    })
    .then(
      () => (A.closed = { code: "done", message: "" }),
      (e) => (A.closed = { code: e?.code ?? "", message: String(e?.message ?? e) }),
    );
  return s;
};

A.initialize = async () => {
  A.init = await (await A.opened).request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  return A.init;
};

A.newSession = async () => {
  const r = await (await A.opened).request(methods.agent.session.new, { cwd: "/", mcpServers: [] });
  A.sessionId = r.sessionId;
  sessionStorage.setItem(KEPT, r.sessionId);
  return r.sessionId;
};

A.load = async (sessionId) => {
  A.sessionId = sessionId;
  A.conversation = [];
  awaitingReplay = sessionId;
  await (await A.opened).request(methods.agent.session.load, { sessionId, cwd: "/", mcpServers: [] });
  awaitingReplay = null;
};

// prompt sends a prompt and resolves with its stop reason and how many chunks
// the conversation had gained when the answer came.
A.prompt = async (text) => {
  A.conversation.push({ role: "user", text });
  const before = A.conversation.length;
  const r = await (await A.opened).request(methods.agent.session.prompt, { sessionId: A.sessionId, prompt: [{ type: "text", text }] });
  return { stopReason: r.stopReason, chunks: A.conversation.length - before };
};

// promptLater sends a prompt without waiting; A.answers gets its outcome.
A.answers = [];
A.promptLater = (text) => {
  A.prompt(text).then(
    (r) => A.answers.push({ text, ...r }),
    (e) => A.answers.push({ text, code: e?.code ?? "", message: String(e?.message ?? e) }),
  );
};

// storedCursor reads the cursor relaywasm keeps in IndexedDB for this page's
// stream (the Store's schema, jsbridge: database "relaywasm", object store
// "state" keyed [url, instance, name]), for the tests to wait for the Store
// to have written what it holds.
A.storedCursor = () =>
  new Promise((resolve, reject) => {
    const open = indexedDB.open("relaywasm");
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      const db = open.result;
      const get = db.transaction("state").objectStore("state").get([A.url, A.instance, A.att.name]);
      get.onsuccess = () => {
        db.close();
        resolve(get.result?.cursor ?? 0);
      };
      get.onerror = () => reject(get.error);
    };
  });

// start: attach, connect, initialize, and a new session or, after a reload,
// the kept one loaded.
A.start = async () => {
  try {
    await A.attach();
    A.connect();
    await A.initialize();
    const kept = sessionStorage.getItem(KEPT);
    if (kept && A.init.agentCapabilities?.loadSession) await A.load(kept);
    else await A.newSession();
    A.ready = true;
  } catch (e) {
    A.error = { code: e?.code ?? "", message: String(e?.message ?? e) };
  }
};

if (q.get("start") !== "no") A.start();
