package librelay

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math/rand/v2"
)

// MaxTraceBytes bounds Frame.Trace. It is far below MaxIDBytes because a trace
// is not addressable: nothing routes on it, nothing looks it up, and the only
// thing it is ever spent on is a log field. A ceiling this low is what stops a
// peer from renting space in every activity record this runtime writes.
const MaxTraceBytes = 128

// TraceAlphabet is the complete set of bytes Frame.Trace may contain:
// unreserved URL characters and nothing else. It is deliberately narrower than
// the identifier rule: a trace carries no name and needs no expressiveness, so
// it is restricted to what NewTraceID emits — no quote, separator, whitespace
// or non-ASCII byte that could be read as structure wherever it is pasted.
const TraceAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// Trace validation failures. Unlike the identifier errors these do not mean
// "unroutable"; they mean "unsafe to log", which Frame.Validate rejects for the
// same reason and on the same terms.
var (
	ErrTraceTooLong = errors.New("librelay: trace exceeds MaxTraceBytes")
	ErrTraceCharset = errors.New("librelay: trace contains a byte outside TraceAlphabet")
)

// traceIDPrefix makes a trace self-describing in a log where request ids and
// span ids sit beside it.
const traceIDPrefix = "tr-"

// NewTraceID mints a fresh trace for one action. Call it where an action
// begins — one browser request, one prompt — never once per connection: a
// value that lives as long as a socket files a day's work under one key.
//
// It uses math/rand/v2, not crypto/rand, deliberately: a trace is a
// correlation key only, never authenticated or authorized on, so the only
// requirement is collision avoidance (128 random bits here). Do not reuse one
// as a token, a nonce or an idempotency key. The result is "tr-" followed by
// 22 characters of TraceAlphabet.
func NewTraceID() string {
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], rand.Uint64())
	// base64url's alphabet is exactly TraceAlphabet.
	return traceIDPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
}

// ValidTraceID reports whether s may be carried in Frame.Trace. The empty
// string is valid: absent is the normal state of an untraced frame. It is
// exported so a receiver can check a value that did not come through
// Reader.ReadFrame or ParseFrame before letting it reach a log.
func ValidTraceID(s string) bool { return checkTrace(s) == nil }

// checkTrace is the trace rule with its reason.
func checkTrace(s string) error {
	if len(s) > MaxTraceBytes {
		return ErrTraceTooLong
	}
	for i := 0; i < len(s); i++ {
		if !isTraceByte(s[i]) {
			return ErrTraceCharset
		}
	}
	return nil
}

func isTraceByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
