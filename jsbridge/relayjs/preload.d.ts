// Type declarations of preload.js, which exports nothing: a page imports it
// (import "relaywasm/preload") or loads it in a script of its own for its
// one effect, starting relay.wasm's fetch and compile (see relay.d.ts,
// LoadOptions.wasm).
export {};
