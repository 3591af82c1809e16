package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// streamRate paces the dev agent in the tests that interrupt a stream, in
// chunks per second. Those tests size their counts by how long the answer
// must last (countLasting): long enough to be interrupted part-way, in a
// slow engine on a busy machine too, and short enough for the package's
// budget. The rate is low because every chunk costs a browser a task and
// its share of a store, and make test is bound by the processor: at 500 a
// second the three engines' runs, one test at a time, took 887
// processor-seconds, at 100 787 (most of the rest is drawing, paid per
// frame, not per chunk). What a fast stream does to the client (a flood's
// batches, a backlog behind a slow handler) is tests/browser's and
// tests/bench's. Nothing is asserted about time; each test also checks that
// the stream really was interrupted part-way, and fails (rather than passes
// vacuously) if it was not.
const streamRate = 100

// countLasting is the count whose answer lasts d at streamRate.
func countLasting(d time.Duration) int { return int(d.Seconds() * streamRate) }

// interruptAfter is how many chunks a page shows before the test interrupts
// the stream.
var interruptAfter = countLasting(400 * time.Millisecond)

// countUnderWay starts the stack and a chat tab at desktop size, and has the
// tab ask for "count n" and wait until the answer is under way and part of
// it is in IndexedDB: an engine whose writes are slow on a busy machine
// (WebKitGTK's took over 0.4 s each in CI) would otherwise be interrupted
// before it had stored any of it. The runtime holds the count after its
// first chunks (startCountHeld) while the test waits for the store, or a
// slow engine would see the whole answer first (WebKitGTK did, in CI, at 500
// a second): the test calls goOn, to let the stream run on, just before it
// interrupts it.
func countUnderWay(t *testing.T, n int) (s *stack.Stack, tb *tab, goOn func()) {
	t.Helper()
	return countUnderWayIn(t, newBrowser(t), n, mainThread)
}

// countUnderWayIn is countUnderWay in browser (newBrowser's) with the demo
// page running relay.wasm in mode m.
func countUnderWayIn(t *testing.T, browser context.Context, n int, m pageMode) (s *stack.Stack, tb *tab, goOn func()) {
	t.Helper()
	s = startStack(t, streamRate)
	tb = openChat(t, browser, "tab", s.PageURL()+m.query)
	m.check(tb)
	tb.viewport(1280, 800, false)
	return s, tb, countStored(tb, s, n)
}

// countStored has tb ask s's runtime for "count n", held after its first
// chunks, and waits until part of the answer is in IndexedDB; goOn lets the
// count run on (countUnderWay).
func countStored(tb *tab, s *stack.Stack, n int) (goOn func()) {
	tb.t.Helper()
	var before int
	tb.eval(storedCursor, &before)
	goOn = startCountHeld(tb, s, n)
	waitStored(tb, before+2)
	return goOn
}

// waitStored waits until the page's IndexedDB holds a cursor of at least
// want.
func waitStored(tb *tab, want int) {
	tb.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		var got int
		tb.eval(storedCursor, &got)
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: IndexedDB holds cursor %d, still waiting for %d", tb.name, got, want)
		}
		time.Sleep(pollEvery)
	}
}

// storedCursor is a JavaScript expression: a Promise of the highest cursor
// the page's IndexedDB holds for any stream (0 when none), read from the
// store relay.js writes (its names are jsbridge/boundary's).
var storedCursor = fmt.Sprintf(`new Promise((resolve, reject) => {
	const req = indexedDB.open(%q);
	req.onupgradeneeded = () => req.transaction.abort(); // none yet: the read must not make one
	req.onerror = () => (req.error?.name === "AbortError" ? resolve(0) : reject(req.error));
	req.onsuccess = () => {
		const db = req.result;
		if (!db.objectStoreNames.contains(%q)) { db.close(); resolve(0); return; }
		const all = db.transaction(%q).objectStore(%q).getAll();
		all.onsuccess = () => { db.close(); resolve(Math.max(0, ...all.result.map((r) => r.cursor ?? 0))); };
		all.onerror = () => { db.close(); reject(all.error); };
	};
})`, boundary.StoreDatabase, boundary.StoreState, boundary.StoreState, boundary.StoreState)

// startCount sends "count n" and waits until the answer is under way.
func startCount(tb *tab, n int) {
	tb.t.Helper()
	tb.prompt("count " + strconv.Itoa(n))
	tb.waitFor("the count to be under way", lastAgentChunks+" >= "+strconv.Itoa(interruptAfter))
}

