package e2e

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// startupWait bounds how long the stack may take to come up; a deadline
// against hangs, not a claim about speed.
const startupWait = 30 * time.Second

// startStack starts what `go run ./demo` runs (demo/stack) with the page
// under test and the module found by TestMain, and a runtime whose agent
// streams rate chunks per second (0: as fast as the relay takes them). The
// stack uses the dev defaults the page falls back to when its URL names
// nothing, so s.PageURL() needs no configuration.
func startStack(t *testing.T, rate float64) *stack.Stack {
	t.Helper()
	return startStackWith(t, rate, nil, logger())
}

// startStackServing is startStack with another page (web) at /.
func startStackServing(t *testing.T, web string, rate float64) *stack.Stack {
	t.Helper()
	return startStackOf(t, web, rate, nil, logger())
}

// startStackWith is startStack with the relay's config edited (nil: as
// it is) and the parts' logs going to log.
func startStackWith(t *testing.T, rate float64, editRelay func(*relay.Config), log *slog.Logger) *stack.Stack {
	t.Helper()
	return startStackOf(t, webDir, rate, editRelay, log)
}

// startStackOf starts the stack serving web at /, with the relay's config
// edited and the parts' logs going to log.
func startStackOf(t *testing.T, web string, rate float64, editRelay func(*relay.Config), log *slog.Logger) *stack.Stack {
	t.Helper()
	s := startFreshStack(t, stack.Config{
		WebDir: web, ModuleDir: moduleDir, Logger: log, EditRelay: editRelay,
		EditRuntime: func(c *devruntime.Config) {
			c.AgentRate = rate
			// Come back quickly after a relay restart; the page's own
			// backoff is what is under test.
			c.BackoffMin, c.BackoffMax = 50*time.Millisecond, time.Second
		},
	})
	t.Cleanup(func() {
		s.Close()
		select {
		case err := <-s.Err():
			t.Errorf("the stack failed on its own: %v", err)
		default:
		}
	})
	return s
}

// restartRelay restarts the relay on the same address with the same key;
// the runtime and tb's page have to notice and come back by themselves.
// Between the stop and the start the port refuses, and a redial that falls
// there is refused and made again later, as it should be; Firefox reports
// each refused WebSocket as an error of the page, so tb's check lets that
// report through.
func restartRelay(tb *tab, s *stack.Stack) {
	tb.t.Helper()
	tb.page = allowing{tb.page, refusedDial}
	if err := s.RestartRelay(); err != nil {
		tb.t.Fatal(err)
	}
}

// refusedDial is in Firefox's report of a WebSocket whose dial was refused.
const refusedDial = "can’t establish a connection to the server"

// interruptedDial is how Firefox reports a WebSocket whose page or worker
// went away while it was open or opening.
const interruptedDial = "was interrupted while the page was loading"

// restartRuntime replaces the runtime with a fresh one that knows nothing of
// the streams before it: the page's cursor is evicted.
func restartRuntime(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()
	if err := s.RestartRuntime(ctx); err != nil {
		t.Fatal(err)
	}
}

// logger discards the stack's logs unless RELAYWASM_E2E_LOG is set.
func logger() *slog.Logger {
	if os.Getenv("RELAYWASM_E2E_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
