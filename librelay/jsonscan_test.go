package librelay

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSpecialBytes holds the eight-at-a-time test to the byte table.
func TestSpecialBytes(t *testing.T) {
	check := func(word [8]byte) {
		want := false
		for _, c := range word {
			want = want || !plainByte[c]
		}
		if got := specialBytes(binary.LittleEndian.Uint64(word[:])) != 0; got != want {
			t.Fatalf("specialBytes(%q) = %v, want %v", word, got, want)
		}
	}
	for _, fill := range []byte{'a', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xff} {
		for c := range 256 {
			for pos := range 8 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		var w [8]byte
		for i := range w {
			w[i] = byte(rng.IntN(256))
		}
		check(w)
	}
}

func TestSkipPlain(t *testing.T) {
	b := []byte("0123456789abcdefghij\"klmnop")
	for start := range 21 {
		if got := skipPlain(b, start); got != 20 {
			t.Fatalf("skipPlain from %d = %d, want 20", start, got)
		}
	}
	if got := skipPlain([]byte("plain to the end"), 3); got != 16 {
		t.Fatalf("skipPlain to end = %d", got)
	}
}

func TestSyntaxErrorMessages(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":x}`:      "invalid character 'x' at offset 8",
		"{\"type\":\x01}": "invalid character 0x01 at offset 8",
		`{"type":"a"`:     "unexpected end of JSON input",
	} {
		_, err := ParseFrame([]byte(in))
		if !errors.Is(err, ErrMalformedFrame) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("ParseFrame(%q) = %v, want ...%s", in, err, want)
		}
	}
}