// startCountHeld is startCount with s's runtime holding the count after its
// first interruptAfter chunks until the test calls goOn, just before it
// interrupts the stream: on a loaded machine the page (and the test's
// polling) can lag seconds behind a runtime sending at streamRate, and a
// count left to run was over before the interruption came (Firefox's
// TestNonResumingRuntimeRelayRestart, with one core busy).
func startCountHeld(tb *tab, s *stack.Stack, n int) (goOn func()) {
	tb.t.Helper()
	goOn = s.Runtime().PauseAt(interruptAfter)
	tb.t.Cleanup(goOn)
	startCount(tb, n)
	return goOn
}

// finishCount waits for the count to end and checks that the page shows it
// all, exactly once and in order, as the only answer.
func finishCount(tb *tab, n int) {
	tb.t.Helper()
	tb.waitFor("the count to end", lastAgentDone)
	checkConversation(tb.t, tb.name, tb.transcript(), [2]string{"count " + strconv.Itoa(n), countText(n)})
}

// stopCount presses Stop while the count is under way and checks that the
// page shows the count's first part, each chunk once and in order, as the
// only answer, ended as cancelled before its last line.
func stopCount(tb *tab, n int) {
	tb.t.Helper()
	tb.click("#stop")
	tb.waitFor("the stopped count to end", lastAgentDone)
	got := tb.transcript()
	if len(got) != 2 || got[0].Text != "count "+strconv.Itoa(n) {
		tb.t.Fatalf("%s: after Stop the transcript is %s, want the prompt count %d and its answer", tb.name, roles(got), n)
	}
	cut := got[1]
	if cut.Stop != "cancelled" || len(cut.Seqs) >= n {
		tb.t.Fatalf("%s: the answer ended with %q after %d chunks; want it cancelled part-way through %d", tb.name, cut.Stop, len(cut.Seqs), n)
	}
	if cut.Text != countText(len(cut.Seqs)) {
		tb.t.Errorf("%s: the stopped answer reads %s, want the count so far", tb.name, describe(cut.Text))
	}
	checkSeqs(tb.t, tb.name, cut.Seqs)
}

// checkInterrupted fails the test unless the page entered state while the
// answer was still incomplete (otherwise the interruption tested nothing).
func checkInterrupted(tb *tab, state string, total int) {
	tb.t.Helper()
	for _, s := range tb.chat().States {
		if s.State == state {
			if s.Chunks >= total {
				tb.t.Fatalf("%s: the page went %s only after all %d chunks; the stream was not interrupted", tb.name, state, total)
			}
			return
		}
	}
	tb.t.Fatalf("%s: the page never showed the state %q; states: %+v", tb.name, state, tb.chat().States)
}

// A reload in the middle of a long stream: afterwards the page shows every
// chunk exactly once, in order; part of it redrawn from the transcript the
// attachment keeps, the rest delivered after the reload.
func TestReloadMidStream(t *testing.T) {
	t.Parallel()
	n := countLasting(4 * time.Second)
	_, tb, goOn := countUnderWay(t, n)
	goOn()
	tb.reload()
	finishCount(tb, n)

	st := tb.chat()
	if st.Redrawn == 0 || st.Redrawn >= n {
		t.Errorf("after the reload %d of %d chunks were redrawn from history, want some but not all (reloaded mid-stream)", st.Redrawn, n)
	}
	if st.Redrawn+st.Live != n {
		t.Errorf("%d chunks redrawn + %d delivered after the reload = %d, want exactly %d", st.Redrawn, st.Live, st.Redrawn+st.Live, n)
	}
	if st.SessionID != "s1" || len(st.Evictions) != 0 {
		t.Errorf("after the reload: ACP session %q and %d evictions, want the same session s1 and none", st.SessionID, len(st.Evictions))
	}
}

