// errors.js: RelayError, and how failures are kept from crossing the
// boundary in a shape Go cannot read.

import { CODE_BAD_OPTIONS } from "./boundary.js";

/** An error with a stable code; every rejection of this module is one. */
export class RelayError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "RelayError";
    this.code = code;
  }
}

// asError makes any thrown value an Error. JavaScript can throw anything (a
// string, a BigInt, undefined); relay.wasm reads what it is handed through
// safejs, which reads an exception's message and cannot describe a value
// that has none. So nothing but an Error ever reaches Go.
export function asError(e) {
  if (e instanceof Error) return e;
  if (e !== null && typeof e === "object" && typeof e.name === "string" && typeof e.message === "string") return e; // a DOMException of another realm
  let text;
  try {
    text = String(e);
  } catch {
    text = Object.prototype.toString.call(e);
  }
  return new Error(text);
}

// guarded returns fn, made to throw only Errors (see asError).
export function guarded(fn) {
  return function (...args) {
    try {
      return fn.apply(this, args);
    } catch (e) {
      throw asError(e);
    }
  };
}

// toGo wraps a Go callback for calls from browser events: an exception must
// not escape into the event loop. The one expected exception is a Go program
// that has exited (a test binary at its end) while sockets still close.
export function toGo(fn) {
  return (...args) => {
    try {
      return fn(...args);
    } catch (e) {
      if (e?.message !== "Go program has already exited") console.error("relay.js: relay.wasm failed:", e);
    }
  };
}

// report says on the console that an application handler failed; it never
// throws into Go.
export function report(what, e) {
  console.error(`relay.js: the ${what} handler failed:`, e);
}

// guard runs an application handler that may return a Promise.
export function guard(what, fn) {
  try {
    const r = fn();
    if (r && typeof r.then === "function") r.then(undefined, (e) => report(what, e));
  } catch (e) {
    report(what, e);
  }
}

// settling is the entry of a call that an AbortSignal may cancel
// ({resolve, reject}): onAbort runs if the signal aborts before the call
// settles, and the listener goes once it settles, so an application that
// passes one long-lived signal to every call does not keep a listener per
// call it ever made.
export function settling(signal, onAbort, resolve, reject) {
  if (!signal) return { resolve, reject };
  signal.addEventListener("abort", onAbort, { once: true });
  const done = (fn) => (v) => {
    signal.removeEventListener("abort", onAbort);
    fn(v);
  };
  return { resolve: done(resolve), reject: done(reject) };
}

/**
 * checkSignal throws a RelayError bad_options unless signal is an
 * AbortSignal (or none: undefined or null). What settling is given must
 * be one: anything else failed there with the engine's TypeError.
 */
export function checkSignal(signal) {
  if (signal === undefined || signal === null) return;
  if (typeof signal === "object" && typeof signal.aborted === "boolean" && typeof signal.addEventListener === "function") return;
  throw new RelayError(CODE_BAD_OPTIONS, `signal must be an AbortSignal, not ${kindOf(signal)}`);
}

/** kindOf names what kind of value v is, for a message: "null", "a string", "an object" … */
export function kindOf(v) {
  if (v === null) return "null";
  const t = Array.isArray(v) ? "array" : typeof v;
  return (/^[aeiou]/.test(t) ? "an " : "a ") + t;
}
