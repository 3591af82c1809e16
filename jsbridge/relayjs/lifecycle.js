// lifecycle.js: the browser lifecycle, for every attachment of the page:
// redial at once when the network comes back, close the socket when it goes
// (a browser does not close a socket on its own when offline), probe the
// connection when the page becomes visible (a sleeping tab may have lost it
// unnoticed), and write the stored cursors at once when it is hidden or goes
// away (pagehide: a reload, a navigation; hidden: a phone may kill a
// background tab without another event), instead of at the end of the commit
// window. pagehide also remembers the slots held, for the next load of the
// tab to lock before relay.wasm runs (tabs.js). Nothing else happens on
// pagehide: no detach, so a reload finds the attachment id still held by
// the relay and reclaims it. A page going into the back/forward cache
// (pagehide, persisted) lets its slots' locks go, and asks for them again
// when it is back (pageshow, persisted; tabs.js suspendSlots). A page back
// from the cache or from being frozen (resume) probes as a visible one
// does.

import { rememberSlots, resumeSlots, suspendSlots } from "./tabs.js";

let listening = false;

export function listenToLifecycle(B) {
  if (listening || typeof addEventListener !== "function") return;
  listening = true;
  addEventListener("online", () => B.api.online(true));
  addEventListener("offline", () => B.api.online(false));
  addEventListener("pagehide", (ev) => {
    B.writeAll();
    rememberSlots();
    if (ev.persisted) suspendSlots();
  });
  // A page restored from the back/forward cache had its socket cut while it
  // was there (Chrome on Android does; WebKit and Firefox close it too):
  // check at once rather than after a timer. So for a page that was frozen
  // in the background (Chrome's Page Lifecycle: freeze, then resume), which
  // the relay may have given up on meanwhile.
  addEventListener("pageshow", (ev) => {
    if (!ev.persisted) return;
    resumeSlots();
    B.api.probe();
  });
  globalThis.document?.addEventListener("freeze", () => B.writeAll());
  globalThis.document?.addEventListener("resume", () => B.api.probe());
  globalThis.document?.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") B.api.probe();
    else B.writeAll();
  });
}
