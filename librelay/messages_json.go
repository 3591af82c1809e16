package librelay

import (
	"encoding/base64"
	"strconv"
	"time"
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

// MarshalJSON encodes c as encoding/json would. Input is written as a
// json.RawMessage field is: compacted, "null" when nil, and an error when it
// is not exactly one JSON value (empty but not nil included).
func (c ChainTrigger) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 96+len(c.RequestID)+len(c.Chain)+len(c.AgentName)+len(c.SessionMode)+len(c.SessionName)+len(c.Input)+len(c.Policy))
	b = appendString(append(b, `{"request_id":`...), c.RequestID)
	b = appendString(append(b, `,"chain":`...), c.Chain)
	b = appendMember(b, `,"agent_name":`, c.AgentName)
	b = appendString(append(b, `,"session_mode":`...), c.SessionMode)
	b = appendMember(b, `,"session_name":`, c.SessionName)
	b, err := appendRaw(append(b, `,"input":`...), c.Input)
	if err != nil {
		return nil, err
	}
	b = appendMember(b, `,"policy":`, c.Policy)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for c; Input keeps the
// value's bytes as received, a null as the four bytes "null".
func (c *ChainTrigger) UnmarshalJSON(data []byte) error {
	names := [...]string{"request_id", "chain", "agent_name", "session_mode", "session_name", "input", "policy"}
	fields := [...]*string{&c.RequestID, &c.Chain, &c.AgentName, &c.SessionMode, &c.SessionName, nil, &c.Policy}
	return decodeObject(data, names[:], func(d *decoder, field int) error {
		if field == 5 {
			return d.readRaw((*[]byte)(&c.Input))
		}
		return d.readString(names[field], fields[field])
	})
}

// MarshalJSON encodes r as encoding/json would.
func (r ChainTriggerResult) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 48+len(r.RequestID)+len(r.Status)+len(r.Error))
	b = appendString(append(b, `{"request_id":`...), r.RequestID)
	b = appendString(append(b, `,"status":`...), r.Status)
	b = appendMember(b, `,"error":`, r.Error)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for r.
func (r *ChainTriggerResult) UnmarshalJSON(data []byte) error {
	names := [...]string{"request_id", "status", "error"}
	fields := [...]*string{&r.RequestID, &r.Status, &r.Error}
	return decodeStrings(data, names[:], fields[:])
}

// MarshalJSON encodes a as encoding/json would. ExpiresAt is written by
// time.Time's own MarshalJSON (RFC 3339 with nanoseconds as needed) and fails
// as it fails, for a year outside 0 to 9999.
func (a AskPublished) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 160+len(a.AskID)+len(a.SessionID)+len(a.MissionID)+len(a.AgentName)+
		len(a.ToolsName)+len(a.ToolName)+len(a.PolicyName)+len(a.ArgsSummary))
	b = appendString(append(b, `{"ask_id":`...), a.AskID)
	b = appendMember(b, `,"session_id":`, a.SessionID)
	b = appendMember(b, `,"mission_id":`, a.MissionID)
	b = appendMember(b, `,"agent_name":`, a.AgentName)
	b = appendMember(b, `,"tools_name":`, a.ToolsName)
	b = appendMember(b, `,"tool_name":`, a.ToolName)
	b = appendMember(b, `,"policy_name":`, a.PolicyName)
	if a.MatchedRule != nil {
		b = appendInt(append(b, `,"matched_rule":`...), *a.MatchedRule)
	}
	b = appendMember(b, `,"args_summary":`, a.ArgsSummary)
	b, err := appendTimeMember(b, `,"expires_at":`, a.ExpiresAt)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for a: null sets
// MatchedRule to nil, a number is stored through it (allocating one when nil),
// and ExpiresAt is read by time.Time's own UnmarshalJSON.
func (a *AskPublished) UnmarshalJSON(data []byte) error {
	names := [...]string{"ask_id", "session_id", "mission_id", "agent_name", "tools_name", "tool_name",
		"policy_name", "matched_rule", "args_summary", "expires_at"}
	fields := [...]*string{&a.AskID, &a.SessionID, &a.MissionID, &a.AgentName, &a.ToolsName, &a.ToolName,
		&a.PolicyName, nil, &a.ArgsSummary, nil}
	return decodeObject(data, names[:], func(d *decoder, field int) error {
		switch field {
		case 7:
			return d.readIntPointer(names[7], &a.MatchedRule)
		case 9:
			return d.readTime(names[9], &a.ExpiresAt)
		}
		return d.readString(names[field], fields[field])
	})
}

// MarshalJSON encodes a as encoding/json would.
func (a AskResolved) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 32+len(a.AskID)+len(a.Reason))
	b = appendString(append(b, `{"ask_id":`...), a.AskID)
	b = appendString(append(b, `,"reason":`...), a.Reason)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for a.
func (a *AskResolved) UnmarshalJSON(data []byte) error {
	names := [...]string{"ask_id", "reason"}
	fields := [...]*string{&a.AskID, &a.Reason}
	return decodeStrings(data, names[:], fields[:])
}

// MarshalJSON encodes v as encoding/json would; DecidedAt as
// AskPublished.ExpiresAt is.
func (v AskVerdict) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 96+len(v.AskID)+len(v.Decision)+len(v.Answer)+len(v.Guidance)+len(v.DecidedBy))
	b = appendString(append(b, `{"ask_id":`...), v.AskID)
	b = appendString(append(b, `,"decision":`...), v.Decision)
	b = appendMember(b, `,"answer":`, v.Answer)
	b = appendMember(b, `,"guidance":`, v.Guidance)
	b = appendMember(b, `,"decided_by":`, v.DecidedBy)
	b, err := appendTimeMember(b, `,"decided_at":`, v.DecidedAt)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes what encoding/json would accept for v.
func (v *AskVerdict) UnmarshalJSON(data []byte) error {
	names := [...]string{"ask_id", "decision", "answer", "guidance", "decided_by", "decided_at"}
	fields := [...]*string{&v.AskID, &v.Decision, &v.Answer, &v.Guidance, &v.DecidedBy, nil}
	return decodeObject(data, names[:], func(d *decoder, field int) error {
		if field == 5 {
			return d.readTime(names[5], &v.DecidedAt)
		}
		return d.readString(names[field], fields[field])
	})
}

// decodeStrings is decodeObject for a payload of string members only, each
// names[i] decoded into fields[i].
func decodeStrings(data []byte, names []string, fields []*string) error {
	return decodeObject(data, names, func(d *decoder, field int) error {
		return d.readString(names[field], fields[field])
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

// appendTimeMember writes an omitzero time.Time member with time.Time's own
// MarshalJSON, as encoding/json does (its output needs no compacting).
func appendTimeMember(b []byte, prefix string, t time.Time) ([]byte, error) {
	if t.IsZero() {
		return b, nil
	}
	text, err := t.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(append(b, prefix...), text...), nil
}

// appendRaw writes a json.RawMessage member's value as encoding/json does:
// "null" for nil, and otherwise the value compacted, refusing anything that
// is not exactly one JSON value.
func appendRaw(b []byte, raw []byte) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	space, err := checkValue(raw, 0)
	if err != nil {
		return nil, err
	}
	if space {
		return appendCompact(b, raw), nil
	}
	return append(b, raw...), nil
}

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
