package e2e

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
)

// What phones do to a page (shared/notes/engines.md), each with nothing
// lost and nothing shown twice. Chromium can freeze a page, cache it and cut
// its network through DevTools; where an engine's automation cannot, the
// test says so by name.

// deleteAllDatabases deletes every IndexedDB database of the tab's origin
// and returns their names.
const deleteAllDatabases = `(async () => {
	const dbs = await indexedDB.databases();
	await Promise.all(dbs.map((d) => new Promise((resolve, reject) => {
		const r = indexedDB.deleteDatabase(d.name);
		r.onsuccess = () => resolve();
		r.onerror = () => reject(r.error);
	})));
	return dbs.map((d) => d.name);
})()`

// The browser deleted the page's storage between two loads, as Safari does
// after seven days without a visit: the next load starts a fresh stream and
// a fresh conversation, with states that say nothing went wrong (no error
// code, IndexedDB still the storage), no error on the page, and it chats.
// Runs in every engine.
func TestStorageVanishedBetweenLoads(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL())
	tb.prompt("ping")
	tb.waitFor("pong", lastAgentDone)
	before := tb.chat()

	// Away to another document of the origin, where the storage goes.
	tb.do("leaving the page", func(ctx context.Context) error { return tb.page.navigate(ctx, s.PageURL()+"style.css") })
	var deleted []string
	tb.eval(deleteAllDatabases, &deleted)
	if len(deleted) == 0 {
		t.Fatal("the page stored nothing in IndexedDB; deleting it tests nothing")
	}
	tb.do("coming back", func(ctx context.Context) error { return tb.page.navigate(ctx, s.PageURL()) })
	tb.waitReady()

	after := tb.chat()
	if got := tb.transcript(); len(got) != 0 {
		t.Errorf("with the storage gone the page shows %s, want a fresh, empty conversation", roles(got))
	}
	if after.Attachment == "" || after.Attachment == before.Attachment || after.Redrawn != 0 {
		t.Errorf("attachment %q (before %q), %d chunks redrawn: want a fresh stream", after.Attachment, before.Attachment, after.Redrawn)
	}
	checkUntroubled(tb, after, "after the deletion")
	tb.prompt("ping")
	tb.waitFor("pong in the fresh conversation", lastAgentDone)
	checkConversation(t, "tab", tb.transcript(), [2]string{"ping", "pong"})
}

// The browser clears the site's storage while the page is open (a user's
// "clear site data"; on iOS, WebKit closes a page's connection to IndexedDB
// when its storage process goes in the background): IndexedDB closes the
// page's connection under it. The page opens the database again and goes
// on storing there, so a reload after it resumes the same stream in the
// same session and shows what came after the clear (what was cleared stays
// cleared), with states that say nothing went wrong. Before, the page kept
// the stream in memory from the clear on, and the reload started a fresh
// stream. Chromium only: its DevTools protocol clears a live page's
// storage, which closes the connection the browser's own way (tests/browser
// checks the reopen in every engine, closing the connection as the
// standard orders it).
func TestStorageClearedWhileThePageIsOpen(t *testing.T) {
	t.Parallel()
	skipUnless(t, "Storage.clearDataForOrigin (clearing a live page's storage)")
	inModes(t, storageClearedWhileThePageIsOpen)
}

func storageClearedWhileThePageIsOpen(t *testing.T, m pageMode) {
	s := startStack(t, streamRate)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+m.query)
	m.check(tb)
	tb.prompt("count 3")
	finishCount(tb, 3)
	waitStored(tb, lastSeq(tb))
	before := tb.chat()

	tb.run(storage.ClearDataForOrigin(s.HTTPURL(), "indexeddb")) // the page's origin
	tb.prompt("count 5")
	tb.waitFor("the second count to end", lastAgentDone)
	waitStored(tb, lastSeq(tb)) // after the page's first write since the clear: a read here would make an empty database

	tb.reload()
	after := tb.chat()
	if after.Attachment != before.Attachment || after.SessionID != before.SessionID {
		t.Errorf("after the reload: attachment %q, session %q; want the same stream resumed (%q, %q)", after.Attachment, after.SessionID, before.Attachment, before.SessionID)
	}
	// Only what came after the clear: the first count went with it (and
	// the test would test nothing had the clear not happened).
	checkConversation(t, tb.name, tb.transcript(), [2]string{"count 5", countText(5)})
	checkUntroubled(tb, after, "after the clear")
	tb.prompt("count 2")
	tb.waitFor("the third count to end", lastAgentDone)
	checkConversation(t, tb.name, tb.transcript(), [2]string{"count 5", countText(5)}, [2]string{"count 2", countText(2)})
}

