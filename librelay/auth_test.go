package librelay

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

type signingVectors struct {
	SeedHex   string `json:"seed_hex"`
	PublicKey string `json:"public_key"`
	Vectors   []struct {
		NonceHex        string `json:"nonce_hex"`
		Version         int    `json:"version"`
		Instance        string `json:"instance"`
		SigningInputHex string `json:"signing_input_hex"`
		SignatureB64    string `json:"signature_b64"`
	} `json:"vectors"`
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSigningVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/signing_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v signingVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	priv := ed25519.NewKeyFromSeed(mustHex(t, v.SeedHex))
	pub := priv.Public().(ed25519.PublicKey)
	if got := FormatPublicKey(pub); got != v.PublicKey {
		t.Fatalf("public key %s, want %s", got, v.PublicKey)
	}
	for _, vec := range v.Vectors {
		nonce := mustHex(t, vec.NonceHex)
		input, err := SigningInput(nonce, vec.Version, vec.Instance)
		if err != nil || hex.EncodeToString(input) != vec.SigningInputHex {
			t.Fatalf("SigningInput = %x, %v\nwant %s", input, err, vec.SigningInputHex)
		}
		sig, err := SignWelcome(priv, nonce, vec.Version, vec.Instance)
		if err != nil || base64.StdEncoding.EncodeToString(sig) != vec.SignatureB64 {
			t.Fatalf("SignWelcome = %s, %v\nwant %s", base64.StdEncoding.EncodeToString(sig), err, vec.SignatureB64)
		}
		if err := VerifyWelcome(pub, nonce, vec.Version, vec.Instance, sig); err != nil {
			t.Fatalf("VerifyWelcome: %v", err)
		}
	}
}

// TestSigningInputLayout spells the layout out independently of the code.
func TestSigningInputLayout(t *testing.T) {
	got, err := SigningInput([]byte{0xfb, 0xff}, 12, "a\x01b")
	if err != nil {
		t.Fatal(err)
	}
	want := SigningDomain + "\x00" + "-_8" + "\x00" + "12" + "\x00" + "a\x01b"
	if string(got) != want {
		t.Fatalf("SigningInput = %q, want %q", got, want)
	}
	// The separators keep ("a", 11, "c") and ("a", 1, "1c") apart.
	x, _ := SigningInput([]byte("n"), 11, "c")
	y, _ := SigningInput([]byte("n"), 1, "1c")
	if bytes.Equal(x, y) {
		t.Fatal("ambiguous signing input")
	}
	neg, _ := SigningInput([]byte("n"), -3, "i")
	if !bytes.HasSuffix(neg, []byte("\x00-3\x00i")) {
		t.Fatalf("negative version spelled %q", neg)
	}
}

func TestSigningInputErrors(t *testing.T) {
	ok := make([]byte, NonceSize)
	tests := []struct {
		nonce    []byte
		instance string
		want     error
	}{
		{nil, "i", ErrNonceSize},
		{[]byte{}, "i", ErrNonceSize},
		{make([]byte, MaxNonceBytes+1), "i", ErrNonceSize},
		{make([]byte, 1), "i", nil},
		{make([]byte, MaxNonceBytes), "i", nil},
		{ok, "a\x00b", ErrNulByte},
		{ok, "\x00", ErrNulByte},
		{nil, "\x00", ErrNonceSize}, // nonce checked first
	}
	for _, tt := range tests {
		_, err := SigningInput(tt.nonce, 1, tt.instance)
		if err != tt.want {
			t.Errorf("SigningInput(%d bytes, %q) = %v, want %v", len(tt.nonce), tt.instance, err, tt.want)
		}
	}
}

func TestVerifyWelcomeSentinels(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	other, _, _ := ed25519.GenerateKey(nil)
	nonce, _ := NewNonce()
	sig, err := SignWelcome(priv, nonce, 1, "inst")
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(sig)
	flipped[0] ^= 1
	tests := []struct {
		name     string
		pub      ed25519.PublicKey
		nonce    []byte
		version  int
		instance string
		sig      []byte
		want     error
	}{
		{"good", pub, nonce, 1, "inst", sig, nil},
		{"short key", pub[:31], nonce, 1, "inst", sig, ErrBadPublicKey},
		{"nil key", nil, nonce, 1, "inst", sig, ErrBadPublicKey},
		{"no nonce", pub, nil, 1, "inst", sig, ErrNonceSize},
		{"huge nonce", pub, make([]byte, 65), 1, "inst", sig, ErrNonceSize},
		{"NUL", pub, nonce, 1, "in\x00st", sig, ErrNulByte},
		{"no signature", pub, nonce, 1, "inst", nil, ErrNoSignature},
		{"flipped bit", pub, nonce, 1, "inst", flipped, ErrBadSignature},
		{"short signature", pub, nonce, 1, "inst", sig[:10], ErrBadSignature},
		{"other key", other, nonce, 1, "inst", sig, ErrBadSignature},
		{"offered version, not selected", pub, nonce, 2, "inst", sig, ErrBadSignature},
		{"other instance", pub, nonce, 1, "inst2", sig, ErrBadSignature},
		{"other nonce", pub, append(bytes.Clone(nonce[:31]), nonce[31]^1), 1, "inst", sig, ErrBadSignature},
	}
	for _, tt := range tests {
		if err := VerifyWelcome(tt.pub, tt.nonce, tt.version, tt.instance, tt.sig); err != tt.want {
			t.Errorf("%s: VerifyWelcome = %v, want exactly %v", tt.name, err, tt.want)
		}
	}
}

