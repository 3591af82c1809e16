// compile.js: fetching and compiling relay.wasm, and the compile that
// preload.js starts before the page's modules have loaded. It imports
// nothing, so preload.js ships as one small file that runs as soon as it
// arrives.

/**
 * compile compiles relay.wasm from a URL, a Response or a compiled module.
 * It streams (compileStreaming: the engine decodes while the bytes arrive)
 * when the server sends application/wasm, which streaming requires; any
 * other type is compiled from the whole body, so a server that does not
 * know .wasm still serves a working module.
 */
export async function compile(source) {
  if (source instanceof WebAssembly.Module) return source;
  const response = source instanceof Response ? source : await fetch(source);
  if (!response.ok) throw await refused(response);
  if (typeof WebAssembly.compileStreaming === "function" && isWasm(response)) {
    return WebAssembly.compileStreaming(response);
  }
  const bytes = await response.arrayBuffer();
  if (!isModule(bytes)) throw notModule(response, bytes);
  return WebAssembly.compile(bytes);
}

// MAGIC is how every WebAssembly module begins: "\0asm".
const MAGIC = [0x00, 0x61, 0x73, 0x6d];

function isModule(bytes) {
  const head = new Uint8Array(bytes, 0, Math.min(bytes.byteLength, MAGIC.length));
  return MAGIC.every((b, i) => head[i] === b);
}

/**
 * notModule is the error for a body that is not a module at all. Servers
 * of single-page apps answer a path they do not have with the app's page
 * and 200, and the engines' own error for that ("expected magic word 00 61
 * 73 6d, found 3c 21 64 6f") does not say that a page came instead.
 */
function notModule(response, bytes) {
  const text = new TextDecoder().decode(new Uint8Array(bytes, 0, Math.min(bytes.byteLength, 60)));
  const type = response.headers.get("content-type") || "no Content-Type";
  return new Missing(`${response.url || "the Response given"} is not a WebAssembly module: it came as ${type}, beginning ${JSON.stringify(text)}`);
}

/**
 * refused is the error for a response that is not relay.wasm, with the
 * start of what the server said. Its body is read to the end, not left
 * unread: an unread body keeps the connection busy, and the engines report
 * the request to resource timing only when its body ended, at a moment of
 * their choosing otherwise (whatwg/fetch#1813).
 */
async function refused(response) {
  const said = await response.text().then((text) => text.trim().slice(0, 200), () => "");
  const Kind = response.status === 404 || response.status === 410 ? Missing : Error;
  return new Kind(`HTTP ${response.status} for ${response.url}${said ? ": " + said : ""}`);
}

/**
 * Missing is a server's answer that relay.wasm is not at the URL asked (404
 * or 410, or something else in its place), as opposed to no answer or a
 * server in trouble.
 */
export class Missing extends Error {}

function isWasm(response) {
  const type = response.headers.get("content-type") ?? "";
  return type.split(";")[0].trim().toLowerCase() === "application/wasm";
}

/**
 * pageURL is url, a URL given to loadRelay, made absolute as the page's
 * own fetch() would make it: against the document's base URL (a <base
 * href> sets it), or a worker's location in a worker. relay.js's fetch of
 * relay.wasm resolves so by itself; wasm_exec.js's import() and what
 * crosses to a worker must be made absolute first.
 */
export function pageURL(url) {
  return String(new URL(String(url), globalThis.document?.baseURI ?? location.href));
}

// EARLY names the compile preload started, { href, compiled }, until a
// loadRelay for the same URL takes it. It is kept on globalThis, not in this
// module, because preload.js and relay.js each ship as one file holding
// their own copy of this module (jsbridge/bundle), and an app's bundler may
// keep them apart too.
const EARLY = Symbol.for("relaywasm.preload");

/**
 * preload starts compiling the relay.wasm at url now, for the loadRelay
 * that later asks for the same URL (by default, or as its wasm option).
 * A failure is that loadRelay's to report, after it has tried once more.
 */
export function preload(url) {
  const compiled = compile(url);
  compiled.catch(() => {}); // not unhandled: the loadRelay that takes it sees it
  globalThis[EARLY] = { href: String(url), compiled };
}

/**
 * preloaded says whether source is a URL whose compile preload started and
 * no loadRelay has taken yet.
 */
export function preloaded(source) {
  const early = globalThis[EARLY];
  if (early === undefined || source instanceof Response || source instanceof WebAssembly.Module) return false;
  try {
    return pageURL(source) === early.href;
  } catch {
    return false; // not a URL: compile reports it
  }
}

/**
 * handBack makes compiled the compile a later compileSource(source) takes,
 * as preload's would be: the page's compile for a worker that could not
 * start serves the main thread instead.
 */
export function handBack(source, compiled) {
  globalThis[EARLY] = { href: pageURL(source), compiled };
}

/**
 * compileSource is compile(source), except that a compile preload started
 * for the same URL is taken instead of fetching again. A preload that failed
 * (the network dropped while the page loaded) is tried once more here.
 */
export function compileSource(source) {
  if (!preloaded(source)) return compile(source);
  const { compiled } = globalThis[EARLY];
  delete globalThis[EARLY];
  return compiled.catch(() => compile(source));
}
