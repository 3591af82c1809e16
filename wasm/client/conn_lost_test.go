//go:build !js

package client_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// logWatch is a relay logger that closes a channel the first time the relay
// logs msg: how a test learns of what the relay does on a timer of its own
// (a grace that runs out) without sleeping for it.
type logWatch struct {
	msg  string
	seen chan struct{}
}

func watchLog(msg string) *logWatch { return &logWatch{msg: msg, seen: make(chan struct{})} }

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *logWatch) WithGroup(string) slog.Handler            { return w }
func (w *logWatch) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == w.msg {
		select {
		case <-w.seen:
		default:
			close(w.seen)
		}
	}
	return nil
}

func (w *logWatch) wait(t *testing.T) {
	t.Helper()
	select {
	case <-w.seen:
	case <-time.After(guard):
		t.Fatalf("the relay never logged %q", w.msg)
	}
}

// A client away for longer than the relay's grace, against a runtime that
// numbers nothing (contenox as it ships): the relay detached the old id,
// the runtime dropped its ACP sessions with it, and the redial is granted a
// new id. The client says so (session_replaced), as it does for a
// sequenced stream, so the application knows to open a new ACP session
// instead of being answered "unknown session".
func TestConnReplacedIdReportedWithoutSeq(t *testing.T) {
	expired := watchLog("attachment grace expired")
	s := newStack(t, func(cfg *relay.Config) {
		cfg.Limits.Grace = 300 * time.Millisecond
		cfg.Logger = slog.New(expired)
	}, nonResuming)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	o.ResumeTimeout = resumeWait
	a := s.attach(o)
	startChat(t, c, a)
	old := a.Session()

	s.front.Freeze()
	s.front.Cut() // the relay hears of the drop and starts the grace; the redials are held
	expired.wait(t)
	s.front.Thaw()
	c.Wait(t, "a new attachment id", func(*clienttest.Collector) bool { return a.Session() != old && a.Session() != "" })
	c.Wait(t, "the replaced id reported", func(c *clienttest.Collector) bool { return evictions(c, client.EvictedSessionReplaced) == 1 })

	// What the application does on hearing it: a new ACP session, which works.
	resp := call(t, c, a, 11, "session/new", `{"cwd":"/","mcpServers":[]}`)
	if len(resp.Error) > 0 {
		t.Fatalf("session/new on the new id answered %s", resp.Error)
	}
	c.Lock()
	defer c.Unlock()
	for _, e := range c.Evicted {
		if e.Reason != client.EvictedSessionReplaced || e.AfterSeq != 0 {
			t.Fatalf("eviction %+v; want only session_replaced after seq 0", e)
		}
	}
}

// A redial against a runtime already known not to resume, with the id
// reclaimed: the loss (not_resumed) is told at the welcome, before the sends
// that waited are let out, so nothing the application sent is answered
// before it hears that what came before was lost (relay.js's stream relies
// on that order).
func TestConnLossToldBeforeQueuedSends(t *testing.T) {
	s := newStack(t, nil, nonResuming)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	o.ResumeTimeout = resumeWait
	answeredFirst := make(chan bool, 1)
	o.OnEvicted = func(e client.Eviction) {
		if e.Reason == client.EvictedNotResumed {
			c.Lock()
			_, ok := c.Response(21)
			c.Unlock()
			select {
			case answeredFirst <- ok:
			default:
			}
		}
		c.OnEvicted(e)
	}
	a := s.attach(o)
	startChat(t, c, a)
	c.Wait(t, "resumable false", func(c *clienttest.Collector) bool { return !lastState(c).Resumable })
	old := a.Session()

	s.front.Freeze()
	s.front.Cut()
	c.Wait(t, "reconnecting", func(c *clienttest.Collector) bool { return lastState(c).State != client.Open })
	sent := make(chan error, 1)
	go func() {
		sent <- a.SendACP(context.Background(), []byte(`{"jsonrpc":"2.0","id":21,"method":"initialize","params":{"protocolVersion":1}}`))
	}()
	relaytest.WaitFor(t, "the send queued", func() bool { return a.Queued() == 1 })
	s.front.Thaw()
	if err := <-sent; err != nil {
		t.Fatalf("SendACP: %v", err)
	}
	c.Wait(t, "the response", func(c *clienttest.Collector) bool { _, ok := c.Response(21); return ok })
	c.Wait(t, "the loss reported", func(c *clienttest.Collector) bool { return evictions(c, client.EvictedNotResumed) == 1 })
	if a.Session() != old {
		t.Fatalf("the redial got id %q, want %q back", a.Session(), old)
	}
	if <-answeredFirst {
		t.Fatal("the send made while reconnecting was answered before the loss was told")
	}
}
