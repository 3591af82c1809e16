package e2e

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// startNonResumingStack is startStackServing with a runtime that behaves as
// contenox v1.0.0 ships (`go run ./demo -resume=false`): no seq, no
// retention, session.resume left unanswered. The shipped runtime cannot run
// here; the dev runtime reproduces what was measured of it.
func startNonResumingStack(t *testing.T, web string, rate float64) *stack.Stack {
	t.Helper()
	s := startFreshStack(t, stack.Config{
		WebDir: web, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) { c.AgentRate, c.NoResume = rate, true },
	})
	t.Cleanup(func() { s.Close() })
	return s
}

// nonResumingChat opens the demo page (with query) against a runtime that
// does not resume, has it ping, and waits until the page knows the runtime
// does not resume.
func nonResumingChat(t *testing.T, query string) (*stack.Stack, *tab) {
	t.Helper()
	s := startNonResumingStack(t, webDir, streamRate)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+query)
	tb.prompt("ping")
	tb.waitFor("the answer to ping", lastAgentDone)
	tb.waitFor("the page to learn the runtime does not resume", `__chat.resumable === false`)
	return s, tb
}

// The demo page against a runtime that does not resume: it chats normally,
// says what a reload costs there, and a reload in the middle of an answer
// shows every chunk that arrived once and in order, reports that the rest is
// gone (instead of waiting for it, or pretending), and the conversation goes
// on on the same ACP session.
func TestNonResumingRuntimeChatAndReload(t *testing.T) {
	t.Parallel()
	nonResumingChatAndReload(t, mainThread)
}

// The same with relay.wasm in a Web Worker (the demo page's ?worker): the
// page, not the worker, writes the store at pagehide and leaves its copy in
// sessionStorage, so what the page showed when it went away is there after
// the reload in every engine. In WebKit the worker is ended before it hears
// of the pagehide: with the store in the worker, up to a commit window of
// what the page had shown was missing after the reload, and this runtime
// never sends it again.
func TestNonResumingRuntimeChatAndReloadInWorker(t *testing.T) {
	t.Parallel()
	nonResumingChatAndReload(t, inWorker)
}

func nonResumingChatAndReload(t *testing.T, m pageMode) {
	s, tb := nonResumingChat(t, m.query)
	m.check(tb)
	var banner string
	tb.eval(`document.getElementById("banner").hidden ? "" : document.getElementById("banner-text").textContent`, &banner)
	if !strings.Contains(banner, "whatever it sends meanwhile is lost") {
		t.Fatalf("the page does not say what a reload costs; banner %q (page: %s)", banner, tb.snapshot())
	}

	n := countLasting(4 * time.Second)
	goOn := startCountHeld(tb, s, n) // under way: interruptAfter chunks shown
	// What the page shows when it goes away is in the store's last write
	// (WebKit abandons that one at the reload; its spill carries it over).
	tb.eval(`addEventListener("pagehide", () => sessionStorage.setItem("e2e.shown", String(`+lastAgentChunks+`))), true`, nil)
	goOn()
	tb.reload()
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	var shown int
	tb.eval(`Number(sessionStorage.getItem("e2e.shown"))`, &shown)
	n2 := countAcrossLoss(tb, n, shown)
	t.Logf("after the reload the page shows %d of the %d numbers (%d when it went away); the rest went while it was away", n2, n, shown)

	// A second reload draws the answer from the transcript alone (history()),
	// the loss with it: marked in the same place, not a count that looks
	// whole while it is cut.
	drawn := tb.transcript()
	tb.reload()
	tb.waitFor("the second reload's loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	if n3 := countAcrossLoss(tb, n, shown); n3 != n2 {
		t.Fatalf("after a second reload the page shows %d numbers, %d before it", n3, n2)
	}
	if again := tb.transcript(); !reflect.DeepEqual(again[:4], drawn[:4]) {
		t.Fatalf("after a second reload the count's answer is %s (%s) with losses marked at %v; before it, %s (%s) marked at %v",
			describe(again[3].Text), again[3].Stop, again[3].Gaps, describe(drawn[3].Text), drawn[3].Stop, drawn[3].Gaps)
	}

	// The conversation goes on.
	// The answer is the one to this prompt, the answer bearing its id, not
	// whichever answer is last: had the loss been reported before any of
	// the rest of the count arrived, the count's answer would have ended
	// interrupted and its rest could still be arriving, as an answer of its
	// own that begins after this one.
	const sentence = "still here after the reload"
	tb.prompt(sentence)
	tb.waitFor("the echoed sentence", `(() => {
		const u = [...document.querySelectorAll("#transcript > li[data-role=user]")].pop();
		return document.querySelector('#transcript > li[data-role=agent][data-prompt-id="' + u?.dataset.id + '"]')?.dataset.done === "true";
	})()`)
	last := tb.transcript()
	var prompt item
	for _, it := range last {
		if it.Role == "user" {
			prompt = it
		}
	}
	if prompt.Text != sentence {
		t.Fatalf("the last prompt shown is %q, want %q", clip(prompt.Text), sentence)
	}
	for _, a := range last {
		if a.Role == "agent" && a.ID == prompt.ID && (a.Text != sentence || a.Stop != "end_turn") {
			t.Fatalf("the answer after the reload is %s %q (%s)", a.Role, clip(a.Text), a.Stop)
		}
	}
	if st := tb.chat(); st.SessionID != "s1" {
		t.Fatalf("ACP session %q after the reload, want s1 still", st.SessionID)
	}
}

