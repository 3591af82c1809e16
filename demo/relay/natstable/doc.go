// Package natstable is a relay.Table shared by several relay nodes through
// NATS (github.com/nats-io/nats.go), so that a runtime attached to one node
// and a browser attached to another meet. Each node has its own Table; the
// relay is unchanged but for the Hooks through which the table tells it
// what happened on other nodes.
//
// # Subjects
//
// Under Config.Prefix ("relay"):
//
//	relay.rt.<instance>            frames for the instance's runtime; only the node holding it subscribes
//	relay.at.<instance>.<session>  frames for one attachment's browser; only the node holding that socket subscribes
//	relay.ctl                      holds, releases, claims and heartbeats; every node
//	relay.ack.<node>               how far the streams a node publishes were taken
//	relay.nr.<node>.…              the reply subject of a node's frames to runtimes: NATS says there when one reached nobody
//	relay.probe.<node>             requests: does the node's runtime for an instance answer? (takeover probes)
//
// (instance names that are not plain tokens are "~" and their base64url).
// A frame on the wire is a 25-byte header (the publishing node, its stream,
// and a counter) and the frame's members and payload as they are, not
// re-encoded as JSON: the node that writes a frame to a socket validates it
// there (wire.go).
//
// # What each node knows
//
// Which node holds each instance's runtime, and nothing else about other
// nodes. A node taking a runtime announces a hold with an epoch (its clock
// when it took it; a later hold wins, equal ones go to the larger node id),
// and the node whose hold is older ends its runtime connection superseded.
// Before a node takes a runtime another node holds, it asks that node on
// its probe subject whether the runtime answers a probe (probe.go): a live
// one keeps the instance and the newcomer is refused instance_taken, as a
// second connection on one relay is; only one that does not answer within
// the relay's TakeoverWait, or whose node does not reply, is taken over
// (the relay tells it heartbeat_timeout when its node probed it, as one
// relay does; several newcomers that find it silent at once get one answer
// "not alive" between them, so only the first takes over).
// Every node beats on the control
// subject every Heartbeat with the runtimes it holds, so a lost hold or
// release is mended within one beat, a node that joins or reconnects asks
// the others to beat at once, and a node not heard from within Lease is
// taken for dead: its runtimes are gone. A browser's node announces a claim
// when it takes an attachment's socket, so that a node still holding an
// older socket for the id supersedes it (4409) and remembers the id as
// moved: its grace running out there sends no acp.detach, which would end
// the session its client resumed elsewhere. A claim carries an epoch, as a
// hold does, and a node whose socket for the id is newer than the claim
// (the client redialled back to it before the claim arrived) leaves it
// alone. Which node holds which socket is
// never kept anywhere else: a runtime's node publishes to the attachment's
// subject and NATS delivers to whichever node subscribed, if any.
//
// # Order, backpressure and loss
//
// NATS delivers in order per publisher, and each node publishes one route's
// frames from one stream, so frames keep their order per (instance,
// session) end to end. The bus delivers at most once: a message can be
// dropped while a subscription is being re-established or past a
// subscriber's pending limit. The counter shows such a loss to the
// receiver, which closes the attachment's socket with runtime_gone, so its
// client redials and resumes from its cursor; what the bus lost is replayed
// from the runtime's retention. A drop past the pending limits
// (PendingFrames, PendingBytes) is a loss as soon as NATS reports it to the
// node (nats.ErrSlowConsumer), with no later frame to wait for. A frame for
// a runtime lost on the bus is logged and counted (Gaps): what a browser
// sends is at most once, as over any socket that drops.
//
// Each stream keeps at most Window frames unacknowledged by the node
// consuming it. That node hands frames to its sockets without waiting (one
// whose queue is full is shed at once, as on a single relay), so a window
// to a socket left full is a node behind or out of reach; frames to a
// runtime wait for room in its queue, as on a single relay, so a runtime
// that is behind fills the windows of the nodes sending to it. Past a full
// window Send waits up to StallTimeout, then drops that frame and the ones
// after it until the consumer acknowledges again; a consumer that is gone
// (its node's lease ran out, or it let the route go) is not waited for. A
// frame dropped so, or refused by the bus, still takes its counter, and a
// stream to a socket that publishes no frame after it owes the consumer a
// tail (wire.go), sent on the node's next heartbeat once the window has
// room, so the socket gets runtime_gone even when the dropped frames ended
// an answer.
//
// # Failures
//
//   - A node dies: its sockets are cut and nothing else is lost. Its
//     browsers redial another node and reclaim their ids (they verify on
//     every node sharing the attachment key); its runtime redials, and its
//     new node's hold routes every node's browsers to it. Until the lease
//     runs out a runtime frame to one of its sockets may wait up to the
//     window. What the runtime had in flight through the dead node may be
//     lost, so the sockets of every instance whose runtime it held get
//     runtime_gone on every node, and their clients resume: when the
//     runtime's new hold reaches the node, or when the node takes the dead
//     one for gone, whichever comes first; a frame for the runtime that
//     reaches nobody before then (NATS says so on its reply subject) ends
//     the sockets of its instance at once, so a client that reclaimed its
//     id meanwhile is not left waiting for the answer to its
//     session.resume.
//   - A runtime's connection is replaced (a new hold, on another node or on
//     the same one with a new epoch: the runtime came back behind a
//     connection that died unseen, or a second connection took over one
//     that did not answer its probe):
//     the instance's sockets on every node get runtime_gone, as on a single
//     relay, since the new connection numbers its streams afresh.
//   - This node loses NATS: the runtimes held elsewhere are unreachable, so
//     their sockets here get runtime_gone, and hellos for them are
//     unknown_instance until the bus is back; this node's own runtimes keep
//     routing to their sockets here. Frames are not buffered for the
//     reconnect (ReconnectBufSize -1): receivers resume instead of getting
//     stale frames. Those its runtimes sent meanwhile to sockets on other
//     nodes are lost, and those nodes, which see nothing amiss when it is
//     back within the lease, learn it from the node's tails: back on the
//     bus, it sends on each of its streams to an attachment a message that
//     says how far the stream went, so a socket that missed frames gets
//     runtime_gone even when no frame follows them.
//   - NATS restarts: every node goes through the above; once reconnected,
//     the nodes beat, learn the holds again, and the redialled clients
//     attach and resume. Lost during the outage: runtime frames to browsers
//     on other nodes (recovered by the resume), and the browser frames in
//     flight on the sockets closed then (at most once, as over any dropped
//     socket); sends made while the client reconnects wait in its queue.
//
// # Costs
//
// Per node: one NATS connection; one subscription per runtime held and per
// attachment held; one goroutine per runtime held and per instance with
// sockets here (attachment subjects of an instance share one, as they share
// the runtime's reader on a single relay); a beat per Heartbeat listing the
// runtimes it holds; a claim per attachment taken. Per frame across nodes:
// one encode on the sending node, one parse on the receiving node, the
// header, and an ack every Window/4 frames. Figures: BenchmarkCrossNode and
// the README.
package natstable
