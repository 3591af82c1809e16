package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/jsbridge/boundary"
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
	s, tb := nonResumingPinged(t, query)
	tb.waitFor("the page to learn the runtime does not resume", `__chat.resumable === false`)
	return s, tb
}

// nonResumingPinged is nonResumingChat up to ping's answer: the page has
// not learnt yet that the runtime does not resume, which takes its first
// connection's wait for the resume's answer (resumeTimeout).
func nonResumingPinged(t *testing.T, query string) (*stack.Stack, *tab) {
	t.Helper()
	s := startNonResumingStack(t, webDir, streamRate)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+query)
	tb.prompt("ping")
	tb.waitFor("the answer to ping", lastAgentDone)
	return s, tb
}

// resumeWaitOutlasting is a resumeTimeout (milliseconds) for a page whose
// resume after the relay restarted must still be unanswered when the test
// reloads it: longer than anything the test waits for before that. A
// first page with it does not wait to learn that the runtime does not
// resume (nonResumingPinged), which would take as long. 30 s, learnt
// first, once ran out before the reload, in Firefox in a make test with
// a core busy.
const resumeWaitOutlasting = "120000"

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
	recordGoing(tb)
	goOn()
	tb.reload()
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	shown := goneShowing(tb)
	n2, unmarked := countAcrossLoss(tb, n, shown, false)
	t.Logf("after the reload the page shows %d of the %d numbers (%d when it went away); the rest went while it was away", n2, n, len(shown.numbers))

	// A second reload draws the answer from the transcript alone (history()),
	// the loss with it: marked in the same place, not a count that looks
	// whole while it is cut. A jump the page showed unmarked before the
	// first reload (Firefox's, above) is marked now, and is left out of
	// the comparison.
	// That reload acts on nothing before the report: its wait for the
	// resume's answer, which never comes, is 1 s, not the default 3 s.
	drawn := tb.transcript()
	reloadWith(tb, "resumeTimeout", "1000")
	tb.waitFor("the second reload's loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	if n3, _ := countAcrossLoss(tb, n, shown, true); n3 != n2 {
		t.Fatalf("after a second reload the page shows %d numbers, %d before it", n3, n2)
	}
	again := tb.transcript()
	for _, it := range []*item{&again[3], &drawn[3]} {
		it.Gaps = slices.DeleteFunc(slices.Clone(it.Gaps), func(i int) bool { return slices.Contains(unmarked, i) })
	}
	if !reflect.DeepEqual(again[:4], drawn[:4]) {
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
	got, _ := countAcrossLoss(tb, n, shownCount{numbers: countTo(shown), what: fmt.Sprintf("%d chunks shown before the count; states %+v", before, tb.chat().States)}, false)
	t.Logf("after the restart the page shows %d of the %d numbers (%d when the connection dropped)", got, n, shown)
	if st := tb.chat(); st.State != "open" || st.SessionID != "s1" || len(st.Evictions) != 1 {
		t.Errorf("after the restart: state %q, ACP session %q, %d evictions; want open, s1, one", st.State, st.SessionID, len(st.Evictions))
	}
}

// shownCount is what the page showed of a count before a loss: the numbers,
// the losses it marked among them (indexes into numbers), whether it had
// connected again after losing its connection, and what to say of it in a
// failure.
type shownCount struct {
	numbers, marks []int
	reconnected    bool
	what           string
}

