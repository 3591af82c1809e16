// Type declarations of preload.js, which exports nothing: a page imports it
// (import "relaywasm/preload") or loads it in a script of its own for its
// effects: starting relay.wasm's fetch and compile (see relay.d.ts,
// LoadOptions.wasm) and, on a reload, asking for the slot locks the page
// held (tabs.js).
export {};