// A prompt sent in the seconds between the connection opening again and
// relay.js reporting the loss (not_resumed, when it stops waiting for the
// resume's answer) goes out on the new connection, once relay.js has given
// up on the resume: nothing of its answer can have been lost, and none of
// it has come when the report does. The page shows it whole, with no mark
// of a loss, and does not end it as interrupted when the report comes.
func TestNonResumingRuntimePromptBeforeLossReported(t *testing.T) {
	t.Parallel()
	// The test acts between the reload and the report, which comes when
	// the wait for the resume's answer ends: 10 s rather than the default
	// 3 s, which a loaded WebKit could spend loading the page.
	_, tb := nonResumingChat(t, "?resumeTimeout=10000")
	tb.reload()
	n := countLasting(600 * time.Millisecond)
	// In one step, so that the prompt surely goes out before the report.
	var sent bool
	tb.eval(`__chat.evictions.length === 0 && (__chat.send("count `+strconv.Itoa(n)+`"), true)`, &sent)
	if !sent {
		t.Fatalf("the loss was reported before the reloaded page was ready to send (state %s)", tb.snapshot())
	}
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	tb.waitFor("the count to end", `![...document.querySelectorAll("#transcript [data-role=agent]")].some(li => li.dataset.done !== "true")`)

	got := tb.transcript()
	if len(got) != 4 || got[2].Text != "count "+strconv.Itoa(n) {
		t.Fatalf("the page shows %s; want ping, pong, the count and one answer (page: %s)", roles(got), tb.snapshot())
	}
	a := got[3]
	if a.Role != "agent" || a.ID != got[2].ID || a.Stop != "end_turn" || a.Text != countText(n) || len(a.Gaps) != 0 {
		t.Fatalf("the answer to the count sent after the reload is %s (%s, answering %q) with losses marked at %v; want the whole count, ended end_turn, no mark",
			describe(a.Text), a.Stop, a.ID, a.Gaps)
	}
}

// The same loss from a dropped connection instead of a reload: the relay
// restarts in the middle of the count, the page reconnects by itself, and
// the loss is marked where the connection dropped, inside the answer, which
// goes on to its end.
func TestNonResumingRuntimeRelayRestart(t *testing.T) {
	t.Parallel()
	s, tb := nonResumingChat(t, "")

	n := countLasting(4 * time.Second)
	before := tb.chat().Chunks // pong's
	goOn := startCountHeld(tb, s, n)
	goOn()
	restartRelay(tb, s)
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	shown := -1
	for _, st := range tb.chat().States {
		if st.State == "reconnecting" {
			shown = st.Chunks - before
			break
		}
	}
	if shown < interruptAfter {
		t.Fatalf("the page showed %d numbers when it went reconnecting, want the count under way (%d); states %+v", shown, interruptAfter, tb.chat().States)
	}
	got := countAcrossLoss(tb, n, shown)
	t.Logf("after the restart the page shows %d of the %d numbers (%d when the connection dropped)", got, n, shown)
	if st := tb.chat(); st.State != "open" || st.SessionID != "s1" || len(st.Evictions) != 1 {
		t.Errorf("after the restart: state %q, ACP session %q, %d evictions; want open, s1, one", st.State, st.SessionID, len(st.Evictions))
	}
}