func TestSignWelcomeErrors(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	if _, err := SignWelcome(priv[:10], []byte("n"), 1, "i"); !errors.Is(err, ErrBadPublicKey) {
		t.Errorf("short private key: %v", err)
	}
	if _, err := SignWelcome(priv, nil, 1, "i"); err != ErrNonceSize {
		t.Errorf("no nonce: %v", err)
	}
	if _, err := SignWelcome(priv, []byte("n"), 1, "\x00"); err != ErrNulByte {
		t.Errorf("NUL: %v", err)
	}
}

func TestNewNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 64 {
		n, err := NewNonce()
		if err != nil || len(n) != NonceSize {
			t.Fatalf("NewNonce = %d bytes, %v", len(n), err)
		}
		if seen[string(n)] {
			t.Fatal("NewNonce repeated a value")
		}
		seen[string(n)] = true
	}
}

// TestParsePublicKey holds ParsePublicKey to the reference's spellings:
// what it accepts, and what it refuses that this once accepted (white space
// around the key) or that it accepts and this once refused (CR or LF inside
// a base64 spelling, which encoding/base64 skips).
func TestParsePublicKey(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	std := FormatPublicKey(pub)
	spellings := map[string]string{
		"FormatPublicKey":      std,
		"std padded":           base64.StdEncoding.EncodeToString(pub),
		"std unpadded":         base64.RawStdEncoding.EncodeToString(pub),
		"url padded":           base64.URLEncoding.EncodeToString(pub),
		"url unpadded":         base64.RawURLEncoding.EncodeToString(pub),
		"hex":                  hex.EncodeToString(pub),
		"HEX":                  strings.ToUpper(hex.EncodeToString(pub)),
		"trailing LF":          std + "\n",
		"trailing CRLF":        std + "\r\n",
		"LF inside":            std[:20] + "\n" + std[20:],
		"leading LF, unpadded": "\n" + base64.RawURLEncoding.EncodeToString(pub),
	}
	if std != base64.StdEncoding.EncodeToString(pub) {
		t.Fatal("FormatPublicKey is not padded standard base64")
	}
	for name, s := range spellings {
		got, err := ParsePublicKey(s)
		if err != nil || !got.Equal(pub) {
			t.Errorf("%s %q: %x, %v", name, s, got, err)
		}
	}
	bad := map[string]error{
		"":          errKeyEncoding,
		"not a key": errKeyEncoding,
		base64.StdEncoding.EncodeToString(pub[:31]):                    errKeySize,
		hex.EncodeToString(pub)[1:]:                                    errKeySize, // 63 bytes of valid base64
		base64.StdEncoding.EncodeToString(append(bytes.Clone(pub), 0)): errKeySize,
		strings.Repeat("zz", 32):                                       errKeySize,
		"#" + std:                                                      errKeyEncoding,
		" " + std:                                                      errKeyEncoding,
		std + " ":                                                      errKeyEncoding,
		"\t" + std:                                                     errKeyEncoding,
		std + "\u00a0":                                                 errKeyEncoding,
		hex.EncodeToString(pub) + "\n":                                 errKeySize, // not 64 digits, so base64 of 48 bytes
		" " + hex.EncodeToString(pub):                                  errKeyEncoding,
	}
	for s, inner := range bad {
		_, err := ParsePublicKey(s)
		if !errors.Is(err, ErrBadPublicKey) || !errors.Is(err, inner) {
			t.Errorf("ParsePublicKey(%q) = %v, want ErrBadPublicKey wrapping %v", s, err, inner)
		}
	}
	// FormatPublicKey writes nothing for a key that is not one.
	for _, k := range []ed25519.PublicKey{nil, pub[:31], append(bytes.Clone(pub), 0)} {
		if got := FormatPublicKey(k); got != "" {
			t.Errorf("FormatPublicKey(%d bytes) = %q, want empty", len(k), got)
		}
	}
}

func TestTraceID(t *testing.T) {
	seen := map[string]bool{}
	for range 256 {
		id := NewTraceID()
		if !strings.HasPrefix(id, "tr-") || !ValidTraceID(id) || len(id) != 25 {
			t.Fatalf("NewTraceID() = %q", id)
		}
		if seen[id] {
			t.Fatalf("NewTraceID repeated %q", id)
		}
		seen[id] = true
	}
	valid := []string{"", "a", TraceAlphabet, strings.Repeat("-", MaxTraceBytes)}
	invalid := []string{" ", "a b", "a.b", "a/b", "a+b", "a=b", "\"", "é", "\x00", strings.Repeat("a", MaxTraceBytes+1)}
	for _, s := range valid {
		if !ValidTraceID(s) {
			t.Errorf("ValidTraceID(%q) = false", s)
		}
	}
	for _, s := range invalid {
		if ValidTraceID(s) {
			t.Errorf("ValidTraceID(%q) = true", s)
		}
	}
	// Every byte outside the alphabet is refused.
	for c := 0; c < 256; c++ {
		if got, want := ValidTraceID(string([]byte{byte(c)})), strings.IndexByte(TraceAlphabet, byte(c)) >= 0; got != want {
			t.Errorf("ValidTraceID(%#x) = %v, want %v", c, got, want)
		}
	}
}
