// Type declarations of relay.js, the JavaScript API of relaywasm.
//
// A web page attaches to a contenox runtime through a relay and talks ACP
// (JSON-RPC 2.0) with it. The client runs in relay.wasm; nothing here blocks
// the page, every operation returns a Promise, and every rejection is a
// RelayError with a stable code.
//
//   import { loadRelay } from "./relay.js";
//   const relay = await loadRelay({ wasm: "/relay.wasm" });
//   const att = await relay.attach({
//     url: "wss://relay.example/v1/attach", instance: "demo", token: "…",
//     onMessage(msg, meta) { … },
//   });
//   await att.sendACP({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: 1 } });

/**
 * Loads relay.wasm once per page and returns a Relay. A call with the
 * database, storage, commitWindowMs and worker of an earlier call resolves
 * to that call's Relay (the same object): calling it on every mount of a
 * component costs nothing after the first. A call that failed is not kept:
 * the next one tries again.
 */
export function loadRelay(options?: LoadOptions): Promise<Relay>;

export interface LoadOptions {
  /**
   * relay.wasm: a URL, a fetched Response or a compiled module. Default:
   * relay.wasm beside relay.js. A relative URL (here and in wasmExec) is
   * the page's, resolved as its fetch() resolves one: against the
   * document's base URL. When the page loaded "relaywasm/preload"
   * (preload.js) in a script ahead of its own, the compile it started for
   * the same URL is taken rather than fetching again. relay.wasm runs once
   * per page, and every Relay shares it: a later loadRelay naming another
   * wasm (another URL, once made absolute; another Response url; another
   * module) rejects with bad_options, and one naming none takes the page's.
   */
  wasm?: string | URL | Response | WebAssembly.Module;
  /** wasm_exec.js of the Go that built relay.wasm, when globalThis.Go is not defined yet. Default: beside relay.js. A relative URL is the page's, as in wasm. */
  wasmExec?: string | URL;
  /** IndexedDB database for stream state. Default "relaywasm". */
  database?: string;
  /**
   * Where stream state is kept. Default "indexeddb". "memory" keeps nothing
   * beyond the page (no resume across a reload): for a page that must leave
   * no trace, or to measure the client without its storage.
   */
  storage?: Storage;
  /**
   * How long stream state may wait before it is written to IndexedDB, in
   * milliseconds. Default 50. Commits are gathered over this window and
   * written in one transaction (each costs the page about a millisecond of
   * main-thread time, however much it carries), and at once when the page is
   * hidden or goes away (pagehide) and before close() and detach() resolve.
   * The price: after a crash or a killed tab, a stream resumes from where it
   * was up to a window earlier, so the messages of that window are delivered
   * again (not marked as replays); none is lost, and history() and the
   * stored cursor always agree. 0 writes once per event-loop turn.
   */
  commitWindowMs?: number;
  /**
   * Run relay.wasm (the engine and its sockets; the page keeps IndexedDB and
   * the streams' Web Locks) in a dedicated module Web Worker (worker.js,
   * beside relay.js) instead of the page's main thread. Default false: the
   * page's thread then does a fifth of the raw JS WebSocket's work per inbound
   * frame, but on the main thread a reloaded page is live sooner, a round trip
   * is quicker and, where cores are few, more frames arrive per second
   * (README, "Worker mode"). A page whose main thread must stay free (a phone
   * drawing a long chat) asks for the worker. The API is the same: messages
   * reach onMessage on the main thread in batches (one postMessage per batch),
   * a Promise onMessage returns still holds the cursor, a token function is
   * called on the page, and the page forwards its lifecycle (and writes its
   * stores at pagehide itself). attach's options are checked on the page,
   * as on the main thread, and only the values attach reads cross to the
   * worker: options held in Proxies (Vue's reactive(), MobX), or holding
   * functions or DOM nodes under other keys, attach as they do there.
   * att.stream() works as well. A
   * worker.js of another origin than the page's (a CDN's) runs in a worker
   * made from a blob: URL, as the engines refuse it otherwise. On a page that
   * requires Trusted Types, the worker's URL is made by relay.js's policy,
   * relaywasm, which the page's trusted-types directive must allow. On a
   * cross-origin isolated page, a worker.js served without a
   * Cross-Origin-Embedder-Policy of its own is loaded from a blob: URL too. A
   * worker that cannot start (a Content-Security-Policy without worker-src, or
   * without blob: for such a worker.js, or without relaywasm among its
   * trusted-types, no module workers, relay.wasm failing to load in it) falls
   * back to the main thread: the Relay's mode is then "main" and reason says
   * why. state, cursor and session of an Attachment are then what the worker
   * last reported, not read from the engine at the moment of the call.
   */
  worker?: boolean;
  /**
   * Ends this call's wait: it rejects with code "canceled" once the signal
   * aborts (at once if it has), as it would wait for good for a relay.wasm
   * whose server never answers. The load itself goes on (its fetch is not
   * stopped): a later loadRelay with the same options waits for it, and
   * resolves once relay.wasm has come, or rejects with its error.
   */
  signal?: AbortSignal;
}

