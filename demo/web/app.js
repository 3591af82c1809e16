// The relaywasm demo chat: a person talks to the dev agent over ACP (JSON-RPC
// 2.0) through relay.js, which reaches a runtime with no public address via
// the relay. No build step and no framework: this module, index.html and
// style.css are the whole page.
//
// What it shows off, and how:
//   - Streaming: agent_message_chunk updates are appended as they arrive,
//     batched into one DOM write per delivery batch (appending, never
//     re-rendering, so a 100,000-chunk answer stays linear).
//   - Reload: the attachment keeps a transcript of both directions (history
//     option). After a reload the page redraws it, finds its ACP sessionId in
//     the stored session/new response (or, where the transcript no longer
//     holds it, its last prompt), matches answers that arrive after the
//     reload to prompts sent before it, and the stream continues from the
//     stored cursor. Deliveries are held until the redraw is done, so nothing
//     is shown twice and nothing is skipped. Reloaded offline, or with the
//     relay down, the page draws the stored transcript before the relay
//     answers (relay.history), and goes on from it once attached.
//   - Connection state: relay.js reconnects by itself; the page only shows it.
//   - Eviction: when content is gone for good, a banner says so and a new ACP
//     session starts.
//   - A runtime that restarted and no longer knows the ACP session (it
//     answers a prompt "unknown session"): the page asks it to load the
//     session, starts a new one where it cannot, and sends the prompt again;
//     each way once, for an agent that keeps refusing.
//   - A runtime that does not resume (contenox as it ships; `go run ./demo
//     -resume=false`): the chat works the same, and the page says what a
//     reload or a dropped connection costs there: whatever the agent sends
//     while the page is away is gone, and an answer that went on across the
//     gap shows where. What is on screen stays (it is in the transcript on
//     this device).
//
// Configuration comes from the URL, the fragment winning over the query (the
// fragment never reaches a server log, so put a real token there):
//   relay     the relay's attach URL   (default ws(s)://<this host>/v1/attach)
//   instance  the runtime instance     (default "demo")
//   token     the bearer credential    (default "dev-token")
//   key       the relay's public key to pin (optional)
//   stream    the stored stream's name (default "chat")
//   history   transcript entries kept on this device (default 20000)
//
// window.__chat is a read-only view of the page's state for tests and for
// poking at from the console; the page never reads it.

import { loadRelay } from "./relay.js";

const config = readConfig(location);
const relayHost = hostOf(config.url);

const $ = (id) => document.getElementById(id);
const ui = {
  status: $("status"),
  statusText: $("status-text"),
  statusNode: $("status-node"), // which relay (node) the page dials: several may serve one runtime
  subtitle: $("subtitle"),
  banner: $("banner"),
  bannerTitle: $("banner-title"),
  bannerText: $("banner-text"),
  bannerClose: $("banner-close"),
  scroller: $("scroller"),
  empty: $("empty"),
  transcript: $("transcript"),
  composer: $("composer"),
  connNote: $("conn-note"),
  prompt: $("prompt"),
  send: $("send"),
  stop: $("stop"),
};

const chat = {
  ready: false, // history redrawn and an ACP session open
  state: "loading", // connection state (relay.js's, plus "loading" and "error")
  states: [], // every state change: {state, chunks (shown at that moment), code}
  sessionId: "",
  stream: "", // the stored stream's name (chat, chat#2 … in other tabs)
  attachment: "", // the relay's attachment id
  storage: "",
  mode: "", // relay.mode: "main", or "worker" (?worker)
  relay: relayHost, // the relay node dialled (host:port)
  chunks: 0, // chunk elements shown
  redrawn: 0, // of which drawn from history after a (re)load
  live: 0, // of which delivered by onMessage
  evictions: [], // every onEvicted info
  resumable: true, // false once the runtime showed it keeps nothing for a reload
  historyEntries: 0,
  previewed: 0, // entries drawn from relay.history before attach resolved
  placed: [], // each reading of the transcript after a not_resumed loss (placeLosses): marks added, whether it held the loss
  error: null, // {title, message, code} of a fatal error
  send: (text) => submitPrompt(text),
};
window.__chat = chat;

// --- the conversation --------------------------------------------------------

let att = null; // the relay.js Attachment
let nextId = 1; // the next JSON-RPC id: above every id in the transcript
let sessionId = "";
let agentName = "";
let initializes = 0; // initialize requests seen: each after the first starts a new life
// restarting is set while setup starts again because its answer was lost
// while the page was away (retireLostSetup): the next initialize goes on
// with this life, it does not start a new one.
let restarting = false;
let agentLoads; // whether the agent offers session/load (initialize's answer); undefined: not known
// forgotten is set while the page opens a session again because the agent
// answered a prompt saying it does not know the session (it restarted, and
// keeps sessions in memory): {sid, prompt}, the session it forgot and the
// prompt it refused, sent again once a session is open (null when drawn
// from the transcript: the prompt sent again is there).
let forgotten = null;
let loadingSid = ""; // a session/load on its way: what it replays is on screen already
// resent is the prompt reopened last sent again, and how its session was
// opened again ("loaded" or "new"), until a prompt is refused as sent on a
// session the agent does not know (forgetSession).
let resent = null;
let replaying = false; // drawing history: show, never answer or send
let loaded = false; // the attachment's transcript is drawn (not only what relay.history read)
const pending = new Map(); // request id -> {method, turn?}
const retired = new Map(); // prompt id -> turn, for prompts of an ended session life
const openTurns = new Map(); // ACP sessionId -> the turn streaming into it
const liveTurns = new Set(); // turns that took a chunk live since the connection last opened
let opens = 0; // how many times the connection has opened
// shown is, for each message received (drawn from the transcript or
// delivered since), in order, the chunk it was shown as (a span), or null;
// shownIn is the turn that span is in. placeLosses lines history() up with
// them.
const shown = [];
const shownIn = [];
// recentIn are the last LINE_UP messages received, oldest first, to check
// that lining up: contenox numbers none, and one chunk's text may repeat.
const recentIn = [];
const LINE_UP = 4;
let openedAt = 0; // shown.length when the connection last opened
// hold is what deliveries and losses wait behind while the page reads its
// transcript again (placeLosses), so that each is in what it reads or
// handled after it; null otherwise.
let hold = null;
let placing = false; // placeLosses is under way
let placeAgain = -1; // and a loss was told meanwhile (its toldAt): it reads again after
// READ_AGAIN_MS bounds each reading of placeLosses: deliveries wait behind
// it, and a store that never answers must not stop the stream.
const READ_AGAIN_MS = 10000;