// countTo is 1 to n.
func countTo(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

// recordGoing has the page record what it shows as it goes away
// (describeGoing), in sessionStorage, for goneShowing to read after the
// reload. The listener runs after relay.js's (added at load), so the spill
// its final write leaves is there to be described too.
func recordGoing(tb *tab) {
	tb.t.Helper()
	tb.eval(`addEventListener("pagehide", () => sessionStorage.setItem("e2e.gone", `+describeGoing+`)), true`, nil)
}

// goneShowing is what the page showed of the count when it went away, as
// recordGoing's listener recorded it, read by the page loaded since.
func goneShowing(tb *tab) shownCount {
	t := tb.t
	t.Helper()
	var text string
	tb.eval(`sessionStorage.getItem("e2e.gone") ?? ""`, &text)
	var gone struct {
		Answer item `json:"answer"`
		States []struct {
			State string `json:"state"`
		} `json:"states"`
	}
	if err := json.Unmarshal([]byte(text), &gone); err != nil {
		t.Fatalf("what the page showed when it went away is not recorded (%v): %q", err, text)
	}
	numbers, marks, ok := countShown(gone.Answer)
	if !ok {
		t.Fatalf("when it went away the page showed %s as the count's answer", describe(gone.Answer.Text))
	}
	// Connected again: open once more after reconnecting.
	reconnected, away := false, false
	for _, st := range gone.States {
		away = away || st.State == "reconnecting"
		reconnected = reconnected || away && st.State == "open"
	}
	return shownCount{numbers: numbers, marks: marks, reconnected: reconnected, what: "when it went away: " + text}
}

// countShown reads the numbers of a count's answer as the page shows it,
// and where it marks losses among them (indexes into numbers).
func countShown(it item) (numbers, marks []int, ok bool) {
	for _, g := range it.Gaps {
		marks = append(marks, len(numbers)+g)
	}
	for _, line := range strings.Split(strings.TrimSpace(it.Text), "\n") {
		k, err := strconv.Atoi(line)
		if err != nil {
			return nil, nil, false
		}
		numbers = append(numbers, k)
	}
	return numbers, marks, true
}

// A reload soon after the connection dropped and opened again, before
// relay.js gave up on the resume: the page shows the count with a jump (what
// the runtime sent while the page was away the first time is gone) that it
// has not marked yet, as it does not know yet. After the reload it shows
// what it showed, the same numbers first, then the reload's loss, marked.
// Once that loss is reported, the transcript marks the first jump too, and
// so does the page that reported it, at once, before any further reload
// (it drew its transcript before the loss was known, and reads it again);
// a page drawn from the transcript (a second reload) shows both marked.
// Firefox does this by itself on a busy machine: it cuts the page's socket
// as a reload's navigation starts, and the page, running until the next one
// replaces it, may connect again and show more of the count before it goes.
func TestNonResumingRuntimeReloadWhileResuming(t *testing.T) {
	t.Parallel()
	reloadWhileResuming(t, mainThread)
}

// The same with relay.wasm in a Web Worker (?worker): the page reads its
// transcript again through the worker, its deliveries held meanwhile.
func TestNonResumingRuntimeReloadWhileResumingInWorker(t *testing.T) {
	t.Parallel()
	reloadWhileResuming(t, inWorker)
}

func reloadWhileResuming(t *testing.T, m pageMode) {
	// The first page's wait for the resume's answer outlasts the time from
	// the relay's restart to the reload (resumeWaitOutlasting); the
	// reloaded page's (10 s) the time the test acts before the loss is
	// reported.
	query := "?resumeTimeout=" + resumeWaitOutlasting
	if m.query != "" {
		query = m.query + "&" + query[1:]
	}
	s, tb := nonResumingPinged(t, query)
	m.check(tb)
	// The count outlasts whatever the test waits for (countAcross's holds);
	// a tail of it comes after the reloaded page is back.
	n := countAcross.reloaded + 210
	recordGoing(tb)
	release := countAcrossRestart(tb, s, n)
	lossNotYetKnown(tb)
	countAcrossReload(tb, s, release, "10000")()
	shown := goneShowing(tb)
	if ranges(shown.numbers) == ranges(countTo(len(shown.numbers))) {
		t.Fatalf("the page went away showing the count without a jump (%s): nothing was lost while it reconnected, the test tested nothing", ranges(shown.numbers))
	}
	// The reader has scrolled up to the jump: the mark goes in above the
	// view, which stays where it is.
	after := firstAfterJump(shown)
	top := scrollTo(tb, after)
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	waitJumpsMarked(tb, shown)
	if now := viewTop(tb, after); now < top-2 || now > top+2 {
		t.Errorf("the reader had scrolled to %d, %.1f px below the view's top; once the jump before it is marked, it is %.1f px below it", after, top, now)
	}
	got, unmarked := countAcrossLoss(tb, n, shown, true)
	t.Logf("after the reload the page shows %d of the %d numbers (%s when it went away, jumps unmarked then at %v, marked now)", got, n, ranges(shown.numbers), unmarked)

	// The second reload acts on nothing before the loss is reported, so its
	// wait for the resume's answer, which never comes, is 1 s, not 10 s:
	// the count has ended, and that wait only delays the report.
	reloadWith(tb, "resumeTimeout", "1000")
	tb.waitFor("the second reload's loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	if again, _ := countAcrossLoss(tb, n, shown, true); again != got {
		t.Fatalf("after a second reload the page shows %d numbers, %d before it", again, got)
	}
}

// lossNotYetKnown fails the test if tb's page has been told of a loss: the
// test reloads it next, and needs the loss its resume after the relay's
// restart will show still unknown then. The page's states since it opened
// say which connection told it.
func lossNotYetKnown(tb *tab) {
	tb.t.Helper()
	if st := tb.chat(); len(st.Evictions) != 0 {
		tb.t.Fatalf("the loss was reported before the reload (evictions %s, states %+v); the test needs it not yet known", st.Evictions, st.States)
	}
}

// reloadWith reloads the tab at its address with the query parameter param
// set to value (history.replaceState first, so the reload is a reload, of
// the same document's history entry).
func reloadWith(tb *tab, param, value string) {
	tb.t.Helper()
	setQuery(tb, map[string]string{param: value})
	tb.reload()
}

// countAcross is where, in chunks of the count, the runtime holds it in
// countAcrossRestart and countAcrossReload (Runtime.PauseAt) until the page
// has done what the next step needs, so that the count is still going
// however long a loaded browser takes to get there: a count of a fixed
// length (10 s) once ended, in Firefox on a loaded machine, before the
// reloaded page was back, and the page got none of it after the reload.
// The runtime sends the chunks between two holds at its own pace, and
// holds only when it gets to the next one first.
var countAcross = func() (c struct{ restarted, reconnected, reloaded int }) {
	// From the relay's restart until the page has connected again: 1 s
	// of chunks, the first of them sent while the relay is down, lost.
	c.restarted = interruptAfter + 100
	// Over the new connection, until the test has seen the count go on
	// there and reloads: where the runtime is at the reload, at most.
	c.reconnected = c.restarted + 150
	// From the reload until the reloaded page has connected: 5 s for the
	// old page to go away, the chunks sent after that lost.
	c.reloaded = c.reconnected + 500
	return c
}()

// countAcrossRestart has tb's page ask s's runtime for "count n" (held
// after its first chunks, startCountHeld) and restarts the relay under it
// (restartUnderCount).
func countAcrossRestart(tb *tab, s *stack.Stack, n int) (release func()) {
	tb.t.Helper()
	return restartUnderCount(tb, s, startCountHeld(tb, s, n))
}

// restartUnderCount lets the count startCountHeld holds go on (goOn),
// restarts the relay under it, and returns when the page, connected
// again, has shown the count going on; the runtime holds it at
// countAcross.reconnected, should it get there, until release is called.
func restartUnderCount(tb *tab, s *stack.Stack, goOn func()) (release func()) {
	tb.t.Helper()
	release = holdCountAt(tb, s, goOn, countAcross.restarted)
	restartRelay(tb, s)
	// Connected again: the relay answers a page's attach only while the
	// runtime is connected to it, so the count reaches the page from here.
	tb.waitFor("the page to connect again", `(() => {
		const s = __chat.states, i = s.findIndex((x) => x.state === "reconnecting");
		return i >= 0 && s.slice(i).some((x) => x.state === "open");
	})()`)
	release = holdCountAt(tb, s, release, countAcross.reconnected)
	tb.waitFor("the count to go on over the new connection", countGoesOnAfterReconnect)
	return release
}

// countAcrossReload lets the count countAcrossRestart holds go on (release)
// and reloads the page at once, with the reloaded page's wait for the
// resume's answer set to resumeTimeout (milliseconds). The runtime holds
// the count at countAcross.reloaded until the reloaded page has connected:
// the rest of it comes to that page. It returns the hold's release.
func countAcrossReload(tb *tab, s *stack.Stack, release func(), resumeTimeout string) func() {
	tb.t.Helper()
	release = holdCountAt(tb, s, release, countAcross.reloaded)
	reloadWith(tb, "resumeTimeout", resumeTimeout)
	tb.waitFor("the reloaded page to connect", `__chat.states.some((x) => x.state === "open")`)
	return release
}

// holdCountAt lets s's runtime go on from the hold release lets go and
// holds it again before chunk number at (counting from 0): at once if it
// has sent that one already. The runtime shares one hold among all its
// callers, so the old one goes first; the new one is let go at the test's
// end too. It returns the new one's release.
func holdCountAt(tb *tab, s *stack.Stack, release func(), at int) func() {
	release()
	release = s.Runtime().PauseAt(at)
	tb.t.Cleanup(release)
	return release
}

// countGoesOnAfterReconnect is a JavaScript expression: the page has
// connected again after a drop and shown more than 3 chunks since.
const countGoesOnAfterReconnect = `(() => {
	const s = __chat.states, i = s.findIndex((x) => x.state === "reconnecting");
	const back = i < 0 ? undefined : s.slice(i).find((x) => x.state === "open");
	return back !== undefined && __chat.chunks > back.chunks + 3;
})()`

// firstAfterJump is the first number after the first jump in the count
// shown that is not marked.
func firstAfterJump(shown shownCount) int {
	for i := 1; i < len(shown.numbers); i++ {
		if shown.numbers[i] != shown.numbers[i-1]+1 && !slices.Contains(shown.marks, i) {
			return shown.numbers[i]
		}
	}
	return 0
}

// chunkOf is a JavaScript expression: the span that shows number k of a
// count.
func chunkOf(k int) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#transcript > li[data-role=agent] [data-seq]")].find((s) => s.textContent === %q)`, strconv.Itoa(k)+"\n")
}