/** Where a Relay's relay.wasm runs. */
export type Mode = "worker" | "main";

export interface Relay {
  /** Where this Relay keeps stream state: "memory" when IndexedDB is unavailable or failed to open. */
  readonly storage: Storage;
  /** Where relay.wasm runs: "worker" when loadRelay({worker: true}) got one, else "main". */
  readonly mode: Mode;
  /** Why mode is "main" although a worker was asked for (the worker's error); "" otherwise. */
  readonly reason: string;

  /**
   * Attaches to a runtime through the relay: reclaims the stream's stored
   * attachment id, resumes from its stored cursor, and resolves once the relay
   * welcomed the client. A relay that cannot be reached yet is retried with
   * backoff until it can, or until the signal aborts; a refusal that cannot
   * change (unauthorized, bad_relay_signature, unsupported_version) rejects.
   */
  attach(options: AttachOptions): Promise<Attachment>;

  /**
   * Reads a stream's stored transcript, as its Attachment's history() would,
   * without attaching: no socket and no slot, so it answers offline and
   * while the relay is down, where attach waits for the relay's welcome. A
   * page reloaded then can draw the conversation at once (demo/web/app.js
   * does). The stream is named as attach names it (an attach's options will
   * do); one never stored, or kept with history 0, reads []. In worker mode
   * and on the main thread alike it reads this Relay's storage: with
   * storage "memory", what this page's attachments wrote.
   *
   * It reads the stream stored under that name, which attach may then not
   * give this page: while another tab holds it, attach gives "name#2"
   * (Attachment.name), and that tab may add to it meanwhile. Once attached,
   * draw from att.history() again if either happened.
   */
  history(stream: StreamName): Promise<HistoryEntry[]>;

  /**
   * Deletes what this Relay's storage holds of a stream: its attachment id,
   * cursor and transcript, so that history(stream) then reads [] and the
   * next attach of it starts a fresh stream (a new attachment id, cursor
   * 0). The stream is named as attach and history name it; a tab that got
   * "name#2" (Attachment.name) stored its conversation under that name.
   * Like history it needs no socket: it works offline, while the relay is
   * down, and in worker mode and on the main thread alike.
   *
   * It is for a device people share: an app that logs one user out (a
   * phone webview with login and logout, a kiosk) closes the user's
   * attachments and forgets their streams, so that the next user, or
   * anyone reading history(), finds nothing of the conversation, even if
   * the logout happened offline:
   *
   *     await att.close();            // or detach(), when online: see below
   *     await relay.forget({ url, instance, name: att.name });
   *
   * It rejects with a RelayError "bad_options", and deletes nothing, while
   * an attachment holds the stream: one of this page or of another tab (the
   * message says which, and names another Relay of this page, one in
   * worker mode beside one on the main thread, as such). It
   * does not wait for it: close() or detach() it first (both resolve once
   * the stream is free). It waits only for this page's attaches of the same
   * relay and instance that are still taking their slot, which is quick,
   * and an attach of that relay and instance waits for the forget (an
   * attach of "chat" may take "chat#2", the slot being forgotten).
   *
   * It deletes from the storage this Relay has: where that is "memory"
   * because IndexedDB could not be opened (storage says so; onState's
   * info.reason says why, as does a fall back later in the page's life),
   * only this page's copy goes, and what earlier pages wrote to IndexedDB
   * stays until a page whose IndexedDB opens forgets the stream. An app
   * that must be sure checks storage first.
   *
   * The relay is not told: the attachment id it holds for the stream ends
   * when its grace runs out, and this device no longer has the id to
   * reclaim it. detach() instead of close() ends it at the relay at once
   * (and clears the stream as forget does), when the relay can be reached.
   */
  forget(stream: StreamName): Promise<void>;
}