// applyOut handles one message this page sent, live or from the transcript.
function applyOut(msg) {
  if (Number.isSafeInteger(msg?.id)) nextId = Math.max(nextId, msg.id + 1);
  switch (msg?.method) {
    case "initialize":
      if (initializes++ > 0 && !restarting) {
        // A new session after the first: what came before ended (eviction).
        retireAll("interrupted");
        // A forgotten session that did not come back has its own divider.
        if (!forgotten) addDivider("New session", "The conversation above could not continue; the agent started afresh.");
      }
      restarting = false;
      pending.set(msg.id, setupSent(msg));
      break;
    case "session/new":
      if (forgotten) addDivider("New session", FORGOTTEN_DIVIDER);
      pending.set(msg.id, setupSent(msg));
      break;
    case "session/load":
      // Only a forgotten session is loaded (forgetSession). What is sent in
      // answer to a message is in the transcript before that message: the
      // refused prompt's answer comes after this when drawn again, so this
      // is what tells.
      loadingSid = msg.params?.sessionId ?? "";
      if (forgotten?.sid !== loadingSid) forgotten = { sid: loadingSid, prompt: null };
      sessionId = "";
      pending.set(msg.id, { ...setupSent(msg), sid: loadingSid });
      break;
    case "session/prompt": {
      const sid = msg.params?.sessionId ?? "";
      // A transcript whose start was trimmed or cleared may not hold the
      // session/new answer: the last prompt names the session as well.
      if (replaying && sid) sessionId = sid;
      const user = addUser(promptText(msg.params?.prompt), msg.id);
      openTurns.get(sid)?.finish("superseded"); // the agent cancels a running turn
      const turn = new Turn(sid, msg.id);
      // The connection its prompt goes out on: the open one, or else the
      // next (sendACP holds it until then, and until its resume is answered
      // or given up on).
      if (!replaying) turn.sentOn = chat.state === "open" ? opens : opens + 1;
      openTurns.set(sid, turn);
      pending.set(msg.id, { method: msg.method, turn, user, prompt: msg.params?.prompt });
      break;
    }
  }
}

// applyIn handles one message the agent sent, live or from the transcript.
function applyIn(msg, seq, live) {
  const at = shown.push(null) - 1;
  shownIn.push(null);
  if (recentIn.push(msg) > LINE_UP) recentIn.shift();
  if (msg?.method === "session/update") {
    const p = msg.params ?? {};
    const u = p.update ?? {};
    // session/load replays the session's conversation: it is on screen.
    if (loadingSid && p.sessionId === loadingSid) return;
    if (u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text") {
      // A transcript trimmed in the middle of an answer holds no prompt
      // before it to name the session: its chunks do.
      if (replaying && p.sessionId) sessionId = p.sessionId;
      const t = turnFor(p.sessionId ?? "");
      if (t.firstAt < 0) t.firstAt = at;
      shown[at] = t.append(u.content.text, seq, live);
      shownIn[at] = t;
      if (live) chat.live++;
    }
    return;
  }
  if (msg?.method !== undefined) {
    // A request from the agent (permissions, files, terminals): this client
    // offers none of those capabilities, so it says so.
    if (msg.id !== undefined && live) {
      sendRaw({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "method not found" } });
    }
    return;
  }
  respond(msg);
}

// respond matches a JSON-RPC response to the request it answers.
function respond(msg) {
  const req = pending.get(msg.id);
  if (!req) {
    // The answer to a prompt of an earlier session life (the agent went on
    // after a gap): close the turn its last chunks went to.
    const old = retired.get(msg.id);
    if (old) {
      retired.delete(msg.id);
      const cur = openTurns.get(old.sid);
      (cur?.orphan ? cur : old).finish(stopOf(msg));
    } else if (msg.result?.stopReason !== undefined) {
      // The answer to a prompt the transcript no longer reaches (trimmed
      // in the middle of its answer): it ends the turn its chunks went to,
      // which was otherwise left answering for good.
      for (const t of openTurns.values()) if (t.orphan) t.finish(stopOf(msg));
    }
    return;
  }
  pending.delete(msg.id);
  switch (req.method) {
    case "initialize":
      if (msg.error) return sessionFailed(msg.error);
      agentName = msg.result?.agentInfo?.title || msg.result?.agentInfo?.name || agentName;
      agentLoads = Boolean(msg.result?.agentCapabilities?.loadSession);
      if (!replaying && !sessionId && !hasPending("session/new") && !hasPending("session/load")) {
        if (forgotten && agentLoads) loadSession(forgotten.sid);
        else newSession();
      }
      break;
    case "session/new": {
      if (msg.error || !msg.result?.sessionId) return sessionFailed(msg.error);
      sessionId = msg.result.sessionId;
      restarting = false;
      if (loadingSid === sessionId) loadingSid = "";
      // An earlier life's "s1", not a prompt sent on this one (a forgotten
      // session's prompt sent again is in the transcript before this).
      const old = openTurns.get(sessionId);
      if (old && !(old.promptId > msg.id)) old.finish("interrupted");
      if (forgotten) reopened("new");
      updateReady();
      break;
    }
    case "session/load":
      if (loadingSid === req.sid) loadingSid = "";
      if (forgotten?.sid !== req.sid) break;
      if (msg.error) {
        // Gone for good: a new session, as for a new conversation.
        if (!replaying) newSession();
        break;
      }
      sessionId = req.sid;
      restarting = false;
      reopened("loaded");
      updateReady();
      break;
    case "session/prompt": {
      // A turn ended early (interrupted when the page was away) may have
      // gone on in a turn of its own: that one is what this answer closes.
      const cur = openTurns.get(req.turn.sid);
      const unknown = unknownSession(msg.error);
      (req.turn.done && cur?.orphan ? cur : req.turn).finish(unknown ? "unknown_session" : stopOf(msg), msg.error);
      if (unknown && req.turn.sid === sessionId) forgetSession(req.turn.sid, req.prompt, resent?.prompt === req.prompt ? resent.how : "");
      break;
    }
  }
}

