package natstable

import (
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/relaywasm/relaywasm/librelay"
)

// Every data message (a frame on its way to a runtime or to a browser) is a
// fixed header naming the stream it belongs to and its place in it, then the
// frame as the Frame it is, not as JSON:
//
//	[1] version (2)
//	[8] publishing node id
//	[8] stream number, unique on that node
//	[8] counter: 1, 2, 3 … within the stream
//	[8] seq
//	type, instance, session, id, re, trace: each a uvarint length and its bytes
//	the payload, as it is, to the message's end
//
// The counter is how a receiver knows that nothing was lost on the bus: NATS
// delivers at most once, in order per publisher, and a message it drops (a
// subscriber past its pending limits, no interest while a subscription is
// being re-established) shows as a counter that skips. A header with no
// frame after it is a tail (stream.tail): it takes a counter like a frame
// and is handed to no one, and shows a receiver the frames lost at the end
// of a stream, where no later frame would show the skip. A node built
// before tails reads one as a frame that does not parse, a step like any
// other, so the version stays 2.
//
// Why not the frame's JSON: the node that read the frame from its socket has
// parsed and validated it already, and the node that writes it to a socket
// encodes, and with that validates, it again (librelay.AppendFrame, as for a
// frame that never left the node), so nothing invalid reaches a socket
// either way. JSON on the bus cost a third encode and a third parse of every
// payload, a third of the receiving node's CPU per frame in
// BenchmarkCrossNode. Nodes of one bus must speak one version: a message of
// another is dropped, and shows as lost.
const (
	wireVersion = 2
	headerSize  = 1 + 8 + 8 + 8
)

type header struct {
	node, stream, n uint64
}

func appendHeader(b []byte, h header) []byte {
	b = append(b, wireVersion)
	b = binary.BigEndian.AppendUint64(b, h.node)
	b = binary.BigEndian.AppendUint64(b, h.stream)
	return binary.BigEndian.AppendUint64(b, h.n)
}

func parseHeader(b []byte) (header, []byte, bool) {
	if len(b) < headerSize || b[0] != wireVersion {
		return header{}, nil, false
	}
	return header{
		node:   binary.BigEndian.Uint64(b[1:]),
		stream: binary.BigEndian.Uint64(b[9:]),
		n:      binary.BigEndian.Uint64(b[17:]),
	}, b[headerSize:], true
}

// appendFrame appends f in the bus's form (after the header).
func appendFrame(b []byte, f *librelay.Frame) []byte {
	b = binary.BigEndian.AppendUint64(b, f.Seq)
	for _, s := range [...]string{f.Type, f.Instance, f.Session, f.ID, f.ReplyTo, f.Trace} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return append(b, f.Payload...)
}

// parseFrame reads a frame appendFrame wrote, or reports false for bytes
// that are not one. Its strings share one allocation; its payload is b's,
// which NATS hands to this one subscriber.
func parseFrame(b []byte) (librelay.Frame, bool) {
	if len(b) < 8 {
		return librelay.Frame{}, false
	}
	var parts [6][]byte
	off, total := 8, 0
	for i := range parts {
		n, w := binary.Uvarint(b[off:])
		if w <= 0 || n > uint64(len(b)-off-w) {
			return librelay.Frame{}, false
		}
		parts[i] = b[off+w : off+w+int(n)]
		off += w + int(n)
		total += int(n)
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, p := range parts {
		sb.Write(p)
	}
	all := sb.String()
	f := librelay.Frame{Seq: binary.BigEndian.Uint64(b)}
	at := 0
	for i, dst := range [...]*string{&f.Type, &f.Instance, &f.Session, &f.ID, &f.ReplyTo, &f.Trace} {
		*dst = all[at : at+len(parts[i])]
		at += len(parts[i])
	}
	if off < len(b) {
		f.Payload = b[off:]
	}
	return f, true
}

// An ack tells a publisher how far a receiver has handed a stream on:
//
//	[8] stream number  [8] counter  [8] receiving node id  [1] flags
//
// with flagReleased when the receiver has let the stream go (its socket or
// runtime left this node), so the publisher stops counting on it.
const (
	ackSize      = 8 + 8 + 8 + 1
	flagReleased = 1
)

type ack struct {
	stream, n, node uint64
	released        bool
}

func appendAck(b []byte, a ack) []byte {
	b = binary.BigEndian.AppendUint64(b, a.stream)
	b = binary.BigEndian.AppendUint64(b, a.n)
	b = binary.BigEndian.AppendUint64(b, a.node)
	var fl byte
	if a.released {
		fl = flagReleased
	}
	return append(b, fl)
}

func parseAck(b []byte) (ack, bool) {
	if len(b) != ackSize {
		return ack{}, false
	}
	return ack{
		stream:   binary.BigEndian.Uint64(b),
		n:        binary.BigEndian.Uint64(b[8:]),
		node:     binary.BigEndian.Uint64(b[16:]),
		released: b[24]&flagReleased != 0,
	}, true
}

// token makes a subject token of an instance name or attachment id. Ids are
// base64url already and most instance names are plain, so they are used as
// they are and stay readable to an operator watching the bus; anything with
// another character (a dot would split the token, '*' and '>' are
// wildcards) is "~" and its base64url, which no plain token starts with.
func token(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "~" + base64.RawURLEncoding.EncodeToString([]byte(s))
		}
	}
	if s == "" {
		return "~"
	}
	return s
}

