package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// A runtime that does not resume (contenox as it ships) restarts: the agent
// holds its sessions in memory, so it answers the page's next prompt with
// "unknown session s1". The page says so plainly, asks the agent to load the
// session (session/load, which the dev agent offers and, restarted, cannot
// do), starts a new session as for a new conversation, marks it in the
// transcript, and sends the refused prompt again, whose answer then comes.
// The page kept s1 and every prompt ended "Error: Invalid params: unknown
// session s1", after a reload too (the page took s1 back from its
// transcript), for good.
//
// The same after a restart followed by a reload before any prompt, and a
// reload after each recovery draws the same conversation and goes on on
// the new session.
func TestNonResumingRuntimeRestartStartsNewSession(t *testing.T) {
	t.Parallel()
	restartStartsNewSession(t, mainThread)
}

// The same with relay.wasm in a Web Worker (the demo page's ?worker): the
// transcript is written there, and what the page sends in answer to a
// message is in it before that message as on the page's thread.
func TestNonResumingRuntimeRestartStartsNewSessionInWorker(t *testing.T) {
	t.Parallel()
	restartStartsNewSession(t, inWorker)
}

func restartStartsNewSession(t *testing.T, m pageMode) {
	// The runtime never answers a resume, so every connection after the
	// first (two restarts, four reloads) waits out resumeTimeout before the
	// loss is reported and the prompts queued meanwhile go out; the test
	// acts on nothing during that wait. 1 s, not the default 3 s, ends the
	// same waits the same way sooner.
	s, tb := nonResumingChat(t, withQuery(m.query, "resumeTimeout=1000"))
	m.check(tb)

	// The runtime restarts while the page stays.
	restartAndWaitForLoss(tb, s)
	promptRefused(tb, "after the restart")
	checkForgottenAndResent(tb, "after the restart", 1)
	drawn := tb.transcript()
	tb.reload()
	if again := tb.transcript(); !slices.EqualFunc(again, drawn, sameItem) {
		t.Fatalf("after a reload the page shows %s; before it, %s", shows(again), shows(drawn))
	}
	tb.prompt("on the new session")
	checkAnswered(tb, "on the new session")

	// The runtime restarts again, and the page is reloaded before any
	// prompt: it takes the session back from its transcript, which the
	// agent no longer knows either.
	restartAndWaitForLoss(tb, s)
	tb.reload()
	promptRefused(tb, "after the restart and a reload")
	checkForgottenAndResent(tb, "after the restart and a reload", 2)
	tb.reload()
	tb.prompt("still going")
	checkAnswered(tb, "still going")
}

// promptRefused is tab.prompt for a prompt the agent refuses, which the page
// sends again at once: there are then two prompts more, not one, by the
// time the test looks.
func promptRefused(tb *tab, text string) {
	tb.t.Helper()
	const users = `document.querySelectorAll("#transcript [data-role=user]")`
	var before int
	tb.eval(users+".length", &before)
	tb.do("typing "+clip(text), func(ctx context.Context) error { return tb.page.typeEnter(ctx, "#prompt", text) })
	tb.waitFor("the prompt "+text+" to be sent", fmt.Sprintf(
		`(u => u.length > %d && u[%d].dataset.sent === "yes" && u[%d].querySelector(".text").textContent === %q)(%s)`,
		before, before, before, text, users))
}

// sameItem compares what the page shows of two transcript elements.
func sameItem(a, b item) bool {
	return a.Role == b.Role && a.ID == b.ID && a.Done == b.Done && a.Stop == b.Stop && a.Text == b.Text
}

// restartAndWaitForLoss restarts s's runtime and waits until tb's page has
// reconnected to the new one and given up on resuming (not_resumed).
func restartAndWaitForLoss(tb *tab, s *stack.Stack) {
	tb.t.Helper()
	var before int
	tb.eval(`__chat.evictions.length`, &before)
	restartRuntime(tb.t, s)
	tb.waitFor("the page to report the loss", `__chat.evictions.length > `+strconv.Itoa(before)+` && __chat.evictions.at(-1).reason === "not_resumed" && __chat.ready`)
}