// countAcrossLoss waits for the count of n, interrupted after the page had
// shown its first shown numbers and reported lost (not_resumed), to end,
// and checks what the page shows of it: each number at most once, in
// order, from 1; the ones sent while the page was away missing, the loss
// marked where it is. It returns how many numbers the page shows.
func countAcrossLoss(tb *tab, n, shown int) int {
	t := tb.t
	t.Helper()
	tb.waitFor("the banner saying so", `!document.getElementById("banner").hidden && document.getElementById("banner-text").textContent.includes("is gone")`)
	// relay.js reports the loss when it gives up on the resume, seconds
	// after the connection opened again, and the count goes on meanwhile:
	// the answer stays open until the runtime ends it.
	tb.waitFor("the count to end", `![...document.querySelectorAll("#transcript [data-role=agent]")].some(li => li.dataset.done !== "true")`)

	got := tb.transcript()
	if len(got) < 4 || got[0].Text != "ping" || got[1].Text != "pong" || got[2].Text != "count "+strconv.Itoa(n) {
		t.Fatalf("the page shows %s", roles(got))
	}
	var numbers, marks []int // marks: where the page marks a loss, as indexes into numbers
	for _, it := range got[3:] {
		if it.Role != "agent" {
			t.Fatalf("element %q (%s) among the count's answer", clip(it.Text), it.Role)
		}
		for _, g := range it.Gaps {
			marks = append(marks, len(numbers)+g)
		}
		for _, line := range strings.Split(strings.TrimSpace(it.Text), "\n") {
			k, err := strconv.Atoi(line)
			if err != nil {
				t.Fatalf("the count's answer shows %q", clip(it.Text))
			}
			numbers = append(numbers, k)
		}
	}
	for i, k := range numbers {
		if k != i+1 && (i == 0 || k <= numbers[i-1]) {
			t.Fatalf("the count shows %d after %v: shown twice or out of order", k, numbers[max(0, i-3):i])
		}
	}
	if shown < interruptAfter {
		t.Fatalf("the page went away showing %d numbers; the count was under way with %d", shown, interruptAfter)
	}
	// Each number at most once and in order: the first shown are 1 to
	// shown exactly when the shown-th is shown.
	if len(numbers) < shown || numbers[shown-1] != shown || len(numbers) >= n {
		t.Fatalf("the page shows %d of %d numbers; want the first %d, shown when it went away, and not all (it was away)", len(numbers), n, shown)
	}
	// The loss is marked where it is: before the first number the page
	// took after the connection opened again, in the answer that goes on
	// to its end. (Had the count ended while the page was away, there is
	// nothing after the loss to mark it before: the answer ends there,
	// interrupted.)
	jump := -1
	for i, k := range numbers {
		if k != i+1 {
			jump = i
			break
		}
	}
	answer := got[len(got)-1]
	switch {
	case jump < 0 && (len(marks) > 0 || answer.Stop != "interrupted"):
		t.Fatalf("the page shows the count up to %d, the rest lost, marks a loss at %v and ends the answer %q; want no mark and interrupted", len(numbers), marks, answer.Stop)
	case jump >= 0 && (!slices.Equal(marks, []int{jump}) || len(got) != 4 || answer.Stop != "end_turn"):
		t.Fatalf("the count goes from %d to %d (lost while the page was away) in %d answers, the last ended %q, with a loss marked before the numbers at %v; want one answer, a mark before number %d only, ended end_turn",
			numbers[jump-1], numbers[jump], len(got)-3, answer.Stop, marks, jump)
	}
	return len(numbers)
}