// A page that keeps a short transcript (history=4 here; 20,000 entries by
// default) has trimmed its start, the ACP session/new answer with it: after
// a reload it finds the session in the last prompt it sent, and goes on in
// it, rather than start a new one.
func TestReloadWithATrimmedTranscriptKeepsTheSession(t *testing.T) {
	t.Parallel()
	s := startStack(t, streamRate)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+"#history=4")
	tb.prompt("count 3")
	tb.waitFor("the first count to end", lastAgentDone)
	tb.prompt("count 2")
	tb.waitFor("the second count to end", lastAgentDone)
	waitStored(tb, lastSeq(tb))

	tb.reload()
	st := tb.chat()
	if st.SessionID != "s1" {
		t.Errorf("after the reload the page is in ACP session %q, want s1 (the last prompt's)", st.SessionID)
	}
	var divider string
	tb.eval(`document.querySelector('#transcript [data-role="divider"]')?.textContent ?? ""`, &divider)
	if !strings.Contains(divider, "Earlier messages") {
		t.Errorf("the page shows no sign of the trimmed start (divider %q): the transcript was not trimmed, and the test tested nothing", divider)
	}
	tb.prompt("count 1")
	tb.waitFor("the third count to end", lastAgentDone)
	got := tb.transcript()
	if last := got[len(got)-1]; last.Text != countText(1) || last.Stop != "end_turn" {
		t.Errorf("the answer after the reload is %q (%s), want %q ended with end_turn", last.Text, last.Stop, countText(1))
	}
	if st := tb.chat(); st.SessionID != "s1" {
		t.Errorf("after the prompt the page is in ACP session %q, want s1", st.SessionID)
	}
}

// A transcript trimmed in the middle of an answer (history=6: the count's
// last five chunks and its response) holds neither the answer's prompt nor
// any prompt to name the session. After a reload the answer's own response
// ends its turn, and its chunks name the session the page goes on in.
// Before, the turn stayed busy for good ("The agent is answering") and the
// page started a new ACP session, s2.
func TestReloadWithATranscriptTrimmedMidAnswer(t *testing.T) {
	t.Parallel()
	s := startStack(t, streamRate)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+"#history=6")
	tb.prompt("count 8")
	tb.waitFor("the count to end", lastAgentDone)
	waitStored(tb, lastSeq(tb))

	tb.reload()
	got := tb.transcript()
	if len(got) == 0 || got[0].Role != "divider" {
		t.Fatalf("the reloaded page shows %+v, want the trimmed start's divider first: the transcript was not trimmed, and the test tested nothing", got)
	}
	if a := got[len(got)-1]; a.Role != "agent" || a.ID != "" || !a.Done || a.Stop != "end_turn" {
		t.Errorf("the answer whose prompt was trimmed shows as %+v, want it ended with end_turn", a)
	}
	tb.prompt("count 1")
	tb.waitFor("the next count to end", lastAgentDone)
	if st := tb.chat(); st.SessionID != "s1" {
		t.Errorf("after the reload the page prompts in ACP session %q, want s1 (the trimmed answer's)", st.SessionID)
	}
}

// The relay restarts (same key, same port) in the middle of a stream: the
// page notices, reconnects by itself, and the stream completes with nothing
// lost or doubled.
func TestRelayRestartMidStream(t *testing.T) {
	t.Parallel()
	n := countLasting(4 * time.Second)
	s, tb, goOn := countUnderWay(t, n)
	goOn()
	restartRelay(tb, s)
	finishCount(tb, n)

	checkInterrupted(tb, "reconnecting", n)
	if st := tb.chat(); st.State != "open" || len(st.Evictions) != 0 {
		t.Errorf("after the restart: state %q and %d evictions, want open and none", st.State, len(st.Evictions))
	}
}

// The network goes away (Chromium's emulation, which also fires the offline
// event) and comes back: the page shows offline, then the stream resumes.
// In worker mode the page forwards offline and online to the worker.
func TestOfflineAndBack(t *testing.T) {
	t.Parallel()
	inModes(t, offlineAndBack)
}

func offlineAndBack(t *testing.T, m pageMode) {
	n := countLasting(4 * time.Second)
	_, tb, goOn := countUnderWayIn(t, networkEmulating(t), n, m)
	goOn()
	setOffline(tb, true)
	tb.waitFor("the page to show offline", `__chat.state === "offline" && document.getElementById("status").dataset.state === "offline"`)
	var label string
	tb.eval(`document.getElementById("status-text").textContent`, &label)
	if label != "Offline" {
		t.Errorf("while offline the status reads %q, want Offline", label)
	}
	// The picture is for people (out/); this test checks the page, and a
	// screenshot that times out on a loaded machine is not its failure.
	if err := writeShot(tb, "offline.png"); err != nil {
		t.Logf("no screenshot offline.png: %v", err)
	}
	setOffline(tb, false)
	finishCount(tb, n)

	checkInterrupted(tb, "offline", n)
	if st := tb.chat(); st.State != "open" {
		t.Errorf("back online the state is %q, want open", st.State)
	}
}

