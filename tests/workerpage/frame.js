// frame.js: page.js's window.__w, mirrored to the page that holds this one
// in a frame (another site's, tests/e2e/frame_test.go), which a test can
// read where it cannot reach into the frame. Every 50 ms it posts what the
// test reads of __w; a message {prompt} from that page is __w.prompt's.
const W = window.__w; // page.js ran first: module scripts run in order

addEventListener("message", (ev) => {
  if (ev.source === parent && typeof ev.data?.prompt === "string") W.prompt(ev.data.prompt);
});

setInterval(() => {
  const { ready, error, mode, reason, hist, live, states } = W;
  parent.postMessage({ ready, error, mode, reason, hist, live, states, origin: globalThis.origin }, "*");
}, 50);
