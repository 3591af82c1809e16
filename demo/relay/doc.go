// Package relay is the dev relay: the rendezvous a runtime dials out to and
// browsers attach to. New returns an http.Handler serving both legs:
//
//   - the runtime leg at relayleg.ConnectPath: GET with Connection: Upgrade,
//     Upgrade: relayleg.UpgradeToken and Authorization: Bearer; HTTP 401 for a
//     bad credential, otherwise 101 and NDJSON both ways (librelay Reader and
//     AppendFrame). The runtime's relay.hello is answered with relay.welcome
//     signed over min(peer, self). A second connection for an instance
//     whose runtime still answers is refused (see Two runtimes for one
//     instance, below).
//   - the browser leg at relayleg.AttachPath: a WebSocket (coder/websocket)
//     carrying one frame per text message, the credential in the
//     relayleg.BearerSubprotocol subprotocol, the Origin checked against
//     Config.OriginPatterns (HTTP 403 otherwise) and the Host against the
//     names it serves (HTTP 403 otherwise; see Config.Hosts: a page whose
//     name was rebound to the relay's address sends an Origin equal to its
//     Host). The hello names the instance and the attachment id to reclaim;
//     the welcome grants one. Past Limits.PendingHellos sockets awaiting
//     their hello, an upgrade is HTTP 503 with Retry-After.
//
// What comes before the upgrade is bounded by the http.Server, which
// ConfigureServer sets up: headers, any body and the response to a request
// that is not upgraded (Limits.HeaderBytes, HeaderTimeout) and connections
// not yet upgraded, in all and per client address (Limits.PendingConns,
// PendingConnsPerAddress).
//
// Relay is a handler: whoever serves it chooses plain HTTP (the loopback
// default) or TLS. With Config.TLSCert and TLSKey, TLSConfig gives the
// listener's config: TLS 1.3 at least, for both legs since they share one
// listener (the contenox connector dials https only and requires 1.3), and
// HTTP/1.1 only (both legs are HTTP/1.1 upgrades).
//
// # Routing
//
// Frames are routed on (instance, session) and nothing else, through a
// Table (one process: NewMemTable); the payload is never parsed or
// re-encoded. Its bytes arrive unchanged except insignificant whitespace
// between JSON tokens (space, tab, CR, LF outside strings), which is
// removed, because a raw newline would split an NDJSON frame: every frame
// goes out through librelay.AppendFrame, which compacts as the spec's Writer
// does. Escapes, non-ASCII, number spellings, key order and duplicate keys
// are kept as sent, and so is whitespace inside strings; a payload that is
// already compact arrives byte for byte. Frames wait in the send queues as
// parsed, and their writer encodes them as it writes (into the runtime
// connection's write buffer, or one pooled buffer per batch to a browser),
// so a routed frame costs no encoding buffer of its own; a frame that does
// not encode is dropped, never written. Unknown cargo types are routed. A
// browser socket speaks only for its own attachment: frames naming another
// instance or session, or none, are dropped, and so are runtime frames with
// no session or for a session no socket holds (the runtime retains them; the
// client resumes). A request among them still gets its one reply (spec 001):
// relay.error malformed_frame for a browser's off its own route or a
// runtime's naming no session or another instance, CodeUndeliverable for a
// runtime's that no socket can be given (unsequenced, or for an id nobody
// holds; a sequenced one for an id in its grace period is replayed to the
// client, which answers it). relay.error frames carrying a session answer a
// routed request and are routed like cargo. An unknown control request gets
// unsupported_type; an unknown control notification is dropped;
// relay.heartbeat gets relay.ack. A cargo request for an instance with no
// runtime connected is answered with unknown_instance. The relay's own
// replies are never dropped: a peer with no room in its queue even for one
// (it sends requests and does not read the answers) is let go with
// slow_consumer. Nor do they wait behind the cargo queued for the peer: they
// are written once the batch being written is out (64 KiB towards a
// browser, or one larger frame), so a heartbeat is answered promptly (spec
// 000) even while a replay of megabytes crawls to a phone. The one
// exception: while a session.resume from a browser is unanswered, the acks
// of its heartbeats keep their place behind the cargo, since the client
// takes such an ack for the end of its wait for the resume's answer.
//
// # A frame too large for the browser leg
//
// A runtime frame whose encoding exceeds Limits.BrowserFrameBytes is not
// sent, and does not vanish either: the socket gets in its place
//
//	{"type":"relay.error","instance":…,"session":<the attachment's id>,
//	 "seq":<the frame's seq, 0 if unsequenced>,
//	 "payload":{"code":"frame_too_large","message":"<n> bytes, limit <limit>"}}
//
// and stays open. A client reads it as "seq N arrived and is lost": it
// reports the loss and goes on after it, rather than see a gap, resume, and
// be replayed the same frame for ever. A replay of the frame after a resume
// gets the same stand-in. When the frame was a request, the runtime gets its
// one reply, relay.error frame_too_large answering it: the browser never
// sees the request, so it cannot answer.
//
// # Slow consumers
//
// The runtime leg has one reader per instance, shared by every attachment
// of the instance, and it never waits for a browser: a frame for a socket
// whose send queue is full sheds that socket at once. The socket is still
// written what it had queued, then relay.error slow_consumer and close 4429;
// the runtime retains what it missed, and its client resumes from its
// cursor after it redials. Nothing slows the runtime down for a slow
// browser (the protocol has no per-session flow control, and the one TCP
// stream would slow all of them), so the queue is deep enough for a whole
// retention replay and for a fast stream to run well ahead of a slower
// browser.
//
// # Direction rules
//
// Spec 001 gives chain_trigger (and contenox v1.0.0 ask.verdict) the one
// direction relay→machine, and chain_trigger_result, ask.published and
// ask.resolved (sessionless in contenox) machine→relay. None of them is
// carried between the legs (direction.go): from a browser, a request of one
// gets relay.error unsupported_type, anything else of one is dropped, and
// nothing reaches the runtime (a browser credential does not start the
// machine's chains or answer its asks); from the runtime, they are addressed
// to the relay, which runs no chains and keeps no asks, so it drops them
// (a request gets unsupported_type) and no browser ever gets one.
//
// # Two runtimes for one instance
//
// The contenox connector redials after anything but unauthorized,
// unsupported_version and a bad relay signature, so a relay that gave an
// instance to each newcomer would have two connectors take it from each
// other for ever. Here the connection holding the instance keeps it while
// it answers: a runtime's hello for an instance that has one waits while
// the relay probes the incumbent (relay.heartbeat, Limits.TakeoverWait,
// 5s). Answered: the newcomer gets relay.error instance_taken and is
// closed, and redials on its own backoff, which a refusal never resets
// (contenox: 1s doubling to 30s; measured against two real connectors, the
// loser knocks 6 times in the first 30s and then every ~30s). Not answered,
// or the connection ends: the incumbent gets relay.error heartbeat_timeout
// and is closed, and the newcomer is welcomed, so a runtime restarted
// behind a connection the relay has not seen die is back within the wait.
// The sockets attached to the instance then get relay.error runtime_gone
// and close 4502, as when a runtime leaves: the newcomer numbers its
// streams afresh and knows none of their attachments, so each client
// redials and resumes, or learns it cannot. Behind a Table shared by
// several nodes (natstable) the incumbent may be on another node: the
// newcomer's node asks that one, which probes its connection the same way
// and answers (Prober, Hooks.Probe), and the newcomer is refused
// instance_taken or welcomed by the same rule. No answer in time (that node
// gone, the bus in trouble) counts as not answered. The incumbent that did
// not answer is told heartbeat_timeout by its own node when the newcomer's
// hold reaches it, as on one relay (a dev runtime that slept redials). Two
// newcomers on two nodes finding the incumbent silent at once settle as on
// one relay too: its node lets the first take over and tells the other's
// node that the runtime answers, so that one is refused instance_taken,
// rather than both being welcomed and one superseded a moment later.
//
// # Attachment ids
//
// 16 random bytes and a 16-byte HMAC-SHA256 over the credential's digest,
// the instance and the random part, in base64url (43 characters). The MAC key
// is Config.AttachmentKey or derived (HKDF) from the signing key's seed, so
// ids verify after a restart with the same key and on any relay sharing it. A
// hello naming an id that verifies for its credential and instance, and has
// not ended, gets it back; a live socket holding it gets relay.error
// superseded and close 4409. Any other id is not an error: the client gets a
// fresh one. A socket that drops without a detach keeps its id reclaimable
// for Limits.Grace; then acp.detach goes to the runtime (when it is back, if
// it is away at that moment) and the id ends. A hello naming the id that is
// refused unknown_instance, for want of a runtime, restarts its grace: its
// client is still there, so a runtime away for longer than the grace while
// the page keeps knocking is not told to drop the session. A
// client's acp.detach ends the id at once, is forwarded, and the socket is
// closed 1000. When an instance's runtime disconnects, its sockets get
// relay.error runtime_gone and close 4502 and their grace periods start.
//
// # Close codes
//
// Every close the relay starts on the browser leg is preceded by a relay.error
// with the code of the same reason (relayleg), except 1000 after a detach:
//
//	1000 detached                 4413 frame_too_large (frame or hello)
//	4400 malformed_frame (hello)  4426 unsupported_version
//	4401 unauthorized             4429 slow_consumer
//	4404 unknown_instance         4430 too_many_attachments
//	4408 heartbeat_timeout        4502 runtime_gone
//	4409 superseded               4503 shutting_down
//
// On the runtime leg the same relay.error precedes closing the connection;
// the runtime leg has one code of its own, instance_taken (see Two runtimes
// for one instance), and sees superseded only when it is replaced from
// another node sharing the Table without its node having probed it for
// that node (a Table that is not a Prober, a node of an earlier version
// during a rolling upgrade, the bus in trouble, or two newcomers on two
// nodes welcomed at once for an instance that had no runtime).
//
// # Limits, and the numbers behind them
//
// Measured on the development machine (2 cores, loopback, Go 1.26, with
// other sessions' builds and browsers running; commands in bench_test.go).
// An idle attachment costs the relay 3.9 KiB of heap and a 4 KiB goroutine
// stack (BenchmarkIdleAttachment, 10,000 attachments): the socket keeps a
// 256-byte write buffer and a 16-byte read buffer, and holds no writer
// goroutine, send or read buffer, or timer while idle. A socket with data
// waiting reads it through a pooled 16 KiB burst buffer, as much as the
// kernel has in one syscall, and gives the buffer back once its bytes are
// consumed (it waits for data holding none). Routing between one runtime
// and 100 attachments, with all 101 peers in the same process, runs at
// 180–630k frames/s to the browsers and 85–430k frames/s to the runtime for
// ~200-byte chunk frames, 150–370k and 40–270k (median 180k) frames/s for
// 1 KiB payloads (BenchmarkRouteToBrowsers, BenchmarkRouteToRuntime, eight
// runs each; the spread is the machine's load, the low ends are runs that
// got half a core). Against the same frames over 100 plain WebSockets with
// no relay, the fan-out runs 1.8–3.2× faster (medians; each batch of frames
// is corked into one write) and the fan-in at 0.38–0.45× (every frame is
// read, validated and re-encoded once more). CPU per frame, the steadier
// figure, is 7.3 µs relayed against 3.0 µs direct for a 1 KiB frame to the
// runtime, peers included; the relay's own ~3.2 µs is about 1 µs reading
// the WebSocket message, 1.1 µs ParseFrame (scanning, and copying the frame
// into an allocation of its own), 0.5 µs AppendFrame (two thirds of it
// scanning again the payload ParseFrame has already checked) and the rest
// queueing and writing.
//
//   - Browser frame, 1 MiB (either way). Chat-sized ACP messages are well under
//     10 KiB; 1 MiB still carries a ~750 KiB base64 image, and it is 1/16 of
//     librelay.MaxFrameBytes, so one browser message cannot make the relay
//     hold 16 MiB. The read buffer grows to the message and goes back to a
//     pool. A larger message is read to its end and discarded (at most 16
//     MiB more, for at most 10s) before relay.error and close 4413, because
//     a browser reports a close code only after sending its whole message,
//     and closing with part of it unread resets the connection (1006).
//   - Hello, 4 KiB. A hello is about 300 bytes (a 32-byte nonce, instance and
//     agent names); 4 KiB is what an unauthenticated peer can make the relay
//     read before it is refused.
//   - Pending hellos, 1024 per relay. A browser socket awaiting its hello
//     is unauthenticated (the credential is judged with the hello) and costs
//     the relay ~26 KiB (measured: 1000 upgraded sockets that never send a
//     hello; the upgrade's goroutine, net/http's and the WebSocket's
//     buffers), so 1024 that never say hello hold ~26 MiB for at most
//     HelloTimeout each. A legitimate hello is answered within a round trip
//     and a signature (~50 µs), so 1024 at once is a reconnect storm of
//     thousands of browsers per second; those past it get 503 and redial
//     with backoff.
//   - Attachments per instance, 256, the dev runtime's MaxSessions: a
//     runtime keeping fewer sessions than the relay grants ids would evict
//     live streams when fresh attachments arrive. At ~8 KiB idle each, 2 MiB
//     per instance at rest. At the limit the id whose socket dropped longest
//     ago yields to the newcomer; only live sockets make a newcomer wait
//     (4430).
//   - Send queue per browser socket, 16,384 frames or 16 MiB of encoded
//     frames (at least one largest frame): at least the dev runtime's whole
//     retention (8,192 frames, 8 MiB), so the replay after a resume always
//     fits, and about a second of a browser consuming 14–24k messages/s
//     (notes) falling behind an unpaced stream. Memory is taken only while a
//     browser lags; worst case per instance 256 × 16 MiB. A stalled
//     socket is shed when its queue is full and cut at CloseTimeout.
//     Sixteen stalled attachments cost a healthy one of the same instance
//     nothing measurable (BenchmarkStalledNeighbours; the ratio is in the
//     README's limits table).
//   - Headers, 16 KiB within 10s, and 1024 connections not yet upgraded:
//     2,000 connections each holding 15 KiB of an unfinished header (1,024
//     held, the rest refused 503) cost the relay +39.5 MiB of resident memory
//     (BenchmarkPreUpgradeRSS); with net/http's default of 1 MiB of headers
//     and no bound on connections, 300 trickling 900 KiB headers held
//     +333 MB. A socket awaiting its hello is served by a goroutine of its
//     own, so its upgrade request is not kept.
//   - Connections not yet upgraded from one client address (an IPv6
//     client's /64), 64: 1/16 of the 1024, so one peer leaves 15/16 of the
//     places to everyone else, and a peer needs 16 addresses to fill them
//     (each connection held for at most HeaderTimeout). A browser opens at
//     most 6 connections to a host at once and its sockets' upgrades take a
//     round trip each, so 64 leaves room for several browsers behind one
//     NAT connecting in the same instant. Never below 8 (one page load),
//     never above PendingConns. The address is the connection's, not
//     X-Forwarded-For's: behind a proxy, set it to PendingConns (the
//     demo's -max-pending-conns-per-address).
//   - Queue towards a runtime, 4096 frames or 16 MiB: about 25 ms of traffic
//     at the measured rate, or 16 largest browser frames. A browser whose
//     frame does not fit is not read until it does (holding meanwhile at
//     most one burst buffer of bytes read but not yet handled).
//   - Grace 2 minutes, heartbeat 15s idle before a probe and 10s to answer,
//     from the design; CloseTimeout 5s, coder/websocket's own close timeout.
//   - Ended ids remembered: 65,536 (~6 MiB), so a hello naming a recently
//     ended id gets a fresh one; an older one is reclaimed, and the runtime,
//     which dropped the session, answers its resume with cursor_evicted.
package relay