// setOffline takes the tab's network away or gives it back (page.offline),
// in a browser networkEmulating gave.
func setOffline(tb *tab, offline bool) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := tb.page.offline(ctx, offline); err != nil {
		tb.t.Fatalf("%s: setting offline=%v in %s: %v", tb.name, offline, engine, err)
	}
}

// Two tabs stream at once, each in its own conversation (its own stored
// stream and attachment); reloading one mid-stream does not disturb the
// other, which never even reconnects. Tab 1's count is long (60 s at
// streamRate) so that it is still streaming once tab 2 is back, however
// slow an engine is to reload on a busy machine (WebKitGTK took over 3.6 s
// in CI, and under four times make test's load tab 1's 12 s had ended);
// the Stop button ends it once tab 2 is done, so its length costs nothing.
func TestTwoTabs(t *testing.T) {
	t.Parallel()
	n1, n2 := countLasting(60*time.Second), countLasting(3*time.Second)
	s := startStack(t, streamRate)
	one := openChat(t, newBrowser(t), "tab 1", s.PageURL())
	two := openChat(t, one.ctx, "tab 2", s.PageURL())

	one.prompt("count " + strconv.Itoa(n1))
	startCount(two, n2)
	var oneStreaming bool
	one.eval("!("+lastAgentDone+")", &oneStreaming)
	if !oneStreaming {
		t.Fatal("tab 1's answer ended before tab 2's began; the tabs did not stream at once")
	}
	two.reload()
	var oneStillStreaming bool
	one.eval("!("+lastAgentDone+")", &oneStillStreaming)
	finishCount(two, n2)
	stopCount(one, n1)

	a, b := one.chat(), two.chat()
	if a.Stream == b.Stream || a.Attachment == b.Attachment {
		t.Errorf("the tabs share a stream (%q, %q) or an attachment (%q, %q)", a.Stream, b.Stream, a.Attachment, b.Attachment)
	}
	opened := false
	for _, st := range a.States {
		if opened && st.State != "open" {
			t.Errorf("tab 1 went %s (%s) after it had opened; want it undisturbed by tab 2", st.State, st.Code)
		}
		opened = opened || st.State == "open"
	}
	if b.Redrawn == 0 || b.Redrawn+b.Live != n2 {
		t.Errorf("tab 2 redrew %d chunks and received %d after its reload, want some redrawn and %d in all", b.Redrawn, b.Live, n2)
	}
	if !oneStillStreaming {
		t.Error("tab 1's answer had ended by the time tab 2 reloaded; the reload did not happen while both streamed")
	}
}

// The runtime restarts and no longer knows the stream: the page says what
// was lost, starts a new ACP session that works, and a reload afterwards
// redraws both lives of the conversation. The count is long (40 s at
// streamRate) because the restart, not its end, is what stops it: in a
// loaded make test, WebKitGTK's count of 4 s all arrived before the runtime
// went away, and the test then had no interrupted answer to look at.
func TestEvictionStartsNewSession(t *testing.T) {
	t.Parallel()
	n := countLasting(40 * time.Second)
	s, tb, goOn := countUnderWay(t, n)
	goOn()
	restartRuntime(t, s)
	tb.waitFor("the eviction banner", `__chat.evictions.length > 0 && !document.getElementById("banner").hidden`)
	var kind string
	tb.eval(`document.getElementById("banner").dataset.kind`, &kind)
	if kind != "evicted" {
		t.Errorf("the banner is of kind %q, want evicted", kind)
	}
	tb.waitReady()
	tb.prompt("ping")
	tb.waitFor("the answer in the new session", lastAgentDone)
	check := func(when string) {
		t.Helper()
		got := tb.transcript()
		if len(got) != 5 || roles(got) != "user, agent, divider, user, agent" {
			t.Fatalf("%s: the transcript is %s, want user, agent, divider, user, agent", when, roles(got))
		}
		cut := got[1]
		if !cut.Done || cut.Stop != "interrupted" || len(cut.Seqs) < interruptAfter || len(cut.Seqs) >= n {
			t.Errorf("%s: the interrupted answer ended=%v with %q after %d chunks, want interrupted part-way", when, cut.Done, cut.Stop, len(cut.Seqs))
		}
		if cut.Text != countText(len(cut.Seqs)) {
			t.Errorf("%s: the interrupted answer is %s, want the first %d lines of the count", when, describe(cut.Text), len(cut.Seqs))
		}
		checkSeqs(t, when, cut.Seqs)
		checkConversation(t, when, got[3:], [2]string{"ping", "pong"})
	}
	check("after the eviction")
	tb.reload()
	check("after a reload")
}