export type Storage = "indexeddb" | "memory";

/** What names a stored stream: a relay's URL, a runtime instance and a name. */
export interface StreamName {
  /**
   * The relay's browser leg, e.g. "wss://relay.example/v1/attach": an
   * absolute ws:// or wss:// URL (what every engine's WebSocket takes), as
   * a string or a URL (the stream is stored under its href). Anything else, or a URL the browser will not open a socket to at all,
   * rejects attach with "bad_options": among them a ws:// URL on a page
   * served over https: (mixed content), but to this machine (localhost,
   * 127.0.0.0/8, [::1]), which Chromium and Firefox let through and WebKit
   * fails as it would an unreachable relay; and a URL the page's
   * Content-Security-Policy leaves out of connect-src (the message says so).
   */
  url: string | URL;
  /** The runtime instance to reach: at most 256 bytes of UTF-8, no control characters (attach rejects another with bad_options). */
  instance: string;
  /**
   * Which stored stream this is. Default "default". Each stream is held by one
   * attachment at a time in the whole browser profile (Web Locks): another tab,
   * or another attach in this page, gets "name#2", "name#3" … (see Attachment.name).
   * An attach made while this page's attachment of the stream is being let
   * go (its attach aborted, detach() or close() not yet resolved, as React's
   * StrictMode does in development) waits for it and gets the same name.
   * A page back from the back/forward cache whose stream another tab took
   * meanwhile does not take it back: its attachment ends with "superseded".
   * A page that is not a secure context (http from another machine) has no
   * Web Locks: there the tabs ask each other over a BroadcastChannel, which
   * adds 250 ms to an attach. A tab holding the stream that is busy longer
   * than that (2 s once the asking tab has heard of it, as it does from
   * the tabs open when relay.js loads) may not answer in time; the asking
   * tab then takes the same stream and the busy one's attachment ends with
   * "superseded".
   */
  name?: string;
}

