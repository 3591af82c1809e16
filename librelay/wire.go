package librelay

import (
	"errors"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// ErrMalformedFrame reports a frame that is not well-formed JSON, is not a
// JSON object, or has a known member of the wrong JSON type (a number for
// "type", a fraction or a sign in "seq"); the control payloads' UnmarshalJSON
// methods report the same for their own members. It is per-frame, like the
// validation errors: a Reader carries on at the next line. An addition to the
// spec, so a caller can answer CodeMalformedFrame without string matching.
var ErrMalformedFrame = errors.New("librelay: malformed frame")

// frameFields are the wire names of Frame's members, in wire order; the
// field* constants index it.
var frameFields = [...]string{"type", "instance", "session", "id", "re", "seq", "trace", "payload"}

const (
	fieldType = iota
	fieldInstance
	fieldSession
	fieldID
	fieldRe
	fieldSeq
	fieldTrace
	fieldPayload
)

// AppendFrame validates f and appends its compact wire form to dst, with no
// trailing newline: the form for message-framed transports (one WebSocket
// text message per frame), and what Writer writes before its newline.
//
// It is an addition to the spec for the browser module, which must not pay
// for reflection on every frame. The encoding is byte for byte what
// encoding/json's Encoder with SetEscapeHTML(false) writes for a Frame:
// members in the order type, instance, session, id, re, seq, trace, payload,
// omitempty as tagged, the payload compacted (only when it holds whitespace
// between tokens; otherwise spliced as is).
//
// It fails closed: on any error dst is returned with its original length and
// nothing has been appended. Errors are f.Validate's, ErrMalformedFrame for a
// payload that is not exactly one JSON value (or nests deeper than a reader
// would accept), and ErrFrameTooLarge for an encoding that, with the newline
// Writer adds, would be over MaxFrameBytes: the longest encoding is
// MaxFrameBytes-1 bytes, so every frame this returns is one a Reader (ours or
// the reference) accepts as a line, and one a relay can carry from a
// message-framed leg onto a line-framed one.
//
// The one place this is stricter than the reference Writer: encoding/json
// checks a payload's nesting on the payload alone, so the reference Writer
// writes a payload nested 10000 deep that its own Reader, counting the
// frame's object as one more level, refuses. This refuses it.
func AppendFrame(dst []byte, f *Frame) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return dst, err
	}
	var space bool
	if len(f.Payload) > 0 {
		var err error
		if space, err = checkValue(f.Payload, 1); err != nil {
			return dst, err
		}
	}
	b := appendEnvelope(slices.Grow(dst, sizeHint(f)), f, space)
	if n := len(b) - len(dst); n >= MaxFrameBytes {
		return dst, wrap(ErrFrameTooLarge, "encoded frame is "+strconv.Itoa(n)+" bytes and its newline")
	}
	return b, nil
}

// sizeHint is enough for the encoding of f unless its strings need escapes.
func sizeHint(f *Frame) int {
	return 80 + len(f.Type) + len(f.Instance) + len(f.Session) + len(f.ID) +
		len(f.ReplyTo) + len(f.Trace) + len(f.Payload)
}

// appendEnvelope writes a frame already known to be valid.
func appendEnvelope(b []byte, f *Frame, compact bool) []byte {
	b = appendString(append(b, `{"type":`...), f.Type)
	b = appendMember(b, `,"instance":`, f.Instance)
	b = appendMember(b, `,"session":`, f.Session)
	b = appendMember(b, `,"id":`, f.ID)
	b = appendMember(b, `,"re":`, f.ReplyTo)
	if f.Seq != 0 {
		b = strconv.AppendUint(append(b, `,"seq":`...), f.Seq, 10)
	}
	b = appendMember(b, `,"trace":`, f.Trace)
	if len(f.Payload) > 0 {
		b = append(b, `,"payload":`...)
		if compact {
			b = appendCompact(b, f.Payload)
		} else {
			b = append(b, f.Payload...)
		}
	}
	return append(b, '}')
}

// appendMember writes an omitempty string member, prefix being its
// `,"name":`.
func appendMember(b []byte, prefix, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(append(b, prefix...), v)
}

