package librelay

import (
	"encoding/base64"
	"strconv"
)

// The control payloads encode and decode themselves without reflection, so
// the browser module can speak the handshake without linking encoding/json.
// Each method produces and accepts exactly the JSON encoding/json would for
// the struct's tags — []byte as padded standard base64, omitempty as tagged,
// unknown members ignored, null leaving a field as it was — and strings are
// written without HTML escaping, as Writer writes them. encoding/json still
// works on these types: it calls the methods.

// MarshalJSON encodes h as encoding/json would.
func (h Hello) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 64+len(h.Instance)+len(h.Agent)+base64.StdEncoding.EncodedLen(len(h.Nonce)))
	b = appendInt(append(b, `{"protocol_version":`...), h.ProtocolVersion)
	b = appendString(append(b, `,"instance":`...), h.Instance)
	b = appendMember(b, `,"agent":`, h.Agent)
	b = appendBytesMember(b, `,"nonce":`, h.Nonce)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for h.
func (h *Hello) UnmarshalJSON(data []byte) error {
	names := [...]string{"protocol_version", "instance", "agent", "nonce"}
	return decodeObject(data, names[:], func(d *decoder, field int) error {
		switch field {
		case 0:
			return d.readInt(names[0], &h.ProtocolVersion)
		case 1:
			return d.readString(names[1], &h.Instance)
		case 2:
			return d.readString(names[2], &h.Agent)
		default:
			return d.readBytes(names[3], &h.Nonce)
		}
	})
}

// MarshalJSON encodes w as encoding/json would.
func (w Welcome) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 80+len(w.Relay)+base64.StdEncoding.EncodedLen(len(w.Signature)))
	b = appendInt(append(b, `{"protocol_version":`...), w.ProtocolVersion)
	b = appendMember(b, `,"relay":`, w.Relay)
	b = appendBytesMember(b, `,"sig":`, w.Signature)
	if w.RetryAfterSeconds != 0 {
		b = appendInt(append(b, `,"retry_after":`...), w.RetryAfterSeconds)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for w.
func (w *Welcome) UnmarshalJSON(data []byte) error {
	names := [...]string{"protocol_version", "relay", "sig", "retry_after"}
	return decodeObject(data, names[:], func(d *decoder, field int) error {
		switch field {
		case 0:
			return d.readInt(names[0], &w.ProtocolVersion)
		case 1:
			return d.readString(names[1], &w.Relay)
		case 2:
			return d.readBytes(names[2], &w.Signature)
		default:
			return d.readInt(names[3], &w.RetryAfterSeconds)
		}
	})
}

// MarshalJSON encodes r as encoding/json would.
func (r Resume) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 40)
	b = strconv.AppendUint(append(b, `{"after_seq":`...), r.AfterSeq, 10)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for r.
func (r *Resume) UnmarshalJSON(data []byte) error {
	names := [...]string{"after_seq"}
	return decodeObject(data, names[:], func(d *decoder, _ int) error {
		return d.readUint(names[0], &r.AfterSeq)
	})
}

// MarshalJSON encodes r as encoding/json would.
func (r Resumed) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 48)
	b = strconv.AppendUint(append(b, `{"from_seq":`...), r.FromSeq, 10)
	if r.Evicted {
		b = append(b, `,"evicted":true`...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for r.
func (r *Resumed) UnmarshalJSON(data []byte) error {
	names := [...]string{"from_seq", "evicted"}
	return decodeObject(data, names[:], func(d *decoder, field int) error {
		if field == 0 {
			return d.readUint(names[0], &r.FromSeq)
		}
		return d.readBool(names[1], &r.Evicted)
	})
}

// MarshalJSON encodes e as encoding/json would.
func (e Error) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 32+len(e.Code)+len(e.Message))
	b = appendString(append(b, `{"code":`...), e.Code)
	b = appendMember(b, `,"message":`, e.Message)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for e.
func (e *Error) UnmarshalJSON(data []byte) error {
	names := [...]string{"code", "message"}
	return decodeObject(data, names[:], func(d *decoder, field int) error {
		if field == 0 {
			return d.readString(names[0], &e.Code)
		}
		return d.readString(names[1], &e.Message)
	})
}

// decodeObject decodes the JSON object in data, calling member for each
// member whose key selects one of names (with its index) and validating and
// skipping the rest. A literal null is a no-op, as encoding/json makes it.
func decodeObject(data []byte, names []string, member func(d *decoder, field int) error) error {
	d := newDecoder(data)
	for {
		field, err := d.field(names)
		if err != nil || field == endOfObject {
			return err
		}
		if err := member(&d, field); err != nil {
			return err
		}
	}
}

func appendInt(b []byte, v int) []byte { return strconv.AppendInt(b, int64(v), 10) }

// appendBytesMember writes an omitempty []byte member as padded standard
// base64, as encoding/json does.
func appendBytesMember(b []byte, prefix string, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, prefix...)
	b = base64.StdEncoding.AppendEncode(append(b, '"'), v)
	return append(b, '"')
}