// scrollTo scrolls the transcript, as a reader would, to number k of a
// count, while enough of the count has come after it for the view to leave
// the end, and before the loss is reported. It returns where k is then,
// below the view's top (viewTop), once the page has had two frames to
// follow the stream, had it not left the end.
func scrollTo(tb *tab, k int) float64 {
	t := tb.t
	t.Helper()
	tb.waitFor(fmt.Sprintf("a screenful of the count after %d", k), `(() => {
		const s = document.getElementById("scroller"), c = `+chunkOf(k)+`;
		return c && s.scrollHeight - s.scrollTop - (c.getBoundingClientRect().top - s.getBoundingClientRect().top) > 3 * s.clientHeight;
	})()`)
	var scrolled bool
	tb.eval(`__chat.evictions.length === 0 && (`+chunkOf(k)+`.scrollIntoView({ block: "start" }), true)`, &scrolled)
	if !scrolled {
		t.Fatalf("the loss was reported before the reader scrolled up (state %s); the test needs it not yet known", tb.snapshot())
	}
	var settled bool
	tb.eval(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, &settled)
	top := viewTop(tb, k)
	if top < -2 || top > 100 { // Firefox leaves it a few pixels down
		t.Fatalf("scrolled to %d, the page shows it %.1f px below the view's top, not at it: it went on following the stream", k, top)
	}
	return top
}

