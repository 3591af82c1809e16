package e2e

import (
	"crypto/ed25519"
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
)

// The relay key pasted into the app's URL as the demo prints it on its
// "relay key:" line, not URL-escaped: URLSearchParams reads its "+" as a
// space, which the app takes back to "+" (as the demo page does), so the key
// is pinned and the app gets ready instead of failing with bad_options
// ("not an ed25519 public key").
func TestDemoAppKeyPastedUnescaped(t *testing.T) {
	t.Parallel()
	key := keyWithPlus()
	s := startFreshStack(t, stack.Config{WebDir: builtApp(t), ModuleDir: moduleDir, Logger: logger(), Key: key})
	t.Cleanup(func() { s.Close() })
	pub := librelay.FormatPublicKey(key.Public().(ed25519.PublicKey))
	tb := openTab(t, newBrowser(t), "app", s.PageURL()+"#key="+pub)
	appReady(tb)
}

// keyWithPlus is a relay key whose base64 form has a "+" in it: the first
// of a fixed series of seeds that gives one (about half of all keys do).
func keyWithPlus() ed25519.PrivateKey {
	for i := 0; ; i++ {
		seed := sha256.Sum256([]byte("relay key " + strconv.Itoa(i)))
		key := ed25519.NewKeyFromSeed(seed[:])
		if strings.Contains(librelay.FormatPublicKey(key.Public().(ed25519.PublicKey)), "+") {
			return key
		}
	}
}
