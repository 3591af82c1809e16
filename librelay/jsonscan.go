package librelay

import (
	"encoding/binary"
	"strconv"
)

// This file is a strict JSON validator: it accepts exactly what encoding/json
// accepts (RFC 8259 grammar, no raw control bytes in strings, nesting at most
// maxDepth) and reports where each value ends. It exists so the codec can find
// a payload's extent and prove it well-formed without reflection, without
// building a tree, and without linking encoding/json into the browser module.
// Like encoding/json it does not check UTF-8 inside strings: a payload is
// opaque bytes to this package and is carried as received.

// maxDepth is encoding/json's nesting limit; a frame it would refuse to
// decode is refused here too. The frame's own object counts as one level.
const maxDepth = 10000

// plainByte marks the bytes a JSON string may contain without attention: not
// a quote, not a backslash, not a control byte.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanner walks a JSON text in b. Its methods take the offset of a token and
// return the offset just past it.
type scanner struct {
	b []byte
	// space records that insignificant whitespace was skipped, which is
	// what decides whether a payload needs compacting.
	space bool
	// esc records that the last string scanned contained an escape.
	esc bool
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func (s *scanner) skipSpace(i int) int {
	j := i
	for j < len(s.b) && isSpace(s.b[j]) {
		j++
	}
	if j != i {
		s.space = true
	}
	return j
}

// fail reports a syntax error at offset i.
func (s *scanner) fail(i int) error {
	if i >= len(s.b) {
		return wrap(ErrMalformedFrame, "unexpected end of JSON input")
	}
	return wrap(ErrMalformedFrame, "invalid character "+describeByte(s.b[i])+" at offset "+strconv.Itoa(i))
}

// describeByte spells a byte for an error message: 'c' when printable
// ASCII, 0xNN otherwise (never raw, since messages end up in logs).
func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	return "0x" + string([]byte{hexDigits[c>>4], hexDigits[c&0xF]})
}

// value scans one value starting at b[i]; depth is the number of containers
// already open around it.
//
// It does not recurse. A container is scanned by one loop that keeps the
// kinds of the open containers as a bit stack, so the goroutine's stack stays
// the same size whatever the nesting: a frame nested maxDepth deep costs a
// few hundred bytes of heap for the duration of the scan, never a grown
// stack that a reader goroutine keeps for the rest of its life.
func (s *scanner) value(i, depth int) (int, error) {
	if i < len(s.b) {
		switch s.b[i] {
		case '"': // most values: straight to the string loop
			return s.str(i)
		case '{', '[':
			return s.nested(i, depth)
		}
	}
	return s.scalar(i)
}

// scalar scans a value that is not a container.
func (s *scanner) scalar(i int) (int, error) {
	if i >= len(s.b) {
		return i, s.fail(i)
	}
	switch c := s.b[i]; c {
	case '"':
		return s.str(i)
	case 't':
		return s.literal(i, "true")
	case 'f':
		return s.literal(i, "false")
	case 'n':
		return s.literal(i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return s.number(i)
		}
		return i, s.fail(i)
	}
}

// openings is a stack of one bit per open container, set for an object: all
// the state a nested scan keeps besides the offset. The first 64 levels live
// in low, on the scanning goroutine's stack; deeper ones spill to more, on
// the heap, for the duration of one scan.
type openings struct {
	n    int
	low  uint64
	more []uint64
}

func (o *openings) push(object bool) {
	if o.n >= 64 {
		o.pushDeep(object)
		return
	}
	o.low = o.low&^(1<<o.n) | bit(object)<<o.n
	o.n++
}

func (o *openings) pushDeep(object bool) {
	w, k := o.n/64-1, o.n%64
	if w == len(o.more) {
		o.more = append(o.more, 0)
	}
	o.more[w] = o.more[w]&^(1<<k) | bit(object)<<k
	o.n++
}

// pop closes the innermost container; top reports whether it is an object.
func (o *openings) pop() { o.n-- }
func (o *openings) top() bool {
	k := o.n - 1
	if k < 64 {
		return o.low>>k&1 != 0
	}
	return o.more[k/64-1]>>(k%64)&1 != 0
}

