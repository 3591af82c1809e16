// stream.js: att.stream(), the Stream the official ACP SDK connects to
// (@agentclientprotocol/sdk: client(...).connectWith(stream, op)).
//
// A plain adapter over onMessage and sendACP is wrong after a reload: every
// page load of the SDK numbers its requests from 0, and the stored stream
// resumes with the previous page's messages, so the previous page's response
// to its request 2 would answer this page's request 2. So this stream:
//
//   - gives every request written to it an id of its own on the wire (a
//     prefix no other stream has, and a counter), and restores the SDK's id
//     on the response; a response to any other request never reaches the
//     SDK: it goes to the attachment's onMessage (and history()) instead.
//     Requests and notifications from the agent (permission requests, file
//     reads, session/update) go to the SDK, which answers them through the
//     writable. The agent's requests reach it under ids of the stream's
//     own too, and the app's answer goes out with the request's wire id
//     only while no new request of that id has come from the runtime (see
//     requests): a runtime that restarted while the stream went on numbers
//     its requests afresh, and an answer to an old dialog would answer a
//     new request. What it keeps for a request that is over (cancelled,
//     stale) goes once a turn begun after that ends, answered or not (see
//     sweep): an app may never answer a dialog that was cancelled.
//   - delivers what arrives from the moment it opens, one message per read:
//     the readable has no queue of its own (highWaterMark 0), and the
//     attachment's delivery of a message waits until the SDK has read it.
//     The cursor moves only past what the SDK read, so a reload neither
//     loses a message the SDK had not read nor hands it one it had.
//     Before anything live it offers the agent's requests the transcript
//     holds unanswered (see unanswered): a request the SDK read but the
//     app never answered is past the cursor, and would be lost with the
//     stream that read it. It offers them under ids of its own, as it
//     hands over live ones.
//   - tells the SDK a request of the runtime's is cancelled when its prompt
//     turn ends (the responses have arrived to all the session/prompts of
//     its session unanswered when the request came: it may be of any of
//     their turns) while the SDK has not answered it, which a runtime need
//     not say with $/cancel_request; the answer does not go out then (see
//     turnOver). A request that may be of a turn still running is not
//     touched. A prompt unanswered at a loss (its response may be gone:
//     not_resumed after a turn ended offline) counts for none of the
//     requests that come after the loss (see dead).
//   - errors the readable with the RelayError that ended the attachment
//     (unauthorized, superseded, detached, closed) or that says content is
//     gone (an eviction's reason), so the SDK's connection closes with that
//     reason. Drops and redials are not seen, and neither is a loss told
//     before anything the stream wrote went out: nothing lost then was part
//     of the SDK's conversation (see tap.evicted).
//   - answers a message over the browser leg's limit in its place, its
//     write resolving: the SDK closes its connection on any failed write,
//     and one message too large would take every request with it (see
//     tooLarge).
//
// It is built on what an Attachment has anyway: sendACP, close, onMessage and
// the attachment's delivery, which waits for a returned Promise. relay.js
// routes an attachment's deliveries, state changes and evictions through the
// open stream's tap (att._tap) and does nothing else for it.

import { ABORTED, CODE_BAD_OPTIONS, CODE_CANCELED, CODE_CLOSED, CODE_RUNTIME_GONE, CODE_STREAM_OPEN } from "./boundary.js";
import { RelayError, checkSignal } from "./errors.js";

// The RelayError code of a message over the browser leg's limit, and the
// JSON-RPC error code of the error response the stream gives in its place
// (JSON-RPC's "internal error"; error.data.code says frame_too_large).
const FRAME_TOO_LARGE = "frame_too_large";
const TOO_LARGE_RPC_CODE = -32603;

// The JSON-RPC method by which the SDK cancels a request it sent; its
// params.requestId names the request, so it is rewritten like the id.
const CANCEL_REQUEST = "$/cancel_request";

// The ACP method of a prompt turn: its response ends the turn, and with it
// the agent's requests of that turn still open (see unanswered).
const PROMPT = "session/prompt";

/**
 * PAUSED is what a held delivery is refused with when the page goes away
 * (pagehide): relay.js reports no handler failure for it. The engine moves
 * the cursor when a whole batch of messages is accepted, so while the SDK
 * has read the first messages of a batch and not the next one, the stored
 * cursor is still before the batch; refusing the one held makes the engine
 * accept the ones before it, and the write at pagehide (relay.js's listener,
 * after this one) stores the cursor right after the last message the SDK
 * read. Should the page come back (back/forward cache), the engine delivers
 * the held message again, after its redelivery backoff.
 */
export const PAUSED = Symbol("relaywasm: delivered again later");

// The open streams' pauses, run on pagehide. The listener is added when this
// module is evaluated, before relay.js adds its own at the first attach:
// listeners run in the order they were added.
const pauses = new Set();
globalThis.addEventListener?.("pagehide", () => {
  for (const pause of pauses) pause();
});

/**
 * openStream opens a stream on att. While att._tap is set, relay.js routes
 * the attachment's deliveries (tap.onMessage), state changes (tap.state) and
 * evictions (tap.evicted) to it; att.onMessage gets every message the stream
 * does not take.
 */
