// held.js: the payload texts relay.js holds for a transcript, so that they
// never cross into Go and back (a socket dialed in MODE_PARSE_HOLD).
//
// With a transcript, every payload a stream receives is written to the
// store. Handed to Go with its envelope (MODE_PARSE_KEEP), each was encoded
// into the in buffer, copied into Go's memory, kept there until the commit
// (work for Go's collector), packed, and copied out again. Held here, Go
// gets the envelope only, commits the entry by its ref (ENTRY_HELD), and
// relay.js puts the text in before the store keeps the entry (entries.js
// unhold).
//
// A text is held from the flush that parsed its message until the commit
// of its entry, or of an entry of a message read after it: the engine
// commits entries in the order it read their frames, across the
// attachment's sockets (wasm/client RefFrameReader), so no later commit
// asks for it. Not until the socket's close: a socket that breaks during a
// delivery is closed at once, and what that delivery accepted is committed
// after. What no commit took goes when the attachment ends (release). The
// refs of an attachment's sockets grow from one socket to the next (a
// socket's handle is in its refs, and handles only grow), so an
// attachment's texts wait in one queue, in the order of their refs.
//
// Nor does the attachment remember every socket it had: a tab open for days
// reconnects thousands of times. A socket is forgotten once no commit can
// take a text of its: when a commit takes a text of a later socket (the
// commit order), or when a later socket joins while no text is held (the
// engine dials the next socket only once it has closed this one: no text
// of it comes after). Texts still held when the next socket joins (messages
// never accepted) keep their socket until the next commit.

const groups = new Map(); // attachment (Go's handle) -> {refs, texts, head, sockets}
const groupOf = new Map(); // socket handle -> attachment

/** join has the socket's held texts wait in the attachment's queue. */
export function join(socket, attachment) {
  let g = groups.get(attachment);
  if (g === undefined) {
    g = { refs: [], texts: [], head: 0, sockets: [] };
    groups.set(attachment, g);
  }
  if (g.head === g.refs.length) forget(g, socket); // no text of theirs to take
  g.sockets.push(socket);
  groupOf.set(socket, attachment);
}

// forget lets the group's sockets before socket go: no commit takes a text
// of theirs any more. Sockets join in the order of their handles.
function forget(g, socket) {
  let n = 0;
  while (n < g.sockets.length && g.sockets[n] < socket) groupOf.delete(g.sockets[n++]);
  if (n > 0) g.sockets.splice(0, n);
}

/**
 * hold keeps the payload text of the message ref, read on socket; null
 * says Go reads the message's payload itself (from its text).
 */
export function hold(socket, ref, text) {
  const g = groups.get(groupOf.get(socket));
  if (g === undefined) return; // released: no commit takes it
  g.refs.push(ref);
  g.texts.push(text);
}

/**
 * take returns the text held for ref, read on socket (null: Go read this
 * one's payload itself, so it is empty), and lets it go, with every text
 * held before it in its attachment's queue; undefined when it is not held,
 * which the commit order rules out.
 */
export function take(socket, ref) {
  const g = groups.get(groupOf.get(socket));
  if (g === undefined) return undefined;
  const { refs, texts } = g;
  let i = g.head;
  while (i < refs.length && refs[i] < ref) i++;
  const found = i < refs.length && refs[i] === ref;
  const text = found ? texts[i] : undefined;
  g.head = found ? i + 1 : i;
  if (g.sockets[0] !== socket) forget(g, socket); // commits come in ref order
  // Drop the ones let go once they are half the queue or more: a splice
  // moves no more than it drops.
  if (g.head > 64 && 2 * g.head >= refs.length) {
    refs.splice(0, g.head);
    texts.splice(0, g.head);
    g.head = 0;
  }
  return text;
}

/** release lets the attachment's texts go: it has ended, and commits no more. */
export function release(attachment) {
  const g = groups.get(attachment);
  if (g === undefined) return;
  for (const s of g.sockets) groupOf.delete(s);
  groups.delete(attachment);
}

/**
 * joined is the number of sockets whose texts may still be taken, for every
 * attachment (for tests: it stays small however often an attachment
 * reconnects).
 */
export function joined() {
  return groupOf.size;
}

/** held is the number of texts held, for every attachment (for tests). */
export function held() {
  let n = 0;
  for (const g of groups.values()) n += g.refs.length - g.head;
  return n;
}