export interface AttachOptions extends StreamName {
  /**
   * The bearer credential, or a function returning it, called on every dial
   * (so it can be refreshed). A function that throws, rejects or gives
   * anything but a string fails that dial as the relay being out of reach:
   * onState says "reconnecting" with the code "unreachable" and the
   * function's message, and the dial is made again after the backoff, the
   * function called again. attach stays pending meanwhile (until a dial
   * succeeds, or its signal aborts); nothing ends the attachment for it.
   * Once close() or detach() has been called, the function is not called
   * again, in either mode, even by a redial already under way; what a call
   * made before resolves to afterwards is not used, and that dial does not
   * go.
   */
  token: string | (() => string | Promise<string>);
  /** The relay's pinned Ed25519 public key (librelay.FormatPublicKey); a welcome that does not verify, or cannot be read, rejects with bad_relay_signature. Checked with WebCrypto's Ed25519 where the engine has it, else by relay.wasm. Its text, never its bytes: anything but a string, or a string that is not a key, rejects with bad_options. It proves the relay after the upgrade, when the token has been sent already (a browser can put it only in the upgrade request): it keeps the conversation from a relay that is not the one pinned, not the token. Over wss:// TLS proves the server before the token goes; over ws:// nothing does. */
  relayKey?: string;
  /** How many transcript entries (both directions, losses included: HistoryLoss) to keep for history(). Default 0. */
  history?: number;
  /**
   * Receives every ACP message in order. The cursor moves past a message only
   * once this returned, or its returned Promise resolved, without throwing; a
   * message whose handler failed is delivered again later, after a backoff,
   * with those after it and before anything newer: a sequenced one by a
   * resume, an unsequenced one (a runtime that does not number its messages,
   * contenox as it ships) held by the engine. The engine holds up to 4096;
   * what comes past that while the handler keeps failing, or a held message
   * the page no longer has after a reconnect, is lost, and onEvicted
   * reports it ("evicted") in its place.
   */
  onMessage: (message: any, meta: MessageMeta) => void | Promise<void>;
  /** Told of every change of connection state, and of a fall back to memory storage. Once close() or detach() is called it hears only the attachment's "closed", in either mode (in worker mode a state the worker sent before it heard the call is dropped), and onEvicted nothing. */
  onState?: (state: State, info: StateInfo) => void;
  /** Told when content is gone for good: refetch state rather than append. onState and onEvicted may be left out (or null); anything else but a function rejects attach with bad_options. */
  onEvicted?: (info: Eviction) => void;
  /** Aborts the attach (rejects with code "canceled"). */
  signal?: AbortSignal;
  /** Bound on one dial plus the relay's welcome. Default 10000. */
  handshakeTimeoutMs?: number;
  /**
   * How long a resume may go unanswered before the runtime is taken not to
   * resume (contenox v1.0.0 never answers): sends are released, the
   * connection stays up, and resumable turns false. Default 3000. Only a
   * stream taken up again (a reload, a redial) holds its sends for the
   * answer, so they follow what it missed; a new stream's go at once. The wait
   * ends at the relay's ack of a heartbeat sent then, so an answer that came
   * while the page was stalled still counts. A resume refused (a runtime
   * answering unsupported_type) means the same at once.
   */
  resumeTimeoutMs?: number;
  /** Redial pacing: exponential backoff with full jitter. Defaults 500 and 30000. */
  backoff?: { initialMs?: number; maxMs?: number };
  /**
   * Liveness probes of an open connection. Defaults 15000 and 10000. A page
   * visible again (or back from being frozen or cached) probes at once, and
   * sendACP waits for that probe's ack, timeoutMs at most; if none comes the
   * message goes out on the next connection.
   */
  heartbeat?: { intervalMs?: number; timeoutMs?: number };
  /** How many messages may wait to be sent while reconnecting: a positive integer (else bad_options). Default 256. */
  sendQueue?: number;
  /**
   * The largest frame sendACP sends, in bytes (the message in its envelope):
   * a larger message rejects at once with frame_too_large. It is the relay's
   * limit on a frame from a browser, which discards a larger one and closes
   * the connection, so the message would be reported sent and lost. Default
   * 1048576 (1 MiB, the dev relay's default); raise it for a relay that takes
   * more. An integer from 1 to 16777216, else bad_options.
   */
  maxSendBytes?: number;
}

export interface Attachment {
  /** The stream's stored name: the name asked for, or name#2, name#3 … when that was held elsewhere. */
  readonly name: string;
  /**
   * The connection's state. After close() it is "closed" at once, in
   * either mode (close() ends the attachment within the call). After
   * detach() it is "closed" once its Promise has resolved (onState has
   * heard it by then); until then it may still say what it said: detach()
   * tells the runtime first, and in worker mode waits for the worker's
   * answer.
   */
  readonly state: State;
  /**
   * The seq of the last message onMessage accepted; stored (within the
   * commit window, see LoadOptions.commitWindowMs), so a reload resumes
   * after it. Read in onMessage it is that of the message before the one
   * being delivered, within a batch too, in either mode.
   */
  readonly cursor: number;
  /** The attachment id the relay granted. */
  readonly session: string;
  /** Whether the runtime resumes this stream: StateInfo.resumable as last reported. */
  readonly resumable: boolean;

  onMessage: AttachOptions["onMessage"];
  onState: AttachOptions["onState"] | null;
  onEvicted: AttachOptions["onEvicted"] | null;

