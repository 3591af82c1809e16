// attachment.js: what the page's two kinds of Attachment share: relay.js's,
// whose engine runs on this thread, and remote.js's, the proxy of one that
// runs in a worker. The handlers, the token, resumable, stream(), the
// checks of what sendACP and resume are given, and the url an attach names,
// so that both modes take and refuse the same arguments and report the same
// to the same handlers.

import { CODE_BAD_CURSOR, CODE_BAD_OPTIONS, CODE_BAD_PAYLOAD, CODE_CLOSED, MAX_FRAME_BYTES } from "./boundary.js";
import { checkSignal, guard, kindOf, RelayError } from "./errors.js";
import { openStream } from "./stream.js";

export class BaseAttachment {
  #token;
  #resumable = true; // the last onState info's resumable
  #where = { storage: "indexeddb" }; // the last onState info's storage and reason
  _tap = null; // the open stream() (stream.js): it takes the deliveries while set
  _quit = false; // close() or detach() was called, or the attachment ended: no token is asked for (_token)

  constructor(handle, options) {
    this._handle = handle;
    this.#token = options.token;
    this.onMessage = options.onMessage;
    this.onState = options.onState ?? null;
    this.onEvicted = options.onEvicted ?? null;
  }

  /** Whether the runtime resumes this stream (the last state info's resumable). */
  get resumable() {
    return this.#resumable;
  }

  /** The ACP SDK's Stream over this attachment (stream.js). */
  stream(options) {
    return openStream(this, options);
  }

  _state(state, info) {
    this._tap?.state(state, info);
    if (typeof info?.resumable === "boolean") this.#resumable = info.resumable;
    if (typeof info?.storage === "string") this.#where = info.reason === undefined ? { storage: info.storage } : { storage: info.storage, reason: info.reason };
    if (this.onState) guard("onState", () => this.onState(state, info));
  }