// viewTop is how far below the transcript view's top the page shows number
// k of a count, in CSS pixels.
func viewTop(tb *tab, k int) float64 {
	tb.t.Helper()
	var top float64
	tb.eval(chunkOf(k)+`.getBoundingClientRect().top - document.getElementById("scroller").getBoundingClientRect().top`, &top)
	return top
}

// waitJumpsMarked waits for the page that reported the loss to mark each
// jump in the count it showed unmarked before (it went away before it knew
// of the loss there): before the first number after the jump, without a
// further reload.
func waitJumpsMarked(tb *tab, shown shownCount) {
	tb.t.Helper()
	for i := 1; i < len(shown.numbers); i++ {
		if shown.numbers[i] == shown.numbers[i-1]+1 || slices.Contains(shown.marks, i) {
			continue
		}
		tb.waitFor(fmt.Sprintf("the jump from %d to %d, shown unmarked before the reload, to be marked", shown.numbers[i-1], shown.numbers[i]),
			chunkOf(shown.numbers[i])+`?.previousElementSibling?.hasAttribute("data-gap")`)
	}
}

// countAcrossLoss waits for the count of n, interrupted after the page had
// shown shown and reported lost (not_resumed), to end, and checks what the
// page shows of it: each number at most once, in order, from 1; first
// exactly what it showed before the loss, marks included; then the loss,
// marked where it is, the numbers sent while the page was away missing.
// redrawn says the page shows the loss in every place the transcript puts
// it: drawn from a transcript stored after the loss was reported (a later
// reload), or the page that reported it (it reads its transcript again):
// then a jump shown unmarked before the loss is marked too (below). It returns how many numbers the page shows,
// and those jumps (indexes into the numbers). A failure says what the page
// showed before the loss, what it drew from its stored transcript, and
// what IndexedDB holds.
func countAcrossLoss(tb *tab, n int, shown shownCount, redrawn bool) (int, []int) {
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
		k, m, ok := countShown(it)
		if !ok {
			t.Fatalf("the count's answer shows %q", clip(it.Text))
		}
		for _, i := range m {
			marks = append(marks, len(numbers)+i)
		}
		numbers = append(numbers, k...)
	}
	for i, k := range numbers {
		if k != i+1 && (i == 0 || k <= numbers[i-1]) {
			t.Fatalf("the count shows %d after %v: shown twice or out of order", k, numbers[max(0, i-3):i])
		}
	}
	before := len(shown.numbers)
	if before < interruptAfter {
		t.Fatalf("the page showed %d numbers before the loss (%s); the count was under way with %d\n%s", before, ranges(shown.numbers), interruptAfter, shown.what)
	}
	// What the page showed before the loss, it shows after it: the same
	// numbers, the same marks, first. That is not always 1 to before: in
	// Firefox a reload cuts the page's socket as the navigation starts,
	// and the page, still running until the next one replaces it, may
	// connect again and show numbers sent after that, those sent between
	// lost (this runtime never sends them again).
	if len(numbers) < before || !slices.Equal(numbers[:before], shown.numbers) || len(numbers) >= n {
		t.Fatalf("the page shows %d of %d numbers (%s, losses marked before the numbers at %v); want first the %d it showed before the loss (%s, marked at %v), and not all (it was away)\n"+
			"before: %s\nthe page now: %s\nstored: %s",
			len(numbers), n, ranges(numbers), marks, before, ranges(shown.numbers), shown.marks, shown.what, pageNow(tb), storedNow(tb))
	}
	var unmarked []int // jumps among what was shown before the loss that the page had not marked
	for i := 1; i < before; i++ {
		if numbers[i] != numbers[i-1]+1 && !slices.Contains(shown.marks, i) {
			unmarked = append(unmarked, i)
		}
	}
	// A jump the page had not marked yet when it went away is one its own
	// connecting again left (above): it marks it only when the runtime's
	// resume answer is overdue (resumeTimeout), and it went away first.
	// The transcript keeps the place where that connection opened, open,
	// and the next page's not_resumed loss goes there too
	// (client.PlaceLosses). That page drew its transcript before the loss
	// was known, and marks the jump once it has read the transcript again
	// (redrawn), as a page drawn from the transcript after the loss does.
	if len(unmarked) > 0 && !shown.reconnected {
		t.Fatalf("the page showed the count with jumps at %v it did not mark (%s), and had not connected again\n%s", unmarked, ranges(shown.numbers), shown.what)
	}
	for _, i := range unmarked {
		if redrawn && !slices.Contains(marks, i) {
			t.Fatalf("before the loss the page had connected again and showed the count going from %d to %d, unmarked (it went away before it knew); after the loss, the page still does not mark it (marks at %v)\n"+
				"before: %s\nthe page now: %s\nstored: %s",
				numbers[i-1], numbers[i], marks, shown.what, pageNow(tb), storedNow(tb))
		}
	}
	// Showing the loss in every place, the page may also mark a place
	// where it connected again before the reload and nothing visible was
	// lost (the runtime sent nothing meanwhile): that loss is only
	// possible, as the mark says.
	marks = slices.DeleteFunc(marks, func(i int) bool {
		return slices.Contains(unmarked, i) || redrawn && shown.reconnected && i > 0 && i < before && !slices.Contains(shown.marks, i) && numbers[i] == numbers[i-1]+1
	})
	// The loss is marked where it is: before the first number the page
	// took after the connection opened again, in the answer that goes on
	// to its end. (Had the count ended while the page was away, there is
	// nothing after the loss to mark it before: the answer ends there,
	// interrupted.)
	jump := -1
	for i := before; i < len(numbers); i++ {
		if numbers[i] != numbers[i-1]+1 {
			jump = i
			break
		}
	}
	answer := got[len(got)-1]
	switch {
	case jump < 0 && (!slices.Equal(marks, shown.marks) || answer.Stop != "interrupted"):
		t.Fatalf("the page shows the count up to %d, the rest lost, marks a loss at %v and ends the answer %q; want marks at %v only, as before the loss, and interrupted", numbers[len(numbers)-1], marks, answer.Stop, shown.marks)
	case jump >= 0 && (!slices.Equal(marks, append(slices.Clone(shown.marks), jump)) || len(got) != 4 || answer.Stop != "end_turn"):
		t.Fatalf("the count goes from %d to %d (lost while the page was away) in %d answers, the last ended %q, with a loss marked before the numbers at %v; want one answer, marks before numbers %v and %d only, ended end_turn",
			numbers[jump-1], numbers[jump], len(got)-3, answer.Stop, marks, shown.marks, jump)
	}
	return len(numbers), unmarked
}