export function openStream(att, options) {
  if (options !== undefined && (options === null || typeof options !== "object")) {
    throw new RelayError(CODE_BAD_OPTIONS, "stream options must be an object");
  }
  const signal = options?.signal;
  checkSignal(signal);
  if (signal?.aborted) throw new RelayError(CODE_CANCELED, ABORTED);
  if (att._tap) throw new RelayError(CODE_STREAM_OPEN, "the attachment has a stream open already");
  if (att.state === "closed") throw new RelayError(CODE_CLOSED, "the attachment is closed");

  const prefix = `rw-${randomHex()}-`;
  let next = 0;
  const sent = new Map(); // wire id -> the SDK's id, for requests awaiting their response
  const wire = new Map(); // the SDK's id -> wire id, for $/cancel_request

  let readCtl, writeCtl;
  let ended = null; // the RelayError writes fail with, once the stream is over
  let spoke = false; // a message written to the stream has gone out
  let held = null; // {raw, meta, resolve, reject}: delivered, not yet read
  let wanted = null; // resolves the readable's pull that waits for a message
  // own: messages for the SDK that the attachment does not deliver (the
  // transcript's requests still unanswered, the cancel of one gone stale,
  // an error response standing for a request too large to send), read
  // before what is held; the cursor has nothing to do with them.
  const own = [];
  // ready: the transcript's unanswered requests are in own; until then
  // nothing delivered is handed over, so that they come first.
  let ready = false;
  // offered: the transcript's requests offered and not yet answered (JSON
  // text -> id), for a delivery of the same message again (a cursor stored
  // before it) to be dropped. An answered one goes: a later request equal
  // to it (a restarted runtime numbers its ids afresh) is a new one.
  const offered = new Map();
  const again = (m) => offered.size > 0 && "method" in m && offered.delete(JSON.stringify(m));
  // open: the runtime's requests handed to the SDK and not yet answered or
  // cancelled (id -> JSON text). When the runtime leaves (runtime_gone),
  // they are stale: the runtime may be a new process when it is back, whose
  // requests reuse their ids, and the app's answer to one of them would
  // answer another (see staleOf).
  const open = new Map();
  // prompts: the session/prompt requests sent and not answered yet (wire
  // id -> params.sessionId), oldest first: this stream's, and those of
  // earlier streams the transcript holds (see unanswered), whose responses
  // go to onMessage. The response to one ends its turn.
  const prompts = new Map();
  // dead: the prompts in prompts that were unanswered at a loss after
  // they went out (see lose): their responses may be gone for good (a
  // turn that ended while the page was offline, against a runtime that
  // does not resume). A request that comes later is not taken for one of
  // their turns: it would stay open until a response that never comes,
  // its dialog left on screen after its own turn ended. The requests that
  // came before the loss keep them: their turns may still run (the
  // runtime only reconnected), and the response, should it come, still
  // ends them. Once none of those counts one any more, it goes (see
  // bury).
  const dead = new Set();
  // lost: a loss was told before the transcript's prompts were known
  // (ready): they all went out before it.
  let lost = false;
  // turns: the runtime's requests by the turns they may belong to (wire
  // id -> a Set of the wire ids of prompts): the prompts of their session
  // still unanswered when they arrived (see turnOf). A request's turn is
  // over once all of them are answered, and not before: ACP requests name
  // no prompt, and with two prompts of a session unanswered a request may
  // be of either turn. An agent that ends the running turn when a prompt
  // comes (the dev agent does) may send the second turn's requests before
  // the first prompt's response; one that refuses a prompt while a turn
  // runs (stopReason "refusal") answers the second prompt first while the
  // first turn waits for its request. Ending the request with either
  // prompt's response would take its dialog from a turn that waits for it,
  // which would then hang; so a first turn's request that came after the
  // second prompt went out keeps its dialog until the second turn ends too
  // (unless the runtime cancels it), and an answer the app gives it
  // meanwhile reaches a runtime no longer waiting for it.
  const turns = new Map();
  const turnOf = (m) => openPrompts(prompts, m, dead);
  // lose notes a loss that may have eaten responses to the prompts sent
  // before it, those of earlier streams (the transcript's): this stream's
  // writes, with nothing gone out yet (see tap.evicted), wait for the
  // loss to be told.
  const lose = () => {
    lost ||= !ready;
    for (const id of prompts.keys()) if (!sent.has(id)) dead.add(id);
    bury();
  };
  // bury lets go of the prompts in dead that no request's turns count
  // (see turns; a request held, not read yet, counts too): no request
  // that comes now is of their turns, so their responses would end
  // nothing, and each would be kept for the stream's life if, as may be,
  // its response is gone.
  const bury = () => {
    for (const id of dead) {
      if (held?.turn?.has(id) || [...turns.values()].some((of) => of.has(id))) continue;
      dead.delete(id);
      prompts.delete(id);
    }
  };
  // moot: the runtime's requests the stream told the SDK were cancelled
  // because their turn ended (the id the SDK has them under -> {wire,
  // session, asked, answer, since}); cancelled: the same by wire id (->
  // the SDK's id). The SDK's answer to one does not go out unless the
  // runtime asks for it: a runtime may send its own $/cancel_request after
  // the turn's end (the dev runtime, on the Go ACP SDK, does), and ACP has
  // the client answer a cancelled request. That cancel is not handed to
  // the SDK a second time; it sends the SDK's answer to the stream's
  // cancel, held until then (answer), or has it sent when it comes
  // (asked). See settle. Neither waits beyond the end of the session's
  // next turn (see expire; once the runtime asked, see sweep), a new
  // request of the same wire id (see unwait), the runtime's leaving (see
  // gone), nor the stream's end: what is kept for one goes then, answered
  // or not, and an answer the SDK gives later is dropped (see toWire).
  const moot = new Map();
  const cancelled = new Map();
  // handed records m, a message of the runtime's the SDK reads now, and
  // returns it as the SDK gets it: a request under an id of the stream's
  // own (see requests), the runtime's $/cancel_request naming that id, a
  // response to the SDK's request with the SDK's id (see restore).
  const handed = (m, turn) => {
    if (!isRequest(m)) {
      if (m.method === CANCEL_REQUEST) {
        settled(m.params?.requestId);
        over(localOf.get(m.params?.requestId));
      }
      return restore(m);
    }
    open.set(m.id, JSON.stringify(m));
    if (turn === undefined) turns.delete(m.id);
    else turns.set(m.id, turn);
    return ask(m, false);
  };
  // unwait gives up on every request of wire id id the stream cancelled
  // at its turn's end (see settle): a new request of that id has come, so
  // the runtime is past them, and a cancel of the id would be the new
  // one's. It runs when the new request is delivered, read or not (see
  // superseded): while the SDK has yet to read it, an answer to an old one
  // going out under the id would answer it, unseen. An answer held for one is dropped; one the SDK has yet to give
  // is dropped when it comes (see toWire). That holds too for one whose
  // cancel the runtime sent already (asked, no longer in cancelled): its
  // answer, late, would go out under the id and answer the new request.
  const unwait = (id) => {
    cancelled.delete(id);
    for (const [sdk, r] of moot) if (r.wire === id) moot.delete(sdk);
  };
  // gone lets go of every request the stream cancelled at its turn's end
  // when the runtime leaves (runtime_gone): the runtime that asked for the
  // SDK's answer, or would, is gone, and the process that takes its place
  // may be a new one whose requests reuse their wire ids. Its request of
  // the same id may be on its way before the stream sees it (queued in the
  // attachment behind a message the SDK has not read, or crossing the
  // answer on the wire), so waiting for it (unwait) is too late: an answer
  // going out under the id meanwhile would answer it. An answer held for
  // one is dropped; one the SDK has yet to give is dropped when it comes
  // (see toWire). Their turns are over (the runtime answered their
  // prompts without them), so a runtime that merely reconnected loses at
  // most the answer to its own cancel, which a new process would not
  // want; a drop on the page's side, with no runtime_gone, keeps them.
  // So too the requests the runtime cancelled itself before their turn
  // ended (its $/cancel_request came before the prompt's response, see
  // over), whose answer the SDK has yet to give: kept in requests, it
  // would go out under the wire id. A request still open is kept: a
  // runtime that merely reconnected waits for its answer.
  //
  // The prompts sent before are not touched: the same process may be
  // back (the relay says runtime_gone when the runtime's connection
  // drops, or when it restarts), and its requests are of their turns.
  const gone = () => {
    moot.clear();
    cancelled.clear();
    for (const [local, r] of requests) {
      if (r.since === undefined || r.stale) continue;
      requests.delete(local);
      if (localOf.get(r.wire) === local) localOf.delete(r.wire);
    }
  };
  // settled forgets the runtime's request of wire id id: answered or
  // cancelled, it is open no more, and is not offered again. Nor is it
  // stale any more (see staleOf): what made it over is in the transcript
  // after it, so no later stream offers it. Not so the app's answer
  // (answered) until it is sent: one that fails to go (the connection
  // dropped mid-write) is in no transcript, and the next stream would offer
  // the stale request again, its answer going to whatever request of that
  // id a restarted runtime has. It returns the request's text.
  const settled = (id, answering = false) => {
    const request = open.get(id);
    if (!answering && request !== undefined) stale.get(att)?.delete(request);
    open.delete(id);
    turns.delete(id);
    for (const [text, w] of offered) if (w === id) offered.delete(text);
    if (dead.size > 0) bury();
    return request;
  };
  const answered = (m) => {
    if (m === null || typeof m !== "object" || "method" in m || !("id" in m)) return undefined;
    return settled(m.id, true);
  };

  // requests: the runtime's requests handed to the SDK and not answered by
  // it yet, by the id the SDK has them under, one of the stream's own
  // (local id -> {wire, stale, again: offered from the transcript});
  // localOf: those whose runtime may still wait for the answer (wire id ->
  // local id). The SDK never gets the wire id because the request may no
  // longer be pending at the runtime when the app answers it: a runtime
  // that restarted while the stream went on (its new process resumed the
  // stream, or not_resumed is yet to come), or took the place of one
  // while the page was offline (a page that never heard runtime_gone, see
  // staleOf), numbers its requests afresh. Its request of the same id
  // would take the app's answer to the old dialog for its own (a
  // permission the user never gave). A JSON-RPC peer does not reuse an id
  // while its request is pending, so a request of the same wire id from
  // the runtime proves the old one is not pending any more: the old one
  // goes stale (superseded), the SDK is told it is cancelled, and its
  // answer is dropped. Until then the answer goes out with the wire id,
  // which is what the transcript records (see unanswered). A request
  // that is over (the runtime cancelled it, or it went stale) is kept
  // only until a turn begun after that ends (since, see sweep), not until
  // the app answers: an app may never answer a dialog the SDK was told is
  // cancelled, and a long-lived stream would keep it for good.
  const requests = new Map();
  const localOf = new Map();
  // ask gives the runtime's request m an id of the stream's own, and
  // returns it as the SDK gets it.
  const ask = (m, again) => {
    const local = prefix + next++;
    requests.set(local, { wire: m.id, stale: false, again, since: undefined });
    localOf.set(m.id, local);
    return { ...m, id: local };
  };
  // over notes that the request the SDK has under id local is over: from
  // now on, a session/prompt that goes out begins a turn after it.
  const over = (local) => {
    const r = requests.get(local);
    if (r !== undefined) r.since ??= next;
  };
  // sweep lets go of what is kept for the requests that were over before
  // the session/prompt whose response m is went out (see since): the SDK's
  // answer to one is not coming now, or comes too late to go anywhere (the
  // runtime may have restarted since and reused the id), and is dropped
  // when it comes (see toWire). Only this stream's prompts count: an
  // earlier stream's went out before anything this one handed over.
  const sweep = (m) => {
    const n = typeof m.id === "string" && m.id.startsWith(prefix) ? Number(m.id.slice(prefix.length)) : -1;
    for (const [local, r] of requests) {
      if (r.since === undefined || r.since > n) continue;
      requests.delete(local);
      if (localOf.get(r.wire) === local) localOf.delete(r.wire);
    }
    for (const [sdk, r] of moot) {
      if (r.since > n) continue;
      moot.delete(sdk);
      if (cancelled.get(r.wire) === sdk) cancelled.delete(r.wire);
    }
  };
  const reoffer = (m, turn) => {
    const text = JSON.stringify(m);
    offered.set(text, m.id);
    open.set(m.id, text);
    if (turn !== undefined) turns.set(m.id, turn);
    own.push(ask(m, true));
  };
  // superseded makes stale the request handed to the SDK that a request
  // from the runtime (m, a new one, not one delivered again) reuses the
  // wire id of, and tells the SDK its request is cancelled: the app's
  // dialog for it goes away. The requests of that id the stream cancelled
  // at their turn's end are given up too (see unwait). It runs as m is
  // delivered, before the SDK reads it.
  const superseded = (m) => {
    if (!isRequest(m)) return;
    unwait(m.id);
    if (!localOf.has(m.id)) return;
    const local = localOf.get(m.id);
    localOf.delete(m.id);
    requests.get(local).stale = true;
    over(local);
    settled(m.id);
    own.push({ jsonrpc: "2.0", method: CANCEL_REQUEST, params: { requestId: local } });
  };
  // toWire gives the SDK's answer to a request of the runtime's its wire
  // id, or returns undefined for one gone stale, which must not go out, one
  // whose turn ended (see settle), or one the stream let go of (an id of
  // its own it keeps nothing for: see sweep). Only an answer the app gave
  // is worth a warning: the SDK answers a request the stream cancelled
  // toward it on its own (an error, or the app's "cancelled" outcome).
  const toWire = (m) => {
    if (m === null || typeof m !== "object" || "method" in m) return m;
    if (moot.has(m.id)) return settle(m);
    if (!requests.has(m.id)) {
      if (typeof m.id !== "string" || !m.id.startsWith(prefix)) return m;
      if (given(m)) console.warn(`relaywasm: att.stream() dropped the app's answer to a request that was over (the runtime cancelled it, its turn ended, or a new request with that id came from the runtime), given after a later turn ended or the runtime left the relay: nothing waits for it`);
      return undefined;
    }
    const r = requests.get(m.id);
    requests.delete(m.id);
    if (r.stale) {
      if (given(m)) console.warn(`relaywasm: att.stream() dropped the app's answer to a request${r.again ? " offered again" : ""} (wire id ${JSON.stringify(r.wire)}): the runtime has since sent a new request with that id, which it would have answered`);
      return undefined;
    }
    if (localOf.get(r.wire) === m.id) localOf.delete(r.wire);
    return { ...m, id: r.wire };
  };

  // turnOver: m is the response to a session/prompt, so its turn is over
  // and nothing waits for the answers to the requests of that turn still
  // open (see turns). A runtime need not say so with $/cancel_request (one
  // that did, before its response, left none open): the SDK is told each
  // is cancelled (the app's dialog goes away), and its answer goes out
  // only if the runtime cancels the request too (see settle). A request
  // that may be of a turn still running (a prompt of the session sent
  // while this one ran was unanswered when it came), or of none (no
  // sessionId, or none of its prompts open when it came), is kept.
  const turnOver = (m) => {
    if (!isResponse(m) || !prompts.has(m.id)) return;
    const session = prompts.get(m.id);
    prompts.delete(m.id);
    dead.delete(m.id);
    expire(session);
    sweep(m);
    for (const [id] of open) {
      const of = turns.get(id);
      if (!of?.has(m.id)) continue;
      of.delete(m.id);
      if (of.size > 0) continue; // a turn it may be of still runs
      settled(id);
      const sdk = localOf.get(id);
      localOf.delete(id);
      requests.delete(sdk);
      moot.set(sdk, { wire: id, session, asked: false, answer: undefined, since: next });
      cancelled.set(id, sdk);
      own.push({ jsonrpc: "2.0", method: CANCEL_REQUEST, params: { requestId: sdk } });
    }
  };
  // expire gives up waiting for the runtime's own $/cancel_request of the
  // requests of session cancelled at an earlier turn's end: one that has
  // not come by the end of the session's next turn is not coming (a
  // runtime that sends none, as ACP allows), and moot and cancelled would
  // keep them for the stream's life. An answer held for one is dropped;
  // one the SDK has yet to give is dropped when it comes (see toWire).
  const expire = (session) => {
    for (const [sdk, r] of moot) {
      if (r.session !== session || r.asked) continue; // the SDK's answer goes out if it comes before sweep
      if (cancelled.get(r.wire) === sdk) cancelled.delete(r.wire);
      moot.delete(sdk);
    }
  };
  // settle takes the SDK's answer m to a request the stream cancelled at
  // its turn's end: it goes out (returned with the wire id) if the runtime
  // has cancelled the request too, else it waits for that. An answer the
  // app gave (Allow on a dialog still on screen) never goes: the runtime
  // ended the turn without it, and it is no answer to a cancel.
  const settle = (m) => {
    const r = moot.get(m.id);
    if (given(m)) {
      moot.delete(m.id);
      console.warn(`relaywasm: att.stream() dropped the app's answer to a request whose turn had ended (wire id ${JSON.stringify(r.wire)}): the runtime answered the turn's session/prompt without waiting for it`);
      return undefined;
    }
    if (!r.asked) {
      r.answer = m;
      return undefined;
    }
    moot.delete(m.id);
    return { ...m, id: r.wire };
  };
  // recancel says whether m is the runtime's $/cancel_request of a request
  // the stream cancelled toward the SDK already: it is not handed over,
  // and the SDK's answer to the stream's cancel goes out (see settle).
  const recancel = (m) => {
    if (m.method !== CANCEL_REQUEST || !cancelled.has(m.params?.requestId)) return false;
    const wireId = m.params.requestId;
    const sdk = cancelled.get(wireId);
    cancelled.delete(wireId);
    const r = moot.get(sdk);
    if (r === undefined) return true; // the app's own answer, dropped
    if (r.answer === undefined) {
      r.asked = true;
      return true;
    }
    moot.delete(sdk);
    const a = { ...r.answer, id: wireId };
    // Should the attachment have ended meanwhile, nothing waits for it.
    send(a)
      .then(() => (spoke = true), (e) => tooLarge(a, e))
      .catch(() => {});
    return true;
  };
  // ends: responses delivered before the stream was ready, for turnOver
  // once the transcript's prompts are known.
  const ends = [];

  // serve hands the SDK's pending read the next message, if there is one. A
  // held message handed over counts as read from then on, and the cursor
  // may move past it.
  const serve = () => {
    if (own.length > 0) {
      readCtl.enqueue(own.shift());
      return true;
    }
    if (!ready || !held) return false;
    const h = held;
    held = null;
    const dup = again(h.raw) || recancel(h.raw);
    if (!dup) {
      superseded(h.raw);
      readCtl.enqueue(handed(h.raw, h.turn));
    }
    h.resolve();
    return !dup;
  };
  // wake serves a read that waits, if there is something for it now.
  const wake = () => {
    if (!wanted || !serve()) return;
    const w = wanted;
    wanted = null;
    w();
  };
  // offer gives the SDK a message of the stream's own, at its next read.
  const offer = (m) => {
    own.push(m);
    wake();
  };

  // restore gives a response the SDK's id back (only responses to this
  // stream's requests are ever held: ours), and the runtime's
  // $/cancel_request of a request the id the SDK has it under.
  const restore = (m) => {
    if (m.method === CANCEL_REQUEST && localOf.has(m.params?.requestId)) {
      return { ...m, params: { ...m.params, requestId: localOf.get(m.params.requestId) } };
    }
    if ("method" in m || !sent.has(m.id)) return m;
    const id = sent.get(m.id);
    sent.delete(m.id);
    wire.delete(id);
    return { ...m, id };
  };
  const ours = (m) => m !== null && typeof m === "object" && !Array.isArray(m) && ("method" in m || sent.has(m.id));

  // end stops the stream: the attachment's messages go to onMessage again,
  // one held but not read included, and writes fail with err (or "closed").
  // When the attachment has closed (closed), the one held goes to no one:
  // nothing is delivered after the end, and the stream's next attach
  // delivers it again.
  const end = (err, errorReadable, closed = false) => {
    if (ended) return;
    ended = err ?? new RelayError(CODE_CLOSED, "the stream is closed");
    // Nothing the SDK writes goes out any more, and nothing is delivered
    // to the stream.
    moot.clear();
    cancelled.clear();
    if (att._tap === tap) att._tap = null;
    signal?.removeEventListener("abort", onAbort);
    pauses.delete(pause);
    if (errorReadable) readCtl.error(ended);
    try {
      writeCtl.error(ended);
    } catch {
      // already closed or errored
    }
    wanted?.();
    wanted = null;
    if (held && closed) pause();
    if (held) {
      const h = held;
      held = null;
      try {
        h.resolve(att.onMessage(h.raw, h.meta));
      } catch (e) {
        h.reject(e); // the attachment delivers it again later
      }
    }
  };
  const onAbort = () => end(new RelayError(CODE_CANCELED, "the stream's signal aborted"), true);
  signal?.addEventListener("abort", onAbort, { once: true });
  const pause = () => {
    const h = held;
    held = null;
    h?.reject(PAUSED);
  };
  pauses.add(pause);

  const readable = new ReadableStream(
    {
      start(c) {
        readCtl = c;
      },
      pull() {
        if (ended || serve()) return undefined;
        return new Promise((resolve) => (wanted = resolve));
      },
      // Cancelling the readable (the SDK does when its connection closes)
      // ends the stream; the attachment stays open.
      cancel() {
        end(null, false);
      },
    },
    { highWaterMark: 0 },
  );

  const writable = new WritableStream({
    start(c) {
      writeCtl = c;
    },
    write(sdk) {
      if (ended) throw ended;
      const m = toWire(sdk);
      if (m === undefined) return undefined;
      const request = answered(m);
      return send(m).then(
        () => {
          spoke = true;
          if (request !== undefined) stale.get(att)?.delete(request);
        },
        (e) => tooLarge(m, e),
      );
    },
    // Closing or aborting the writable closes the attachment (att.close():
    // the stored stream stays resumable); the readable then errors with
    // "closed".
    close() {
      return att.close();
    },
    abort() {
      return att.close();
    },
  });

  // send writes one message, a request with an id of this stream's own.
  const send = (m) => {
    if (m === null || typeof m !== "object" || Array.isArray(m)) return att.sendACP(m);
    if ("method" in m && "id" in m && m.id !== null) {
      const id = prefix + next++;
      sent.set(id, m.id);
      wire.set(m.id, id);
      if (m.method === PROMPT && typeof m.params?.sessionId === "string") prompts.set(id, m.params.sessionId);
      return att.sendACP({ ...m, id }).catch((e) => {
        sent.delete(id);
        wire.delete(m.id);
        prompts.delete(id);
        throw e;
      });
    }
    if (m.method === CANCEL_REQUEST && wire.has(m.params?.requestId)) {
      return att.sendACP({ ...m, params: { ...m.params, requestId: wire.get(m.params.requestId) } });
    }
    return att.sendACP(m);
  };

  // tooLarge answers a message over the browser leg's limit (sendACP's
  // frame_too_large) in its place, so that its write resolves: the SDK
  // takes any failed write for a dead transport and closes the connection,
  // failing every request pending on it, for one message that could never
  // have been sent. A request gets an error response from the stream, a
  // response becomes an error response to the runtime's request (small, it
  // fits), and a notification, which nothing answers, is dropped with a
  // console error. Any other failure fails the write, as before.
  const tooLarge = (m, e) => {
    if (e?.code !== FRAME_TOO_LARGE || m === null || typeof m !== "object" || Array.isArray(m)) throw e;
    const error = { code: TOO_LARGE_RPC_CODE, message: `${e.message} (frame_too_large)`, data: { code: FRAME_TOO_LARGE } };
    if (typeof m.method === "string" && "id" in m && m.id !== null) {
      offer({ jsonrpc: "2.0", id: m.id, error });
      return undefined;
    }
    if (typeof m.method === "string") {
      console.error(`relaywasm: att.stream() dropped a ${m.method} notification: ${e.message.replace(/^relaywasm: /, "")} (frame_too_large)`);
      return undefined;
    }
    if (!("id" in m) || m.id === null) throw e;
    return att.sendACP({ jsonrpc: "2.0", id: m.id, error }).then(() => {
      spoke = true;
    });
  };

  const tap = {
    // onMessage is the attachment's delivery while the stream is open: what
    // is ours waits for the SDK's read (the returned Promise holds the
    // cursor); anything else is the attachment's onMessage's.
    onMessage(raw, meta) {
      if (ended) return att.onMessage(raw, meta);
      // A prompt's response ends its turn, whichever stream sent it: the
      // cancels of its requests still open go first.
      if (ready) turnOver(raw);
      else if (isResponse(raw)) ends.push(raw);
      if (!ours(raw)) {
        wake();
        return att.onMessage(raw, meta);
      }
      if (ready && (again(raw) || recancel(raw))) return undefined; // offered from the transcript already, or cancelled
      // The turn a request belongs to is the one running as it arrives
      // (before ready, the transcript's prompts are not known yet: it is
      // found once they are, nothing having arrived since).
      const turn = ready ? turnOf(raw) : null;
      if (ready) {
        // From now on the app's answer to a re-offer of raw's id would
        // answer raw: the re-offer is stale, and its cancel goes first.
        superseded(raw);
        wake();
      }
      if (wanted && ready) {
        // A read is waiting: the message is read now, and the delivery
        // goes on at once.
        const w = wanted;
        wanted = null;
        readCtl.enqueue(handed(raw, turn));
        w();
        return undefined;
      }
      return new Promise((resolve, reject) => {
        held = { raw, meta, turn, resolve, reject };
      });
    },
    state(state, info) {
      if (info?.code === CODE_RUNTIME_GONE) {
        staleOf(att, open.values());
        gone();
      }
      if (state === "closed") end(new RelayError(info?.code ?? "closed", info?.message ?? "the attachment is closed"), true, true);
    },
    // evicted ends the stream when content is gone, unless nothing the
    // stream wrote has gone out yet: the SDK's conversation starts with its
    // first message (initialize), so nothing the runtime sent before can be
    // part of it, and the loss is the attachment's alone (onEvicted hears of
    // it). That is the case after a reload, whose first sends wait for the
    // resume: against a runtime that does not resume (contenox as it ships),
    // not_resumed is told just as they go out, and would otherwise end every
    // SDK connection a reloaded page opens. The engine tells a loss before
    // it lets the waiting sends out, so spoke is still false then.
    evicted(info) {
      if (!spoke) return lose();
      const e = new RelayError(info.reason, lossText(info));
      e.eviction = info;
      end(e, true);
    },
  };
  att._tap = tap;
  // The requests the runtime sent before the stream opened that are still
  // unanswered (the transcript's, see unanswered) go to the SDK first: the
  // previous page's SDK, or the previous stream's, may have read one and
  // never answered it (a reload while a permission dialog was open, a
  // stream ended by a loss), and the cursor is past it, so nothing would
  // deliver it again while the runtime waits for its answer. Without a
  // transcript (history 0) there are none to offer.
  att
    .history()
    .then(unanswered)
    .catch(() => ({ requests: [], prompts: new Map(), dead: new Set(), received: null })) // the attachment ended meanwhile, and the stream with it (or the store failed: the stale requests stay)
    .then(({ requests, prompts: earlier, dead: lostEarlier, received }) => {
      const gone = staleOf(att);
      // A stale request the transcript no longer holds is offered by no
      // stream: it goes.
      if (received !== null) for (const t of gone) if (!received.has(t)) gone.delete(t);
      for (const { m, turn } of requests) if (!gone.has(JSON.stringify(m))) reoffer(m, turn);
      // The transcript's prompts are older than those this stream sent
      // meanwhile: they go first (see turnOf).
      const mine = [...prompts];
      prompts.clear();
      for (const [id, session] of [...earlier, ...mine]) prompts.set(id, session);
      for (const id of lostEarlier) dead.add(id);
      if (lost) for (const id of earlier.keys()) dead.add(id);
      for (const m of ends.splice(0)) turnOver(m);
      // A request delivered meanwhile came after those responses, and
      // before anything the SDK writes from now on.
      if (held?.turn === null) held.turn = turnOf(held.raw);
      // A request delivered meanwhile is past the requests of its id that
      // those responses ended, whenever the SDK reads it.
      if (held && !offered.has(JSON.stringify(held.raw))) superseded(held.raw);
      bury();
      ready = true;
      if (!ended) wake();
    });
  return { readable, writable };
}

