package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/relaywasm/relaywasm/demo/stack"
)

// The demo page in worker mode (?worker) against a runtime that does not
// resume, reloaded after the relay restarted and the count went on over the
// new connection, before the worker's commits of what it delivered since
// reached the page: WebKit ends a page's worker before the worker hears of
// the pagehide, and on a loaded machine the commits of the last batches
// may still be on their way in any engine. The page then stores those
// messages itself (remote.js _commitTail), and the place where the new
// connection took the stream up (the engine's keepLossPlace) must be
// stored with them, before them: the next page's not_resumed loss goes
// there too, and the jump the first page showed unmarked is marked, as it
// is on the main thread (TestNonResumingRuntimeReloadWhileResuming).
//
// The worker's commits are held back from the page, from the first batch
// of messages over the new connection on, by a wrapper of Worker the tab
// runs before the page's own scripts (Chromium's DevTools protocol: the
// test runs there only). The engine commits the place before it delivers
// that batch (client's commitFirst), and the worker's messages reach
// the page in the order it posts them: no commit posted before a batch is
// still on its way once the page has taken the batch.
func TestWorkerPlaceStoredWhenThePageCommitsItself(t *testing.T) {
	t.Parallel()
	skipUnless(t, "a script run before the page's (Page.addScriptToEvaluateOnNewDocument)")
	_, tb, hold := workerPlaceRestarted(t)
	n := placeCountLen
	recordGoing(tb)
	lossNotYetKnown(tb)
	placeCountAcrossReload(tb, hold)
	shown := goneShowing(tb)
	if ranges(shown.numbers) == ranges(countTo(len(shown.numbers))) {
		t.Fatalf("the page went away showing the count without a jump (%s): nothing was lost while it reconnected, the test tested nothing", ranges(shown.numbers))
	}
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	waitJumpsMarked(tb, shown)
	got, unmarked := countAcrossLoss(tb, n, shown, true)
	t.Logf("after the reload the page shows %d of the %d numbers (%s when it went away, jumps unmarked then at %v, marked now)", got, n, ranges(shown.numbers), unmarked)
}

// holdWorkerCommits wraps Worker so that the page's handler of its
// messages does not get the worker's store commits ({t: "store", op:
// "commit"}) that come after the first batch of messages ({t: "batch"})
// since the worker said its attachment is open again after reconnecting:
// as if they were still on their way when the page went away.
// window.__e2eHeldCommits counts them; window.__e2eReleaseCommits() hands
// them to the page, in order, and holds no more.
const holdWorkerCommits = `(() => {
	const Real = globalThis.Worker;
	if (typeof Real !== "function") return;
	window.__e2eHeldCommits = 0;
	let away = false, reopened = false, holding = false;
	const wrap = (fn) => fn && function (ev) {
		const m = ev.data;
		if (m && m.t === "state") {
			if (m.state === "reconnecting") away = true;
			else if (m.state === "open" && away) reopened = true;
		}
		if (reopened && m && m.t === "batch") {
			reopened = false;
			holding = true;
		}
		if (holding && m && m.t === "store" && m.op === "commit") {
			window.__e2eHeldCommits++;
			held.push(() => fn.call(this, ev));
			return;
		}
		return fn.call(this, ev);
	};
	const held = [];
	window.__e2eReleaseCommits = () => {
		holding = false;
		for (const f of held.splice(0)) f();
		return true;
	};
	class HeldWorker extends Real {
		set onmessage(fn) { super.onmessage = wrap(fn); }
		get onmessage() { return super.onmessage; }
	}
	globalThis.Worker = HeldWorker;
})()`

