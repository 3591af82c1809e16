package relay_test

import (
	"bytes"
	"context"
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

// The detaches owed to a returning runtime never wait for room in its
// queue. The welcome holds that queue (nothing is written before the route
// exists) under the relay's takeover lock, so when as many detaches were
// owed as the queue holds frames, the one that waited for room waited for
// ever, and so did the handshake of every runtime, of every instance.
func TestOwedDetachesDoNotHoldTheHandshake(t *testing.T) {
	const attachments = 8
	logs := &syncBuffer{}
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Limits.Grace = 50 * time.Millisecond
		c.Limits.AttachmentsPerInstance = attachments
		c.Limits.RuntimeQueueFrames = attachments / 2
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	rt := env.Connect(t)
	owed := map[string]bool{}
	var bs []*relaytest.Browser
	for range attachments {
		b := env.Attach(t, "")
		bs = append(bs, b)
		owed[b.Session] = true
	}
	rt.Conn.Close()
	for _, b := range bs {
		b.ReadUntilClosed()
	}
	for deadline := time.Now().Add(relaytest.IOTimeout); strings.Count(logs.String(), "attachment grace expired") < attachments; {
		if time.Now().After(deadline) {
			t.Fatalf("the grace periods never ran out:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	back := dialRuntime(t, env, env.RuntimeToken, env.Instance)
	for range attachments {
		f, err := back.ReadCargo()
		if err != nil || f.Type != librelay.TypeACPDetach || !owed[f.Session] {
			t.Fatalf("the returning runtime got %s for %s (%v), want an owed acp.detach", f.Type, f.Session, err)
		}
		delete(owed, f.Session)
	}
	dialRuntime(t, env, "any-runtime", "another-instance") // the takeover lock is free
}

// dialRuntime connects a runtime for instance and fails the test unless it
// is welcomed within 3s.
func dialRuntime(t *testing.T, env *relaytest.Env, token, instance string) *relaytest.Runtime {
	t.Helper()
	r, _, err := relaytest.DialRuntime(context.Background(), env.HTTPURL, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Conn.Close() })
	r.Timeout = 3 * time.Second
	if f, _, err := r.Hello(instance, librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeWelcome {
		t.Fatalf("a runtime for %s got %s (%v), want a welcome", instance, f.Type, err)
	}
	return r
}