// describeGoing is a JavaScript expression: a JSON text of what the demo
// page shows of the last answer as it goes away (answer, as transcript
// reads it; text, with the loss marks in it as "[gap]"), what it was told
// (evictions, states), and the spills
// in sessionStorage (relay.js's final write leaves them there: see
// store.js), each entry without its bytes.
var describeGoing = fmt.Sprintf(`JSON.stringify((() => {
	const a = [...document.querySelectorAll("#transcript [data-role=agent]")].pop();
	const text = a ? (a.querySelector(".text") ?? a).cloneNode(true) : null;
	text?.querySelectorAll("[data-gap]").forEach((g) => g.replaceWith("[gap]\n"));
	const spills = {};
	for (let i = 0; i < sessionStorage.length; i++) {
		const k = sessionStorage.key(i);
		if (!k.startsWith(%q)) continue;
		try {
			spills[k] = JSON.parse(sessionStorage.getItem(k)).map(({ bytes, key, ...e }) => ({ ...e, bytes: bytes.length }));
		} catch (e) {
			spills[k] = String(e);
		}
	}
	const c = window.__chat;
	return { text: text?.textContent.trim().split("\n").join(" "), chunks: c.chunks, redrawn: c.redrawn, live: c.live,
		evictions: c.evictions, states: c.states, spills, answer: (%s).filter((i) => i.role === "agent").pop() };
})())`, boundary.StoreSpill, readTranscript)