// unknownSession says whether a JSON-RPC error says the agent does not know
// the session: the dev runtime and contenox v1.0.0 answer a prompt on a
// session they do not hold in memory (they restarted) with Invalid params,
// "unknown session <id>"; ACP's own code for it is -32002 (resource not
// found).
function unknownSession(err) {
  if (!err) return false;
  if (err.code === -32002) return true;
  const text = `${err.message ?? ""} ${err.data?.error ?? err.data?.message ?? ""}`;
  return err.code === -32602 && /unknown session|session not found/i.test(text);
}

// forgetSession opens a session again after the agent refused prompt on
// sid, a session it no longer knows: session/load, unless the agent said it
// offers none, and session/new where that fails; then prompt goes out
// again (reopened). No initialize: the restarted agent took the prompt
// without one (contenox v1.0.0 and the dev runtime do). Drawn from the
// transcript it does nothing: the messages after it show what came of it.
//
// again says how the session prompt was refused on had been opened again,
// if prompt was sent again on it (reopened): "loaded" starts a new session
// instead, as if the load had failed, and "new" gives up, so an agent that
// keeps refusing (its load, or its sessions, broken) gets each way once,
// not a load and a prompt for as long as it goes on.
function forgetSession(sid, prompt, again) {
  resent = null;
  if (replaying) return;
  if (again === "new") {
    showBanner("error", "The agent refused your message again", "It does not know the session it has just started. Reload the page to try again.");
    return;
  }
  forgotten = { sid, prompt };
  sessionId = "";
  updateReady();
  showBanner("evicted", "The agent lost this conversation", FORGOTTEN_BANNER);
  if (settingUp()) return;
  if (agentLoads === false || again === "loaded") newSession();
  else loadSession(sid);
}

function loadSession(sid) {
  request("session/load", { sessionId: sid, cwd: "/", mcpServers: [] });
}

// reopened ends forgetSession's work once a session is open again, how:
// "loaded" (the same session, session/load) or "new"; and sends the refused
// prompt again: the agent did nothing with it.
function reopened(how) {
  const { prompt } = forgotten;
  forgotten = null;
  if (replaying) return;
  showBanner(
    "evicted",
    how === "loaded" ? "The agent loaded this conversation again" : "A new session has started",
    (how === "loaded" ? RELOADED_BANNER : NEW_SESSION_BANNER) + (prompt ? " Your message has been sent again." : ""),
  );
  if (!prompt) return;
  resent = { prompt, how };
  sendPrompt(prompt);
}

const FORGOTTEN_BANNER =
  "The agent no longer knows this conversation: it has probably restarted. The page asks it to load the conversation again, or else starts a new one, and then sends your message again.";
const FORGOTTEN_DIVIDER = "The agent no longer had the conversation above (it has probably restarted): it does not remember it.";
const RELOADED_BANNER = "It had lost it (it has probably restarted).";
const NEW_SESSION_BANNER =
  "The agent no longer had this conversation (it has probably restarted), so a new one has started: the agent does not remember what is above it.";

function stopOf(msg) {
  return msg.error ? "error" : (msg.result?.stopReason ?? "end_turn");
}

function hasPending(method) {
  for (const r of pending.values()) if (r.method === method) return true;
  return false;
}

// The requests that open an ACP session.
const SETUP = new Set(["initialize", "session/new", "session/load"]);

function settingUp() {
  for (const r of pending.values()) if (SETUP.has(r.method)) return true;
  return false;
}

// setupSent is what pending keeps of a setup request: with the connection
// (opens) it goes out on, as a prompt's turn keeps it (sentOn); -1 when
// drawn from the transcript, sent before this page.
function setupSent(msg) {
  return { method: msg.method, sentOn: replaying ? -1 : chat.state === "open" ? opens : opens + 1 };
}

// retireLostSetup forgets the setup requests sent before the connection
// opened again, once the runtime is known not to resume (not_resumed): their
// answers, if they came while the page was away, are never sent again, and
// the page waited on "Starting a session…" for good, after every reload
// too. It says whether it forgot any; setup then starts again, once, and
// a late answer to a forgotten one is ignored (respond finds it in neither
// pending nor retired), so it cannot open a second session.
function retireLostSetup() {
  let any = false;
  for (const [id, r] of pending) {
    if (SETUP.has(r.method) && r.sentOn < opens) {
      pending.delete(id);
      any = true;
    }
  }
  if (any && !sessionId) restarting = true;
  return any;
}

// turnFor is the turn chunks for sid go to: the open one, or a new turn for
// chunks whose prompt is not in the transcript (older than it reaches).
function turnFor(sid) {
  let t = openTurns.get(sid);
  if (!t) {
    t = new Turn(sid, null);
    openTurns.set(sid, t);
  }
  return t;
}

// retireAll ends the current session life: its running turns are shown as
// ended and its outstanding requests forgotten (a prompt's late answer still
// closes its turn, through retired).
function retireAll(reason) {
  for (const [id, r] of pending) if (r.turn) retired.set(id, r.turn);
  pending.clear();
  for (const t of [...openTurns.values()]) t.finish(reason);
  openTurns.clear();
  sessionId = "";
  updateReady();
}

// ensureSession opens an ACP session unless one is open or on its way.
function ensureSession() {
  if (sessionId || settingUp()) return; // an initialize's answer sends session/new or session/load
  request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "relaywasm-demo", title: "relaywasm demo chat", version: "1" },
  });
}

function newSession() {
  request("session/new", { cwd: "/", mcpServers: [] });
}

function sessionFailed(err) {
  showBanner("error", "Could not start a session", rpcErrorText(err) + " Reload the page to try again.");
  updateReady();
}

// request sends a JSON-RPC request; its answer arrives through applyIn. It
// returns what applyOut recorded for it and whether it was sent.
function request(method, params) {
  const msg = { jsonrpc: "2.0", id: nextId, method, params };
  applyOut(msg);
  const req = pending.get(msg.id);
  return { req, sent: sendRaw(msg) };
}