// writeShot writes a screenshot of the tab as it is to out/, the engine's
// name first (shotName).
func writeShot(tb *tab, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	buf, err := tb.page.screenshot(ctx)
	if err != nil {
		return err
	}
	return writeOut(shotName(name), buf)
}

// A reloaded page asks for its slot's Web Lock as it loads, before
// relay.wasm runs (preload.js, tabs.js lockRemembered), and its attach
// takes that request instead of making another: the page
// tests/workerpage/early.html lists every relaywasm lock request and every
// WebSocket made in it, and when. The first load has nothing remembered, so
// its one lock request is the attach's, made after loadRelay was called;
// after a reload whose loadRelay waits (hold) the lock has been granted
// before the attach takes it, after a load that does not wait it may still
// be pending. Either way the page asks once, before loadRelay was called,
// gets its slot and attachment back, and chats. Its socket is always the
// attach's own, dialed after loadRelay was called: a socket would have to
// be opened with the credential, which is never kept (sessionStorage, as
// the page found it before relaywasm ran, holds no trace of it). A load in
// worker mode asks once too: the page holds its worker's slot locks
// (tabs.js tabEnv; Safari keeps a refreshed window's worker's Web Locks,
// WebKit bug 316904), so the worker's attach takes the page's early
// request, the lock's holder is the page, and the worker gets slot 1 back.
// The last load leaves a worker-mode page by a link, which WPE 2.38 keeps
// in its back/forward cache with its locks: the page lets them go at
// pagehide itself (remote.js suspendLocks), not when the worker's word
// comes back to a page frozen by then, which had the next page wait 3 s
// and take worker-e2e#2.
func TestReloadLocksEarly(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	tb := openTab(t, newBrowser(t), "early", s.PageURL()+"early.html?main&hold=300")
	workerReady(tb, "main")
	checkEarly(tb, "the first load", false, true)
	var first string
	tb.eval(`__w.att.session`, &first)

	for _, step := range []struct{ name, query, mode string }{
		{"a reload whose loadRelay waits", "", "main"},
		{"a load whose loadRelay does not wait", "?main", "main"},
		{"a load in worker mode", "?worker", "worker"},
		{"a reload in worker mode", "", "worker"},
		{"a load from a page in worker mode", "?worker&again", "worker"},
	} {
		if step.query == "" {
			tb.do(step.name, tb.page.reload)
		} else {
			tb.do(step.name, func(ctx context.Context) error { return tb.page.navigate(ctx, s.PageURL()+"early.html"+step.query) })
		}
		workerReady(tb, step.mode)
		checkEarly(tb, step.name, true, step.mode == "main")
		checkPageHoldsSlot(tb, step.name)
		var got struct{ Session, Name string }
		tb.eval(`({session: __w.att.session, name: __w.att.name})`, &got)
		if got.Session != first || got.Name != "worker-e2e" {
			t.Errorf("after %s the page has attachment %q as %q, want its own %q as worker-e2e", step.name, got.Session, got.Name, first)
		}
		tb.eval(`__w.live.length = 0, __w.prompt("count 20")`, nil)
		tb.waitFor("the count after "+step.name, `__w.live.length === 20 && __w.live[19][1] === "20\n"`)
		// The count committed before the next navigation: WebKit keeps the
		// page it leaves in its back/forward cache, and a transaction of
		// that page still running blocks the next page's store for 10 s,
		// after which the next page starts in memory, without its stored
		// attachment (README, "How nothing is lost"). That is not what this
		// test is about.
		var last int
		tb.eval(`__w.live[19][0]`, &last)
		waitStored(tb, last)
	}
}

