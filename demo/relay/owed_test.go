package relay_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// syncBuffer is a log sink the relay writes from its own goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A grace period that runs out while the instance's runtime is away still
// ends in an acp.detach: the runtime gets it when it connects again, so it
// can drop the session instead of keeping it until its own limit evicts it.
func TestDetachOwedToAnAbsentRuntime(t *testing.T) {
	logs := &syncBuffer{}
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Limits.Grace = 50 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	rt := env.Connect(t)
	b := env.Attach(t, "")
	rt.Conn.Close() // the runtime goes away; the relay closes b with runtime_gone
	if _, code := b.ReadUntilClosed(); code != 4502 {
		t.Fatalf("the browser was closed with %d, want 4502 runtime_gone", code)
	}
	for deadline := time.Now().Add(relaytest.IOTimeout); !strings.Contains(logs.String(), "attachment grace expired"); {
		if time.Now().After(deadline) {
			t.Fatal("the grace period never ran out")
		}
		time.Sleep(10 * time.Millisecond)
	}

	back := env.Connect(t)
	f, err := back.ReadCargo()
	if err != nil || f.Type != librelay.TypeACPDetach || f.Instance != env.Instance || f.Session != b.Session {
		t.Fatalf("the reconnected runtime got %s %s/%s (%v), want acp.detach for %s", f.Type, f.Instance, f.Session, err, b.Session)
	}
}