// stale holds, per attachment, the runtime's requests (JSON text) that were
// handed to an SDK and still unanswered when the runtime left the relay
// (runtime_gone): a later stream does not offer them again. Against a
// runtime that does not resume (contenox as it ships), the loss that
// follows says only not_resumed, whether the runtime merely reconnected or
// is a new process; a new process numbers its requests from the start
// again, and the app's answer to an old request would answer the new one
// of the same id (a permission the user never saw granted). So a request
// pending when the runtime left is not offered again, at the cost of a
// turn that waits (the app can cancel it) where the runtime only
// reconnected. It lasts as long as the page: after a reload, the
// transcript alone cannot tell. A request goes from it once it is over
// (see settled in openStream), or once the transcript no longer holds it
// (a stream opens): no stream offers it again then.
const stale = new WeakMap();

// staleOf returns att's stale requests, adding texts to them first.
function staleOf(att, texts = []) {
  let s = stale.get(att);
  if (s === undefined) stale.set(att, (s = new Set()));
  for (const t of texts) s.add(t);
  return s;
}

// given says whether m, the app's answer to a request of the runtime's, is
// one the app gave rather than the SDK's answer to its cancel: not an
// error, not the "cancelled" outcome of a permission request.
function given(m) {
  return !("error" in m) && m.result?.outcome?.outcome !== "cancelled";
}