// ParseFrame decodes and validates exactly one frame from one message, such
// as one WebSocket text message; whitespace around it, including a trailing
// CR/LF, is accepted. It is an addition to the spec for message-framed
// transports, and what Reader.ReadFrame does with each line.
//
// It reads what encoding/json's Unmarshal reads into a Frame, with the same
// result: member names match case-insensitively, unknown members are ignored
// (but must be well-formed), a repeated member's last value wins, null leaves
// a string or seq member empty, seq must be a non-negative integer literal,
// escapes including surrogate pairs are decoded and an unpaired surrogate
// becomes U+FFFD, raw invalid UTF-8 in a string member becomes U+FFFD (so an
// identifier never fails with ErrNotUTF8 here, as in the reference Reader),
// and a payload is kept byte for byte as received (null included, as the four
// bytes "null").
//
// The result never aliases msg, so the caller may reuse msg at once. All of
// the frame's strings and its payload share one allocation (a second one only
// when invalid UTF-8 in a string grows it).
//
// Errors: ErrFrameTooLarge for a frame that could not be a line (its text,
// without surrounding whitespace, is MaxFrameBytes or more, leaving no room
// for the newline), ErrMalformedFrame, and Frame.Validate's. None of them says
// anything about the next message.
func ParseFrame(msg []byte) (Frame, error) {
	if len(msg) >= MaxFrameBytes && len(trimSpace(msg)) >= MaxFrameBytes {
		return Frame{}, ErrFrameTooLarge
	}
	var p frameParts
	if err := p.scan(msg); err != nil {
		return Frame{}, err
	}
	f := p.build()
	if err := f.Validate(); err != nil {
		return Frame{}, err
	}
	return f, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// stringPart is a string member as it appears in the message: its body
// between the quotes and whether that body holds escapes.
type stringPart struct {
	body    []byte
	escaped bool
}

// frameParts locates a frame's members in a message before anything is
// copied, so the copy can be a single allocation sized exactly.
type frameParts struct {
	str     [len(frameFields)]stringPart // indexed by field*, seq and payload unused
	seq     uint64
	payload []byte
}

// scan is decodeObject with the member handler called directly, which keeps
// the decoder off the heap.
func (p *frameParts) scan(msg []byte) error {
	d := newDecoder(msg)
	for {
		field, err := d.field(frameFields[:])
		if err != nil || field == endOfObject {
			return err
		}
		if err := p.member(&d, field); err != nil {
			return err
		}
	}
}

func (p *frameParts) member(d *decoder, field int) error {
	switch field {
	case fieldSeq:
		return d.readUint("seq", &p.seq)
	case fieldPayload:
		start := d.i
		err := d.skip()
		p.payload = d.b[start:d.i]
		return err
	}
	body, escaped, set, err := d.stringSpan(frameFields[field])
	if set {
		p.str[field] = stringPart{body, escaped}
	}
	return err
}

// build copies the located members into one allocation. The strings are
// views of that allocation made with unsafe.String: safe because nothing
// else can reach the bytes behind them (the payload is a disjoint range whose
// capacity ends where it does, so appending to it reallocates) and they are
// never written again.
func (p *frameParts) build() Frame {
	n := len(p.payload)
	for _, s := range p.str {
		n += len(s.body) // escapes only shorten; see take for invalid UTF-8
	}
	f := Frame{Seq: p.seq}
	if n == 0 {
		return f
	}
	buf := make([]byte, 0, n)
	if p.payload != nil {
		buf = append(buf, p.payload...)
		f.Payload = buf[:len(buf):len(buf)]
	}
	f.Type, buf = p.str[fieldType].take(buf)
	f.Instance, buf = p.str[fieldInstance].take(buf)
	f.Session, buf = p.str[fieldSession].take(buf)
	f.ID, buf = p.str[fieldID].take(buf)
	f.ReplyTo, buf = p.str[fieldRe].take(buf)
	f.Trace, _ = p.str[fieldTrace].take(buf)
	return f
}

// take decodes s onto the end of buf and returns it as a string, raw invalid
// UTF-8 coerced to U+FFFD as encoding/json does. That is the one case where
// decoding lengthens a string (one byte becomes three); append then moves buf
// to a new array, which leaves the strings already taken intact in the old.
func (s stringPart) take(buf []byte) (string, []byte) {
	if len(s.body) == 0 {
		return "", buf
	}
	start := len(buf)
	if s.escaped || !utf8.Valid(s.body) {
		buf = appendUnquoted(buf, s.body)
	} else {
		buf = append(buf, s.body...)
	}
	return unsafe.String(&buf[start], len(buf)-start), buf
}
