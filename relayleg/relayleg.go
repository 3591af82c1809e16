// Package relayleg holds the transport contract of the relay's two legs: what
// librelay leaves to the server. librelay fixes the frames; this package fixes
// the doors they come through — paths, upgrade tokens, how a browser presents
// its credential, and the close codes that tell a client why it was let go.
//
// The relay (demo/relay), the runtime (demo/runtime), the client engine
// (wasm/client) and the conformance suite all import these names, so a close
// code or a subprotocol is defined once. The package is standard library only
// and small, because the browser module links it.
package relayleg

import (
	"encoding/base64"
	"strings"

	"github.com/relaywasm/relaywasm/librelay"
)

// The runtime leg: a contenox connector dials the relay with
//
//	GET ConnectPath
//	Connection: Upgrade
//	Upgrade: UpgradeToken
//	Authorization: Bearer <credential>
//
// and, after 101 Switching Protocols, the raw stream carries NDJSON frames
// read and written with librelay.Reader and librelay.Writer.
const (
	ConnectPath  = "/v1/connect"
	UpgradeToken = "contenox-relay/1"
)

// The browser leg: a WebSocket at AttachPath, one frame per text message.
// Browsers cannot set headers on a WebSocket upgrade, so the credential rides
// in a second offered subprotocol, BearerSubprotocol(token); the relay selects
// Subprotocol and never echoes the credential back.
const (
	AttachPath   = "/v1/attach"
	Subprotocol  = "contenox-relay.v1"
	BearerPrefix = "bearer."
)

// BearerSubprotocol spells a credential as a WebSocket subprotocol:
// BearerPrefix followed by the credential in unpadded base64url, which uses
// only characters a subprotocol token may contain.
func BearerSubprotocol(credential string) string {
	return BearerPrefix + base64.RawURLEncoding.EncodeToString([]byte(credential))
}

// ParseBearer finds the credential among the offered subprotocols. It reports
// false when none is offered or the one offered is not valid base64url, which
// a relay answers as unauthorized.
func ParseBearer(protocols []string) (credential string, ok bool) {
	for _, p := range protocols {
		enc, found := strings.CutPrefix(strings.TrimSpace(p), BearerPrefix)
		if !found {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil || len(raw) == 0 {
			return "", false
		}
		return string(raw), true
	}
	return "", false
}

// Error codes a relay carries in a relay.error payload beyond librelay's own
// (CodeUnsupportedType, CodeMalformedFrame, CodeUnknownInstance, CodeVersion,
// CodeCursorEvicted). Like librelay's they are strings, so an unknown one still
// reads in a log.
const (
	// CodeUnauthorized: the credential is missing, wrong, or not allowed this instance.
	CodeUnauthorized = "unauthorized"
	// CodeSuperseded: another socket reclaimed this attachment id.
	CodeSuperseded = "superseded"
	// CodeFrameTooLarge: a frame exceeded the leg's size limit.
	CodeFrameTooLarge = "frame_too_large"
	// CodeSlowConsumer: the socket did not drain its send queue in time.
	CodeSlowConsumer = "slow_consumer"
	// CodeHeartbeatTimeout: the peer did not answer a heartbeat.
	CodeHeartbeatTimeout = "heartbeat_timeout"
	// CodeTooManyAttachments: the instance holds as many attachments as the relay allows.
	CodeTooManyAttachments = "too_many_attachments"
	// CodeRuntimeGone: the instance's runtime disconnected; attach again later.
	CodeRuntimeGone = "runtime_gone"
	// CodeShuttingDown: the relay is stopping; attach again later.
	CodeShuttingDown = "shutting_down"
)

// Close codes on the browser leg. Browsers let script see any code the server
// sends, and 4000–4999 is the range reserved for applications, so each reason a
// relay ends a socket gets a code of its own and a client can tell a refusal it
// must not retry (unauthorized, unsupported version, superseded) from a drop it
// should. The last two digits echo the HTTP status of the same meaning.
const (
	CloseNormal             = 1000 // a detach, or the client closing
	CloseBadHello           = 4400 // the first frame was not a valid relay.hello request
	CloseUnauthorized       = 4401 // see CodeUnauthorized; not retryable
	CloseUnknownInstance    = 4404 // no runtime is connected for the instance
	CloseHeartbeatTimeout   = 4408 // see CodeHeartbeatTimeout
	CloseSuperseded         = 4409 // see CodeSuperseded; not retryable
	CloseTooLarge           = 4413 // see CodeFrameTooLarge
	CloseUnsupportedVersion = 4426 // the negotiated version is not one both speak; not retryable
	CloseSlowConsumer       = 4429 // see CodeSlowConsumer
	CloseTooManyAttachments = 4430 // see CodeTooManyAttachments
	CloseRuntimeGone        = 4502 // see CodeRuntimeGone
	CloseShuttingDown       = 4503 // see CodeShuttingDown
)

// closeCodes pairs each close code with the error code of the same reason.
var closeCodes = map[int]string{
	CloseBadHello:           librelay.CodeMalformedFrame,
	CloseUnauthorized:       CodeUnauthorized,
	CloseUnknownInstance:    librelay.CodeUnknownInstance,
	CloseHeartbeatTimeout:   CodeHeartbeatTimeout,
	CloseSuperseded:         CodeSuperseded,
	CloseTooLarge:           CodeFrameTooLarge,
	CloseUnsupportedVersion: librelay.CodeVersion,
	CloseSlowConsumer:       CodeSlowConsumer,
	CloseTooManyAttachments: CodeTooManyAttachments,
	CloseRuntimeGone:        CodeRuntimeGone,
	CloseShuttingDown:       CodeShuttingDown,
}

// CloseReason returns the error code a close code stands for, or "" for a
// code this package does not define.
func CloseReason(code int) string { return closeCodes[code] }

// CloseCode returns the close code for an error code, or 0 when the code
// does not end a socket.
func CloseCode(errorCode string) int {
	for c, e := range closeCodes {
		if e == errorCode {
			return c
		}
	}
	return 0
}