// isResponse says whether m is a JSON-RPC response (an object, no method).
function isResponse(m) {
  return m !== null && typeof m === "object" && !Array.isArray(m) && !("method" in m);
}

// isRequest says whether m is a JSON-RPC request (method and id).
function isRequest(m) {
  return typeof m.method === "string" && m.id !== undefined && m.id !== null;
}

// A loss after which the runtime's side of the requests before it is gone:
// it restarted (cursor_evicted), or the relay gave a new attachment
// (session_replaced), so nothing waits for their answers.
const GONE = new Set(["cursor_evicted", "session_replaced"]);

// unanswered picks, from a transcript, the requests received (method and
// id) that nothing made moot since: no response with their id was sent
// after them, the runtime did not cancel them ($/cancel_request), no loss
// after them says the runtime's side is gone, and the prompt turn they
// belong to has not ended. In ACP the agent's requests to the client
// (session/request_permission, fs/*, terminal/*) belong to a turn of their
// params.sessionId, one of the session/prompts of it unanswered when they
// arrived (see openPrompts): once the responses to all of those arrived
// after them, nothing waits for their answer, and asking the app again
// would show a dialog for a turn that is over (one cancelled while the
// dialog was open, which a runtime need not follow with $/cancel_request).
// The response to one of them alone does not end them (see turns in
// openStream). A request without a sessionId, or of no turn, is kept. A
// prompt unanswered at a loss (of any reason: each may have eaten its
// response) is of no request after it (see dead in openStream). One
// pass: prompts maps each session/prompt sent (by the id it went out with,
// the stream's own) to its session until its response; those still
// unanswered are returned too (and which of them were at a loss: dead),
// for the stream to end their turns when their responses come, and each
// request with the prompts of the turns it may be of ({m, turn}); and the
// texts of all the requests it holds (received), answered or not.
function unanswered(entries) {
  const open = new Map(); // id -> {m: the request, turn: the ids of the prompts it may be of}
  const prompts = new Map(); // a sent session/prompt's id -> its sessionId, oldest first
  const dead = new Set(); // those of prompts unanswered at a loss after them
  const received = new Set(); // every request received (JSON text), for staleOf's to be let go
  for (const { out, message: m, lost } of entries) {
    if (lost) {
      if (GONE.has(lost.reason)) {
        open.clear();
        prompts.clear();
        dead.clear();
      } else for (const id of prompts.keys()) dead.add(id);
      continue;
    }
    if (m === null || typeof m !== "object" || Array.isArray(m)) continue;
    if (!out && isRequest(m)) {
      received.add(JSON.stringify(m));
      open.delete(m.id);
      open.set(m.id, { m, turn: openPrompts(prompts, m, dead) });
    } else if (!out && m.method === CANCEL_REQUEST) open.delete(m.params?.requestId);
    else if (out && !("method" in m)) open.delete(m.id);
    else if (out && m.method === PROMPT && isRequest(m) && typeof m.params?.sessionId === "string") prompts.set(m.id, m.params.sessionId);
    else if (!out && !("method" in m) && prompts.has(m.id)) {
      turnEnded(open, m.id);
      prompts.delete(m.id);
      dead.delete(m.id);
    }
  }
  return { requests: [...open.values()], prompts, dead, received };
}