func bit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// nested scans the object or array at b[i], depth containers already being
// open around it, with the same grammar, errors and offsets a recursive
// descent would have.
func (s *scanner) nested(i, depth int) (int, error) {
	b := s.b
	var open openings
	for {
		// b[i] starts a value.
		var err error
		switch {
		case i < len(b) && (b[i] == '{' || b[i] == '['):
			object := b[i] == '{'
			if err := s.tooDeep(depth+open.n+1, i); err != nil {
				return i, err
			}
			closing := byte(']')
			if object {
				closing = '}'
			}
			if i = s.skipSpace(i + 1); i < len(b) && b[i] == closing {
				i++
				break // an empty container is a complete value
			}
			open.push(object)
			if object {
				if i, err = s.key(i); err != nil {
					return i, err
				}
			}
			continue
		case i < len(b) && b[i] == '"':
			if i, err = s.str(i); err != nil {
				return i, err
			}
		default:
			if i, err = s.scalar(i); err != nil {
				return i, err
			}
		}
		// A value just ended at i: close containers until one continues.
		for {
			if open.n == 0 {
				return i, nil
			}
			object := open.top()
			closing := byte(']')
			if object {
				closing = '}'
			}
			var more bool
			if i, more, err = s.separator(s.skipSpace(i), closing); err != nil {
				return i, err
			}
			if !more {
				open.pop()
				continue
			}
			if object {
				if i, err = s.key(i); err != nil {
					return i, err
				}
			}
			break
		}
	}
}

// key scans an object member's key and colon at b[i] and returns the offset
// of its value.
func (s *scanner) key(i int) (int, error) {
	b := s.b
	if i >= len(b) || b[i] != '"' {
		return i, s.fail(i)
	}
	i, err := s.str(i)
	if err != nil {
		return i, err
	}
	if i = s.skipSpace(i); i >= len(b) || b[i] != ':' {
		return i, s.fail(i)
	}
	return s.skipSpace(i + 1), nil
}

func (s *scanner) tooDeep(depth, i int) error {
	if depth > maxDepth {
		return wrap(ErrMalformedFrame, "exceeded max depth at offset "+strconv.Itoa(i))
	}
	return nil
}

// separator consumes the ',' between members (more is true, and the offset
// is past any following space) or the closing byte (more is false).
func (s *scanner) separator(i int, closing byte) (int, bool, error) {
	if i < len(s.b) {
		switch s.b[i] {
		case ',':
			return s.skipSpace(i + 1), true, nil
		case closing:
			return i + 1, false, nil
		}
	}
	return i, false, s.fail(i)
}

// str scans a string starting at its opening quote and sets s.esc.
func (s *scanner) str(i int) (int, error) {
	b := s.b
	s.esc = false
	i++
	for {
		if i = skipPlain(b, i); i >= len(b) {
			return i, s.fail(i)
		}
		switch b[i] {
		case '"':
			return i + 1, nil
		case '\\':
			n := escapeLen(b[i:])
			if n == 0 {
				return i, s.fail(i + 1)
			}
			s.esc = true
			i += n
		default:
			return i, s.fail(i)
		}
	}
}

// skipPlain returns the first offset at or after i whose byte needs
// attention inside a string, testing eight bytes at a time while none does:
// string bodies are nearly all of a payload, so this loop is the codec's
// speed.
func skipPlain(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if specialBytes(binary.LittleEndian.Uint64(b[i:])) != 0 {
			break
		}
	}
	for i < len(b) && plainByte[b[i]] {
		i++
	}
	return i
}

// specialBytes is non-zero exactly when one of the eight bytes in x is below
// 0x20, a quote or a backslash. Each term is the classic "has a zero byte"
// test ((v - 0x01…) & ^v & 0x80…); ^x can stand in for ^v in all three
// because '"' and '\\' leave bit 7 alone, and a byte >= 0x80 never matches.
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	return ((x - ones*0x20) | (quote - ones) | (backslash - ones)) & ^x & highs
}

// escapeLen is the length of the valid escape at the start of b, or 0.
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(b) >= 6 && hexVal(b[2]) >= 0 && hexVal(b[3]) >= 0 && hexVal(b[4]) >= 0 && hexVal(b[5]) >= 0 {
			return 6
		}
	}
	return 0
}

func hexVal(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number(i int) (int, error) {
	b := s.b
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, s.fail(i)
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, s.fail(j)
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, s.fail(j)
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func (s *scanner) literal(i int, lit string) (int, error) {
	for j := 0; j < len(lit); j++ {
		if i+j >= len(s.b) || s.b[i+j] != lit[j] {
			return i + j, s.fail(i + j)
		}
	}
	return i + len(lit), nil
}

// checkValue validates that b holds exactly one JSON value, optionally
// surrounded by whitespace, nested inside depth containers. It reports
// whether b contains insignificant whitespace anywhere.
func checkValue(b []byte, depth int) (space bool, err error) {
	s := scanner{b: b}
	i, err := s.value(s.skipSpace(0), depth)
	if err != nil {
		return false, err
	}
	if i = s.skipSpace(i); i != len(b) {
		return false, s.fail(i)
	}
	return s.space, nil
}