// checkUntroubled fails unless the page's stream went only loading,
// connecting and open, with no error code, and it stores in IndexedDB: what
// happened to its storage (when) is nothing it shows as trouble.
func checkUntroubled(tb *tab, st chatState, when string) {
	tb.t.Helper()
	for _, s := range st.States {
		if s.Code != "" || (s.State != "loading" && s.State != "connecting" && s.State != "open") {
			tb.t.Errorf("%s the stream went %s (%s); want loading, connecting and open, no error", when, s.State, s.Code)
		}
	}
	var storage string
	tb.eval(`__chat.storage ?? ""`, &storage)
	if storage != "indexeddb" {
		tb.t.Errorf("storage %q %s, want indexeddb", storage, when)
	}
}

// logWatch is a slog handler that signals when a message is logged.
type logWatch struct {
	msg  string
	once sync.Once
	seen chan struct{}
}

func watchLog(msg string) *logWatch { return &logWatch{msg: msg, seen: make(chan struct{})} }

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message == w.msg {
		w.once.Do(func() { close(w.seen) })
	}
	return nil
}
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *logWatch) WithGroup(string) slog.Handler      { return w }

func (w *logWatch) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-w.seen:
	case <-time.After(waitLimit):
		t.Fatalf("still waiting for %s (the relay's log %q)", what, w.msg)
	}
}

// fastHeartbeat makes the relay give up on a silent browser within a few
// seconds instead of 25 s (not much less: on a loaded machine a live page
// must still answer in time).
func fastHeartbeat(c *relay.Config) {
	c.Limits.HeartbeatInterval, c.Limits.HeartbeatTimeout = time.Second, 2*time.Second
}

// The page is frozen as a background tab is (Chrome's Page Lifecycle),
// mid-stream, until the relay gives up on it (it answers no heartbeat).
// Back to active, it reconnects (its resume event probes at once) and the
// stream completes, every chunk once and in order. So too in worker mode,
// where Chromium freezes the page's worker with it (the relay gives up on
// it just the same). Chromium's freezing ends the page's socket itself (the
// page finds it closed at resume, with a proxy frozen in front of the relay
// and nothing sent to the page meanwhile), so what redials here is that
// close, not the resume's probe, which tests/browser checks.
func TestFrozenPageResumes(t *testing.T) {
	t.Parallel()
	skipUnless(t, "Page.setWebLifecycleState (freezing a page)")
	inModes(t, frozenPageResumes)
}

func frozenPageResumes(t *testing.T, m pageMode) {
	n := countLasting(4 * time.Second)
	gaveUp := watchLog("browser missed a heartbeat")
	s := startStackWith(t, streamRate, fastHeartbeat, slog.New(gaveUp))
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+m.query)
	m.check(tb)
	goOn := startCountHeld(tb, s, n)
	goOn()
	tb.run(cdppage.SetWebLifecycleState(cdppage.SetWebLifecycleStateStateFrozen))
	gaveUp.wait(t, "the relay to give up on the frozen page")
	tb.run(cdppage.SetWebLifecycleState(cdppage.SetWebLifecycleStateStateActive))
	finishCount(tb, n)
	checkInterrupted(tb, "reconnecting", n)
	tb.waitFor("the connection to be open", `__chat.state === "open"`)
	if st := tb.chat(); len(st.Evictions) != 0 {
		t.Errorf("after the freeze: %d evictions, want none", len(st.Evictions))
	}
}

// The socket dies without a close, as a phone that changed networks leaves
// it: a proxy in front of the relay holds every byte and tells neither end
// (relaytest.Proxy's Freeze), which works in every engine and reaches a
// worker's sockets too (Chromium's network emulation of a page does not).
// Each of the page's signals that it may have slept probes the socket: the
// page in front becoming visible again, coming back from being frozen
// (resume) and from the back/forward cache (pageshow, persisted); in worker
// mode the page forwards each to the worker. The probe goes unanswered, the
// client gives the socket up when the probe's timeout is over, and once the
// network is back it redials; after the three the stream completes, every
// chunk once and in order. The page's own heartbeats are ten minutes apart
// (the demo page's heartbeat=), so only the probes notice within the test's
// wait: without one of them, or without its forwarding to the worker, the
// test fails. (The events are dispatched by the test: tests/browser checks
// that a plain pageshow does not probe; TestFrozenPageResumes and
// TestBackForwardCache have Chromium really freeze and cache a page.)
func TestSilentSocketNoticed(t *testing.T) {
	t.Parallel()
	inModes(t, silentSocketNoticed)
}