// checkForgottenAndResent waits until the page has sent text again on a new
// session, the agent has answered it, and checks what the page shows: the
// refused prompt with its note, the new session marked (the dividers'
// count so far: dividers), the prompt again, and its answer.
func checkForgottenAndResent(tb *tab, text string, dividers int) {
	t := tb.t
	t.Helper()
	tb.waitFor("the prompt answered on a new session", settled)
	got := tb.transcript()
	var marks int
	for _, it := range got {
		if it.Role == "divider" {
			marks++
		}
	}
	n := len(got)
	if n < 5 {
		t.Fatalf("the page shows %s; want the refused prompt, a new session and the prompt again", shows(got))
	}
	refused, div, again, answer := got[n-5:n-3], got[n-3], got[n-2], got[n-1]
	switch {
	case refused[0].Role != "user" || refused[0].Text != text:
		t.Fatalf("the prompt %q is not where the agent refused it; the page shows %s", text, shows(got))
	case refused[1].Role != "agent" || refused[1].ID != refused[0].ID || refused[1].Stop != "unknown_session":
		t.Fatalf("the refused prompt's answer is %s %q (%s); want its note that the agent no longer knew the conversation", refused[1].Role, clip(refused[1].Text), refused[1].Stop)
	case strings.Contains(refused[1].Text, "Invalid params"):
		t.Errorf("the refused prompt's answer shows the raw error: %q", refused[1].Text)
	case div.Role != "divider" || !strings.HasPrefix(div.Text, "New session") || marks != dividers:
		t.Fatalf("the new session is not marked once (%d dividers, want %d); the page shows %s", marks, dividers, shows(got))
	case again.Role != "user" || again.Text != text || again.ID == refused[0].ID:
		t.Fatalf("the prompt was not sent again: after the divider the page shows %s %q", again.Role, clip(again.Text))
	case answer.Role != "agent" || answer.ID != again.ID || answer.Text != text || answer.Stop != "end_turn":
		t.Fatalf("the prompt sent again is answered %s %q (%s)", answer.Role, clip(answer.Text), answer.Stop)
	}
	var banner string
	tb.eval(`document.getElementById("banner").hidden ? "" : document.getElementById("banner-text").textContent`, &banner)
	if !strings.Contains(banner, "new one has started") || !strings.Contains(banner, "sent again") {
		t.Errorf("the banner says %q; want that a new session started and the message was sent again", banner)
	}
}

// checkAnswered waits for text's answer and checks that it is the echo.
func checkAnswered(tb *tab, text string) {
	tb.t.Helper()
	tb.waitFor("the answer to "+text, settled)
	got := tb.transcript()
	if n := len(got); n < 2 || got[n-2].Text != text || got[n-1].Role != "agent" || got[n-1].Text != text || got[n-1].Stop != "end_turn" {
		tb.t.Fatalf("the page shows %s, last %q (%s); want %q answered", shows(got), clip(got[n-1].Text), got[n-1].Stop, text)
	}
}

// settled holds when the page has a session, no answer is under way, and the
// last prompt has its answer.
const settled = `__chat.ready && (() => {
	const lis = [...document.querySelectorAll("#transcript > li")];
	const last = lis.at(-1);
	return last?.dataset.role === "agent" && last.dataset.done === "true" &&
		!lis.some(li => li.dataset.role === "agent" && li.dataset.done !== "true");
})()`

// shows describes what the page shows: each element's role, text and, for
// an answer, how it ended.
func shows(items []item) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(it.Role + " " + strconv.Quote(clip(it.Text)))
		if it.Stop != "" {
			b.WriteString(" (" + it.Stop + ")")
		}
	}
	return b.String()
}

// A runtime whose session/load answers success and still does not know the
// session (its load is broken: devruntime LoadForgets): the page loads it
// once, and when the prompt it sends again is refused "unknown session"
// again, starts a new session instead and sends it there, where it is
// answered. Before, the page loaded and sent again for as long as the
// runtime went on so, without end.
func TestNonResumingRuntimeBrokenLoadStartsNewSession(t *testing.T) {
	t.Parallel()
	s := startFreshStack(t, stack.Config{
		WebDir: webDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) { c.AgentRate, c.NoResume, c.LoadForgets = streamRate, true, true },
	})
	t.Cleanup(func() { s.Close() })
	tb := openChat(t, newBrowser(t), "tab", s.PageURL())
	tb.prompt("ping")
	tb.waitFor("the answer to ping", lastAgentDone)
	tb.waitFor("the page to learn the runtime does not resume", `__chat.resumable === false`)

	restartAndWaitForLoss(tb, s)
	promptRefused(tb, "after the restart")
	checkForgottenAndResent(tb, "after the restart", 1)
	var refused int
	for _, it := range tb.transcript() {
		if it.Role == "agent" && it.Stop == "unknown_session" {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("the prompt was refused %d times; want twice: on the forgotten session, then on it loaded (the runtime's load is broken)", refused)
	}
	tb.prompt("on the new session")
	checkAnswered(tb, "on the new session")
}