  /**
   * Sends one ACP message: an object (serialised with JSON.stringify) or JSON
   * text. Resolves once it is written to the socket; while reconnecting it
   * waits in a bounded queue (send_queue_full when full). Never sent twice:
   * written is not received, and a message written into a connection that
   * then drops without a close (a phone changing networks) may never reach
   * the relay. It is not sent again (at most once): an ACP request that
   * gets no answer is the application's to time out or cancel.
   * A message whose frame is over the relay's browser-leg limit
   * (maxSendBytes: 1 MiB, the dev relay's default), which the relay would
   * discard, closing the connection, rejects at once with frame_too_large
   * and is not sent.
   */
  sendACP(message: object | string, options?: SendOptions): Promise<void>;
  /** Asks for the stream again from after afterSeq; messages this page already had come again with meta.replay set. */
  resume(afterSeq: number): Promise<void>;
  /**
   * The local transcript, both directions, oldest first (see AttachOptions.history):
   * every message whose onMessage has returned (or whose Promise resolved),
   * and every loss onEvicted told, in its place (HistoryLoss).
   *
   * After a reload, messages after the stored cursor may reach onMessage
   * before history() resolves. To redraw the transcript and then append what
   * follows, hold those deliveries until the redraw is done by returning a
   * Promise from onMessage: the cursor waits for it, so each message is in
   * history() or delivered after it, never both (demo/web/app.js does this).
   */
  history(): Promise<HistoryEntry[]>;
  /**
   * Ends the stream for good: tells the runtime, closes the socket, forgets the stored cursor.
   * On an attachment that has ended already (state "closed": unauthorized,
   * superseded, wasm_exited …) it does nothing, and the stored stream
   * stays: its slot was let go when it ended, and another attachment (this
   * page's next attach of the stream, or another tab's) may hold that
   * stream by then. To forget it, attach the stream again and detach that.
   */
  detach(): Promise<void>;
  /** Ends the attachment in this page only: the stored cursor stays and the stream can be attached again. */
  close(): Promise<void>;

