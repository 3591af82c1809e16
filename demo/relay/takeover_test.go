package relay_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// Two dev runtimes for one instance, each redialling on its own backoff
// (10–100 ms here, so the loser knocks dozens of times a second), over TLS
// on both legs. The contenox connector does the same (it redials after any
// refusal, on a 1s–30s backoff), which is what made two of them take the
// instance from each other for ever when the relay gave it to each
// newcomer. Here it settles: the first keeps the instance and its chat for
// as long as it runs, connected once; the second is refused again and
// again; when the first stops, the second gets the instance, and the first,
// back, is now the one refused.
func TestTwoRuntimesSettle(t *testing.T) {
	relayLog := newLogCounter()
	env := relaytest.StartTLS(t, func(c *relay.Config) { c.Logger = slog.New(relayLog) })
	firstLog, secondLog := newLogCounter(), newLogCounter()
	_, stopFirst := env.RunRuntime(t, func(c *devruntime.Config) { c.Logger = slog.New(firstLog) })
	b := env.Attach(t, "")
	sid, err := b.StartChat()
	if err != nil {
		t.Fatal(err)
	}
	refused := func() int { return relayLog.count("runtime refused", relayleg.CodeInstanceTaken) }

	second := runDetached(t, env, secondLog)
	relayLog.waitFor(t, func() bool { return refused() >= 5 })
	if n := firstLog.count("connected to relay", ""); n != 1 {
		t.Fatalf("the first runtime connected %d times, want once", n)
	}
	if n := secondLog.count("connected to relay", ""); n != 0 {
		t.Fatalf("the second runtime was welcomed %d times while the first answered", n)
	}
	if chunks, _, stop, err := b.Prompt(3, sid, "ping"); err != nil || len(chunks) != 1 || chunks[0] != "pong" || stop != "end_turn" {
		t.Fatalf("chat through the first runtime: %q %s %v", chunks, stop, err)
	}

	stopFirst()
	select {
	case <-second.Connected():
	case <-time.After(relaytest.IOTimeout):
		t.Fatal("the second runtime never got the instance after the first stopped")
	}
	before := refused()
	runDetached(t, env, newLogCounter())
	relayLog.waitFor(t, func() bool { return refused() >= before+5 })
	if n := secondLog.count("connected to relay", ""); n != 1 {
		t.Fatalf("the second runtime connected %d times, want once", n)
	}
}

// runDetached runs a dev runtime against env until the test ends without
// waiting for it to connect.
func runDetached(t *testing.T, env *relaytest.Env, log slog.Handler) *devruntime.Runtime {
	t.Helper()
	rt, err := devruntime.New(devruntime.Config{
		Relay: env.HTTPURL, Instance: env.Instance, Credential: env.RuntimeToken, RelayKey: env.Key, TLS: env.TLS,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Logger: slog.New(log),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return rt
}

// logCounter is a slog.Handler that counts records by message and "code"
// attribute, and wakes waiters on each.
type logCounter struct {
	mu     sync.Mutex
	counts map[[2]string]int
	wake   chan struct{}
}

func newLogCounter() *logCounter {
	return &logCounter{counts: make(map[[2]string]int), wake: make(chan struct{}, 1)}
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCounter) WithGroup(string) slog.Handler            { return l }

func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	code := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "code" {
			code = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	l.counts[[2]string{r.Message, code}]++
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return nil
}

func (l *logCounter) count(msg, code string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[[2]string{msg, code}]
}

// waitFor waits until cond holds, re-checking on every record; the deadline
// is a hang guard.
func (l *logCounter) waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(relaytest.IOTimeout)
	for !cond() {
		select {
		case <-l.wake:
		case <-deadline:
			t.Fatal("the condition never held")
		}
	}
}