async function sendRaw(msg) {
  try {
    await att.sendACP(msg);
    return true;
  } catch (e) {
    if (msg.id !== undefined && pending.get(msg.id)?.turn) {
      pending.get(msg.id).turn.finish("error", { message: sendErrorText(e) });
      pending.delete(msg.id);
    } else if (msg.id !== undefined && pending.has(msg.id)) {
      pending.delete(msg.id);
      sessionFailed({ message: sendErrorText(e) });
    }
    return false;
  }
}

function submitPrompt(text) {
  text = text.trim();
  if (!text || !sessionId || !loaded) return false;
  sendPrompt([{ type: "text", text }]);
  return true;
}

// sendPrompt sends the prompt's content blocks on the open session.
function sendPrompt(prompt) {
  const { req, sent } = request("session/prompt", { sessionId, prompt });
  req.user.dataset.sent = "pending";
  sent.then((ok) => (req.user.dataset.sent = ok ? "yes" : "failed"));
  scrollToEnd();
}

function cancelTurn() {
  if (sessionId && openTurns.has(sessionId)) {
    sendRaw({ jsonrpc: "2.0", method: "session/cancel", params: { sessionId } });
  }
}

// --- rendering ---------------------------------------------------------------

// A chunk goes into its turn's last run (below); a new run waits in the
// turn's fragment until one flush per delivery batch (a microtask) puts the
// batch's new runs in the document. Nothing here reads the layout: the
// engine lays the batch out once, at its next frame.
const dirtyTurns = new Set();
let flushQueued = false;

// An answer's text is laid out in runs: a run (a block) ends at the first
// line end after RUN_CHUNKS chunks. A chunk added to a long answer then
// makes the engine lay out its last run again, not the whole answer: with
// the answer one block, each frame of a long stream laid out every line of
// it again, and the page's work per frame grew with the answer. Runs split
// only where the text breaks its line anyway, so they show as one text.
const RUN_CHUNKS = 32;

class Turn {
  constructor(sid, promptId) {
    this.sid = sid;
    this.orphan = promptId === null; // chunks whose prompt this page does not have
    this.promptId = promptId;
    this.done = false;
    this.firstLive = null; // the first chunk it took live since the connection last opened
    this.gapNext = ""; // a loss to mark before its next chunk (lostHere): the mark's text
    this.sentOn = -1; // the connection (opens) its prompt went out on; -1 if not this page's
    this.firstAt = -1; // where in shown its first chunk is; -1 before it has one
    this.frag = document.createDocumentFragment();
    const li = el("li", "msg agent");
    li.dataset.role = "agent";
    li.dataset.session = sid;
    if (promptId !== null) li.dataset.promptId = String(promptId);
    li.setAttribute("aria-busy", "true");
    const who = el("div", "who", agentLabel());
    who.setAttribute("aria-hidden", "true");
    this.text = el("div", "text");
    this.meta = el("div", "meta");
    this.meta.append(typingDots());
    const bubble = el("div", "bubble");
    bubble.append(this.text, this.meta);
    li.append(who, bubble);
    this.li = li;
    append(li);
  }

  append(text, seq, live) {
    const span = document.createElement("span");
    span.dataset.seq = String(seq);
    span.textContent = text;
    if (live && !liveTurns.has(this)) {
      liveTurns.add(this);
      this.firstLive = span;
    }
    if (!this.run || (this.runChunks >= RUN_CHUNKS && this.runEnded)) {
      this.run = el("div", "run");
      this.runChunks = 0;
      this.frag.append(this.run);
    }
    if (this.gapNext) {
      this.run.append(gapMark(this.gapNext));
      this.gapNext = "";
    }
    this.run.append(span);
    this.runChunks++;
    this.runEnded = span.textContent.endsWith("\n");
    chat.chunks++;
    dirtyTurns.add(this);
    if (!flushQueued) {
      flushQueued = true;
      queueMicrotask(flush);
    }
    return span;
  }

  // mayHaveLost says whether part of the answer can have come while the
  // page was away: not if its prompt went out on the current connection.
  mayHaveLost() {
    return this.sentOn < opens;
  }

  // markGap shows, before the first chunk this turn took since the
  // connection last opened, that what the agent sent before that is gone.
  markGap() {
    this.firstLive.before(gapMark(AWAY));
  }

  finish(stopReason, error) {
    if (this.done) return;
    this.done = true;
    if (openTurns.get(this.sid) === this) openTurns.delete(this.sid);
    this.li.dataset.done = "true";
    this.li.dataset.stopReason = stopReason;
    this.li.removeAttribute("aria-busy");
    this.meta.replaceChildren();
    const note = stopNote(stopReason, error);
    if (note) this.meta.append(el("span", `note note-${stopReason}`, note));
    else this.meta.remove();
    if (this.frag.childNodes.length === 0 && this.text.childNodes.length === 0 && !note) {
      this.text.append(el("span", "quiet", "(no answer)"));
    }
    updateComposer();
  }
}

const AWAY = "Part of this answer was lost here, while the page was away.";
const TOO_LARGE = "Part of this answer was lost here: it was too large to reach this page.";

// gapMark is the mark of a loss inside an answer.
function gapMark(text) {
  const gap = el("span", "gap", text);
  gap.dataset.gap = "";
  gap.setAttribute("role", "note");
  return gap;
}

// lostHere draws a loss the transcript holds (history()'s lost entries)
// as the page drew it when it was told (evicted), in its place: a
// not_resumed one marks each answer open there before its next chunk, and
// ends one that took none after it as interrupted (redraw); frame_too_large
// marks the answer going on; any other ended the session's answers.
function lostHere(info) {
  switch (info.reason) {
    case "not_resumed":
      for (const t of openTurns.values()) t.gapNext = AWAY;
      retireLostSetup(); // as evicted did: the initialize after this goes on
      return;
    case "frame_too_large":
      for (const t of openTurns.values()) t.gapNext = TOO_LARGE;
      return;
  }
  retireAll("interrupted");
}

