package librelay

import (
	"encoding/base64"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// decoder reads one top-level JSON object member by member, with the rules
// encoding/json applies when it decodes into a struct: keys match a field
// name exactly or case-insensitively, unknown members are validated and
// skipped, a later duplicate wins, and null leaves a field as it was. Every
// value is validated even when it is skipped, so a text encoding/json would
// refuse is refused here too.
type decoder struct {
	scanner
	i      int
	opened bool // the opening brace (or a whole-text null) is consumed
	first  bool // no member has been read yet
}

// endOfObject is what field returns once the object is fully read.
const endOfObject = -2

// field moves to the next member whose key selects one of names and returns
// that name's index, validating and skipping members with other keys. At the
// end of the object, and for a text that is the literal null, it checks that
// only whitespace follows and returns endOfObject.
//
// It is an iterator rather than a callback so that a caller's decoder can
// live on the stack: the hot path (ParseFrame) allocates nothing but the
// frame's own bytes.
func (d *decoder) field(names []string) (int, error) {
	if !d.opened {
		d.opened = true
		if null, err := d.open(); null || err != nil {
			return endOfObject, err
		}
	}
	for {
		key, escaped, ok, err := d.next()
		if err != nil {
			return endOfObject, err
		}
		if !ok {
			return endOfObject, d.finish()
		}
		if f := matchKey(key, escaped, names); f >= 0 {
			return f, nil
		}
		if err := d.skip(); err != nil {
			return endOfObject, err
		}
	}
}

func newDecoder(b []byte) decoder { return decoder{scanner: scanner{b: b}} }

// open moves past the opening brace. A text that is the literal null reports
// null and is fully consumed: encoding/json decodes null into a struct as a
// no-op.
func (d *decoder) open() (null bool, err error) {
	i := d.skipSpace(0)
	if i < len(d.b) && d.b[i] == '{' {
		d.i, d.first = i+1, true
		return false, nil
	}
	end, err := d.value(i, 0)
	if err != nil {
		return false, err
	}
	if i < len(d.b) && d.b[i] == 'n' {
		d.i = end
		return true, d.finish()
	}
	return false, wrap(ErrMalformedFrame, "want a JSON object")
}

// next moves to the next member's value and returns its key, still quoted
// JSON (escaped reports escapes in it). ok is false once the closing brace is
// consumed.
func (d *decoder) next() (key []byte, escaped, ok bool, err error) {
	b := d.b
	i := d.skipSpace(d.i)
	if d.first {
		d.first = false
		if i < len(b) && b[i] == '}' {
			d.i = i + 1
			return nil, false, false, nil
		}
	} else {
		var more bool
		if i, more, err = d.separator(i, '}'); !more || err != nil {
			d.i = i
			return nil, false, false, err
		}
	}
	if i >= len(b) || b[i] != '"' {
		return nil, false, false, d.fail(i)
	}
	end, err := d.str(i)
	if err != nil {
		return nil, false, false, err
	}
	key, escaped = b[i+1:end-1], d.esc
	if i = d.skipSpace(end); i >= len(b) || b[i] != ':' {
		return nil, false, false, d.fail(i)
	}
	d.i = d.skipSpace(i + 1)
	return key, escaped, true, nil
}

// finish checks that nothing but whitespace follows the object.
func (d *decoder) finish() error {
	if i := d.skipSpace(d.i); i != len(d.b) {
		return d.fail(i)
	}
	return nil
}

// skip validates and passes over the current value.
func (d *decoder) skip() error {
	end, err := d.value(d.i, 1)
	d.i = end
	return err
}

// peek returns the first byte of the current value.
func (d *decoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// wrongType reports a value of the wrong JSON type for field, unless the value
// is not even well-formed, which is reported as such (as encoding/json does).
func (d *decoder) wrongType(field, want string) error {
	if err := d.skip(); err != nil {
		return err
	}
	return wrap(ErrMalformedFrame, "field "+field+": want "+want)
}

// null consumes a null literal if one is current.
func (d *decoder) null() (bool, error) {
	if d.peek() != 'n' {
		return false, nil
	}
	return true, d.skip()
}

// stringSpan consumes a string value and returns its body (between the
// quotes) and whether it holds escapes; set is false for null.
func (d *decoder) stringSpan(field string) (body []byte, escaped, set bool, err error) {
	if null, err := d.null(); null || err != nil {
		return nil, false, false, err
	}
	if d.peek() != '"' {
		return nil, false, false, d.wrongType(field, "string")
	}
	start := d.i
	end, err := d.str(start)
	if d.i = end; err != nil {
		return nil, false, false, err
	}
	return d.b[start+1 : end-1], d.esc, true, nil
}

// numberSpan consumes a number value; set is false for null.
func (d *decoder) numberSpan(field string) (num []byte, set bool, err error) {
	if null, err := d.null(); null || err != nil {
		return nil, false, err
	}
	if c := d.peek(); c != '-' && (c < '0' || c > '9') {
		return nil, false, d.wrongType(field, "number")
	}
	start := d.i
	end, err := d.number(start)
	if d.i = end; err != nil {
		return nil, false, err
	}
	return d.b[start:end], true, nil
}

// readString decodes a string value into dst as encoding/json does, invalid
// UTF-8 coerced to U+FFFD; null leaves dst unchanged.
func (d *decoder) readString(field string, dst *string) error {
	body, escaped, set, err := d.stringSpan(field)
	if !set || err != nil {
		return err
	}
	if !escaped && utf8.Valid(body) {
		*dst = string(body)
		return nil
	}
	*dst = string(appendUnquoted(make([]byte, 0, len(body)), body))
	return nil
}

// readUint decodes a non-negative integer literal into dst.
func (d *decoder) readUint(field string, dst *uint64) error {
	num, set, err := d.numberSpan(field)
	if !set || err != nil {
		return err
	}
	v, ok := parseUint(num, 64)
	if !ok {
		return wrap(ErrMalformedFrame, "field "+field+": want an unsigned integer")
	}
	*dst = v
	return nil
}

// readInt decodes an integer literal that fits in int into dst.
func (d *decoder) readInt(field string, dst *int) error {
	num, set, err := d.numberSpan(field)
	if !set || err != nil {
		return err
	}
	v, ok := parseInt(num)
	if !ok || int64(int(v)) != v {
		return wrap(ErrMalformedFrame, "field "+field+": want an integer")
	}
	*dst = int(v)
	return nil
}

// readBool decodes true or false into dst.
func (d *decoder) readBool(field string, dst *bool) error {
	if null, err := d.null(); null || err != nil {
		return err
	}
	switch d.peek() {
	case 't', 'f':
		*dst = d.peek() == 't'
		return d.skip()
	}
	return d.wrongType(field, "boolean")
}

// readIntPointer decodes into a *int as encoding/json does: null sets it to
// nil, and a number is stored through it, into a new int when it is nil.
func (d *decoder) readIntPointer(field string, dst **int) error {
	if d.peek() == 'n' {
		*dst = nil
		return d.skip()
	}
	var v int
	if *dst != nil {
		v = **dst
	}
	if err := d.readInt(field, &v); err != nil {
		return err
	}
	if *dst == nil {
		*dst = new(int)
	}
	**dst = v
	return nil
}

// readTime hands the current value's bytes, as they appear, to
// time.Time.UnmarshalJSON, which is what encoding/json does for a field of a
// type with that method (null included: it is a no-op there).
func (d *decoder) readTime(field string, dst *time.Time) error {
	start := d.i
	if err := d.skip(); err != nil {
		return err
	}
	if err := dst.UnmarshalJSON(d.b[start:d.i]); err != nil {
		return wrapBoth(wrap(ErrMalformedFrame, "field "+field), err)
	}
	return nil
}

// readRaw keeps the current value's bytes, as json.RawMessage does (a null
// as the four bytes "null"), in a copy that does not alias the input.
func (d *decoder) readRaw(dst *[]byte) error {
	start := d.i
	if err := d.skip(); err != nil {
		return err
	}
	*dst = append((*dst)[:0], d.b[start:d.i]...)
	return nil
}

// readBytes decodes a []byte as encoding/json does: standard base64 in a
// string (which, like base64.StdEncoding.Decode, skips CR and LF), or an
// array of integers 0..255; null sets nil.
func (d *decoder) readBytes(field string, dst *[]byte) error {
	if null, err := d.null(); null || err != nil {
		if null {
			*dst = nil
		}
		return err
	}
	switch d.peek() {
	case '"':
		body, escaped, _, err := d.stringSpan(field)
		if err != nil {
			return err
		}
		if escaped || !utf8.Valid(body) {
			body = appendUnquoted(nil, body)
		}
		out := make([]byte, base64.StdEncoding.DecodedLen(len(body)))
		n, err := base64.StdEncoding.Decode(out, body)
		if err != nil {
			return wrapBoth(wrap(ErrMalformedFrame, "field "+field), err)
		}
		*dst = out[:n]
		return nil
	case '[':
		return d.readByteArray(field, dst)
	}
	return d.wrongType(field, "base64 string")
}

func (d *decoder) readByteArray(field string, dst *[]byte) error {
	out := []byte{}
	d.i = d.skipSpace(d.i + 1)
	if d.peek() == ']' {
		d.i++
		*dst = out
		return nil
	}
	for {
		var v uint64
		if err := d.readUint(field, &v); err != nil {
			return err
		}
		if v > 255 {
			return wrap(ErrMalformedFrame, "field "+field+": byte out of range")
		}
		out = append(out, byte(v))
		i, more, err := d.separator(d.skipSpace(d.i), ']')
		if d.i = i; !more || err != nil {
			*dst = out
			return err
		}
	}
}

// parseUint reads an integer token the way encoding/json reads one into an
// unsigned field: digits only, within bits.
func parseUint(b []byte, bits uint) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	limit := uint64(1)<<bits - 1
	if bits == 64 {
		limit = ^uint64(0)
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseInt reads an integer token into an int64 as strconv.ParseInt does.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, ok := parseUint(b, 64)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return int64(-u), true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// appendUnquoted appends the decoded body of a JSON string that the scanner
// has already validated. Escapes decode as in encoding/json, including an
// unpaired surrogate becoming U+FFFD, and raw invalid UTF-8 is coerced to
// U+FFFD, encoding/json's rule for every string it decodes.
func appendUnquoted(dst, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			dst = append(dst, s[start:i]...)
			var n int
			dst, n = appendEscape(dst, s[i:])
			i += n
			start = i
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = utf8.AppendRune(dst, utf8.RuneError)
				start = i + 1
			}
			i += size
		default:
			i++
		}
	}
	return append(dst, s[start:]...)
}