// The demo page against the dev runtime, which numbers its messages and
// answers session.resume: a page whose connection opened again (the relay
// restarted) and delivered part of an answer before its resume was
// answered leaves a place open in the transcript when it goes away then.
// The next page's resume is answered, and nothing was lost there: the
// count shows every number. A loss a later page is told (not_resumed: its
// resume was not answered in time) must not be drawn at that old place:
// the page would mark a loss in the middle of a count it shows whole.
//
// The first and third pages never get the runtime's session.resumed (a
// wrapper of WebSocket the tab runs before the page's own scripts drops it
// while window.__e2eDropResumed is set): the first stands for a page gone
// before the answer came, the third for one whose answer came too late.
func TestResumingRuntimeOpenPlaceLeftByAPageGoneMarksNothingLater(t *testing.T) {
	t.Parallel()
	skipUnless(t, "a script run before the page's (Page.addScriptToEvaluateOnNewDocument)")
	s := startStackServing(t, webDir, streamRate)
	tb := openPageAfter(t, dropResumed, s.PageURL()+"?resumeTimeout="+resumeWaitOutlasting)
	tb.prompt("ping")
	tb.waitFor("the answer to ping", lastAgentDone)

	n := countLasting(10 * time.Second)
	goOn := startCountHeld(tb, s, n)
	tb.eval(`window.__e2eDropResumed = true`, nil)
	restartRelay(tb, s)
	tb.waitFor("the page to connect again", `(() => {
		const s = __chat.states, i = s.findIndex((x) => x.state === "reconnecting");
		return i >= 0 && s.slice(i).some((x) => x.state === "open");
	})()`)
	goOn()
	tb.waitFor("the count to go on over the new connection", countGoesOnAfterReconnect)
	tb.waitFor("the runtime's answer to the resume dropped", `window.__e2eDroppedResumed > 0`)
	if st := tb.chat(); len(st.Evictions) != 0 {
		t.Fatalf("a loss was reported before the reload (evictions %s); the test needs the resume unanswered", st.Evictions)
	}

	// The second page's resume is answered: the count goes on whole.
	tb.reload()
	tb.waitFor("the count to end", lastAgentDone)
	checkCountWhole(tb, n, "after a reload whose resume was answered")

	// The third page's resume goes unanswered: not_resumed.
	setQuery(tb, map[string]string{"resumeTimeout": "1000", "e2eDropResumed": "1"})
	tb.reload()
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	tb.waitFor("the transcript read again for the loss", `__chat.placed.some(p => p.told)`)
	checkCountWhole(tb, n, "once the third page was told of a loss")

	// A page drawn from the transcript since.
	setQuery(tb, map[string]string{"resumeTimeout": resumeWaitOutlasting, "e2eDropResumed": ""})
	tb.reload()
	checkCountWhole(tb, n, "drawn from the transcript after that loss")
}

// checkCountWhole checks that the page shows the count of n whole, each
// number once and in order, with no loss marked in it.
func checkCountWhole(tb *tab, n int, when string) {
	t := tb.t
	t.Helper()
	got := tb.transcript()
	if len(got) < 4 || got[2].Text != "count "+strconv.Itoa(n) {
		t.Fatalf("%s: the page shows %s", when, roles(got))
	}
	numbers, marks, ok := countShown(got[3])
	if !ok {
		t.Fatalf("%s: the page shows %s as the count's answer", when, describe(got[3].Text))
	}
	if ranges(numbers) != ranges(countTo(n)) {
		t.Fatalf("%s: the page shows %s of the count of %d", when, ranges(numbers), n)
	}
	for _, m := range marks {
		t.Errorf("%s: the page marks a loss before %d in the count it shows whole (marks before indexes %v); stored: %s", when, numbers[m], marks, storedNow(tb))
	}
}

// setQuery sets (or, with "", removes) query parameters of the tab's
// address without navigating (history.replaceState), for the next reload.
func setQuery(tb *tab, params map[string]string) {
	tb.t.Helper()
	js, _ := json.Marshal(params)
	tb.eval(`(() => { const u = new URL(location.href); for (const [k, v] of Object.entries(`+string(js)+`)) v === "" ? u.searchParams.delete(k) : u.searchParams.set(k, v); history.replaceState(history.state, "", u) })()`, nil)
}

// dropResumed wraps WebSocket so that the page's handler of its messages
// never gets a session.resumed frame while window.__e2eDropResumed is set
// (from the address's e2eDropResumed parameter at load, or by the test).
const dropResumed = `(() => {
	const Real = globalThis.WebSocket;
	window.__e2eDroppedResumed = 0;
	window.__e2eDropResumed = new URLSearchParams(location.search).get("e2eDropResumed") === "1";
	const wrap = (fn) => fn && function (ev) {
		if (window.__e2eDropResumed && typeof ev.data === "string" && ev.data.includes('"session.resumed"')) {
			try {
				if (JSON.parse(ev.data).type === "session.resumed") return void window.__e2eDroppedResumed++;
			} catch {}
		}
		return fn.call(this, ev);
	};
	class DroppingSocket extends Real {
		set onmessage(fn) { super.onmessage = wrap(fn); }
		get onmessage() { return super.onmessage; }
	}
	globalThis.WebSocket = DroppingSocket;
})()`

