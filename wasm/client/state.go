package client

import (
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// State is where an attachment's connection stands.
type State int32

const (
	// Connecting: the first dial and handshake are under way.
	Connecting State = iota
	// Open: the relay welcomed this client; frames flow.
	Open
	// Reconnecting: the connection dropped and a redial is pending or under way.
	Reconnecting
	// Offline: the platform reports no network; the next redial waits for it.
	Offline
	// Closed: the attachment has ended (Detach, Close or a fatal error).
	Closed
)

var stateNames = [...]string{"connecting", "open", "reconnecting", "offline", "closed"}

// String returns the state's lower-case name, as the JavaScript API spells it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// StateChange reports a new State and why it was entered.
type StateChange struct {
	State State
	// Err is why the last connection ended (Reconnecting, Offline) or why the
	// attachment did (Closed); nil for a Close or a first Connecting.
	Err error
	// Attempt counts redials since the connection was last stable.
	Attempt int
	// RetryIn is how long until the next redial, when one is scheduled.
	RetryIn time.Duration
	// Resumable is what the runtime has shown about resuming: false once a
	// resume went unanswered for Options.ResumeTimeout (a runtime without
	// retention, as contenox v1.0.0 ships: what arrives while the
	// attachment is away is gone) or was refused (relay.error
	// unsupported_type), true before that and again as soon as the runtime
	// resumes one or sends a sequenced frame. A change of it alone is
	// reported as a StateChange in the same State.
	Resumable bool
}

// Message is one ACP message delivered to the application.
type Message struct {
	// Payload is the ACP JSON-RPC message, byte for byte as the runtime sent it.
	Payload []byte
	// Seq is the runtime's sequence number for it; 0 for an unsequenced frame.
	Seq uint64
	// Session is the attachment id the message arrived on.
	Session string
	// Trace is the frame's correlation id (librelay.Frame.Trace), "" when
	// untraced: peer-supplied text to log and join on, never to trust.
	Trace string
	// Replay marks a message this stream has delivered before, fetched again
	// by an explicit Resume to an earlier cursor. Messages a resume after a
	// drop or a reload brings are new to the application and are not marked.
	Replay bool
	// Ref is the transport's own reference to the message, as its
	// RefFrameReader handed it over (RefFrame.Ref); 0 from any other
	// transport. The engine only carries it: jsbridge uses it to tell
	// relay.js which of the messages it parsed to hand to onMessage.
	Ref uint64
}

// Eviction reports content that is gone: the producer could not replay the
// frames after AfterSeq, and delivery continues at FromSeq (0 when the stream
// starts over).
type Eviction struct {
	AfterSeq uint64
	FromSeq  uint64
	// Reason is one of the Evicted* constants: why the content is gone.
	Reason string
}

// Eviction reasons, as Eviction.Reason (and the JavaScript API's
// onEvicted) spells them.
const (
	// EvictedRetention: retention dropped frames the client had not seen.
	// With FromSeq 0, unsequenced messages were dropped instead: more
	// arrived than the engine holds (4096) while the handler refused the
	// ones before them.
	EvictedRetention = "evicted"
	// EvictedCursor: the runtime no longer knows the stream at all (it restarted).
	EvictedCursor = librelay.CodeCursorEvicted
	// EvictedSessionReplaced: the relay granted a new attachment id because the old one could not be reclaimed.
	EvictedSessionReplaced = "session_replaced"
	// EvictedFrameTooLarge: the relay could not carry frame AfterSeq+1 to
	// this client (relay.error frame_too_large naming its seq); FromSeq is
	// the one after it, and delivery goes on there. For an unsequenced
	// frame FromSeq is 0, and the loss is told in the frame's place.
	EvictedFrameTooLarge = relayleg.CodeFrameTooLarge
	// EvictedNotResumed: after a redial or a reload the runtime left the
	// resume unanswered, or refused it; it keeps nothing
	// (StateChange.Resumable false), so what it sent while the client was
	// away is gone. FromSeq is 0. It is told when the wait for the
	// resume's answer ends, up to ResumeTimeout after the connection
	// opened: messages delivered since it opened came after the loss, not
	// before it.
	EvictedNotResumed = "not_resumed"
)

// EvictionReasons lists every reason an Eviction can give.
func EvictionReasons() []string {
	return []string{EvictedRetention, EvictedCursor, EvictedSessionReplaced, EvictedFrameTooLarge, EvictedNotResumed}
}
