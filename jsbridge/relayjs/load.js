// load.js: fetching, instantiating and starting relay.wasm, once per page.

import { CODE_WASM_EXITED, CODE_WASM_LOAD_FAILED } from "./boundary.js";
import { RelayError } from "./errors.js";

/**
 * start loads wasm_exec.js when globalThis.Go is missing, instantiates
 * relay.wasm and runs it, and resolves once relay.wasm registered its API
 * with the bridge B. Every failure is a RelayError: wasm_load_failed when
 * relay.wasm could not be fetched, compiled or started, or is from another
 * build than this relay.js.
 */
export async function start(B, options) {
  try {
    if (typeof globalThis.Go !== "function") {
      // wasm_exec.js is a classic script that defines globalThis.Go; it
      // evaluates as a module just as well, with no eval involved.
      await import(String(options.wasmExec ?? new URL("./wasm_exec.js", import.meta.url)));
    }
    const go = new globalThis.Go();
    const source = options.wasm ?? new URL("./relay.wasm", import.meta.url);
    const instance = await instantiate(source, go.importObject);
    let started = false;
    const exited = go.run(instance).then(() => {
      if (!started) {
        throw new RelayError(CODE_WASM_LOAD_FAILED, "relay.wasm exited before it registered with relay.js: it is not from the same build");
      }
    });
    exited.catch(() => {});
    await Promise.race([B.ready, exited]);
    started = true;
    exited.then(() => console.error(new RelayError(CODE_WASM_EXITED, "relay.wasm exited")));
  } catch (e) {
    if (e instanceof RelayError) throw e;
    throw new RelayError(CODE_WASM_LOAD_FAILED, `could not start relay.wasm: ${e?.message ?? e}`);
  }
}

async function instantiate(source, imports) {
  if (source instanceof WebAssembly.Module) return WebAssembly.instantiate(source, imports);
  const response = source instanceof Response ? source : await fetch(source);
  if (!response.ok) throw new Error(`HTTP ${response.status} for ${response.url}`);
  try {
    return (await WebAssembly.instantiateStreaming(response.clone(), imports)).instance;
  } catch (e) {
    // A server that does not send application/wasm: compile from the bytes.
    if (!(e instanceof TypeError)) throw e;
    return (await WebAssembly.instantiate(await response.arrayBuffer(), imports)).instance;
  }
}