// pageNow is what the page says of itself for a failure: what it drew from
// its stored transcript (redrawn, historyEntries, previewed), what it was
// told since (live, evictions, states), and what it read of the transcript
// again after a loss (placed).
func pageNow(tb *tab) string {
	var s string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const expr = `JSON.stringify((({ chunks, redrawn, live, historyEntries, previewed, placed, evictions, states }) =>
		({ chunks, redrawn, live, historyEntries, previewed, placed, evictions, states }))(window.__chat))`
	if err := tb.page.eval(ctx, expr, &s); err != nil {
		return "unavailable: " + err.Error()
	}
	return s
}

// storedNow is what the page's IndexedDB holds, for a failure: every
// stream's state record and the start and size of each of its chunks.
func storedNow(tb *tab) string {
	var s string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	expr := fmt.Sprintf(`new Promise((resolve, reject) => {
		const req = indexedDB.open(%q);
		req.onerror = () => reject(req.error);
		req.onsuccess = () => {
			const db = req.result;
			const tx = db.transaction([%q, %q]);
			const states = tx.objectStore(%q).getAll();
			const keys = tx.objectStore(%q).getAllKeys();
			const chunks = tx.objectStore(%q).getAll();
			tx.oncomplete = () => {
				db.close();
				resolve(JSON.stringify({ states: states.result,
					chunks: keys.result.map((k, i) => [k.at(-1), chunks.result[i]?.size ?? chunks.result[i]?.length]) }));
			};
			tx.onabort = () => reject(tx.error);
		};
	})`, boundary.StoreDatabase, boundary.StoreState, boundary.StoreChunks, boundary.StoreState, boundary.StoreChunks, boundary.StoreChunks)
	if err := tb.page.eval(ctx, expr, &s); err != nil {
		return "unavailable: " + err.Error()
	}
	return s
}