// placeLosses shows a not_resumed loss just told in every place the
// transcript now puts it, not only where this connection opened (evicted
// marks that): a connection that opened again and went away (a reload, or
// a drop) before its resume's wait ended left its place open, and this loss
// goes there too (history()'s lost entries). The page drew that jump
// unmarked: it read its transcript before the loss was known. It reads the
// transcript again, holding deliveries meanwhile so that what it reads
// lines up with what it shows, and adds the marks missing before the
// chunks shown. It removes and redraws nothing: what is shown, the answer
// streaming and the prompts on their way stay as they are. relay.wasm
// stores the loss after the messages it was delivering when it told it: a
// reading without it is tried again after a while, deliveries going on.
// toldAt is shown's length when the loss was told: no chunk shown since
// can follow a place of it.
function placeLosses(toldAt) {
  if (!att) return;
  if (placing) {
    placeAgain = toldAt; // a loss told on a later connection: read again after
    return;
  }
  placing = true;
  const since = openedAt;
  const read = async (tries) => {
    await new Promise((r) => setTimeout(r, 100 * tries));
    let release;
    hold = new Promise((r) => (release = r));
    let done;
    try {
      done = markPlaces(await withinTime(att.history(), READ_AGAIN_MS), since, toldAt);
    } finally {
      hold = null;
      release();
    }
    if (!done && tries < 5) return read(tries + 1);
  };
  read(0)
    .catch((e) => {
      chat.placed.push({ error: String(e?.message ?? e) });
      console.warn("chat: could not read the saved conversation again:", e);
    })
    .finally(() => {
      placing = false;
      if (placeAgain >= 0) {
        const at = placeAgain;
        placeAgain = -1;
        placeLosses(at);
      }
    });
}

// markPlaces marks, before the chunks shown, each not_resumed loss entries
// hold, as redraw would have drawn it: before the next chunk of each answer
// open there. It lines entries up with what was shown by their received
// messages, counted from the end (the oldest may have been trimmed since),
// and says whether they hold all the page has received, and the loss told
// on the connection that opened at shown index since. A loss goes before
// no chunk shown from toldAt on (one PlaceLosses left where it was told,
// its place trimmed away, would otherwise mark the next chunk to come).
function markPlaces(entries, since, toldAt) {
  const received = entries.filter((e) => !e.out && !e.lost);
  const n = received.length;
  const from = shown.length - n;
  if (from < 0 || n === 0 || !endsWithRecent(received)) {
    chat.placed.push({ entries: entries.length, received: n, shown: shown.length, lined: false });
    return false;
  }
  flush();
  const prompts = new Set(); // the prompts sent before the entry the walk is at
  const marks = [];
  let at = from;
  let told = false;
  for (const e of entries) {
    if (e.out && e.message?.method === "session/prompt") prompts.add(e.message.id);
    else if (!e.out && !e.lost) at++;
    else if (e.lost?.reason === "not_resumed") {
      marks.push(...unmarkedAfter(at, Math.min(toldAt, shown.length), prompts));
      told ||= at >= since;
    }
  }
  keepingView(() => {
    for (const span of marks) span.before(gapMark(AWAY));
  });
  chat.placed.push({ entries: entries.length, received: n, shown: shown.length, marks: marks.length, told });
  return told;
}

// endsWithRecent says whether received, the transcript's received entries,
// end with the messages last received (recentIn).
function endsWithRecent(received) {
  const k = Math.min(received.length, recentIn.length);
  const tail = received.slice(received.length - k);
  return k > 0 && tail.every((e, i) => JSON.stringify(e.message) === JSON.stringify(recentIn[recentIn.length - k + i]));
}

// withinTime is p, or a rejection once ms have passed without it settling.
function withinTime(p, ms) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

// unmarkedAfter is, for each answer open at shown index at (its prompt in
// prompts, or a chunk shown before at), its first chunk from at on, before
// index end, unless a loss is marked before it already.
function unmarkedAfter(at, end, prompts) {
  const seen = new Set();
  const out = [];
  for (let i = at; i < end; i++) {
    const t = shownIn[i];
    if (!t || seen.has(t)) continue;
    seen.add(t);
    const span = shown[i];
    const open = t.firstAt < at || prompts.has(t.promptId);
    if (open && !span.previousElementSibling?.hasAttribute("data-gap")) out.push(span);
  }
  return out;
}

// keepingView runs fn, which adds to the transcript, keeping what the reader
// looks at where it is when they have scrolled up: WebKit has no scroll
// anchoring, and a mark added above the view would push it down.
function keepingView(fn) {
  if (following) return fn();
  const s = ui.scroller;
  const top = s.getBoundingClientRect().top;
  const below = (e) => e.getBoundingClientRect().bottom > top;
  // The first message in view; in an answer, its first chunk in view (a
  // mark may go into the run, RUN_CHUNKS long, that holds it).
  const li = [...ui.transcript.children].find(below);
  const run = li && [...li.querySelectorAll(".run")].find(below);
  const anchor = (run && [...run.children].find(below)) ?? li;
  const before = anchor?.getBoundingClientRect().top;
  fn();
  if (anchor) s.scrollTop += anchor.getBoundingClientRect().top - before;
}

// flush puts the batch's new runs in the document. It does not scroll: the
// transcript's ResizeObserver (watchScrolling) does, once per frame.
function flush() {
  flushQueued = false;
  for (const t of dirtyTurns) t.text.append(t.frag);
  dirtyTurns.clear();
}

function stopNote(reason, error) {
  switch (reason) {
    case "end_turn":
      return "";
    case "cancelled":
    case "superseded":
      return "Stopped";
    case "interrupted":
      return "Interrupted: the rest of this answer was lost";
    case "max_tokens":
      return "Stopped: length limit reached";
    case "refusal":
      return "The agent declined to answer";
    case "error":
      return "Error: " + rpcErrorText(error);
    case "unknown_session":
      return "Not answered: the agent no longer knew this conversation";
    default:
      return `Stopped (${reason})`;
  }
}

function addUser(text, id) {
  const li = el("li", "msg user");
  li.dataset.role = "user";
  li.dataset.id = String(id);
  const who = el("div", "who", "You");
  who.setAttribute("aria-hidden", "true");
  const bubble = el("div", "bubble");
  bubble.append(el("div", "text", text));
  li.append(who, bubble);
  append(li);
  return li;
}

function addDivider(title, text, first = false) {
  const li = el("li", "divider");
  li.dataset.role = "divider";
  li.append(el("span", "divider-title", title));
  if (text) li.append(el("span", "divider-text", text));
  if (first) ui.transcript.prepend(li);
  else append(li);
}

