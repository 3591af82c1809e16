// attachment.js: what the page's two kinds of Attachment share: relay.js's,
// whose engine runs on this thread, and remote.js's, the proxy of one that
// runs in a worker. The handlers, the token, resumable, stream(), the
// checks of what sendACP and resume are given, and the url an attach names,
// so that both modes take and refuse the same arguments and report the same
// to the same handlers.

import { CODE_BAD_CURSOR, CODE_BAD_OPTIONS, CODE_BAD_PAYLOAD } from "./boundary.js";
import { guard, RelayError } from "./errors.js";
import { openStream } from "./stream.js";

export class BaseAttachment {
  #token;
  #resumable = true; // the last onState info's resumable
  #where = { storage: "indexeddb" }; // the last onState info's storage and reason
  _tap = null; // the open stream() (stream.js): it takes the deliveries while set

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

  async _token() {
    const t = typeof this.#token === "function" ? await this.#token() : this.#token;
    if (typeof t !== "string") throw new TypeError("the token function must resolve to a string");
    return t;
  }
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