// A page restored from the back/forward cache holds its stream's slot again
// (tabs.js suspendSlots and resumeSlots): WebKit caches the page and lets
// its Web Locks go while it is there, so without asking for them again the
// restored page would hold none, and a second tab would take slot 1, and
// with it the same attachment, instead of name#2. Chromium keeps a cached
// page's locks (and drops the page from its cache when another page asks
// for one); Firefox did not cache the page here, so it loads again and
// takes its slot as a reload does. Either way the page ends up holding its
// slot and a second tab gets worker-e2e#2. In worker mode the page holds
// the locks for the worker, which lets them go and asks for them again when
// it hears of the page's pagehide and pageshow from it.
func TestRestoredPageHoldsItsSlot(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			tb := openEarly(t, newBrowser(t), "restored", s, mode, "")
			restored := leaveAndComeBack(tb, s.PageURL()+"page.js", `location.search === "?`+mode+`" && window.__w && __w.ready`)
			t.Logf("restored from the back/forward cache: %v", restored)
			tb.waitFor("the page to hold its slot", `navigator.locks.query().then((q) => q.held.some((l) => l.name.endsWith("\u0000worker-e2e")))`)

			two := openEarly(t, tb.ctx, "second tab", s, mode, "")
			var names [2]string
			tb.eval(`__w.att.name`, &names[0])
			two.eval(`__w.att.name`, &names[1])
			if names != [2]string{"worker-e2e", "worker-e2e#2"} {
				t.Errorf("the restored page and a second tab attached as %q, want worker-e2e and worker-e2e#2", names)
			}
		})
	}
}

// A page restored from the back/forward cache whose slot another tab took
// meanwhile does not take the stream back: its attachment ends with the
// code "superseded" without dialling, and the other tab's goes on. A page
// lets its slots' locks go as it is cached, so a second tab opened then
// gets slot 1 and reclaims the page's stored attachment id; the restored
// page's redial would in turn reclaim it from that tab, which the relay
// would then end as superseded (tabs.js, relay.js's Attachment's token).
// Without the check before the dial this fails in Chromium, both modes,
// and in WebKit's main-thread mode: the restored page dials. In worker
// mode WebKit kept the worker's socket open while the page was cached, so
// the relay itself ended it. Firefox did not cache the page here: it loads
// again, and takes worker-e2e#2 as a second tab would.
//
// "worker, second tab in memory": the second tab keeps its state in
// memory, so it attaches with an attachment id of its own, and the relay
// has nothing to supersede. A restored page whose socket stayed open
// (WebKit's worker) must end its attachment itself once it finds the slot
// taken (relay.js, slot.lost); without that it goes on beside the second
// tab in one slot, and this fails in WebKit. Elsewhere the restored page
// redials, and the check before the dial ends it, as in "worker": the
// case runs in WebKit only (Chromium closed the worker's socket, Firefox
// did not cache the page), where nothing else covers it.
func TestRestoredPageGivesUpATakenSlot(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, mode, second string }{
		{"main", "main", ""},
		{"worker", "worker", ""},
		{"worker, second tab in memory", "worker", "&memory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.second != "" && engine != webdriver.WebKit && engine != webdriver.WPE {
				t.Skipf("%s closes a cached page's sockets or does not cache it: %q covers it", engine, "worker")
			}
			s := startStackServing(t, workerDir, 0)
			tb := openEarly(t, newBrowser(t), "restored", s, c.mode, "")
			// Stored before the page goes (see TestReloadLocksEarly): a
			// write of the cached page's still running would keep the
			// second tab's store waiting, and that tab then starts in
			// memory, with an attachment of its own.
			tb.eval(`__w.prompt("count 3")`, nil)
			tb.waitFor("the count", `__w.live.length === 3`)
			var last int
			tb.eval(`__w.live[2][0]`, &last)
			waitStored(tb, last)
			var first string
			tb.eval(`(window.__shown = [], addEventListener("pageshow", (e) => __shown.push(e.persisted)), __w.att.session)`, &first)
			tb.do("leaving the page", func(ctx context.Context) error { return tb.page.navigate(ctx, s.PageURL()+"page.js") })

			two := openEarly(t, tb.ctx, "second tab", s, c.mode, c.second)
			var other struct{ Name, Session string }
			two.eval(`({name: __w.att.name, session: __w.att.session})`, &other)
			t.Logf("with the page away, a second tab attached as %q on %q (the page's was %q)", other.Name, other.Session, first)
			if c.second != "" && other.Session == first {
				t.Fatalf("the second tab, in memory, reclaimed the page's attachment id %q, want one of its own", first)
			}

			tb.do("going back", tb.page.back)
			tb.waitFor("the page to be back", `location.search === "?`+c.mode+`" && window.__w && (__w.ready || __w.error)`)
			var restored bool
			tb.eval(`(window.__shown ?? []).includes(true)`, &restored)
			t.Logf("restored from the back/forward cache: %v", restored)
			// Chromium and WebKit cache the page here, and the case is
			// about such a page: loaded again, it would pass without
			// showing anything. Firefox loads it again (see above); WPE
			// is not checked.
			if !restored && (engine == webdriver.Chromium || engine == webdriver.WebKit) {
				t.Fatalf("%s loaded the page again instead of restoring it from the back/forward cache, as it does here", engine)
			}
			switch {
			case restored && other.Name == "worker-e2e":
				tb.waitFor("the restored page's attachment to end", `__w.ended !== undefined`)
				var ended struct{ Code, Message string }
				tb.eval(`__w.ended`, &ended)
				// Its message says why: relay.js's words when it found the
				// slot taken, the relay's close when the socket stayed open
				// in the cache (WebKit's worker mode) and the second tab
				// reclaimed the same attachment id.
				why := strings.Contains(ended.Message, "another tab took this stream") || (c.second == "" && strings.Contains(ended.Message, "4409"))
				if ended.Code != "superseded" || !why {
					t.Errorf("the restored page's attachment ended with %q (%q), want superseded, saying another tab took the stream", ended.Code, ended.Message)
				}
				t.Logf("ended: %s", ended.Message)
			case restored:
				t.Errorf("the page was cached, yet the second tab attached as %q: the cached page kept its lock", other.Name)
			default: // loaded again: a second tab's slot of its own
				var name string
				tb.eval(`__w.att.name`, &name)
				if name == other.Name {
					t.Errorf("loaded again, the page attached as %q, as the second tab did", name)
				}
			}

			// The second tab was left alone: never closed, the same
			// attachment, and it still chats.
			two.eval(`__w.live.length = 0, __w.prompt("count 3")`, nil)
			two.waitFor("the second tab's count", `__w.live.length === 3 && __w.live[2][1] === "3\n"`)
			var after struct {
				States  []string
				Session string
			}
			two.eval(`({states: __w.states, session: __w.att.session})`, &after)
			if slices.Contains(after.States, "closed") || after.Session != other.Session {
				t.Errorf("the second tab went through %q and has attachment %q, want it never closed and still on %q", after.States, after.Session, other.Session)
			}
		})
	}
}

