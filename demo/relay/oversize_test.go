package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
)

// oversized attaches a browser with opts and sends it a message of n bytes
// on its route, returning the error of the write.
func oversized(t *testing.T, edit func(*relay.Config), opts relaytest.DialOptions, n int) error {
	t.Helper()
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Limits.BrowserFrameBytes = 64 << 10
		edit(c)
	})
	env.Connect(t)
	b := env.AttachWith(t, "", opts)
	// By hand: AppendFrame refuses a frame over librelay.MaxFrameBytes.
	msg := `{"type":"acp.message","instance":"` + b.Instance + `","session":"` + b.Session + `","payload":"` + strings.Repeat("x", n) + `"}`
	return b.SendRaw([]byte(msg))
}

// The relay reads at most DrainBytes of an oversized message past the limit:
// a client that sends more is cut, so its write fails (the relay stopped
// reading long before the end of 32 MiB).
func TestOversizeDrainBytesBound(t *testing.T) {
	err := oversized(t, func(c *relay.Config) { c.Limits.DrainBytes = 64 << 10 }, relaytest.DialOptions{}, 32<<20)
	if err == nil {
		t.Fatal("the relay read all of a 32 MiB message with DrainBytes at 64 KiB")
	}
}

// The relay drains an oversized message for at most DrainTimeout: a client
// on a slow uplink still sending after it is cut.
func TestOversizeDrainTimeBound(t *testing.T) {
	err := oversized(t, func(c *relay.Config) { c.Limits.DrainTimeout = 50 * time.Millisecond },
		relaytest.DialOptions{Uplink: 1 << 20}, 1<<20)
	if err == nil {
		t.Fatal("the relay waited out a 1-second oversized message with DrainTimeout at 50ms")
	}
}