  /**
   * _closedBy tells the handlers, as Go would have, that the attachment
   * ended with err (a RelayError) without Go: relay.wasm exited.
   */
  _closedBy(err) {
    this._state("closed", { attempt: 0, resumable: this.#resumable, ...this.#where, code: err.code, message: err.message });
  }

  _evicted(info) {
    this._tap?.evicted(info);
    if (this.onEvicted) guard("onEvicted", () => this.onEvicted(info));
  }

  // The token for a dial. Once the application called close() or detach(),
  // a redial already under way gets none: the token function is not called
  // (an app may have torn down the session it refreshes tokens from), and
  // one it had called is not waited for: the dial fails, and does not go.
  async _token() {
    if (this._quit) throw closedNow();
    const t = typeof this.#token === "function" ? await this.#token() : this.#token;
    if (this._quit) throw closedNow();
    if (typeof t !== "string") throw new TypeError("the token function must resolve to a string");
    return t;
  }
}

function closedNow() {
  return new RelayError(CODE_CLOSED, "the attachment is closed: no token is asked for");
}

/** meta is what onMessage is given beside a delivered frame's payload. */
export function meta(f, replay) {
  return { seq: f.seq ?? 0, session: f.session ?? "", replay, trace: f.trace ?? "" };
}

/** sendArgs checks sendACP's arguments and returns [JSON text, trace]; it throws a RelayError. */
export function sendArgs(message, options) {
  let text = message;
  if (typeof message !== "string") {
    try {
      text = JSON.stringify(message);
    } catch (e) {
      throw new RelayError(CODE_BAD_PAYLOAD, `message is not JSON: ${e.message}`);
    }
    if (text === undefined) throw new RelayError(CODE_BAD_PAYLOAD, "message is not JSON");
  }
  if (typeof options !== "object" || options === null) throw new RelayError(CODE_BAD_OPTIONS, `sendACP's options must be an object, not ${kindOf(options)}`);
  checkSignal(options.signal);
  const trace = options.trace ?? "";
  if (typeof trace !== "string") throw new RelayError(CODE_BAD_OPTIONS, "trace must be a string");
  return [text, trace];
}

/** checkCursor throws unless afterSeq is a seq resume() can take. */
export function checkCursor(afterSeq) {
  if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) {
    throw new RelayError(CODE_BAD_CURSOR, "afterSeq must be a seq (a non-negative integer)");
  }
}

/**
 * urlText is an attach's url as the stream is stored under it, and as it
 * crosses to a worker (a URL cannot): a URL's href, anything else as it is
 * (relay.js's checks refuse what is not a string).
 */
export function urlText(url) {
  return url instanceof URL ? url.href : url;
}

function bad(what) {
  throw new RelayError(CODE_BAD_OPTIONS, what);
}

/**
 * streamOf checks what names a stored stream, as attach takes it: its url
 * (a string or a URL, made a string), instance and name.
 */
export function streamOf(options, op) {
  if (typeof options !== "object" || options === null) bad(`${op} needs an options object`);
  const { instance, name = "default" } = options;
  const url = urlText(options.url);
  if (url === undefined || url === "") bad("url is required");
  if (typeof url !== "string") bad(`url must be a string or a URL, not ${typeof url}`);
  if (!webSocketURL(url)) bad(`url must be an absolute ws:// or wss:// URL, not ${JSON.stringify(url)}`);
  if (typeof instance !== "string" || instance === "") bad("instance is required");
  if (typeof name !== "string" || name === "") bad("name must be a non-empty string");
  return { url, instance, name };
}

/**
 * checkAttach checks attach's options, once, on the page, in either mode,
 * and returns what of them the engine takes as a plain object: only the
 * keys attach knows, each read once, backoff and heartbeat made objects of
 * their own, undefined where the default applies, and the token a string
 * or null (a function stays on the page). That is what crosses to a worker:
 * the options as an application holds them may not survive the structured
 * clone (a Vue reactive() or MobX Proxy, a function or a DOM node under a
 * key attach does not read), where the main thread takes them.
 */
export function checkAttach(options) {
  const { url, instance, name } = streamOf(options, "attach");
  const { token, relayKey, history = 0, sendQueue, maxSendBytes } = options;
  if (typeof token !== "string" && typeof token !== "function") bad("token must be a string or a function");
  if (typeof options.onMessage !== "function") bad("onMessage is required");
  // The other handlers are optional, but one given must be callable: it
  // is called on every event, where it failed each time.
  for (const k of ["onState", "onEvicted"]) {
    const f = options[k];
    if (f !== undefined && f !== null && typeof f !== "function") bad(`${k} must be a function, not ${kindOf(f)}`);
  }
  checkSignal(options.signal);
  if (!Number.isSafeInteger(history) || history < 0) bad("history must be a count");
  // relay.wasm reads a relayKey that is not a string as none: a key given
  // as bytes would turn the pinning off without a word.
  if (relayKey !== undefined && typeof relayKey !== "string") bad("relayKey must be a string (librelay.FormatPublicKey's), not bytes or another value");
  if (sendQueue !== undefined && !(Number.isSafeInteger(sendQueue) && sendQueue > 0)) bad("sendQueue must be a positive count");
  if (maxSendBytes !== undefined && !(Number.isSafeInteger(maxSendBytes) && maxSendBytes > 0 && maxSendBytes <= MAX_FRAME_BYTES)) {
    bad(`maxSendBytes must be a count of bytes from 1 to ${MAX_FRAME_BYTES}`);
  }
  const ms = (v) => (v === undefined || (Number.isFinite(v) && v > 0) ? v : bad("durations are positive milliseconds"));
  const { backoff, heartbeat } = options;
  return {
    url,
    instance,
    name,
    token: typeof token === "string" ? token : null,
    relayKey,
    history,
    handshakeTimeoutMs: ms(options.handshakeTimeoutMs),
    resumeTimeoutMs: ms(options.resumeTimeoutMs),
    backoff: { initialMs: ms(backoff?.initialMs), maxMs: ms(backoff?.maxMs) },
    heartbeat: { intervalMs: ms(heartbeat?.intervalMs), timeoutMs: ms(heartbeat?.timeoutMs) },
    sendQueue,
    maxSendBytes,
  };
}

// webSocketURL says whether url is one every engine's WebSocket takes:
// absolute, ws: or wss:. Newer engines also take http(s) and relative URLs,
// which older Safari refuses, and a URL refused is no dial to retry.
function webSocketURL(url) {
  try {
    const { protocol } = new URL(url);
    return protocol === "ws:" || protocol === "wss:";
  } catch {
    return false;
  }
}
