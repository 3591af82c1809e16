// Package client is the engine of a relay client: attach to a runtime through
// a relay, send ACP messages, resume from a cursor after any drop, detach.
//
// It is platform-neutral Go. Natively it dials with coder/websocket and can be
// used by any Go program; in the browser, package jsbridge wraps it, supplies
// a Transport built on the page's own WebSocket and a Store built on
// IndexedDB, and exports it to JavaScript.
//
// # Nothing lost
//
// The runtime stamps every frame of a stream with seq 1, 2, 3 … and keeps the
// last ones. The engine delivers a sequenced message only when its seq is the
// cursor plus one, drops a duplicate silently, and answers a gap with a
// session.resume from the cursor rather than deliver out of order. The cursor
// moves past a message only after the handler returned without error, and is
// saved in the Store with the transcript lines it covers in one Commit per
// batch. After a drop, a redial or a reload (a new Attachment with the same
// Store and Name), the engine reclaims its attachment id and resumes from the
// saved cursor: the transcript plus what the resume replays holds every
// message exactly once. When the runtime could not keep what the client
// missed, OnEvicted says so instead of the gap passing silently.
//
// Client → runtime messages are never replayed: a re-sent instruction is a
// second instruction. A send waits in a bounded queue while the connection is
// down and goes out once the stream has resumed.
//
// # Errors
//
// A failure a caller sees is one of three kinds, and Code names each with a
// stable string (the JavaScript API's Error.code):
//
//   - one that wraps an *Error sentinel (compare with errors.Is): the
//     client's own verdicts, and the relay's refusals it acts on, by
//     relay.error or by close code (ErrUnauthorized for 4401, say);
//   - a *CloseError (errors.AsType): the relay closed the socket with a code
//     the client does not act on beyond redialling (slow_consumer,
//     too_many_attachments, shutting_down, frame_too_large …), as a
//     connection's cause in StateChange.Err; Code gives the reason its code
//     names (relayleg), or "closed_by_relay";
//   - a bare context error, when the caller's ctx ended first (Attach,
//     SendACP, Resume, Detach): Code says "canceled" or "timeout".
//
// A Store's own failure is returned as the Store gave it (Attach's Load),
// and Abandon's cause is kept, wrapped in ErrClosed unless it is one that
// ends an attachment. A bad relay signature, an unauthorized credential, an
// unacceptable protocol version, a superseded attachment, bad options,
// Detach, Close and Abandon end an attachment; any other failure ends one
// connection and the attachment redials with exponential backoff and full
// jitter.
package client
