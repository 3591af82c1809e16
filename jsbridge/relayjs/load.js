// load.js: instantiating and starting relay.wasm, once per page (compile.js fetches and compiles it).

import { CODE_WASM_EXITED, CODE_WASM_LOAD_FAILED } from "./boundary.js";
import { compileSource, Missing, pageURL } from "./compile.js";
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
    const compiled = compileSource(options.wasm ?? new URL("./relay.wasm", import.meta.url)).catch((e) => {
      throw options.wasm === undefined && e instanceof Missing ? notBeside(e) : e;
    });
    compiled.catch(() => {}); // awaited below; a failure of wasm_exec.js comes first
    if (typeof globalThis.Go !== "function") await loadGo(options.wasmExec);
    const go = new globalThis.Go();
    const instance = await WebAssembly.instantiate(await compiled, go.importObject);
    let started = false;
    const exited = go.run(instance).then(() => {
      if (!started) {
        throw new RelayError(CODE_WASM_LOAD_FAILED, "relay.wasm exited before it registered with relay.js: it is not from the same build");
      }
    });
    exited.catch(() => {});
    let code = null;
    const exit = go.exit.bind(go);
    go.exit = (c) => {
      code = c;
      exit(c);
    };
    await Promise.race([B.ready, exited]);
    started = true;
    exited.then(() => {
      stopTimers(go);
      const e = new RelayError(CODE_WASM_EXITED, `relay.wasm exited${code === null ? "" : ` with code ${code}`} (a Go panic, or out of memory; what it printed is on the console): load the page again`);
      console.error(e);
      B.exited(e);
    });
  } catch (e) {
    if (e instanceof RelayError) throw e;
    const why = String(e?.message ?? e);
    throw new RelayError(CODE_WASM_LOAD_FAILED, `could not start relay.wasm: ${why}${refusedByPolicy(why) ? POLICY_CURE : ""}`);
  }
}

// stopTimers clears the timers Go scheduled and will never see fire:
// wasm_exec.js's timer, firing after Go exited, throws "Go program has
// already exited" into the page, one uncaught error for each.
// _scheduledTimeouts is wasm_exec.js's own (a Map of setTimeout ids); a Go
// without it (an application's own wasm_exec.js) is left as it is.
function stopTimers(go) {
  const timers = go._scheduledTimeouts;
  if (!(timers instanceof Map)) return;
  for (const id of timers.values()) clearTimeout(id);
  timers.clear();
}

// POLICY_CURE is what a page whose Content-Security-Policy refused
// relay.wasm must change. The engines' own words do not all say it:
// Chromium's name only 'unsafe-eval' (far more than WebAssembly needs), and
// Firefox's only "blocked by CSP"; WebKit's name both.
const POLICY_CURE = " (the Content-Security-Policy must allow 'wasm-unsafe-eval' in script-src; WebAssembly needs no more, not 'unsafe-eval')";

/** refusedByPolicy says whether an engine's error is a Content-Security-Policy's refusal. */
function refusedByPolicy(why) {
  return /\bCSP\b|Content.Security.Policy/i.test(why);
}

/**
 * loadGo loads wasm_exec.js, a classic script that defines globalThis.Go;
 * it evaluates as a module just as well, with no eval involved. The
 * comments keep bundlers from taking the import for one of their own:
 * webpack would otherwise look the emitted file's URL up in a map of its
 * modules at run time and fail ("Cannot find module"). The new URL(...) is
 * what has them emit wasm_exec.js.
 */
async function loadGo(wasmExec) {
  const url = wasmExec === undefined ? String(wasmExecBeside()) : pageURL(wasmExec);
  try {
    await import(/* webpackIgnore: true */ /* @vite-ignore */ url);
  } catch (e) {
    // WebKit's message names no URL ("Importing a module script failed.").
    const why = `wasm_exec.js did not load from ${url}: ${e?.message ?? e}`;
    throw wasmExec === undefined ? notBeside(why) : new Error(why);
  }
}

/**
 * wasmExecBeside is wasm_exec.js's default URL: beside relay.js, or where
 * a bundler emitted it.
 */
export function wasmExecBeside() {
  return new URL("./wasm_exec.js", import.meta.url);
}

/**
 * notBeside adds to an error fetching one of relay.js's files from its
 * default place where that place is, and what to do. Bundlers that emit
 * new URL("./file", import.meta.url) as an asset (Vite, webpack) put the
 * files there; esbuild and Rollup leave the expression as written, so the
 * files must be copied beside their output, or named by loadRelay's
 * options. Vite's dev server before Vite 8 bundles relay.js into its
 * dependency cache (node_modules/.vite/deps/relaywasm.js?v=…) and leaves
 * the files where npm put them, the URLs unrewritten (checked with Vite
 * 7.3): there one setting keeps relay.js where npm put it, and the error
 * names it.
 */
function notBeside(e) {
  const what = inViteCache(import.meta.url)
    ? `, and Vite's dependency optimizer moved it into its cache without them, as Vite 7 and earlier do: add optimizeDeps: { exclude: ["relaywasm"] } to vite.config`
    : ": copy them there from the package where a bundler did not, or name them with loadRelay's wasm and wasmExec";
  return new Error(`${e?.message ?? e} (relay.js loads relay.wasm, wasm_exec.js and worker.js from beside itself${what})`);
}

/**
 * inViteCache says whether url is a module of Vite's dependency cache: a
 * file of its deps folder (or of the deps_temp_… it fills) served with
 * the cache's version as ?v=, wherever its cacheDir is.
 */
function inViteCache(url) {
  const u = new URL(url);
  return /\/deps(_temp_[^/]*)?\/[^/]+$/.test(u.pathname) && u.searchParams.has("v");
}
