// A small web app as users build them: Vite, TypeScript, the official ACP SDK
// (@agentclientprotocol/sdk) and relaywasm installed from its npm tarball.
// The SDK talks ACP over att.stream(); relaywasm reaches the runtime through
// the relay and keeps the stream across drops and reloads.
//
// After a reload the app does what ACP prescribes: initialize, then
// session/load with the sessionId it kept (in localStorage), and redraws the
// conversation from the session/update notifications the agent replays.
// Before that, as soon as it loads, it draws what this device kept of the
// conversation (relay.history, which answers while the relay is down), for
// session/load to replace. It
// does the same on a new stream when content is lost under a conversation
// under way (att.stream()'s readable errors with the loss: a runtime that
// does not resume, as contenox v1.0.0 ships, loses what it sent while the
// connection was down), so a dropped connection costs a redraw, not the
// conversation.
//
// Configuration from the URL, the fragment winning over the query:
//   relay     the relay's attach URL (default ws(s)://<this host>/v1/attach)
//   instance  the runtime instance (default "demo")
//   token     the bearer credential (default "dev-token")
//   key       the relay's public key to pin (optional; URL-escaped or not)
//   worker    "1" runs relay.wasm in a Web Worker (loadRelay({worker: true}))
//
// window.__app is a read-only view of the app's state for tests.

// First, so relay.wasm's fetch and compile start before the rest of the
// bundle runs, rather than when main() gets to loadRelay.
import "relaywasm/preload";
import { loadRelay, RelayError } from "relaywasm";
import { client, PROTOCOL_VERSION, RequestError } from "@agentclientprotocol/sdk";
import type { ClientContext, ContentBlock, SessionNotification } from "@agentclientprotocol/sdk";
import type { HistoryEntry, Relay } from "relaywasm";

const query = new URLSearchParams(location.search);
const fragment = new URLSearchParams(location.hash.slice(1));
const setting = (name: string, fallback: string) => fragment.get(name) ?? query.get(name) ?? fallback;
const scheme = location.protocol === "https:" ? "wss" : "ws";
const config = {
  relay: setting("relay", `${scheme}://${location.host}/v1/attach`),
  instance: setting("instance", "demo"),
  token: setting("token", "dev-token"),
  // A base64 key pasted unescaped (as the demo prints it) has its "+" read as a space.
  key: setting("key", "").replaceAll(" ", "+"),
  worker: setting("worker", "") === "1",
};
const sessionKey = `relaywasm-demo-app:${config.instance}:session`;
// The stream the app attaches to, kept on this device for preview.
const stream = { url: config.relay, instance: config.instance, name: "app" };
const KEEP = 20000; // transcript entries kept (both directions)
const SETUP_TRIES = 3; // losses in a row while setting up, before the app gives up

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const ui = {
  status: $<HTMLParagraphElement>("status"),
  log: $<HTMLElement>("log"),
  composer: $<HTMLFormElement>("composer"),
  prompt: $<HTMLInputElement>("prompt"),
  send: $<HTMLButtonElement>("send"),
};

/** What tests read; the app never does. */
const app = {
  state: "loading",
  ready: false,
  mode: "", // where relay.wasm runs: "main" or "worker"
  reason: "", // why it runs on the main thread although a worker was asked for
  loaded: false, // the conversation came back through session/load
  previewed: 0, // turns drawn from this device's transcript before the agent replayed them
  losses: [] as string[], // the code of each loss the app came back from
  sessionId: "",
  chunks: 0, // agent chunks shown
  text: "", // every agent chunk's text, in order
  turns: [] as { role: "user" | "agent"; text: string }[],
  stopReasons: [] as string[],
  error: null as null | { code: string; message: string },
  send: (text: string) => submit(text),
};
(window as unknown as { __app: typeof app }).__app = app;

let current: { role: "user" | "agent"; el: HTMLElement; turn: { role: "user" | "agent"; text: string } } | null = null;

function append(role: "user" | "agent", text: string) {
  if (current?.role !== role) {
    const el = document.createElement("div");
    el.className = `turn ${role}`;
    const turn = { role, text: "" };
    app.turns.push(turn);
    ui.log.append(el);
    current = { role, el, turn };
  }
  // A text node per chunk, and one scroll per frame: setting the whole
  // turn's text and reading scrollHeight for every chunk lays out the turn
  // again each time, which a long answer (a session/load replaying thousands
  // of chunks) turns into tens of seconds in WebKit.
  current.turn.text += text;
  current.el.append(text);
  if (role === "agent") {
    app.chunks++;
    app.text += text;
  }
  scrollSoon();
}

