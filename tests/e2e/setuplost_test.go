package e2e

import (
	"context"
	"testing"
	"time"
)

// A page that goes away while its initialize is unanswered, against a
// runtime that does not resume (contenox as it ships): the answer goes out
// while the page is away and is never sent again. The page that comes back
// draws the initialize from its transcript, still unanswered; once it learns
// the runtime does not resume (not_resumed) it starts setting up again, and
// is ready to chat, on one ACP session, with no new-session divider, after
// a further reload too. It waited on "Starting a session…" for good, after
// every further reload too.
func TestNonResumingRuntimeSetupAnswerLostWhileAway(t *testing.T) {
	t.Parallel()
	setupLostWhileAway(t, false)
}

// The same when the answer to the first initialize is not lost but late: it
// comes after the page has started setting up again. It must not start a
// second session.
func TestNonResumingRuntimeSetupAnswerLate(t *testing.T) {
	t.Parallel()
	setupLostWhileAway(t, true)
}

func setupLostWhileAway(t *testing.T, late bool) {
	s := startNonResumingStack(t, webDir, streamRate)
	// The origin's database first, on a stream of its own: in WebKit a
	// page that left soon after it created the database sometimes left
	// nothing stored (not looked into here), and the page that came back
	// had nothing to draw, so the test tested nothing.
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+"?stream=first")
	held, release := s.Runtime().HoldSetup()
	t.Cleanup(release)
	tb.do("opening the chat", func(ctx context.Context) error { return tb.page.navigate(ctx, s.PageURL()) })
	waitHeld(tb, held, 1, "the page's initialize")

	// Away to about:blank: in WebKit, a page left for another document of
	// the origin found IndexedDB unavailable when it came back (memory
	// storage), so it had nothing to draw.
	tb.do("leaving the page", func(ctx context.Context) error { return tb.page.navigate(ctx, "about:blank") })
	if !late {
		release() // the answer goes out while the page is away, and is lost
	}
	tb.do("coming back", func(ctx context.Context) error { return tb.page.navigate(ctx, s.PageURL()) })
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	if late {
		waitHeld(tb, held, 2, "the page's initialize sent again")
		release() // both answers go out, the first one late
	}
	tb.waitReady()
	pingPong(tb, "after coming back")

	tb.reload()
	pingPong(tb, "after a reload")
	if st := tb.chat(); st.SessionID != "s1" {
		t.Fatalf("ACP session %q after the reload, want s1: one session", st.SessionID)
	}
}

// waitHeld waits until the runtime holds n setup answers (HoldSetup's held).
func waitHeld(tb *tab, held func() int, n int, what string) {
	tb.t.Helper()
	for deadline := time.Now().Add(waitLimit); held() < n; time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			tb.t.Fatalf("the runtime holds %d setup answers, want %d: %s (page: %s)", held(), n, what, tb.snapshot())
		}
	}
}

// pingPong has the page send ping and checks that pong answers it, with no
// new session marked on the page.
func pingPong(tb *tab, when string) {
	tb.t.Helper()
	tb.prompt("ping")
	tb.waitFor("the answer to ping "+when, settled)
	got := tb.transcript()
	for _, it := range got {
		if it.Role == "divider" {
			tb.t.Fatalf("%s the page shows %s: a new session marked where none started", when, shows(got))
		}
	}
	if n := len(got); n < 2 || got[n-2].Text != "ping" || got[n-1].Role != "agent" || got[n-1].Text != "pong" || got[n-1].Stop != "end_turn" {
		tb.t.Fatalf("%s the page shows %s; want ping answered pong", when, shows(got))
	}
}
