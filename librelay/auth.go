package librelay

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// Relay authentication lives here because both ends must compute one byte
// string, and a signature format defined twice is defined differently. The
// relay signs with SignWelcome, the connector checks with VerifyWelcome, and
// neither reimplements SigningInput. The direction covered is relay→instance
// only; the instance proves itself with a bearer credential on the transport,
// which never enters a frame.

// Nonce sizes. NonceSize is what a connector generates; MaxNonceBytes is what
// a relay will sign over, bounding the work an unauthenticated peer can ask
// for with a single hello.
const (
	NonceSize     = 32
	MaxNonceBytes = 64
)

// SigningDomain is the domain-separation tag every Welcome signature starts
// with. It stops a signature being replayed into any other context that ever
// signs with the same key: a verifier for a different purpose would have to
// accept this tag to be fooled, and it never will.
const SigningDomain = "contenox-relay/welcome/v1"

// Relay-authentication failures. They are all "this peer did not prove it is
// the relay this instance paired with", which a connector treats as fatal
// rather than transient: a relay that cannot prove itself now will not start
// being able to on the next dial.
var (
	ErrNonceSize    = errors.New("librelay: nonce is missing or larger than MaxNonceBytes")
	ErrNoSignature  = errors.New("librelay: welcome carries no signature")
	ErrBadSignature = errors.New("librelay: welcome signature does not verify")
	ErrBadPublicKey = errors.New("librelay: not an ed25519 public key")
	ErrNulByte      = errors.New("librelay: signing input contains a NUL byte")
)

// Reasons a key string is refused; ParsePublicKey wraps one of them together
// with ErrBadPublicKey.
var (
	errKeyEncoding = errors.New("key is not base64 or hex")
	errKeySize     = errors.New("key is not " + strconv.Itoa(ed25519.PublicKeySize) + " bytes")
)

// NewNonce returns a fresh challenge for Hello.Nonce, NonceSize bytes from
// crypto/rand. It must be generated per connection and never reused: reuse is
// what would let a signature captured from one session be replayed into
// another. The error is always nil on current Go (crypto/rand does not fail);
// it stays in the signature so a caller never has to change if that does.
func NewNonce() ([]byte, error) {
	n := make([]byte, NonceSize)
	if _, err := rand.Read(n); err != nil {
		return nil, err
	}
	return n, nil
}

// SigningInput is the exact byte string a Welcome signature covers, and the
// single definition of that layout — both the signing and the verifying path
// call it:
//
//	SigningDomain ‖ 0x00 ‖ base64url(nonce) ‖ 0x00 ‖ decimal(version) ‖ 0x00 ‖ instance
//
// The nonce is unpadded base64url (text that cannot contain a NUL), the
// version is ASCII digits with no padding (a leading '-' if negative), and the
// separator is one NUL. That nonce text is not the one Hello carries: in JSON
// Hello.Nonce is padded standard base64, encoding/json's spelling of a
// []byte. Spec 001 calls this spelling "the same text it travels as in
// JSON", which its own Hello and Welcome definitions contradict; this
// package follows the definitions, as contenox's librelay does, and only
// the signed bytes use base64url. Plain concatenation would not do: ("a", 11, "c") and
// ("a", 1, "1c") both flatten to "a11c". The separators make the parse
// unambiguous, which is why an instance containing one is refused
// (ErrNulByte) rather than signed over. A nonce that is empty or longer than
// MaxNonceBytes is ErrNonceSize.
func SigningInput(nonce []byte, negotiatedVersion int, instance string) ([]byte, error) {
	if len(nonce) == 0 || len(nonce) > MaxNonceBytes {
		return nil, ErrNonceSize
	}
	if strings.IndexByte(instance, 0) >= 0 {
		return nil, ErrNulByte
	}
	enc := base64.RawURLEncoding
	b := make([]byte, 0, len(SigningDomain)+enc.EncodedLen(len(nonce))+len(instance)+24)
	b = append(b, SigningDomain...)
	b = append(b, 0)
	b = enc.AppendEncode(b, nonce)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(negotiatedVersion), 10)
	b = append(b, 0)
	return append(b, instance...), nil
}

