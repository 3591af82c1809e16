package client

import (
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
)

// The largest hello Options.check lets through fits the relay's limit on a
// first frame (4 KiB): Instance and Agent as long as librelay's identifiers
// may be, of the characters JSON escapes most ('"' doubles, U+2028 goes
// from 3 bytes to 6), the longest attachment id and hello id, a full nonce.
func TestLargestHelloFits(t *testing.T) {
	const relayHelloLimit = 4 << 10
	for _, worst := range []string{`"`, "\u2028"} {
		o := Options{
			Instance: strings.Repeat(worst, librelay.MaxIDBytes/len(worst)),
			Agent:    strings.Repeat(worst, librelay.MaxIDBytes/len(worst)),
		}
		if err := o.checkHello(); err != nil {
			t.Fatalf("%q: %v", worst, err)
		}
		f, err := helloFrame(&o, "hello-"+uitoa(^uint64(0)), strings.Repeat(worst, librelay.MaxIDBytes/len(worst)), make([]byte, librelay.NonceSize))
		if err != nil {
			t.Fatal(err)
		}
		b, err := librelay.AppendFrame(nil, &f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > relayHelloLimit {
			t.Fatalf("a hello of %d bytes passes the options' check", len(b))
		}
		t.Logf("%q: largest hello %d bytes", worst, len(b))
	}
}
