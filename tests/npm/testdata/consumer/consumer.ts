// Type-checked by tests/npm against the installed tarball: the package's
// types must resolve, and must be the real ones (the @ts-expect-error lines
// fail the check if they were `any`).
import "relaywasm/preload"; // a side-effect import, checked (noUncheckedSideEffectImports)
import { loadRelay, RelayError } from "relaywasm";
import type { Attachment, Relay } from "relaywasm";

export async function attach(): Promise<Attachment> {
  const relay: Relay = await loadRelay({ storage: "memory" });
  const att = await relay.attach({
    url: "ws://127.0.0.1:8080/v1/attach",
    instance: "demo",
    token: "dev-token",
    onMessage(msg, meta) {
      const seq: number = meta.seq;
      void msg, seq;
    },
  });
  // @ts-expect-error: storage is "indexeddb" or "memory"
  await loadRelay({ storage: "disk" });
  // @ts-expect-error: attach needs its options
  await relay.attach();
  return att;
}

export function codeOf(e: unknown): string {
  return e instanceof RelayError ? e.code : "";
}