function append(node) {
  ui.transcript.append(node);
  ui.empty.hidden = true;
}

function typingDots() {
  const d = el("span", "typing");
  d.setAttribute("role", "img");
  d.setAttribute("aria-label", "The agent is answering");
  d.append(el("i"), el("i"), el("i"));
  return d;
}

function agentLabel() {
  return agentName ? prettyAgent(agentName) : "Agent";
}

function prettyAgent(name) {
  return name === "relaywasm-dev-agent" ? "Dev agent" : name;
}

function el(tag, className = "", text = "") {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text) e.textContent = text;
  return e;
}

// Follow the stream only while the reader is at the end: scrolling up to
// read must not be fought. following is decided by where the reader
// scrolled to, never by measuring after content was added (a large batch
// moves the end far away), and kept when the view changes size (a note above
// the composer, a phone's keyboard, a rotation). What follows is a
// ResizeObserver of the view and of the transcript: it runs once per frame,
// after layout and before paint, so a frame never shows the end out of view
// and a burst of chunks costs one layout, not one per batch (reading
// scrollHeight after each batch made the engine lay the transcript out
// again each time).
let following = true;
// pinnedTop is where scrollToEnd last left the view. The scroll event of
// that scroll comes a frame later, when more chunks may have moved the end
// further than nearEnd's margin: from there, or further down, the reader
// has not scrolled away.
let pinnedTop = 0;

function nearEnd() {
  const s = ui.scroller;
  return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
}

function scrollToEnd() {
  const s = ui.scroller;
  s.scrollTop = s.scrollHeight;
  pinnedTop = s.scrollTop;
  following = true;
}

function watchScrolling() {
  const s = ui.scroller;
  s.addEventListener("scroll", () => (following = s.scrollTop >= pinnedTop || nearEnd()), { passive: true });
  const follow = new ResizeObserver(() => following && scrollToEnd());
  follow.observe(ui.scroller);
  follow.observe(ui.transcript);
}

// --- connection state, banner, composer -------------------------------------

const STATES = {
  loading: ["Loading", "Loading the relay client"],
  connecting: ["Connecting", "Connecting to the relay"],
  open: ["Connected", "Connected to the relay"],
  reconnecting: ["Reconnecting", "Connection lost; reconnecting by itself"],
  offline: ["Offline", "This device is offline; waiting for the network"],
  closed: ["Disconnected", "The connection ended"],
  error: ["Error", "Something went wrong"],
};

// What a person needs to know while the connection is away: nothing is
// lost, and nothing needs doing.
const NOTES = {
  reconnecting: "Reconnecting to the relay. The conversation will continue where it left off.",
  offline: "You are offline. The conversation will continue when the network is back.",
};

// The same moments with a runtime that keeps nothing while the page is away.
const LOSSY_NOTES = {
  reconnecting: "Reconnecting to the relay. This agent keeps nothing meanwhile: what it sends until then is lost.",
  offline: "You are offline. This agent keeps nothing meanwhile: what it sends until the network is back is lost.",
};

// The relay answered, but the agent's machine (the runtime) is not connected
// to it: a wrong instance name, or a machine that is off, restarting or
// offline. Nothing on this side is at fault, and whether the conversation
// can go on is up to that machine, so the page promises nothing.
const AGENT_AWAY_CODES = new Set(["unknown_instance", "runtime_gone"]);
const AGENT_AWAY = ["Agent not connected", "The agent's machine is not connected to the relay"];
const AGENT_AWAY_NOTE = "The agent's machine is not connected to the relay; waiting for it.";

const NOT_RESUMABLE =
  "This agent does not keep the conversation for you while the page is away. " +
  "If the page reloads or the connection drops, whatever it sends meanwhile is lost; what is on screen stays.";

function setState(state, info = {}) {
  if (state === "open" && chat.state !== "open") {
    opens++;
    openedAt = shown.length;
    liveTurns.clear();
  }
  // A change of resumable alone comes in the same state: not a new state.
  if (state !== chat.state || state !== "open") chat.states.push({ state, chunks: chat.chunks, code: info.code ?? "" });
  chat.state = state;
  if (info.storage) chat.storage = info.storage;
  if (typeof info.resumable === "boolean" && info.resumable !== chat.resumable) {
    chat.resumable = info.resumable;
    if (!info.resumable) showBanner("warning", "Reloading loses what arrives meanwhile", NOT_RESUMABLE);
    else if (ui.banner.dataset.kind === "warning" && ui.bannerText.textContent === NOT_RESUMABLE) ui.banner.hidden = true;
  }
  const away = (state === "reconnecting" || state === "connecting") && AGENT_AWAY_CODES.has(info.code);
  const [label, long] = away ? AGENT_AWAY : (STATES[state] ?? [state, state]);
  ui.status.dataset.state = state;
  ui.statusText.textContent = label;
  ui.statusNode.textContent = relayHost;
  let detail = long;
  if (state === "reconnecting" && info.retryInMs > 0) {
    detail += ` (next try in ${Math.max(1, Math.round(info.retryInMs / 1000))} s)`;
  }
  ui.status.title = `${detail} (${config.url})`;
  const note = away ? AGENT_AWAY_NOTE : (chat.resumable ? NOTES : LOSSY_NOTES)[state];
  ui.connNote.hidden = !note;
  ui.connNote.textContent = note ?? "";
  if (state === "closed" && info.code && info.code !== "closed" && info.code !== "detached") {
    showBanner("error", "Disconnected", closedText(info.code));
  }
  if (info.storage === "memory" && info.reason) {
    showBanner("warning", "Not saved on this device", "The browser's storage is unavailable, so a reload will start a fresh conversation.");
  }
  updateReady();
}

function closedText(code) {
  switch (code) {
    case "superseded":
      return "This conversation is open in another tab now: go on there. Reloading here starts a new one.";
    case "unauthorized":
      return "The relay refused the credential.";
    case "bad_relay_signature":
      return "The relay could not prove it is the one this page trusts.";
    default:
      return `The relay ended the connection (${code}). Reload to reconnect.`;
  }
}