  /**
   * The Stream the official ACP SDK connects to, unchanged:
   * `client({...}).connectWith(att.stream(), op)` (@agentclientprotocol/sdk
   * 2.x; 1.x's `new ClientSideConnection(toClient, att.stream())` takes the
   * same). One stream is open on an attachment at a time (else stream_open).
   *
   * - Ids: each request written gets an id of this stream's own on the wire
   *   and its response comes back with the SDK's id, so a response reaches
   *   only the stream whose request it answers. A response to any other
   *   request (a previous page's, before a reload) goes to onMessage and
   *   history(), never to the stream. Requests and notifications from the
   *   agent (session/update, session/request_permission, fs reads) go to the
   *   stream, and the SDK answers them through it. The agent's requests
   *   reach the SDK under ids of the stream's own too, and the app's
   *   answer goes out with the request's wire id only while no new request
   *   with that id has come from the runtime (a JSON-RPC peer does not
   *   reuse an id while its request is pending; it has come once the
   *   attachment delivered it to the stream, before the SDK reads it):
   *   a runtime that restarted
   *   while the stream went on numbers its requests afresh. Once one has,
   *   the SDK gets a $/cancel_request for the old request (its dialog goes
   *   away), and an answer the app gives it is dropped with a console.warn
   *   rather than answering the new request, a permission the user never
   *   gave (the SDK's own answer to that cancel, an error or the
   *   "cancelled" outcome, without one). The runtime's $/cancel_request
   *   for a request reaches the SDK with the stream's id; the SDK's answer
   *   to it goes out as any other. What the stream keeps for a request
   *   that is over (the runtime cancelled it, its turn ended, or a new
   *   request took its id) goes once a turn begun after that has ended
   *   (the response to a session/prompt the SDK sent since), answered or
   *   not, so that dialogs the app never answers do not add up over a
   *   long-lived stream: an answer the SDK gives after that is dropped,
   *   with a console.warn if the app gave it.
   * - Delivery: what arrives from the moment the stream opens; what came
   *   before is in history(). While it is open the stream takes the
   *   messages instead of onMessage. It keeps no queue: a message is handed
   *   over when the SDK reads, and the cursor moves past it only then, so a
   *   reload neither loses a message the SDK had not read nor gives it one it
   *   had. Drops and redials are not seen; writes wait while reconnecting.
   * - Requests still unanswered: on an attachment that keeps a transcript
   *   (AttachOptions.history > 0), the stream first offers the SDK, before
   *   anything live, each request the agent sent before it opened (a
   *   permission request, a file read) that nothing has made moot since: no
   *   response with its id sent after it, no $/cancel_request for it, no
   *   cursor_evicted or session_replaced loss after it, and no end of its
   *   turn: the responses to the session/prompts of its params.sessionId
   *   unanswered when it came (its turn is one of theirs) arrived after it
   *   (a turn cancelled while its dialog was open; nothing waits for the
   *   answer then). The response to one of them alone does not end it (a
   *   prompt sent over a running turn starts a turn of its own). A request
   *   without a sessionId, or of no turn, is not ended that way. So a request a
   *   previous page's SDK (or this page's previous stream's) read and never
   *   answered, a permission dialog open at a reload or when a loss ended
   *   the stream, is asked again instead of leaving the agent waiting;
   *   one answered already is not, and the same request delivered again
   *   live is not handed over twice. Without a transcript (history 0, the
   *   default) nothing says what is unanswered, and such a request is not
   *   offered again. Nor is one that was open when the runtime left the
   *   relay (runtime_gone) while this page was open: the runtime may come
   *   back as a new process that numbers its requests afresh, and an
   *   answer to the old request would answer its new one of the same id.
   *   The agent's turn may then wait, and the app can cancel it. A page
   *   loaded after that cannot tell, and offers it, and neither can a page
   *   that was offline while a new process took the runtime's place: a
   *   request offered again goes stale, as a live one does (see Ids), once
   *   a new request with its wire id comes from the runtime.
   * - A turn's end: once the response to a session/prompt arrives (this
   *   stream's, or an earlier stream's the transcript holds), the agent's
   *   requests of its turn the SDK has not answered are over (a turn
   *   cancelled while its dialog was open, which a runtime need not follow
   *   with $/cancel_request; requests name no prompt, so a request is of
   *   the turn of one of the session/prompts of its params.sessionId
   *   unanswered when it came, and is over once all of them are answered:
   *   a second prompt's request that came before the first prompt's
   *   response stays open, as does a first turn's request when an agent
   *   refuses the second prompt, answering it first; a first turn's
   *   request that came after the second prompt went out keeps its dialog
   *   until the second turn ends, unless the runtime cancels it; a
   *   session/prompt unanswered at a loss, whose response may be gone,
   *   counts for no request that came after the loss, and one that came
   *   before stays open unless that response does come; not so at
   *   runtime_gone, after which the same process may be back, its
   *   requests of that turn): the stream
   *   sends the SDK a
   *   $/cancel_request for each (the dialog goes away), and the SDK's
   *   answer reaches the runtime only if the runtime cancels the request
   *   itself after all, before the session's next turn ends (its
   *   $/cancel_request is not handed to the SDK a second time), and
   *   before a new request with its id comes from the runtime, a turn
   *   begun after the cancel ends (see Ids), or the runtime leaves the
   *   relay (runtime_gone: its new process's request of that id may be on
   *   its way before the stream sees it), which holds too for a request
   *   the runtime cancelled before its turn ended. An answer the app gave anyway (Allow on a dialog left
   *   on screen) is dropped with a console.warn. A request without a
   *   sessionId, or of no turn, is kept.
   * - Errors: the readable errors with the RelayError that ended the
   *   attachment (unauthorized, superseded, detached, closed) or that says
   *   content is gone (an EvictionReason; the attachment stays open then),
   *   so the SDK's connection closes with it. A loss told before anything
   *   written to the stream went out does not end it: the SDK's
   *   conversation begins with its first message, so nothing lost before
   *   was part of it (after a reload against a runtime that does not
   *   resume, not_resumed comes as the stream's first writes go out);
   *   onEvicted still hears of it. A write rejects with sendACP's error
   *   (send_failed, …), which the SDK takes for a dead transport, closing
   *   its connection; but not for a message over the browser leg's limit
   *   (maxSendBytes, frame_too_large), which is answered in its place and
   *   its write resolves: a request gets an error response from the stream
   *   (JSON-RPC code -32603, internal error; error.data.code
   *   "frame_too_large"; the message names the size and the limit), so only
   *   that request fails; a response (the app's answer to the agent's
   *   request, e.g. a large fs/read_text_file) goes to the runtime as such
   *   an error response to its request instead; a notification is dropped,
   *   with a console.error naming its method and size.
   * - Ending it: cancelling the readable (the SDK does when its connection
   *   closes) ends the stream only: the attachment stays open, messages go
   *   to onMessage again, and stream() may be called again. Closing or
   *   aborting the writable closes the attachment (close(): the stored
   *   stream stays resumable). options.signal aborting ends the stream with
   *   canceled.
   *
   * After a reload, open the stream right after attach() resolves, then
   * initialize and session/load the sessionId the page kept (README).
   *
   * It throws, synchronously (it returns no Promise), a RelayError:
   * stream_open when a stream is open already, closed when the attachment
   * has ended, canceled when options.signal has aborted already, and
   * bad_options when options is not an object or its signal is not an
   * AbortSignal.
   */
  stream<M = any>(options?: StreamOptions): AcpStream<M>;
}

