package relay

import (
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// judge checks a hello on either leg, in the order a peer should learn of
// its failures: the frame's shape, the credential (authorized: it may use
// the instance the hello names), that the instance has a runtime (present;
// always true on the runtime leg), and the version. It returns the decoded
// hello and the version to speak, or the error code and message of the
// refusal.
//
// A hello without a payload is the zero Hello, as Frame.DecodePayload makes
// it (spec 001: an absent payload decodes to nothing and is not an error),
// and is judged as that: it offers version 0. Hello.UnmarshalJSON refuses
// empty input, as encoding/json does.
func judge(f librelay.Frame, authorized, present bool) (librelay.Hello, int, string, string) {
	var h librelay.Hello
	if f.Type != librelay.TypeHello || !f.IsRequest() || f.Instance == "" {
		return h, 0, librelay.CodeMalformedFrame, "the first frame must be a relay.hello request naming an instance"
	}
	if len(f.Payload) > 0 && h.UnmarshalJSON(f.Payload) != nil {
		return h, 0, librelay.CodeMalformedFrame, "the hello payload is not a Hello"
	}
	if h.Instance != "" && h.Instance != f.Instance {
		return h, 0, librelay.CodeMalformedFrame, "the hello names two instances"
	}
	v, ok := negotiate(h.ProtocolVersion)
	switch {
	case !authorized:
		return h, v, relayleg.CodeUnauthorized, "the credential is not allowed this instance"
	case !present:
		return h, v, librelay.CodeUnknownInstance, "no runtime is connected for this instance"
	case !ok:
		return h, v, librelay.CodeVersion, "no protocol version in common"
	}
	return h, v, "", ""
}

// signIfAsked signs the welcome, on either leg, when the peer sent a nonce.
// Spec 001 makes both the hello's nonce and the welcome's signature
// optional, since only a peer pinning the relay's key checks one: a peer
// that pins none may send no nonce, and gets an unsigned welcome rather
// than a refusal.
func signIfAsked(r *Relay, nonce []byte, v int, instance string) ([]byte, error) {
	if len(nonce) == 0 {
		return nil, nil
	}
	return librelay.SignWelcome(r.key, nonce, v, instance)
}

// negotiate picks min(peer, self) and reports whether this relay speaks it.
func negotiate(peer int) (int, bool) {
	v := min(peer, librelay.ProtocolVersion)
	return v, v >= 1
}

// controlReply is the relay's answer to a relay.* frame from either leg (nil
// when none is owed), and whether the frame is a relay.error to route: one
// carrying a session answers a request routed through the relay.
func controlReply(f *librelay.Frame) (reply *librelay.Frame, route bool) {
	switch f.Type {
	case librelay.TypeHeartbeat:
		if f.IsRequest() {
			return &librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID}, false
		}
	case librelay.TypeAck:
	case librelay.TypeError:
		return nil, f.Session != ""
	case librelay.TypeHello:
		if f.IsRequest() {
			return ptr(librelay.NewError(*f, librelay.CodeMalformedFrame, "already welcomed")), false
		}
	default:
		if r, ok := librelay.Unsupported(*f); ok {
			return &r, false
		}
	}
	return nil, false
}