// ranges writes ascending numbers as runs: "1-40, 55-104".
func ranges(numbers []int) string {
	var b strings.Builder
	for i := 0; i < len(numbers); {
		j := i
		for j+1 < len(numbers) && numbers[j+1] == numbers[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if j == i {
			fmt.Fprintf(&b, "%d", numbers[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", numbers[i], numbers[j])
		}
		i = j + 1
	}
	return b.String()
}

// A loss whose places History's keep has trimmed from the transcript by the
// time it is told (more than the keep came while the resume's answer was
// awaited) is marked where the page's connection opened, and nowhere after.
// Before, the page, reading its transcript again to mark the loss in every
// place (placeLosses), found it where relay.wasm records it when no place
// is left, where it was told, and marked the next chunk to come: a loss
// between two numbers in a row.
func TestNonResumingRuntimeTrimmedPlaceMarksNothingLater(t *testing.T) {
	t.Parallel()
	s, tb := nonResumingPinged(t, "?resumeTimeout="+resumeWaitOutlasting+"&history=150")
	// The first page's wait for the resume's answer outlasts the time to
	// the reload (resumeWaitOutlasting). The reloaded page's (6 s) ends while the count is still
	// coming: the runtime sends at least 8 s of it from the time the page
	// has connected, more than the keep first, and holds what is left
	// only if the report is later still, until it comes. What comes as
	// the loss is told is what was marked wrongly.
	flow := countLasting(8 * time.Second)
	n := countAcross.reloaded + flow + 50
	release := countAcrossRestart(tb, s, n)
	release = countAcrossReload(tb, s, release, "6000")
	release = holdCountAt(tb, s, release, countAcross.reloaded+flow)
	tb.waitFor("the loss reported", `__chat.evictions.some((e) => e.reason === "not_resumed")`)
	release()
	tb.waitFor("the page to have read its transcript again", `__chat.placed.some((p) => p.told || p.error) || __chat.placed.length >= 6`)
	tb.waitFor("the count to end", `![...document.querySelectorAll("#transcript [data-role=agent]")].some(li => li.dataset.done !== "true")`)
	var placed string
	tb.eval(`JSON.stringify(__chat.placed)`, &placed)
	t.Logf("the page's readings of its transcript: %s", placed)
	jumps := 0
	for _, it := range tb.transcript() {
		if it.Role != "agent" {
			continue
		}
		numbers, marks, ok := countShown(it)
		if !ok {
			continue // ping's answer
		}
		for _, i := range marks {
			if i > 0 && numbers[i] == numbers[i-1]+1 {
				t.Errorf("the page marks a loss between %d and %d, numbers in a row (marks at %v of %s; its readings of the transcript %s)", numbers[i-1], numbers[i], marks, ranges(numbers), placed)
			}
		}
		for i := 1; i < len(numbers); i++ {
			if numbers[i] != numbers[i-1]+1 {
				jumps++
			}
		}
	}
	if jumps == 0 {
		t.Fatalf("the count shows no jump: nothing was lost at the reload, the test tested nothing")
	}
}