/** att.stream()'s options. */
export interface StreamOptions {
  /** Ends the stream (the readable errors with canceled); the attachment stays open. */
  signal?: AbortSignal;
}

/** The ACP SDK's Stream: JSON-RPC messages in and out. */
export interface AcpStream<M = any> {
  readable: ReadableStream<M>;
  writable: WritableStream<M>;
}

export interface SendOptions {
  /** Aborts a send still waiting in the queue (rejects with code "canceled"); one being written goes out. */
  signal?: AbortSignal;
  /**
   * The frame's trace id, the correlation key of the human action the
   * message belongs to: at most 128 bytes of [A-Za-z0-9_-] (librelay's
   * TraceAlphabet); anything else rejects with "bad_options".
   */
  trace?: string;
}

export type State = "connecting" | "open" | "reconnecting" | "offline" | "closed";

export interface StateInfo {
  /** Redials since the connection was last stable. */
  attempt: number;
  /** When a redial is scheduled: in how many milliseconds. */
  retryInMs?: number;
  /** Why the last connection or the attachment ended. */
  code?: ErrorCode;
  message?: string;
  /**
   * Whether the runtime resumes this stream. false once a resume went
   * unanswered for a few seconds (a runtime without retention, as contenox
   * v1.0.0 ships) or was refused: sends then go out at once, and what arrives while the page
   * is away (a drop, a reload) is gone. true before that, and again as soon
   * as the runtime answers a resume or sends a sequenced message. A change
   * of it alone is reported in the same state.
   */
  resumable: boolean;
  /**
   * Where stream state is kept. "memory": IndexedDB is unavailable or failed,
   * see reason. A connection the browser closes under the page (its storage
   * cleared; iOS in the background) is not a failure: it is opened again.
   */
  storage: Storage;
  reason?: StorageFallbackReason;
}

export type StorageFallbackReason = "indexeddb_unavailable" | "indexeddb_blocked" | "indexeddb_failed" | "quota_exceeded";

export interface MessageMeta {
  /** The runtime's sequence number; 0 for an unsequenced message. */
  seq: number;
  /** The attachment id it arrived on. */
  session: string;
  /**
   * Delivered before and fetched again by an explicit resume() to an earlier
   * cursor. What a resume after a drop or a reload brings is new to the page
   * and not marked.
   */
  replay: boolean;
  /** The frame's trace id, "" when untraced: peer-supplied, for logs and joins only. */
  trace: string;
}

export interface Eviction {
  afterSeq: number;
  fromSeq: number;
  /**
   * "evicted": the runtime's retention dropped what this page had not seen,
   * or unsequenced messages held for a failing onMessage were lost (see
   * onMessage); afterSeq is the cursor and fromSeq 0 then;
   * "cursor_evicted": the runtime no longer knows the stream (fromSeq 0);
   * "session_replaced": the relay granted a new attachment id;
   * "frame_too_large": the relay could not carry message afterSeq+1 to this
   * page (over its browser-leg limit); the stream goes on at fromSeq. For an
   * unsequenced message afterSeq is the cursor and fromSeq 0;
   * "not_resumed": after a drop or a reload the runtime did not resume (it
   * keeps nothing, see StateInfo.resumable): what it sent meanwhile is gone.
   * It comes when the wait for the resume's answer ends, up to
   * resumeTimeoutMs after the connection opened, and messages delivered
   * since it opened came after the loss, not before it.
   */
  reason: EvictionReason;
}

