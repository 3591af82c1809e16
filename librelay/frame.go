package librelay

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// ProtocolVersion is the envelope version this build speaks; exchanged once in
// [Hello]/[Welcome], never on a frame, because it cannot change mid-connection
// and a framing change severe enough to need it would make the frame
// unparseable before the version was reachable.
const ProtocolVersion = 1

// Envelope limits bound what a decoder will allocate for a single frame before
// it gives up. They are a memory contract, not a style rule: a relay pays the
// read buffer per connection. MaxFrameBytes counts a frame's whole line, the
// newline that ends it included, as the reference Reader and Writer count it.
const (
	MaxFrameBytes = 16 << 20
	MaxTypeBytes  = 128
	MaxIDBytes    = 256
)

// ControlPrefix marks a type as relay-level control traffic; a relay handles
// frames with this prefix and forwards everything else, without ever looking
// at the payload.
const ControlPrefix = "relay."

// Control message types; part of the protocol floor and may never be removed,
// because [Unsupported] answers with TypeError and a peer that did not
// understand TypeError could not learn that it had failed.
const (
	// TypeHello is the connector's opening frame, payload [Hello]; a request answered with TypeWelcome or TypeError.
	TypeHello = ControlPrefix + "hello"
	// TypeWelcome is the relay's answer to TypeHello, payload [Welcome].
	TypeWelcome = ControlPrefix + "welcome"
	// TypeHeartbeat is a liveness probe with no payload, sent by either end; a request answered with TypeAck.
	TypeHeartbeat = ControlPrefix + "heartbeat"
	// TypeAck answers TypeHeartbeat, carrying no payload.
	TypeAck = ControlPrefix + "ack"
	// TypeError reports a failure, payload [Error]; as a response it never induces a response.
	TypeError = ControlPrefix + "error"
)

// TypeACPMessage tunnels one ACP JSON-RPC message, byte for byte; a relay
// routes it without parsing or linking an ACP library.
const TypeACPMessage = "acp.message"

// TypeACPDetach reports that the client behind one attachment is gone; it
// carries no payload, and is a hint rather than a prerequisite for anything.
const TypeACPDetach = "acp.detach"

// Error codes carried by [Error]; strings rather than integers so an
// unrecognized code degrades to something legible in a log.
const (
	CodeUnsupportedType = "unsupported_type"
	CodeMalformedFrame  = "malformed_frame"
	CodeUnknownInstance = "unknown_instance"
	// CodeUnauthorized refuses a credential that is missing, wrong, or not allowed the instance.
	CodeUnauthorized = "unauthorized"
	CodeVersion      = "unsupported_version"
	// CodeCursorEvicted answers a [Resume] whose cursor the producer no longer retains at all; a partial replay sets [Resumed].Evicted instead.
	CodeCursorEvicted = "cursor_evicted"
)

// Validation failures: all "this frame is not addressable", treated as a bad
// message rather than a bad connection.
var (
	ErrEmptyType    = errors.New("librelay: frame type is empty")
	ErrTypeTooLong  = errors.New("librelay: frame type exceeds MaxTypeBytes")
	ErrIDTooLong    = errors.New("librelay: identifier exceeds MaxIDBytes")
	ErrControlChar  = errors.New("librelay: identifier contains a control character")
	ErrBothIDs      = errors.New("librelay: frame sets both id and re")
	ErrSessionAlone = errors.New("librelay: frame sets session without instance")
	ErrNotUTF8      = errors.New("librelay: identifier is not valid UTF-8")
)

