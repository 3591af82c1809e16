// A scripted relay inside the page, for tests that need frames a real relay
// never sends (odd envelopes, garbage, duplicates, gaps): it stands in for
// WebSocket for URLs under ws://fake.invalid/ and answers the client's
// hello and resumes itself; the test pushes the rest.

const PREFIX = "ws://fake.invalid/";
let installed = false;
let nextRelay = 1;
const relays = new Map(); // url -> relay

function install() {
  if (installed) return;
  installed = true;
  const Real = globalThis.WebSocket;
  class FakeWebSocket {
    static Real = Real.Real ?? Real; // the browser's, for tests that watch the real sockets' sends (app.js)
    static CONNECTING = 0;
    static OPEN = 1;
    static CLOSING = 2;
    static CLOSED = 3;
    constructor(url, protocols) {
      const relay = relays.get(String(url));
      if (!relay) return new Real(url, protocols);
      this.readyState = 0;
      this.protocol = "";
      this.relay = relay;
      relay.socket = this;
      setTimeout(() => {
        this.readyState = 1;
        this.protocol = protocols[0];
        this.onopen?.({});
      }, 0);
    }
    send(text) {
      if (this.readyState !== 1) throw new DOMException("not open", "InvalidStateError");
      this.relay.received(JSON.parse(text));
    }
    close(code = 1000, reason = "") {
      if (this.readyState >= 2) return;
      this.readyState = 2;
      setTimeout(() => {
        this.readyState = 3;
        this.onclose?.({ code, reason });
      }, 0);
    }
    // push delivers messages from the relay, one event each, in this task.
    // A text starting with "binary:" goes as a binary message of the rest.
    push(...texts) {
      for (const text of texts) {
        const data = text.startsWith("binary:") ? new TextEncoder().encode(text.slice(7)).buffer : text;
        if (this.readyState === 1) this.onmessage?.({ data });
      }
    }
  }
  globalThis.WebSocket = FakeWebSocket;
}

// fakeRelay makes a relay at a fresh URL. cfg names the frame types and the
// protocol version (the Go test takes them from librelay). onResume(after),
// when set, runs after each resume is answered.
export function fakeRelay(cfg) {
  install();
  const r = {
    url: `${PREFIX}${nextRelay++}`,
    session: "att-fake",
    instance: "",
    socket: null,
    resumes: [], // after_seq of each resume asked for
    answered: 0, // resumes answered
    acks: [], // re of each relay.ack
    hellos: 0, // relay.hello frames: one per dial
    nonces: [], // the nonce of each hello, base64 as sent
    heartbeats: 0, // relay.heartbeat requests from the client
    onResume: null,
  };
  const reply = (f) => r.socket.push(JSON.stringify(f));
  r.received = (f) => {
    switch (f.type) {
      case cfg.hello:
        r.hellos++;
        r.nonces.push(f.payload?.nonce);
        r.instance = f.instance;
        setTimeout(() =>
          reply({
            type: cfg.welcome, re: f.id, instance: f.instance, session: r.session,
            payload: { protocol_version: cfg.version, relay: "fake" },
          }), 0);
        break;
      case cfg.resume:
        r.resumes.push(f.payload.after_seq);
        setTimeout(() => {
          reply({
            type: cfg.resumed, re: f.id, instance: r.instance, session: r.session,
            payload: { from_seq: f.payload.after_seq + 1 },
          });
          r.answered++;
          r.onResume?.(f.payload.after_seq);
        }, 0);
        break;
      case cfg.ack:
        r.acks.push(f.re);
        break;
      case cfg.heartbeat:
        r.heartbeats++;
        break;
    }
  };
  r.push = (...texts) => r.socket.push(...texts);
  r.until = (pred, what) =>
    new Promise((resolve, reject) => {
      const t0 = Date.now();
      const poll = () => {
        if (pred(r)) resolve();
        else if (Date.now() - t0 > 15000) reject(new Error(`timed out waiting for ${what}`));
        else setTimeout(poll, 5);
      };
      poll();
    });
  relays.set(r.url, r);
  return r;
}
