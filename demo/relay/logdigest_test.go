package relay_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// An attachment id is a capability, so no log line carries one, at any
// level: attach, reclaim, supersede, a missed heartbeat, detach and grace
// expiry are logged with a digest of the id instead.
func TestLogsCarryNoAttachmentID(t *testing.T) {
	logs := &syncBuffer{}
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Limits.Grace = 20 * time.Millisecond
		// The browser that answers no probe times out; the runtime, which
		// answers each, must not, with the race detector on a busy machine
		// (at 50 ms it did: the hellos after it met unknown_instance).
		c.Limits.HeartbeatInterval, c.Limits.HeartbeatTimeout = 50*time.Millisecond, time.Second
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	rt := env.Connect(t)
	go func() { // the runtime answers its probes
		for {
			f, err := rt.Read()
			if err != nil {
				return
			}
			if f.Type == librelay.TypeHeartbeat && f.IsRequest() {
				rt.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
			}
		}
	}()
	first := env.Attach(t, "")
	second := env.Attach(t, first.Session) // reclaims; first is superseded
	first.ReadUntilClosed()
	detached := env.Attach(t, "")
	detached.Send(librelay.Frame{Type: librelay.TypeACPDetach, Instance: detached.Instance, Session: detached.Session})
	detached.ReadUntilClosed()
	second.ReadUntilClosed() // it answers no probe: heartbeat_timeout, then its grace runs out
	ids := []string{first.Session, detached.Session}
	for deadline := time.Now().Add(relaytest.IOTimeout); !strings.Contains(logs.String(), "grace expired"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the grace never ran out; logs:\n%s", logs)
		}
	}
	out := logs.String()
	for _, want := range []string{"browser attached", "browser detached", "missed a heartbeat", "grace expired"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in the logs:\n%s", want, out)
		}
	}
	for _, id := range ids {
		if strings.Contains(out, id) || strings.Contains(out, id[:16]) {
			t.Fatalf("the logs carry attachment id %s:\n%s", id, out)
		}
	}
}