// SignWelcome produces the Welcome.Signature a relay answers hello with. The
// version is the one the relay selected, not the one the connector offered:
// the connector verifies against what it was told. A private key of the wrong
// size is reported as ErrBadPublicKey, the only key sentinel there is.
func SignWelcome(priv ed25519.PrivateKey, nonce []byte, negotiatedVersion int, instance string) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, wrap(ErrBadPublicKey, "private key is not "+strconv.Itoa(ed25519.PrivateKeySize)+" bytes")
	}
	input, err := SigningInput(nonce, negotiatedVersion, instance)
	if err != nil {
		return nil, err
	}
	return ed25519.Sign(priv, input), nil
}

// VerifyWelcome checks a relay's answer against the public key pinned at
// pairing time. A nil error is the only success; every other outcome is
// exactly one of ErrBadPublicKey, ErrNonceSize, ErrNulByte, ErrNoSignature or
// ErrBadSignature (checked in that order), and none of them is retryable. A
// missing signature is distinguished from a wrong one because "the relay did
// not sign at all" is a misconfiguration, not a key mismatch.
func VerifyWelcome(pub ed25519.PublicKey, nonce []byte, negotiatedVersion int, instance string, sig []byte) error {
	if len(pub) != ed25519.PublicKeySize {
		return ErrBadPublicKey
	}
	input, err := SigningInput(nonce, negotiatedVersion, instance)
	if err != nil {
		return err
	}
	if len(sig) == 0 {
		return ErrNoSignature
	}
	if !ed25519.Verify(pub, input, sig) {
		return ErrBadSignature
	}
	return nil
}

// FormatPublicKey renders a relay's key for storage and for an enrolment
// payload: standard padded base64, the spelling ParsePublicKey reads first. A
// key that is not ed25519.PublicKeySize bytes renders as the empty string, as
// the reference's does, rather than as text that would never parse back.
func FormatPublicKey(pub ed25519.PublicKey) string {
	if len(pub) != ed25519.PublicKeySize {
		return ""
	}
	return base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey reads a key produced by FormatPublicKey, and accepts exactly
// the spellings the reference ParsePublicKey accepts: hex of exactly 64
// digits in either case, then standard base64 padded or not, then URL-safe
// base64 padded or not, each decoding to exactly 32 bytes. Nothing is
// trimmed: a space, a tab or any other byte around the key refuses it. CR and
// LF are the exception, anywhere in a base64 spelling, because
// encoding/base64 skips them (so a key read from a file with its newline
// parses, in the reference as here). Anything else is an error that matches
// ErrBadPublicKey and names the reason.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	raw, err := decodeKey(s)
	if err != nil {
		return nil, wrapBoth(ErrBadPublicKey, err)
	}
	return ed25519.PublicKey(raw), nil
}

// keyEncodings are tried in order after hex, and a spelling that decodes to
// the wrong length does not stop the search, as in the reference.
var keyEncodings = [...]*base64.Encoding{
	base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
}

func decodeKey(s string) ([]byte, error) {
	if s == "" {
		return nil, errKeyEncoding
	}
	if len(s) == 2*ed25519.PublicKeySize {
		if raw, ok := decodeHex(s); ok {
			return raw, nil
		}
	}
	wrongSize := false
	for _, enc := range keyEncodings {
		raw, err := enc.DecodeString(s)
		switch {
		case err != nil:
		case len(raw) == ed25519.PublicKeySize:
			return raw, nil
		default:
			wrongSize = true
		}
	}
	if wrongSize {
		return nil, errKeySize
	}
	return nil, errKeyEncoding
}

// decodeHex decodes hex digits in either case, as encoding/hex does; ok is
// false for an odd length or any other byte. It is written out because
// encoding/hex's error type formats with fmt, which the browser module would
// otherwise link for this one call.
func decodeHex(s string) (raw []byte, ok bool) {
	if len(s)%2 != 0 {
		return nil, false
	}
	raw = make([]byte, len(s)/2)
	for i := range raw {
		hi, lo := hexVal(s[2*i]), hexVal(s[2*i+1])
		if hi < 0 || lo < 0 {
			return nil, false
		}
		raw[i] = byte(hi<<4 | lo)
	}
	return raw, true
}