// openEarly opens the worker page that asks for its locks early
// (early.html) in mode, "main" or "worker", with more of a query after it
// ("&memory": its state in memory), and waits until it is ready.
func openEarly(t *testing.T, parent context.Context, name string, s *stack.Stack, mode, more string) *tab {
	t.Helper()
	tb := openTab(t, parent, name, s.PageURL()+"early.html?"+mode+more)
	workerReady(tb, mode)
	return tb
}

// checkEarly checks that the page asked for one relaywasm lock, before
// page.js called loadRelay when early, after it when not; that on the main
// thread it made one WebSocket, after loadRelay was called; and that
// sessionStorage held neither the credential nor its bearer subprotocol.
func checkEarly(tb *tab, when string, early, main bool) {
	tb.t.Helper()
	type made struct {
		Name string  `json:"name"`
		At   float64 `json:"at"`
	}
	var got struct {
		Sockets    []made      `json:"sockets"`
		Locks      []made      `json:"locks"`
		Stored     [][2]string `json:"stored"`
		LoadCalled float64     `json:"loadCalled"`
	}
	tb.eval(`({sockets: __made.sockets, locks: __made.locks, stored: __made.stored, loadCalled: __w.loadCalled})`, &got)
	if len(got.Locks) != 1 {
		tb.t.Fatalf("%s: the page asked for %d relaywasm locks, want 1: %+v", when, len(got.Locks), got.Locks)
	}
	if before := got.Locks[0].At < got.LoadCalled; before != early {
		tb.t.Fatalf("%s: the lock was asked for at %.1f ms and loadRelay called at %.1f ms; want it asked for before: %v", when, got.Locks[0].At, got.LoadCalled, early)
	}
	want := 0 // in worker mode the socket is the worker's, out of sight
	if main {
		want = 1
	}
	if len(got.Sockets) != want || (main && got.Sockets[0].At < got.LoadCalled) {
		tb.t.Fatalf("%s: the page made WebSockets %+v (loadRelay called at %.1f ms), want %d, after loadRelay was called", when, got.Sockets, got.LoadCalled, want)
	}
	// page.js attaches with the stack's client token.
	token := stack.DefaultClientToken
	encoded := strings.TrimPrefix(relayleg.BearerSubprotocol(token), relayleg.BearerPrefix)
	for _, kv := range got.Stored {
		if strings.Contains(kv[1], token) || strings.Contains(kv[1], encoded) {
			tb.t.Fatalf("%s: sessionStorage %q holds the credential: %.200s", when, kv[0], kv[1])
		}
	}
}

