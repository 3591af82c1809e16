//go:build !js

package client_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
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
