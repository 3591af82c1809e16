// Package devruntime is the dev runtime: a stand-in for a contenox runtime that
// dials a relay, proves nothing about itself but its bearer credential, checks
// that the relay proves itself (the welcome's signature against a pinned key),
// and serves an ACP agent on every attachment the relay routes to it.
//
// It is the producer side of resumption. Every frame it sends on an
// attachment's session is stamped with seq 1, 2, 3 … and kept in a retention
// window bounded by count and bytes; session.resume {after_seq} is answered
// with session.resumed {from_seq, evicted} followed by the retained frames
// after the cursor and then live frames, with no gap and no reordering.
// A cursor this runtime cannot continue — for a session it holds nothing of,
// or past the newest frame (an earlier life of the stream) — is answered with
// relay.error cursor_evicted. acp.detach drops the session: agent, running
// turns and retention.
//
// Config.NoResume turns the producer side off, as contenox v1.0.0 ships
// without it: no seq is stamped, nothing is retained, and session.resume is
// left unanswered, so clients can be tested against a runtime that cannot
// resume.
//
// The connection is redialled with exponential backoff and full jitter,
// honouring the welcome's retry_after; sessions and retention survive a
// redial, so a client resumes where it was. A welcome that does not verify,
// a refused credential, or being superseded by another runtime for the same
// instance ends Run instead, because dialling again cannot fix them. A hello
// refused with instance_taken (another connection holds the instance and
// answers the relay) is not: the runtime redials on its backoff and gets the
// instance once the other one has gone.
//
// # The dev agent
//
// Each attachment gets its own agent, built on github.com/coder/acp-go-sdk.
// Each JSON-RPC message the agent writes becomes one acp.message frame, and
// each acp.message payload from the client is one line of the agent's input.
// It is deterministic so that tests can predict every byte:
//
//   - initialize answers protocol version 1 and one capability, loadSession.
//   - session/new answers session ids "s1", "s2", … per attachment.
//   - session/prompt streams agent_message_chunk updates and then answers
//     {stopReason: "end_turn"}. What it streams depends on the prompt's text:
//   - "ping": one chunk, "pong".
//   - "count N" (0 ≤ N ≤ 100,000): N chunks, "1\n", "2\n", … "N\n".
//   - "count N size S" (S ≤ 256 KiB): N chunks, each "i xxx…x\n" padded
//     with 'x' to S bytes, for benchmarks with messages of a given size.
//   - "permission …" (PermissionWord first): the agent first asks the
//     client with session/request_permission (options "allow" and
//     "reject"), an agent→client request, and then streams one chunk,
//     "permission allow", "permission reject" or "permission cancelled".
//   - "readfile …" (ReadFileWord first): the agent first reads /big.txt
//     from the client (fs/read_text_file), then streams one chunk, "read N
//     bytes" or "read failed: " and the error.
//   - anything else: the prompt echoed word by word, the first chunk the
//     first word and every later chunk a space and the next word; a word
//     longer than MaxEchoChunk (16 KiB) is echoed in chunks of at most that
//     many bytes, so no echoed message nears the browser leg's 1 MiB even
//     when encoding/json escapes every byte (`<` as \u003c, six bytes).
//   - session/load {sessionId} replays the session's conversation as
//     session/update notifications and then answers {}: each prompt as a
//     user_message_chunk, then the agent_message_chunks of its answer sent
//     so far (the newest MaxTurns turns). Chunks of a turn still running
//     follow live after the replay; each chunk is in the replay or after
//     it, exactly once. A page that reloaded rebuilds its conversation with
//     initialize and session/load, the ACP way.
//   - session/cancel ends the running turn, which answers
//     {stopReason: "cancelled"}; a new prompt on a session cancels the
//     turn still running on it.
//   - the extension method "_relaywasm/echo" (EchoMethod) is answered with
//     its params unchanged: a one-request, one-response round trip for
//     benchmarks.
//
// Chunks are paced by Config.AgentRate (chunks per second; 0 is as fast as
// the connection takes them). The dev relay never slows the connection for
// one slow browser, so an unpaced stream can run ahead of a browser: by more
// than the relay's send queue and the browser is shed and resumes, by more
// than the retention and the client reports the frames as evicted.
// Runtime.PauseAt holds every agent before a turn's chunk number n until
// released, so a test can interrupt a stream it knows is under way and
// unfinished, however slow the browser under test. Runtime.HoldSetup holds
// every agent's answers to initialize and session/new until released (off
// unless a test turns it on), so a test can have a page go away while its
// setup request is unanswered.
package devruntime