/**
 * One entry of a transcript (history()): a message (HistoryMessage), or a
 * loss (HistoryLoss), in the place where messages went missing. Code that
 * reads only e.message still type-checks; it reads undefined from a loss.
 */
export type HistoryEntry = HistoryMessage | HistoryLoss;

export interface HistoryMessage {
  /** true for a message this page sent, false for one received. */
  out: boolean;
  /** The seq a received message arrived with; 0 for sent ones. */
  seq: number;
  message: any;
  lost?: undefined;
}

/**
 * A loss, as onEvicted told it, kept in the transcript where it happened,
 * so a page redrawn after a reload can still show that part of the
 * conversation is missing there. Every reason is kept. A not_resumed loss
 * stands where the connection opened again, before the messages delivered
 * while the resume's answer was awaited (onEvicted told it after them). A
 * page that went away (a reload) after its connection opened again, before
 * that wait ended, left no loss there; the next page's not_resumed loss
 * stands there too, once it is told: one onEvicted, two entries.
 * It is kept only when the transcript is (history > 0), and counts toward
 * history's number of entries like a message.
 */
export interface HistoryLoss {
  out: false;
  seq: 0;
  message?: undefined;
  lost: Eviction;
}

/** Every rejection of this module. */
export class RelayError extends Error {
  readonly name: "RelayError";
  readonly code: ErrorCode;
  /** Set when att.stream()'s readable errored because content is gone (code is its reason). */
  readonly eviction?: Eviction;
}

/** Stable error codes. */
/** Why content is gone (onEvicted's info.reason; a stream's error code). */
export type EvictionReason = "evicted" | "cursor_evicted" | "session_replaced" | "frame_too_large" | "not_resumed";

export type ErrorCode =
  // The attachment ended and will not come back by itself.
  | "unauthorized" // the relay refused the credential
  | "bad_relay_signature" // the relay could not prove it holds the pinned key
  | "unsupported_version" // no protocol version in common
  | "superseded" // another client reclaimed this attachment, or took the tab's stream while the page was in the back/forward cache
  | "detached" // detach() was called
  | "closed" // the attachment is closed
  // Content is gone for good (att.stream()'s readable errors with them; see Eviction).
  | "evicted"
  | "cursor_evicted"
  | "session_replaced"
  | "not_resumed" // the runtime does not resume: what it sent while the page was away is gone
  // One operation failed.
  | "bad_options" // an option is not what it must be, or the browser will not open a socket to url
  | "bad_payload" // sendACP: not a single JSON value
  | "bad_cursor" // resume: not a seq that was delivered
  | "send_queue_full"
  | "send_failed" // the connection dropped while writing; the message may not have arrived
  | "canceled" // the AbortSignal fired: "the operation was aborted"
  | "stream_open" // stream(): the attachment has one open already
  | "timeout"
  // One connection ended; the attachment redials by itself (seen in StateInfo.code).
  | "unknown_instance" // no runtime connected for the instance
  | "runtime_gone"
  | "heartbeat_timeout"
  | "protocol_error"
  | "unreachable" // no socket opened; the message names the URL (browsers do not say why: nothing listening, another path, a refused Origin, TLS)
  | "offline"
  | "malformed_frame"
  | "frame_too_large" // sendACP: over the relay's browser-leg limit, not sent; or close 4413
  | "slow_consumer"
  | "too_many_attachments"
  | "shutting_down"
  | "closed_by_relay" // a close code this client does not know
  // Loading.
  | "wasm_load_failed"
  | "wasm_exited" // relay.wasm stopped (a Go panic; out of memory), or in worker mode its worker failed (a trap, an error it did not catch; relay.js ends it) or the browser ended it (seen by a Web Lock the worker held): every live attachment's onState hears "closed" with it, once, and every call waiting or made after rejects with it; the getters keep their last values. Load the page again
  | "error"; // anything else
