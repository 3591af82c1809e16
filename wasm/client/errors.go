package client

import (
	"context"
	"errors"
	"slices"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// Error is a failure with a stable code. The code is what a program branches
// on (and what the JavaScript API puts in Error.code); the message is for
// people and may change. Compare with errors.Is against the sentinels below.
type Error struct {
	code, msg string
}

func (e *Error) Error() string { return "relaywasm: " + e.msg }

// sentinels are the *Error values below, in order: Codes lists their codes,
// so a new one cannot be left out of relay.d.ts (tests/browser checks it).
var sentinels []*Error

// define is not inlined: inlined into each sentinel's initializer it made
// the package's init about 7 KB bigger in relay.wasm.
//
//go:noinline
func define(code, msg string) *Error {
	e := &Error{code, msg}
	sentinels = append(sentinels, e)
	return e
}

// Codes Code returns for a failure that is none of the sentinels.
const (
	CodeCanceled      = "canceled"        // a context was canceled
	CodeTimeout       = "timeout"         // a context's deadline passed
	CodeClosedByRelay = "closed_by_relay" // a close code that names no reason
	CodeOther         = "error"           // anything else
)

// Codes lists every code Code can return: the sentinels', the reasons the
// relay's close codes name (relayleg), and the four above.
func Codes() []string {
	var out []string
	for _, e := range sentinels {
		out = append(out, e.code)
	}
	for c := relayleg.CloseCode(1000); c < 5000; c++ {
		if r := c.Reason(); r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return append(out, CodeCanceled, CodeTimeout, CodeClosedByRelay, CodeOther)
}

// Code is the stable, machine-readable name of the failure.
func (e *Error) Code() string { return e.code }

// Failures that end an attachment. None is retried: each says the next dial
// would fail the same way, or that the application asked for the end.
var (
	ErrUnauthorized       = define(relayleg.CodeUnauthorized, "the relay refused the credential")
	ErrBadRelaySignature  = define("bad_relay_signature", "the relay could not prove it holds the pinned key")
	ErrUnsupportedVersion = define(librelay.CodeVersion, "the relay selected a protocol version this client does not speak")
	ErrSuperseded         = define(relayleg.CodeSuperseded, "another client reclaimed this attachment")
	ErrDetached           = define("detached", "the attachment was detached")
	ErrClosed             = define("closed", "the attachment is closed")
)

// Failures reported to the caller of one operation. ErrBadOptions also ends
// an attachment whose Transport will never dial its URL (Transport.Dial).
var (
	ErrBadOptions    = define("bad_options", "invalid options")
	ErrBadPayload    = define("bad_payload", "payload is not a single JSON value")
	ErrBadCursor     = define("bad_cursor", "cannot resume after a seq that was never delivered")
	ErrSendQueueFull = define("send_queue_full", "too many messages are waiting for the connection")
	ErrSendFailed    = define("send_failed", "the connection dropped while the message was being written; it may not have arrived")
	// ErrFrameTooLarge: the message's frame is over the relay's browser-leg
	// limit, which would discard it and close the connection (4413, the
	// same code); it was not sent.
	ErrFrameTooLarge = define(relayleg.CodeFrameTooLarge, "the message is larger than the relay's browser leg carries")
)

// Failures that end one connection; the attachment redials after each.
var (
	ErrUnknownInstance  = define(librelay.CodeUnknownInstance, "no runtime is connected to the relay for this instance")
	ErrRuntimeGone      = define(relayleg.CodeRuntimeGone, "the runtime disconnected from the relay")
	ErrHeartbeatTimeout = define(relayleg.CodeHeartbeatTimeout, "the relay did not answer a heartbeat in time")
	ErrProtocol         = define("protocol_error", "the relay sent something this client cannot follow")
	ErrUnreachable      = define("unreachable", "the relay could not be reached")
	ErrOffline          = define("offline", "the browser reports no network")
)

// ErrNotSent is what a Transport's Conn.Write wraps when it knows the message
// did not leave (the socket was already closing). The engine then keeps the
// message queued for the next connection instead of failing it, which is safe
// precisely because nothing was sent: a client never sends a message twice.
var ErrNotSent = errors.New("relaywasm: message not sent: the socket is not open")

// detailed keeps a sentinel's identity while saying what happened this time.
type detailed struct {
	sentinel *Error
	detail   string
	cause    error
}

func (e *detailed) Error() string {
	s := e.sentinel.Error()
	if e.detail != "" {
		s += ": " + e.detail
	}
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *detailed) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

func wrap(sentinel *Error, detail string, cause error) error {
	return &detailed{sentinel: sentinel, detail: detail, cause: cause}
}

// Code returns the stable code of err: the code of the *Error it wraps, the
// reason a relay's close code names, "canceled" or "timeout" for a context,
// and "error" for anything else. Code(nil) is "".
func Code(err error) string {
	if err == nil {
		return ""
	}
	// errors.AsType, not errors.As: As needs reflection (internal/reflectlite,
	// about 30 KB of relay.wasm's code), AsType only type assertions.
	if e, ok := errors.AsType[*Error](err); ok {
		return e.code
	}
	if ce, ok := errors.AsType[*CloseError](err); ok {
		if r := relayleg.CloseCode(ce.Code).Reason(); r != "" {
			return r
		}
		return CodeClosedByRelay
	}
	switch {
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	}
	return CodeOther
}

// fatal reports whether err ends the attachment instead of one connection.
func fatal(err error) bool {
	for _, s := range []*Error{ErrUnauthorized, ErrBadRelaySignature, ErrUnsupportedVersion, ErrSuperseded, ErrDetached, ErrClosed, ErrBadOptions} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// closeError turns a relay's close into the error it stands for, so a close
// with 4401 ends the attachment exactly as a relay.error unauthorized would.
// A close code the client does not act on stays a *CloseError.
func closeError(ce *CloseError) error {
	if s := byCode(relayleg.CloseCode(ce.Code).Reason()); s != nil {
		return wrap(s, "", ce)
	}
	return ce
}

// relayError turns a relay.error code into the error it stands for, or nil
// when the code names nothing this client acts on.
func relayError(code, message string) error {
	if s := byCode(code); s != nil {
		return wrap(s, message, nil)
	}
	return nil
}

// actedOn are the relay's error codes that change what the client does: end
// the attachment, or redial knowing why.
var actedOn = []*Error{ErrUnauthorized, ErrUnsupportedVersion, ErrSuperseded, ErrUnknownInstance, ErrRuntimeGone, ErrHeartbeatTimeout}

func byCode(code string) *Error {
	for _, s := range actedOn {
		if s.code == code {
			return s
		}
	}
	return nil
}
