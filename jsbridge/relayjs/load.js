// load.js: instantiating and starting relay.wasm, once per page (compile.js fetches and compiles it).

import { CODE_WASM_EXITED, CODE_WASM_LOAD_FAILED } from "./boundary.js";
import { compileSource } from "./compile.js";
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
    // relay.wasm is fetched and compiled while wasm_exec.js loads: neither
    // waits for the other, and only instantiating needs both.
    // preload.js may have started it already.
    const compiled = compileSource(options.wasm ?? new URL("./relay.wasm", import.meta.url));
    compiled.catch(() => {}); // awaited below; a failure of wasm_exec.js comes first
    if (typeof globalThis.Go !== "function") {
      // wasm_exec.js is a classic script that defines globalThis.Go; it
      // evaluates as a module just as well, with no eval involved.
      await import(String(options.wasmExec ?? new URL("./wasm_exec.js", import.meta.url)));
    }
    const go = new globalThis.Go();
    const instance = await WebAssembly.instantiate(await compiled, go.importObject);
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