func silentSocketNoticed(t *testing.T, m pageMode) {
	n := countLasting(8 * time.Second) // under way through the three probes
	s := startStack(t, streamRate)
	p := relaytest.NewProxy(t, s.Addr())
	// ms: heartbeats far beyond waitLimit apart; a probe answered within 2 s
	const heartbeat = "&heartbeat=600000&heartbeatTimeout=2000"
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+m.query+"#relay="+proxiedAttachURL(p)+heartbeat)
	// A redial made while the proxy still holds every byte fails, and is
	// made again once it lets them through; Firefox reports such a dial as
	// an error of the page (seen in worker mode with the other core busy).
	tb.page = allowing{tb.page, refusedDial}
	m.check(tb)
	startCount(tb, n)
	tb.do("bringing the tab to the front", tb.page.front)
	var visible string
	tb.eval(`document.visibilityState`, &visible)
	if visible != "visible" {
		t.Fatalf("the page is %s in front; the probe needs a visible page", visible)
	}
	for _, signal := range []struct{ name, dispatch string }{
		{"visibilitychange", `document.dispatchEvent(new Event("visibilitychange"))`},
		{"resume", `document.dispatchEvent(new Event("resume"))`},
		{"pageshow from the back/forward cache", `dispatchEvent(new PageTransitionEvent("pageshow", { persisted: true }))`},
	} {
		tb.waitFor("the connection to be open", `__chat.state === "open"`)
		p.Freeze()
		tb.eval(`(`+signal.dispatch+`, true)`, nil)
		tb.waitFor("the client to give the dead socket up after "+signal.name, `__chat.state === "reconnecting"`)
		p.Thaw()
	}
	finishCount(tb, n)
	checkInterrupted(tb, "reconnecting", n)
}

// The page leaves mid-stream and the person comes back (history.back()).
// Restored from the back/forward cache (pageshow, persisted), its socket was
// cut there and the client dials again by itself; not restored (Chromium
// says why), the new load gets the same stream back — the old page left
// nothing holding it: its Web Lock released, its attachment reclaimed — and
// redraws and resumes it. Either way every chunk is shown once, in order.
// So too in worker mode, whose worker the page takes into the cache with it.
func TestBackForwardCache(t *testing.T) {
	t.Parallel()
	skipUnless(t, "Page.backForwardCacheNotUsed (why a page was not cached)")
	inModes(t, backForwardCache)
}

// leaveAndComeBack leaves tb's page for away, comes back through history
// and waits until ready holds. It reports whether the page was restored from
// the back/forward cache (a pageshow with persisted) rather than loaded
// again.
func leaveAndComeBack(tb *tab, away, ready string) (restored bool) {
	tb.t.Helper()
	tb.eval(`(window.__shown = [], addEventListener("pageshow", (e) => __shown.push(e.persisted)), true)`, nil)
	tb.do("leaving the page", func(ctx context.Context) error { return tb.page.navigate(ctx, away) })
	tb.do("going back", tb.page.back)
	tb.waitFor("the page to be back", ready)
	tb.eval(`(window.__shown ?? []).includes(true)`, &restored)
	return restored
}

func backForwardCache(t *testing.T, m pageMode) {
	n := countLasting(4 * time.Second)
	s := startStack(t, streamRate)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+m.query)
	m.check(tb)
	var (
		mu      sync.Mutex
		reasons []string
	)
	chromedp.ListenTarget(tb.ctx, func(ev any) {
		if e, ok := ev.(*cdppage.EventBackForwardCacheNotUsed); ok {
			mu.Lock()
			for _, x := range e.NotRestoredExplanations {
				reasons = append(reasons, string(x.Reason))
			}
			mu.Unlock()
		}
	})
	goOn := startCountHeld(tb, s, n)
	before := tb.chat()
	goOn()
	if leaveAndComeBack(tb, s.PageURL()+"style.css", `location.pathname === "/" && window.__chat && __chat.ready`) {
		t.Log("restored from the back/forward cache")
		finishCount(tb, n)
		checkInterrupted(tb, "reconnecting", n)
	} else {
		mu.Lock()
		t.Logf("not restored from the back/forward cache: %s", strings.Join(reasons, ", "))
		mu.Unlock()
		finishCount(tb, n)
		after := tb.chat()
		if after.Stream != before.Stream || after.Attachment != before.Attachment {
			t.Errorf("the new load has stream %q, attachment %q; want the left page's %q, %q back", after.Stream, after.Attachment, before.Stream, before.Attachment)
		}
		if after.Redrawn == 0 || after.Redrawn+after.Live != n {
			t.Errorf("%d chunks redrawn + %d delivered, want some redrawn and %d in all", after.Redrawn, after.Live, n)
		}
	}
	if st := tb.chat(); st.State != "open" || len(st.Evictions) != 0 {
		t.Errorf("back: state %q and %d evictions, want open and none", st.State, len(st.Evictions))
	}
}