// turnEnded notes in open that the turn of the prompt whose id is prompt
// ended, and drops the requests whose turns may all have ended.
function turnEnded(open, prompt) {
  for (const [id, r] of open) {
    if (!r.turn?.has(prompt)) continue;
    r.turn.delete(prompt);
    if (r.turn.size === 0) open.delete(id);
  }
}

// openPrompts returns the ids of the prompts in prompts (id -> sessionId)
// of request m's params.sessionId, as a Set: the turns m may belong to, if
// it came now. Undefined when m has no sessionId or none of its session's
// prompts is unanswered. The prompts in dead, unanswered at a loss that
// may have eaten their responses, are left out: a turn that ended unheard
// would keep m open for good.
function openPrompts(prompts, m, dead) {
  const session = m.params?.sessionId;
  if (typeof session !== "string") return undefined;
  const of = new Set();
  for (const [id, s] of prompts) if (s === session && !dead.has(id)) of.add(id);
  return of.size > 0 ? of : undefined;
}

// lossText says what an eviction lost, for the stream's error. fromSeq 0
// is a loss among unsequenced messages (a runtime that does not number
// them, contenox as it ships), which no seq can place.
function lossText({ reason, afterSeq, fromSeq }) {
  const numbered = fromSeq > 0;
  switch (reason) {
    case "cursor_evicted":
      return `the runtime no longer knows this stream (it restarted): what it sent after seq ${afterSeq} is gone`;
    case "not_resumed":
      return "the runtime does not resume: what it sent while the connection was down is gone";
    case "frame_too_large":
      return numbered ? `message ${afterSeq + 1} was over the browser leg's size limit and was dropped` : "a message was over the browser leg's size limit and was dropped";
    case "session_replaced":
      return numbered || afterSeq > 0
        ? `the relay granted a new attachment id: messages after seq ${afterSeq} were lost`
        : "the relay granted a new attachment id: what the runtime held for the old one (its ACP sessions) is gone";
    default:
      return numbered
        ? `the runtime no longer held what it sent after seq ${afterSeq}; delivery goes on at seq ${fromSeq}`
        : "messages the handler did not take were more than the engine holds, and were dropped";
  }
}

function randomHex() {
  const b = new Uint32Array(2);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (v) => v.toString(16).padStart(8, "0")).join("");
}