// Frame is the transport envelope; wire field names are short because every
// ACP message pays for them. Instance and Session form the routing key and are
// direction-independent: they name what a frame concerns, not who sent it.
type Frame struct {
	// Type discriminates the frame; control types carry ControlPrefix, everything else is routed opaquely.
	Type string `json:"type"`
	// Instance is the runtime instance this frame concerns; empty only on frames that precede identification.
	Instance string `json:"instance,omitempty"`
	// Session names the stream within Instance that this frame concerns; a relay routes on the value without interpreting it. Empty on control traffic and anything instance-scoped.
	Session string `json:"session,omitempty"`
	// ID marks this frame as a request and correlates the reply; its presence, not the type, obliges exactly one answer.
	ID string `json:"id,omitempty"`
	// ReplyTo carries the ID of the request being answered and marks this frame as a response.
	ReplyTo string `json:"re,omitempty"`
	// Seq is the producer's per-(Instance, Session) cursor for this frame, monotonically increasing and gap-free within a session; zero means unsequenced.
	Seq uint64 `json:"seq,omitempty"`
	// Trace is the correlation key for the one human action this frame belongs to; peer-supplied text that must never be authorized on, only logged and joined. [MaxTraceBytes]/[TraceAlphabet] bound it; empty means untraced.
	Trace string `json:"trace,omitempty"`
	// Payload is the message body, left as raw JSON so intermediaries do not parse it; empty is legal.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// IsControl reports whether a type is relay-level control traffic; a relay
// handles these and forwards everything else, including types it has never
// heard of.
func IsControl(msgType string) bool { return strings.HasPrefix(msgType, ControlPrefix) }

// IsRequest reports whether f obliges the receiver to send exactly one
// response. A request is recognised by its ID, not its type, so this stays
// true for types this build does not know.
func (f Frame) IsRequest() bool { return f.ID != "" }

// IsResponse reports whether f answers an earlier request; a response is never
// answered, which is what keeps two disagreeing peers from trading errors
// forever.
func (f Frame) IsResponse() bool { return f.ReplyTo != "" }

// Validate reports whether f is structurally addressable and safe to log. It
// deliberately says nothing about whether Type is known: rejecting unknown
// types is the forward-compatibility failure the protocol is built to avoid.
//
// It accepts and refuses exactly what the reference Validate does. The checks
// run in a fixed order and the first failure is returned, so a frame with
// several defects always reports the same one:
//
//  1. Type empty (ErrEmptyType), then longer than MaxTypeBytes (ErrTypeTooLong).
//  2. Both ID and ReplyTo set (ErrBothIDs).
//  3. Session set without Instance (ErrSessionAlone).
//  4. Trace longer than MaxTraceBytes (ErrTraceTooLong), then a byte outside
//     TraceAlphabet (ErrTraceCharset).
//  5. Each identifier in wire order — type, instance, session, id, re: longer
//     than MaxIDBytes (ErrIDTooLong, not for type, already bounded), then a
//     C0 control or DEL anywhere in it (ErrControlChar), then invalid UTF-8
//     anywhere in it (ErrNotUTF8).
//
// The reference checks the identifiers in no fixed order; this order is one
// of the orders it may take, and the same every time. C1 controls (U+0080 to
// U+009F) are not refused, because the reference does not refuse them: an
// identifier the reference's endpoints send is one a relay must carry.
//
// Cheap structural checks come first so a hostile frame is refused before its
// identifiers are scanned. Errors wrap the sentinel with the field's name.
func (f Frame) Validate() error {
	switch {
	case f.Type == "":
		return ErrEmptyType
	case len(f.Type) > MaxTypeBytes:
		return wrap(ErrTypeTooLong, "type")
	case f.ID != "" && f.ReplyTo != "":
		return ErrBothIDs
	case f.Session != "" && f.Instance == "":
		return ErrSessionAlone
	}
	if err := checkTrace(f.Trace); err != nil {
		return err
	}
	return checkIdentifiers(&f)
}

// checkIdentifiers applies the identifier rules to every routing field, in
// wire order.
func checkIdentifiers(f *Frame) error {
	fields := [...]struct{ name, value string }{
		{"type", f.Type}, {"instance", f.Instance}, {"session", f.Session},
		{"id", f.ID}, {"re", f.ReplyTo},
	}
	for _, fd := range fields {
		if err := checkIdentifier(fd.name, fd.value); err != nil {
			return err
		}
	}
	return nil
}

// checkIdentifier rejects what would corrupt a log line (a C0 control or DEL)
// and what would not survive a hop: invalid UTF-8, which JSON encoding
// rewrites to U+FFFD, so a key that is one value here would be another on the
// next hop. A Reader never yields invalid UTF-8 (it decodes it to U+FFFD, as
// encoding/json does); this refuses it in a frame built in-process.
func checkIdentifier(name, v string) error {
	if len(v) > MaxIDBytes {
		return wrap(ErrIDTooLong, name)
	}
	ascii := true
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < 0x20 || c == 0x7f:
			return wrap(ErrControlChar, name)
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if !ascii && !utf8.ValidString(v) {
		return wrap(ErrNotUTF8, name)
	}
	return nil
}

// Unsupported returns the reply owed to a frame this build cannot handle, and
// whether one is owed at all. The caller has already decided it cannot handle
// f (typically an unknown control type); this function decides only whether
// the sender is waiting. A request is answered with TypeError /
// CodeUnsupportedType so its sender fails at once instead of waiting out a
// timeout. A response or a notification gets nothing: nobody is waiting on it,
// and answering a response is how two peers ping-pong errors forever.
func Unsupported(f Frame) (Frame, bool) {
	if !f.IsRequest() || f.IsResponse() {
		return Frame{}, false
	}
	return NewError(f, CodeUnsupportedType, "unsupported message type "+clampType(f.Type)), true
}

// NewError builds a response carrying code and message, correlated to req when
// req is a request; otherwise the error frame is a notification, which a peer
// logs rather than answers. The payload is encoded without reflection.
func NewError(req Frame, code, message string) Frame {
	payload, _ := Error{Code: code, Message: message}.MarshalJSON()
	return Frame{
		Type:     TypeError,
		Instance: req.Instance,
		Session:  req.Session,
		ReplyTo:  req.ID,
		Payload:  payload,
	}
}

// clampType bounds an untrusted type before it is echoed into a message, so a
// peer cannot use the error path to make this end emit more than it received.
// It cuts on a rune boundary.
func clampType(t string) string {
	if len(t) <= MaxTypeBytes {
		return t
	}
	n := MaxTypeBytes
	for n > 0 && !utf8.RuneStart(t[n]) {
		n--
	}
	return t[:n] + "…"
}

// WithPayload returns f carrying v as its payload, encoded as compact JSON
// without HTML escaping (the same bytes Writer puts on the wire). It is the
// way to build a payload that is guaranteed newline-free. It uses
// encoding/json; code that must stay small calls the MarshalJSON methods of
// the control payloads directly instead.
func (f Frame) WithPayload(v any) (Frame, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return f, wrapBoth(errors.New("librelay: encode payload for "+clampType(f.Type)), err)
	}
	p := buf.Bytes()
	n := len(p) - 1 // Encode appends one newline
	f.Payload = p[:n:n]
	return f, nil
}

// DecodePayload unmarshals f's payload into v; an absent payload decodes to
// nothing and is not an error, so a peer may add a payload to a frame that had
// none without breaking older readers.
func (f Frame) DecodePayload(v any) error {
	if len(f.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(f.Payload, v); err != nil {
		return wrapBoth(errors.New("librelay: decode payload of "+clampType(f.Type)), err)
	}
	return nil
}