// appendEscape decodes the escape at the start of s and reports its length.
func appendEscape(dst, s []byte) ([]byte, int) {
	switch c := s[1]; c {
	case 'b':
		return append(dst, '\b'), 2
	case 'f':
		return append(dst, '\f'), 2
	case 'n':
		return append(dst, '\n'), 2
	case 'r':
		return append(dst, '\r'), 2
	case 't':
		return append(dst, '\t'), 2
	case 'u':
		r := hex4(s[2:])
		if !utf16.IsSurrogate(r) {
			return utf8.AppendRune(dst, r), 6
		}
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if pair := utf16.DecodeRune(r, hex4(s[8:])); pair != utf8.RuneError {
				return utf8.AppendRune(dst, pair), 12
			}
		}
		return utf8.AppendRune(dst, utf8.RuneError), 6
	default: // '"', '\\', '/'
		return append(dst, c), 2
	}
}

// hex4 decodes four hex digits, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		v := hexVal(c)
		if v < 0 {
			return -1
		}
		r = r<<4 | v
	}
	return r
}

// matchKey returns the index in names of the field a member key selects, or
// -1. names are lower-case ASCII. Like encoding/json v1 an exact match wins
// and otherwise the comparison folds case, where U+017F (long s) folds to
// 's' and U+212A (Kelvin) to 'k' — the only non-ASCII runes whose case fold
// reaches ASCII.
func matchKey(key []byte, escaped bool, names []string) int {
	if escaped {
		var tmp [64]byte
		key = appendUnquoted(tmp[:0], key)
	}
	for j, n := range names {
		if string(key) == n {
			return j
		}
	}
	for j, n := range names {
		if foldEqual(key, n) {
			return j
		}
	}
	return -1
}

func foldEqual(key []byte, name string) bool {
	j := 0
	for i := 0; i < len(key); j++ {
		if j >= len(name) {
			return false
		}
		want := upperASCII(name[j])
		if c := key[i]; c < utf8.RuneSelf {
			if upperASCII(c) != want {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(key[i:])
		if !(r == '\u017f' && want == 'S' || r == '\u212a' && want == 'K') {
			return false
		}
		i += size
	}
	return j == len(name)
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}