// checkPageHoldsSlot fails the test unless the page itself holds the lock of
// its slot worker-e2e, in worker mode as on the main thread: the lock's
// clientId is that of a lock the page takes to find its own.
func checkPageHoldsSlot(tb *tab, when string) {
	tb.t.Helper()
	var got struct{ Page, Slot string }
	tb.eval(`(async () => {
		const probe = "relaywasm-test:whose";
		const holder = async (name) => (await navigator.locks.query()).held.find((l) => l.name.endsWith(name))?.clientId ?? "";
		return { page: await navigator.locks.request(probe, () => holder(probe)), slot: await holder("\u0000worker-e2e") };
	})()`, &got)
	if got.Page == "" || got.Slot != got.Page {
		tb.t.Fatalf("%s: the slot's lock is held by client %q, the page is %q; want the page", when, got.Slot, got.Page)
	}
}

// Attaching a stream again at once, while this page's attachment of it is
// being let go, as React's StrictMode has a component do in development
// (its effect set up, cleaned up and set up again, synchronously): the
// second attach gets the same slot, where it took name#2 before, and the
// chat of every tab moved to name#2. Checked, each without awaiting the
// first: an attach aborted by its signal while it waits, a detach, and a
// close, whose stream the second attach takes up again with the same
// attachment id. An attachment of the page that is not going keeps its
// slot, and the second gets name#2 as before; once the first is closed,
// a third attach waits for it and gets name. React is not among what the
// tests may depend on; the page makes the calls StrictMode's effects would.
func TestAttachAgainAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, query string }{{"main", "?main"}, {"worker", ""}} {
		t.Run(c.mode, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			tb := openTab(t, newBrowser(t), "again", s.PageURL()+c.query)
			workerReady(tb, c.mode)
			tb.eval(`(async () => {
				const { loadRelay } = await import("/relay.js");
				const relay = await loadRelay({ worker: location.search !== "?main" });
				const o = (name, signal) => ({ url: "ws://" + location.host + "/v1/attach", instance: "demo", token: "dev-token", name, onMessage() {}, signal });
				const got = {};
				const ac = new AbortController();
				const first = relay.attach(o("aborted", ac.signal));
				ac.abort();
				const again = relay.attach(o("aborted"));
				got.aborted = [await first.then(() => "attached", (e) => e.code), (await again).name];
				for (const end of ["detach", "close"]) {
					const a = await relay.attach(o(end));
					const ending = a[end]();
					const b = await relay.attach(o(end));
					got[end] = [a.name, b.name, a.session === b.session];
					await ending;
				}
				const kept = await relay.attach(o("kept"));
				const beside = await relay.attach(o("kept"));
				const closing = kept.close();
				got.kept = [kept.name, beside.name, (await relay.attach(o("kept"))).name];
				await closing;
				return got;
			})().then((got) => (window.__again = got), (e) => (window.__again = { error: String(e) })), true`, nil)
			tb.waitFor("the attaches", `window.__again !== undefined`)
			var got struct {
				Aborted, Kept []string
				Detach, Close []any
				Error         string
			}
			tb.eval(`__again`, &got)
			want := struct{ aborted, kept, detach, close string }{
				`[canceled aborted]`, `[kept kept#2 kept]`, `[detach detach false]`, `[close close true]`,
			}
			for _, c := range []struct{ what, got, want string }{
				{"an attach after one aborted", fmt.Sprint(got.Aborted), want.aborted},
				{"attaches beside a live one, then after its close", fmt.Sprint(got.Kept), want.kept},
				{"an attach after a detach", fmt.Sprint(got.Detach), want.detach},
				{"an attach after a close", fmt.Sprint(got.Close), want.close},
			} {
				if c.got != c.want {
					t.Errorf("%s: %s, want %s (%s)", c.what, c.got, c.want, got.Error)
				}
			}
		})
	}
}