function evicted(info) {
  chat.evictions.push(info);
  if (info.reason === "not_resumed") {
    // The ACP session is still there; only what came while away is gone.
    // relay.js says so when it gives up on the resume, seconds after the
    // connection opened again, and an answer may have gone on meanwhile,
    // or even ended: its loss is where the connection opened, and is marked
    // there. An answer still open that has not gone on may have lost its
    // end: show it as such. An answer to a prompt sent since the connection
    // opened lost nothing: sendACP held that prompt until now. The loss may
    // stand in earlier places too, where a connection opened before and
    // went away before knowing (placeLosses).
    for (const t of liveTurns) if (t.mayHaveLost()) t.markGap();
    for (const t of [...openTurns.values()]) if (!liveTurns.has(t) && t.mayHaveLost()) t.finish("interrupted");
    liveTurns.clear();
    placeLosses(shown.length);
    if (retireLostSetup()) ensureSession();
    showBanner(
      "evicted",
      "Part of this conversation may be missing",
      "This agent keeps nothing while the page is away, so whatever it sent during the reload or the lost connection is gone. The conversation goes on.",
    );
    return;
  }
  if (info.reason === "frame_too_large") {
    // One message is gone; the answer goes on after it, marked there.
    lostHere(info);
    showBanner("evicted", "Part of an answer is missing", "A message from the agent was too large to reach this page; what follows it still arrives.");
    return;
  }
  const what = {
    evicted: "Part of the agent's answer was dropped before this page could receive it.",
    cursor_evicted: "The agent restarted and no longer has this conversation.",
    session_replaced: "The relay no longer recognised this conversation.",
  }[info.reason] ?? "Part of the conversation is gone.";
  showBanner("evicted", "Some of this conversation was lost", what + " A new session has started.");
  retireAll("interrupted");
  ensureSession();
}

function showBanner(kind, title, text) {
  ui.banner.dataset.kind = kind;
  ui.bannerTitle.textContent = title;
  ui.bannerText.textContent = text;
  ui.banner.hidden = false;
}

function fatal(title, e) {
  chat.error = { title, message: String(e?.message ?? e), code: e?.code ?? "" };
  setState("error", { code: e?.code });
  showBanner("error", title, errorText(e));
}

function errorText(e) {
  switch (e?.code) {
    case "wasm_load_failed":
      return "relay.wasm did not load. Build it with `make wasm` and serve it beside this page.";
    case "unauthorized":
      return "The relay refused the credential. Check the token in the page's URL.";
    case "bad_relay_signature":
      return "The relay could not prove it holds the pinned key.";
    case "bad_options":
      return `The page's settings are wrong: ${e.message}`;
    default:
      return String(e?.message ?? e);
  }
}

function sendErrorText(e) {
  switch (e?.code) {
    case "send_queue_full":
      return "too many messages are waiting for the connection.";
    case "send_failed":
      return "the connection dropped while sending; the message may not have arrived.";
    default:
      return String(e?.message ?? e);
  }
}

function rpcErrorText(err) {
  if (!err) return "the agent did not say why.";
  const detail = err.data?.error ?? err.data?.message;
  return detail ? `${err.message}: ${detail}` : String(err.message ?? "unknown error");
}

function updateReady() {
  const ended = chat.state === "closed" || chat.state === "error";
  chat.sessionId = sessionId;
  chat.ready = Boolean(sessionId) && !replaying && loaded && !ended;
  if (att) chat.attachment = att.session;
  const where = config.instance === "demo" ? "" : ` · ${config.instance}`;
  if (sessionId) ui.subtitle.textContent = `${prettyAgent(agentName || "Agent")} · session ${sessionId}${where}`;
  else if (att && !ended) ui.subtitle.textContent = "Starting a session…";
  ui.empty.hidden = !chat.ready || ui.transcript.childElementCount > 0;
  updateComposer();
}

function updateComposer() {
  ui.send.disabled = !chat.ready || ui.prompt.value.trim() === "";
  ui.prompt.disabled = chat.state === "closed" || chat.state === "error";
  ui.stop.hidden = !(sessionId && openTurns.has(sessionId));
}

// resizePrompt grows the composer with its text, up to the CSS max-height.
function resizePrompt() {
  const p = ui.prompt;
  p.style.height = "";
  if (p.value === "") return;
  const borders = p.offsetHeight - p.clientHeight;
  p.style.height = p.scrollHeight + borders + "px";
}

function wireComposer() {
  ui.composer.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (ui.send.disabled) return;
    if (submitPrompt(ui.prompt.value)) {
      ui.prompt.value = "";
      resizePrompt();
      updateComposer();
    }
  });
  ui.prompt.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !composing(ev)) {
      ev.preventDefault();
      ui.composer.requestSubmit();
    }
  });
  ui.prompt.addEventListener("input", () => {
    resizePrompt();
    updateComposer();
  });
  ui.stop.addEventListener("click", cancelTurn);
  ui.bannerClose.addEventListener("click", () => (ui.banner.hidden = true));
  for (const chip of document.querySelectorAll(".chip")) {
    chip.addEventListener("click", () => {
      if (!submitPrompt(chip.dataset.prompt)) {
        ui.prompt.value = chip.dataset.prompt;
        updateComposer();
      }
      ui.prompt.focus();
    });
  }
}

// --- start -------------------------------------------------------------------

