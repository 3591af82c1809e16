// Package relayleg holds the transport contract of the relay's two legs: what
// librelay leaves to the server. librelay fixes the frames; this package fixes
// the doors they come through — paths, upgrade tokens, how a browser presents
// its credential, and the close codes that tell a client why it was let go.
//
// The relay (demo/relay), the dev runtime (demo/devruntime), the client engine
// (wasm/client) and the conformance suite all import these names, so a close
// code or a subprotocol is defined once. The package is standard library only
// and small, because the browser module links it.
package relayleg

import (
	"encoding/base64"
	"strconv"
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
	// CodeUnauthorized is librelay's, named here too so the legs' codes read as one list.
	CodeUnauthorized = librelay.CodeUnauthorized
	// CodeSuperseded: another socket reclaimed this attachment id.
	CodeSuperseded = "superseded"
	// CodeInstanceTaken: on the runtime leg, a hello for an instance whose
	// connected runtime still answers heartbeats; the connection holding the
	// instance keeps it, and the newcomer redials with its backoff. No close
	// code: a browser never gets it.
	CodeInstanceTaken = "instance_taken"
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

// CloseCode is a WebSocket close code on the browser leg. Browsers let script
// see any code the server sends, and 4000–4999 is the range reserved for
// applications, so each reason a relay ends a socket gets a code of its own
// and a client can tell a refusal it must not retry (unauthorized, unsupported
// version, superseded) from a drop it should. The last two digits echo the
// HTTP status of the same meaning.
type CloseCode int

// The close codes a relay ends a browser socket with; each but CloseNormal
// follows a relay.error whose code is the one Reason returns.
const (
	CloseNormal             CloseCode = 1000 // a detach, or the client closing
	CloseBadHello           CloseCode = 4400 // the first frame was not a valid relay.hello request
	CloseUnauthorized       CloseCode = 4401 // see CodeUnauthorized; not retryable
	CloseUnknownInstance    CloseCode = 4404 // no runtime is connected for the instance
	CloseHeartbeatTimeout   CloseCode = 4408 // see CodeHeartbeatTimeout
	CloseSuperseded         CloseCode = 4409 // see CodeSuperseded; not retryable
	CloseTooLarge           CloseCode = 4413 // see CodeFrameTooLarge
	CloseUnsupportedVersion CloseCode = 4426 // the negotiated version is not one both speak; not retryable
	CloseSlowConsumer       CloseCode = 4429 // see CodeSlowConsumer
	CloseTooManyAttachments CloseCode = 4430 // see CodeTooManyAttachments
	CloseRuntimeGone        CloseCode = 4502 // see CodeRuntimeGone
	CloseShuttingDown       CloseCode = 4503 // see CodeShuttingDown
)

// closeCodes is the one table of close codes: each code, its name as String
// spells it, and the error code of the same reason ("" for CloseNormal). A
// slice, not a map: a map literal is code run at start (3.3 KB of it in
// relay.wasm), a slice of constants is data, and twelve entries are found
// as fast by looking at each.
var closeCodes = []struct {
	code         CloseCode
	name, reason string
}{
	{CloseNormal, "CloseNormal", ""},
	{CloseBadHello, "CloseBadHello", librelay.CodeMalformedFrame},
	{CloseUnauthorized, "CloseUnauthorized", CodeUnauthorized},
	{CloseUnknownInstance, "CloseUnknownInstance", librelay.CodeUnknownInstance},
	{CloseHeartbeatTimeout, "CloseHeartbeatTimeout", CodeHeartbeatTimeout},
	{CloseSuperseded, "CloseSuperseded", CodeSuperseded},
	{CloseTooLarge, "CloseTooLarge", CodeFrameTooLarge},
	{CloseUnsupportedVersion, "CloseUnsupportedVersion", librelay.CodeVersion},
	{CloseSlowConsumer, "CloseSlowConsumer", CodeSlowConsumer},
	{CloseTooManyAttachments, "CloseTooManyAttachments", CodeTooManyAttachments},
	{CloseRuntimeGone, "CloseRuntimeGone", CodeRuntimeGone},
	{CloseShuttingDown, "CloseShuttingDown", CodeShuttingDown},
}

// String names the code as its constant does, or CloseCode(n) for a code this
// package does not define, as coder/websocket's StatusCode does.
func (c CloseCode) String() string {
	for _, e := range closeCodes {
		if e.code == c {
			return e.name
		}
	}
	return "CloseCode(" + strconv.Itoa(int(c)) + ")"
}

// Reason returns the error code the close code stands for, or "" for
// CloseNormal and for a code this package does not define.
func (c CloseCode) Reason() string {
	for _, e := range closeCodes {
		if e.code == c {
			return e.reason
		}
	}
	return ""
}

// CloseFor returns the close code for an error code, or 0 when the code does
// not end a socket.
func CloseFor(errorCode string) CloseCode {
	if errorCode == "" {
		return 0
	}
	for _, e := range closeCodes {
		if e.reason == errorCode {
			return e.code
		}
	}
	return 0
}