let scrolling = false;

function scrollSoon() {
  if (scrolling) return;
  scrolling = true;
  requestAnimationFrame(() => {
    scrolling = false;
    ui.log.scrollTop = ui.log.scrollHeight;
  });
}

function note(text: string) {
  const el = document.createElement("div");
  el.className = "turn note";
  el.textContent = text;
  ui.log.append(el);
  current = null;
}

function textOf(block: ContentBlock): string {
  return block?.type === "text" ? block.text : "";
}

// While a kept session is being loaded, the resumed stream may first hand
// the SDK updates the page had not shown before it reloaded; session/load
// replays them (each chunk is in the replay or after it, once), so updates
// before the replay's first user chunk are dropped.
let loading = Boolean(localStorage.getItem(sessionKey));
let replaying = false;

function onUpdate(n: SessionNotification) {
  const u = n.update;
  if (loading && !replaying) {
    if (u.sessionUpdate !== "user_message_chunk") return;
    replaying = true;
  }
  if (u.sessionUpdate === "agent_message_chunk") append("agent", textOf(u.content));
  else if (u.sessionUpdate === "user_message_chunk") append("user", textOf(u.content));
}

let prompt: (text: string) => Promise<string> = async () => {
  throw new Error("not connected yet");
};

// lost says whether e is a stream's report that content is gone: the
// attachment is still open, and a new stream can load the session again.
const lost = (e: unknown): e is RelayError => e instanceof RelayError && e.eviction !== undefined;

// tooLarge says whether e is att.stream()'s answer to a request over the
// relay's size limit: that one request was not sent, the connection goes on.
const tooLarge = (e: unknown): e is RequestError => e instanceof RequestError && (e.data as { code?: string } | undefined)?.code === "frame_too_large";

function setReady(ready: boolean) {
  app.ready = ready;
  ui.prompt.disabled = ui.send.disabled = !ready;
  if (ready) ui.prompt.focus();
}

// clearView forgets what is shown, for session/load to replay it.
function clearView() {
  ui.log.replaceChildren();
  current = null;
  Object.assign(app, { chunks: 0, text: "", turns: [] });
}

// conversing is set once the SDK's conversation starts: preview draws
// nothing after that.
let conversing = false;

// preview draws what this device kept of the conversation, as the app drew
// it live: its prompts and the agent's updates, each session/load starting
// the view again (its replay from its first user chunk, as onUpdate takes
// it). A reloaded app shows it at once, and while the relay is down.
async function preview(relay: Relay) {
  if (!localStorage.getItem(sessionKey)) return;
  let entries: HistoryEntry[];
  try {
    entries = await relay.history(stream);
  } catch {
    return; // nothing kept to show: session/load will draw it
  }
  if (conversing) return;
  let skipping = false; // a session/load's replay, before its first user chunk
  for (const { out, message } of entries) {
    const m = message ?? {};
    if (out && m.method === "session/load") {
      clearView();
      skipping = true;
    } else if (out && m.method === "session/prompt") {
      append("user", (m.params?.prompt ?? []).map(textOf).join(""));
      current = null;
    } else if (!out && m.method === "session/update" && m.params?.update) {
      const u = m.params.update;
      if (skipping && u.sessionUpdate !== "user_message_chunk") continue;
      skipping = false;
      if (u.sessionUpdate === "agent_message_chunk") append("agent", textOf(u.content));
      else if (u.sessionUpdate === "user_message_chunk") append("user", textOf(u.content));
    } else if (!out && !m.method) {
      current = null; // an answer: the turn it ends is over
    }
  }
  app.previewed = app.turns.length;
}

