package client

import (
	"context"
	"strconv"

	"github.com/relaywasm/relaywasm/librelay"
)

// Transport opens WebSockets to a relay's browser leg. The engine calls Dial
// once per connection attempt; everything above the socket (hello, welcome,
// resume, heartbeats) is the engine's.
//
// Natively the default is coder/websocket (DefaultTransport). In the browser
// the jsbridge package supplies one built on the page's own WebSocket, because
// coder/websocket's browser build neither reports close codes nor keeps the
// frames that arrived just before a close.
type Transport interface {
	// Dial opens a WebSocket to url offering protocols and returns once it is
	// open. A refusal before the socket opens (a 403 for the Origin, a refused
	// TCP connection) is an error that is not a *CloseError, and is retried.
	// An error wrapping ErrBadOptions says that no dial of url can succeed
	// (a browser that will not open a socket to it at all): it ends the
	// attachment.
	Dial(ctx context.Context, url string, protocols []string) (Conn, error)
}

// Conn is one open WebSocket carrying one frame per text message.
//
// Read and Write may be called concurrently with each other, but each by one
// goroutine at a time: the engine has one reader and one writer per Conn.
type Conn interface {
	// Read blocks until at least one message has arrived and returns every
	// message that is waiting, oldest first, so a transport that receives in
	// bursts (the browser's event loop) hands a burst over in one call. The
	// slices are valid until the next Read.
	//
	// Every message that arrived before the peer closed is returned before the
	// close is: the error comes only once nothing is left, and when the peer
	// sent a close frame it is (or wraps) a *CloseError.
	Read(ctx context.Context) ([][]byte, error)

	// Write sends msg as one text message. The transport does not keep msg
	// after Write returns.
	Write(ctx context.Context, msg []byte) error

	// Close sends a close frame with code and reason and releases the socket.
	// Browsers let script send only 1000 and 3000–4999.
	Close(code int, reason string) error
}

// FrameReader is implemented by a Conn that parses the frames itself. The
// engine calls ReadFrames instead of Read when its Conn has it; ReadFrames
// is Read with librelay.ParseFrame already applied to every message.
//
// It exists for the browser: the page parses every message with JSON.parse
// anyway (native code, and the application needs the object), while Go's
// own scan of a 1 KiB frame, compiled to WebAssembly, costs several times
// what the page spends on it. jsbridge's transport hands the engine frames
// built from what JSON.parse found, and scans in Go only the frames the
// engine must read (relay.* control, session.resumed) or keep (a
// transcript).
//
// The rules are Read's (every frame that arrived before a close is returned
// before the close is) plus: every frame passes librelay.Frame.Validate, a
// message that is not a frame is left out (as the engine drops one Read
// returns), and the frames and their slices belong to the engine once
// returned. The Payload of an acp.message frame is only passed on, to
// OnMessages and, with Options.History, to the Store's transcript: a
// transport whose OnMessages is its own (jsbridge) may hand a token that
// stands for the payload instead of the payload itself, as long as it keeps
// real payloads whenever a transcript is kept. A transport that needs to find
// its own objects again says so explicitly instead: RefFrameReader.
type FrameReader interface {
	ReadFrames(ctx context.Context) ([]librelay.Frame, error)
}

// RefFrameReader is a FrameReader whose frames carry a reference of the
// transport's own (RefFrame.Ref), which the engine hands on, unchanged, in
// the Message of an acp.message (Message.Ref) and in its transcript Entry
// (Entry.Ref). The rules are ReadFrames', except that a frame with a Ref may
// leave its Payload empty when no transcript is kept, or when the Store
// finds the payloads of entries by their Ref: the transport's own
// OnMessages (jsbridge's) finds the message by its Ref, and its Store
// (jsbridge's, through relay.js) the payload. Such a transport may let a
// payload go once the entry of a frame read after it has been committed,
// or once the attachment has ended: the engine records and commits entries
// in the order it read their frames, across its connections, so no later
// commit needs it. (Not at the connection's close: a socket that breaks
// during a delivery is closed at once, and what that delivery accepted is
// committed after.) The engine prefers ReadRefFrames to ReadFrames.
type RefFrameReader interface {
	ReadRefFrames(ctx context.Context) ([]RefFrame, error)
}

// A RefFrame is a frame and the transport's reference to it (0: none).
type RefFrame struct {
	librelay.Frame
	Ref uint64
}

// CloseError is how a Conn reports that the peer closed the socket: the
// relay's close code (see relayleg) and its reason text.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	s := "relaywasm: socket closed with code " + strconv.Itoa(e.Code)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}
