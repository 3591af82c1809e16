package librelay_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"

	"github.com/relaywasm/relaywasm/librelay"
)

// The fixed signature vector (also in testdata/signing_vectors.json): another
// implementation that reproduces these bytes signs exactly what this one
// verifies. Ed25519 signatures are deterministic, so the output is stable.
func ExampleSignWelcome() {
	seed := make([]byte, ed25519.SeedSize) // 00 01 02 … 1f
	nonce := make([]byte, librelay.NonceSize)
	for i := range seed {
		seed[i] = byte(i)
		nonce[i] = byte(0x20 + i) // 20 21 22 … 3f
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)

	input, _ := librelay.SigningInput(nonce, 1, "inst-1")
	sig, _ := librelay.SignWelcome(priv, nonce, 1, "inst-1")
	os.Stdout.WriteString("public key:    " + librelay.FormatPublicKey(pub) + "\n")
	os.Stdout.WriteString("signing input: " + strings.ReplaceAll(string(input), "\x00", "␀") + "\n")
	os.Stdout.WriteString("input hex:     " + hex.EncodeToString(input) + "\n")
	os.Stdout.WriteString("signature:     " + base64.StdEncoding.EncodeToString(sig) + "\n")
	if librelay.VerifyWelcome(pub, nonce, 1, "inst-1", sig) == nil {
		os.Stdout.WriteString("verifies\n")
	}
	// Output:
	// public key:    A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=
	// signing input: contenox-relay/welcome/v1␀ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8␀1␀inst-1
	// input hex:     636f6e74656e6f782d72656c61792f77656c636f6d652f763100494345694979516c4a69636f4b536f724c4330754c7a41784d6a4d304e5459334f446b364f7a7739506a38003100696e73742d31
	// signature:     m538tI14y2CJyv5ASDV0KuUjo0tRmlym1as/epPAW3ZkBIw0pVlwMn6o6k/eWXjafTtOomsIIp0LugVRFHWBAw==
	// verifies
}

// One frame per WebSocket text message: AppendFrame builds the message,
// ParseFrame reads one.
func ExampleParseFrame() {
	msg := []byte(`{"type":"acp.message","instance":"i","session":"s","seq":7,"payload":{"jsonrpc":"2.0"}}` + "\r\n")
	f, err := librelay.ParseFrame(msg)
	if err != nil {
		panic(err)
	}
	f.Seq++
	out, _ := librelay.AppendFrame(nil, &f)
	os.Stdout.Write(append(out, '\n'))
	// Output:
	// {"type":"acp.message","instance":"i","session":"s","seq":8,"payload":{"jsonrpc":"2.0"}}
}

// Writer compacts the payload, so a caller's pretty-printed JSON cannot
// split a frame across lines.
func ExampleWriter() {
	w := librelay.NewWriter(os.Stdout)
	_ = w.WriteFrame(librelay.Frame{
		Type:     librelay.TypeACPMessage,
		Instance: "i",
		Payload:  json.RawMessage("{\n  \"text\": \"<b>hi</b>\"\n}"),
	})
	// Output:
	// {"type":"acp.message","instance":"i","payload":{"text":"<b>hi</b>"}}
}

// An unknown control request is owed exactly one reply; anything else is not.
func ExampleUnsupported() {
	req := librelay.Frame{Type: "relay.shiny_new_thing", ID: "42"}
	if reply, ok := librelay.Unsupported(req); ok {
		line, _ := librelay.AppendFrame(nil, &reply)
		os.Stdout.Write(append(line, '\n'))
	}
	if _, owed := librelay.Unsupported(librelay.Frame{Type: "relay.shiny_new_thing"}); !owed {
		os.Stdout.WriteString("a notification is owed nothing\n")
	}
	// Output:
	// {"type":"relay.error","re":"42","payload":{"code":"unsupported_type","message":"unsupported message type relay.shiny_new_thing"}}
	// a notification is owed nothing
}