async function main() {
  const relay = await loadRelay({ worker: config.worker });
  app.mode = relay.mode;
  app.reason = relay.reason;
  void preview(relay);
  const att = await relay.attach({
    ...stream,
    history: KEEP,
    token: config.token,
    relayKey: config.key || undefined,
    onMessage() {}, // everything goes through att.stream()
    onState(state) {
      app.state = state;
      ui.status.textContent = state;
    },
  });
  const acp = client()
    .onNotification("session/update", ({ params }) => onUpdate(params))
    .onRequest("session/request_permission", ({ params }) => {
      // The dev agent asks before some prompts; this app, to stay small,
      // allows once without asking, and never more than once: with no
      // "allow_once" among the options it rejects, or cancels. An app of
      // yours shows the user the request and its options (demo/web does).
      const pick = params.options.find((o) => o.kind === "allow_once") ?? params.options.find((o) => o.kind === "reject_once");
      return { outcome: pick ? { outcome: "selected", optionId: pick.optionId } : { outcome: "cancelled" } };
    });
  let loss: RelayError | null = null; // what ended the last stream
  let again = 0; // losses in a row while setting up
  for (;;) {
    let began = false; // the conversation got going on this stream
    try {
      await acp.connectWith(att.stream(), async (ctx) => {
        await converse(ctx, loss);
        began = true;
        again = 0;
        await new Promise<never>(() => {}); // the connection lives as long as the page
      });
    } catch (e) {
      // A loss while setting up again (a drop during session/load's
      // replay) is retried, a few times in a row and no more: the same
      // loss (a message too large to carry, replayed) would come back
      // each time.
      if (!lost(e) || (!began && ++again > SETUP_TRIES)) throw e;
      loss = e;
      app.losses.push(e.code);
      setReady(false);
    }
  }
}

// converse starts the SDK's conversation: initialize, then the kept session
// (session/load, which replays it) or a new one, and readies the composer.
// loss is what ended the previous stream, if one did.
async function converse(ctx: ClientContext, loss: RelayError | null) {
  conversing = true;
  const init = await ctx.request("initialize", { protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
  const kept = localStorage.getItem(sessionKey);
  app.sessionId = "";
  if (kept && init.agentCapabilities?.loadSession) {
    clearView(); // what preview drew, or the conversation a loss cut
    if (loss) note(`The connection lost part of this conversation (${loss.message}); the agent has sent all of it again.`);
    loading = true;
    replaying = false;
    try {
      await ctx.request("session/load", { sessionId: kept, cwd: "/", mcpServers: [] });
      app.sessionId = kept;
      app.loaded = true;
    } catch (e) {
      if (lost(e)) throw e; // the stream's loss, not the session's: main sets up again
      clearView();
      note("The earlier conversation is gone; starting a new one.");
    }
  } else if (!loss) {
    clearView(); // a session this agent cannot load: preview drew it for nothing
  } else {
    note(`The connection lost part of this conversation (${loss.message}), and this agent cannot send it again: a new one starts here.`);
  }
  loading = false;
  if (!app.sessionId) {
    const s = await ctx.request("session/new", { cwd: "/", mcpServers: [] });
    app.sessionId = s.sessionId;
    localStorage.setItem(sessionKey, s.sessionId);
  }
  prompt = async (text) => {
    append("user", text);
    current = null;
    const r = await ctx.request("session/prompt", { sessionId: app.sessionId, prompt: [{ type: "text", text }] });
    current = null;
    app.stopReasons.push(r.stopReason);
    return r.stopReason;
  };
  setReady(true);
}

ui.composer.addEventListener("submit", (e) => {
  e.preventDefault();
  const text = ui.prompt.value.trim();
  if (!text || !app.ready) return;
  ui.prompt.value = "";
  void submit(text);
});

// submit sends a prompt and resolves to how its turn ended: null if it did
// not. A prompt cut off by a loss is not a failure: main loads the session
// again, and the agent's answer shows as it goes on. Nor is a prompt too
// large to send (a pasted log): the app says so, and the next one goes.
async function submit(text: string): Promise<string | null> {
  try {
    return await prompt(text);
  } catch (e) {
    if (tooLarge(e)) note(`That message was not sent: ${e.message}`);
    else if (!lost(e)) fail(e);
    return null;
  }
}

function fail(e: unknown) {
  const code = e instanceof RelayError ? e.code : "error";
  const message = e instanceof Error ? e.message : String(e);
  app.error = { code, message };
  ui.status.textContent = `error: ${code}`;
  note(message);
}

// The attachment ended for good (superseded, unauthorized, the relay's key
// changed): nothing more can be sent.
main().catch((e) => {
  setReady(false);
  fail(e);
});