async function main() {
  wireComposer();
  watchScrolling();
  setState("loading");
  let relay;
  try {
    // ?worker: relay.wasm in a Web Worker (loadRelay's worker mode).
    relay = await loadRelay({ wasm: new URL("./relay.wasm", location.href), worker: config.worker });
  } catch (e) {
    return fatal("Could not load the relay client", e);
  }
  chat.storage = relay.storage;
  chat.mode = relay.mode;

  // Until the transcript is redrawn, deliveries wait behind it: the handler
  // returns a Promise, so the cursor does not move past them and they are
  // not in the transcript history() reads. Each is then shown exactly once.
  let release;
  const redrawn = new Promise((r) => (release = r));
  const afterRedraw = (fn) => (!loaded ? redrawn.then(fn) : hold ? hold.then(fn) : fn());
  setState("connecting");
  // attach resolves once the relay has answered: offline, or with the relay
  // down, that can be never. Meanwhile the conversation stored on this
  // device is drawn from relay.history, and checked once attached (below).
  let previewed = null; // the entries drawn before attach resolved
  relay.history({ url: config.url, instance: config.instance, name: config.stream }).then(
    (entries) => {
      if (att || entries.length === 0) return;
      redraw(entries);
      previewed = entries;
      chat.previewed = entries.length;
    },
    (e) => console.warn("chat: could not read the saved conversation:", e),
  );
  try {
    att = await relay.attach({
      url: config.url,
      instance: config.instance,
      token: config.token,
      relayKey: config.relayKey || undefined,
      name: config.stream,
      history: config.history,
      heartbeat: config.heartbeat,
      resumeTimeoutMs: config.resumeTimeoutMs,
      onMessage: (msg, meta) => afterRedraw(() => guarded(() => applyIn(msg, meta.seq, true))),
      onState: (state, info) => setState(state, info),
      onEvicted: (info) => afterRedraw(() => guarded(() => evicted(info))),
    });
  } catch (e) {
    return fatal("Could not connect", e);
  }
  chat.stream = att.name;
  chat.attachment = att.session;
  setState(att.state, { storage: relay.storage });

  let entries = [];
  try {
    entries = await att.history();
  } catch (e) {
    showBanner("warning", "Could not read the saved conversation", errorText(e));
  }
  if (previewed && continues(entries, previewed)) {
    redraw(entries, previewed.length);
  } else {
    if (previewed) forget();
    redraw(entries);
  }
  // The connection may have opened before the transcript was drawn: its
  // place is after it, deliveries having waited behind it.
  if (chat.state === "open") openedAt = shown.length;
  loaded = true;
  updateReady();
  release();
  ensureSession();
}

// redraw draws the saved transcript from entry from on, oldest first,
// without answering or sending anything: what was pending is still pending
// and its answer, if it comes, arrives through onMessage.
function redraw(entries, from = 0) {
  chat.historyEntries = entries.length;
  replaying = true;
  try {
    for (let i = from; i < entries.length; i++) {
      const e = entries[i];
      if (e.lost) lostHere(e.lost);
      else if (e.out) applyOut(e.message);
      else applyIn(e.message, e.seq, false);
    }
    // An answer a loss cut that took nothing after it was ended as
    // interrupted when the loss was told (evicted); once attached, as
    // what is drawn before (relay.history) may go on in what follows.
    if (att) for (const t of [...openTurns.values()]) if (t.gapNext === AWAY) t.finish("interrupted");
  } finally {
    replaying = false;
  }
  flush();
  chat.redrawn = chat.chunks;
  if (from === 0 && entries.length >= config.history) {
    addDivider("Earlier messages", "Older parts of this conversation are not kept on this device.", true);
  }
  scrollToEnd();
  updateReady();
}

// continues says whether the attachment's transcript (entries) begins with
// what was drawn before attaching (drawn), so that drawing goes on from
// there: a transcript only grows at its end and is trimmed at its start, so
// the two agree if their first entries and drawn's last one do. They do not
// when attach gave this tab another stream (another tab held this one:
// "chat#2"), or another tab added to it meanwhile and its oldest entries
// went.
function continues(entries, drawn) {
  const same = (a, b) => a.out === b.out && a.seq === b.seq && JSON.stringify(a.message) === JSON.stringify(b.message);
  const last = drawn.length - 1;
  return entries.length > last && same(entries[0], drawn[0]) && same(entries[last], drawn[last]);
}

// forget clears what was drawn before attaching, for the attachment's own
// transcript to be drawn instead: that of another stream (another tab held
// this one, so attach gave "chat#2"), or one that changed meanwhile.
function forget() {
  ui.transcript.replaceChildren();
  for (const m of [pending, retired, openTurns]) m.clear();
  shown.length = shownIn.length = recentIn.length = 0;
  openedAt = 0;
  nextId = 1;
  initializes = 0;
  restarting = false;
  agentLoads = undefined;
  forgotten = null;
  loadingSid = "";
  sessionId = "";
  agentName = "";
  chat.chunks = 0;
}

// guarded keeps a bug in one message's handling from making relay.js deliver
// it again and again.
function guarded(fn) {
  try {
    fn();
  } catch (e) {
    console.error("chat: could not handle a message:", e);
  }
}

function promptText(blocks) {
  if (!Array.isArray(blocks)) return "";
  return blocks.filter((b) => b?.type === "text").map((b) => b.text).join("\n");
}

// hostOf names the relay node the page dials, as its status shows it.
function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

function readConfig(loc) {
  const query = new URLSearchParams(loc.search);
  const frag = new URLSearchParams(loc.hash.replace(/^#/, ""));
  const get = (k, d) => frag.get(k) ?? query.get(k) ?? d;
  const ws = loc.protocol === "https:" ? "wss:" : "ws:";
  const positive = (k) => {
    const v = Number.parseInt(get(k, ""), 10);
    return Number.isSafeInteger(v) && v > 0 ? v : undefined;
  };
  return {
    url: get("relay", `${ws}//${loc.host}/v1/attach`),
    instance: get("instance", "demo"),
    token: get("token", "dev-token"),
    // A base64 key pasted unescaped has its "+" read as a space.
    relayKey: get("key", "").replaceAll(" ", "+"),
    stream: get("stream", "chat"),
    history: positive("history") ?? 20000,
    // ?worker (or ?worker=1, =true) runs relay.wasm in a Web Worker;
    // ?worker=0 and ?worker=false are the page's thread, as no ?worker is.
    worker: !["0", "false", null].includes(get("worker", null)),
    // attach's heartbeat, ms: the interval and how long a heartbeat or a
    // probe may go unanswered (a long interval leaves a dead socket to the
    // probes of the page's lifecycle).
    heartbeat: { intervalMs: positive("heartbeat"), timeoutMs: positive("heartbeatTimeout") },
    resumeTimeoutMs: positive("resumeTimeout"), // attach's wait for a resume's answer, ms
  };
}

// composing says whether a keydown belongs to an input method's composition
// (Japanese, Chinese, Korean): its Enter confirms a word, and must not send
// the prompt. WebKit (Safari, every iOS webview) ends the composition before
// that keydown, so isComposing is false there, and marks the keydown with
// keyCode 229 alone (WebKit bug 165004).
function composing(ev) {
  return ev.isComposing || ev.keyCode === 229;
}

main();