// The same, but the worker's commits held back come after all, once the
// page has stored the tail itself at a pagehide and goes on (as a page
// shown again from the back/forward cache does, or one whose worker's
// commits Chromium runs as it goes into the cache): the place must stay
// before the messages the page stored, not land after them, as it did
// when the worker committed it with the first of those messages, which
// the page drops from the commit (remote.js _unwritten). The next page's
// not_resumed then marks the jump the first page showed, and nothing in
// the count it showed whole after the jump.
func TestWorkerPlaceKeptBeforeTheTailThePageStored(t *testing.T) {
	t.Parallel()
	skipUnless(t, "a script run before the page's (Page.addScriptToEvaluateOnNewDocument)")
	s, tb, hold := workerPlaceRestarted(t)
	n := placeCountLen
	// The page stores what it took since itself (pagehide), and the
	// worker's commits of it come after. The count goes on past the hold
	// it may have reached, to placeCountMore.
	hold = holdCountAt(tb, s, hold, placeCountMore)
	tb.eval(`dispatchEvent(new PageTransitionEvent("pagehide", { persisted: false })), __e2eReleaseCommits()`, nil)
	lossNotYetKnown(tb)
	tb.waitFor("more of the count after the page stored its tail", lastAgentChunks+" > "+strconv.Itoa(countShownNow(tb)+3))
	recordGoing(tb)
	placeCountAcrossReload(tb, hold)
	shown := goneShowing(tb)
	if ranges(shown.numbers) == ranges(countTo(len(shown.numbers))) {
		t.Fatalf("the page went away showing the count without a jump (%s): nothing was lost while it reconnected, the test tested nothing", ranges(shown.numbers))
	}
	tb.waitFor("the loss reported", `__chat.evictions.some(e => e.reason === "not_resumed")`)
	waitJumpsMarked(tb, shown)
	got, unmarked := countAcrossLoss(tb, n, shown, true)
	t.Logf("after the reload the page shows %d of the %d numbers (%s when it went away, jumps unmarked then at %v, marked now)", got, n, ranges(shown.numbers), unmarked)
}

// The worker-mode place tests' count is held (Runtime.PauseAt) at each
// step until the page has done what the next step needs, as countAcross's
// is, instead of running for a fixed time: a count of 10 s could end, on a
// loaded machine, before the page had connected again after the relay's
// restart or before the reloaded page was back, and the test then failed
// waiting for what never came. Chunks are counted from 0, as
// Runtime.PauseAt counts them.
var (
	// After the page stored its tail itself, until it has shown more.
	placeCountMore = countAcross.reconnected + 150
	// placeCountLen is the count's length: what is left after the last
	// hold comes to the reloaded page.
	placeCountLen = placeCountMore + 300
)

// workerPlaceRestarted opens the demo page in worker mode, its worker's
// store commits held back (holdWorkerCommits), against a runtime that does
// not resume, has it ask for a count of placeCountLen and restarts the
// relay under it (restartUnderCount). It returns once the page has
// connected again, shown the count going on, and had a commit held back.
// The first page's wait for the resume's answer outlasts the relay's
// restart and the reload (resumeWaitOutlasting), so it does not wait to
// learn that the runtime does not resume.
func workerPlaceRestarted(t *testing.T) (s *stack.Stack, tb *tab, hold func()) {
	t.Helper()
	s = startNonResumingStack(t, webDir, streamRate)
	tb = openPageAfter(t, holdWorkerCommits, s.PageURL()+"?worker&resumeTimeout="+resumeWaitOutlasting)
	inWorker.check(tb)
	tb.prompt("ping")
	tb.waitFor("the answer to ping", lastAgentDone)
	hold = restartUnderCount(tb, s, startCountHeld(tb, s, placeCountLen))
	tb.waitFor("the worker's commits since the reconnection held back", `window.__e2eHeldCommits > 0`)
	return s, tb, hold
}

// placeCountAcrossReload reloads the page, its wait for the resume's
// answer 10 s, and lets the count the runtime holds (release) go on once
// the reloaded page has connected: the rest of it comes to that page.
func placeCountAcrossReload(tb *tab, release func()) {
	tb.t.Helper()
	reloadWith(tb, "resumeTimeout", "10000")
	tb.waitFor("the reloaded page to connect", `__chat.states.some((x) => x.state === "open")`)
	release()
}

// openPageAfter opens url in a tab of a new browser that runs script before
// the page's own scripts, on every page the tab loads (reloads too).
func openPageAfter(t *testing.T, script, url string) *tab {
	t.Helper()
	tb := openTab(t, newBrowser(t), "tab", "about:blank")
	tb.run(chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := cdppage.AddScriptToEvaluateOnNewDocument(script).Do(ctx)
		return err
	}))
	tb.eval(`setTimeout(() => location.assign(`+strconv.Quote(url)+`), 0), true`, nil)
	tb.waitReady()
	return tb
}

// countShownNow is how many chunks the page shows of its last answer.
func countShownNow(tb *tab) int {
	tb.t.Helper()
	var k int
	tb.eval(lastAgentChunks, &k)
	return k
}