// untoken is the name or id token made s of, or false for what token never
// makes.
func untoken(s string) (string, bool) {
	enc, ok := strings.CutPrefix(s, "~")
	if !ok {
		return s, s != "" && !strings.ContainsAny(s, ".*>")
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	return string(b), err == nil
}

func nodeToken(id uint64) string { return strconv.FormatUint(id, 16) }

// subjects names what the table publishes and subscribes under a prefix.
type subjects struct{ prefix string }

// runtime is where frames for instance's runtime go; only the node holding
// that runtime subscribes.
func (s subjects) runtime(instance string) string { return s.prefix + ".rt." + token(instance) }

// attachment is where frames for one attachment's browser go; only the node
// holding that socket subscribes.
func (s subjects) attachment(instance, session string) string {
	return s.prefix + ".at." + token(instance) + "." + token(session)
}

// parseRuntime reads the instance back from a runtime's subject.
func (s subjects) parseRuntime(subject string) (string, bool) {
	tok, ok := strings.CutPrefix(subject, s.prefix+".rt.")
	if !ok {
		return "", false
	}
	return untoken(tok)
}

// parseAttachment reads the route back from an attachment's subject.
func (s subjects) parseAttachment(subject string) (route, bool) {
	rest, ok := strings.CutPrefix(subject, s.prefix+".at.")
	itok, stok, ok2 := strings.Cut(rest, ".")
	instance, ok3 := untoken(itok)
	session, ok4 := untoken(stok)
	return route{instance, session}, ok && ok2 && ok3 && ok4
}

// control carries holds, releases, claims and heartbeats; every node
// subscribes.
func (s subjects) control() string { return s.prefix + ".ctl" }

// probe is where other nodes ask node whether its runtime for an instance
// is alive before they take it over (probe.go).
func (s subjects) probe(node uint64) string { return s.prefix + ".probe." + nodeToken(node) }

// ack is where a node's publishers hear how far their streams were taken.
func (s subjects) ack(node uint64) string { return s.prefix + ".ack." + nodeToken(node) }

// unheard is the reply subject of every frame node publishes on stream to a
// runtime held by h: NATS answers a message with a reply subject that
// reached no subscriber with a "503" status there, which is how the node
// learns at once that h's node no longer subscribes to the runtime's
// subject. unheardAll is what the node subscribes to for them.
func (s subjects) unheard(node, stream uint64, h holder) string {
	return s.prefix + ".nr." + nodeToken(node) + "." + strconv.FormatUint(stream, 16) + "." +
		nodeToken(h.Node) + "." + strconv.FormatInt(h.Epoch, 16)
}

func (s subjects) unheardAll(node uint64) string { return s.prefix + ".nr." + nodeToken(node) + ".>" }

// parseUnheard reads the stream and hold back from an unheard subject.
func parseUnheard(subject string) (stream uint64, h holder, ok bool) {
	parts := strings.Split(subject, ".")
	if len(parts) < 3 {
		return 0, holder{}, false
	}
	parts = parts[len(parts)-3:]
	stream, err1 := strconv.ParseUint(parts[0], 16, 64)
	node, err2 := strconv.ParseUint(parts[1], 16, 64)
	epoch, err3 := strconv.ParseInt(parts[2], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, holder{}, false
	}
	return stream, holder{node, epoch}, true
}
