package e2e

import (
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// A page reloaded while the relay cannot be reached (a phone offline, the
// relay down) shows the conversation it had at once, drawn from the
// transcript on this device (relay.history): attach resolves only once the
// relay answers. Once it does, the page goes on from what it drew, nothing
// drawn twice, and chats again.
func TestReloadWhileTheRelayIsDown(t *testing.T) {
	t.Parallel()
	inModes(t, reloadWhileTheRelayIsDown)
}

func reloadWhileTheRelayIsDown(t *testing.T, m pageMode) {
	s := startStack(t, streamRate)
	p := relaytest.NewProxy(t, s.Addr())
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+m.query+"#relay="+proxiedAttachURL(p))
	tb.page = allowing{tb.page, refusedDial}
	m.check(tb)
	const n = 20
	tb.prompt("count 20")
	finishCount(tb, n)
	waitStored(tb, lastSeq(tb))

	p.Down()
	tb.do("reloading", tb.page.reload)
	tb.waitFor("the stored conversation to be drawn", `window.__chat && __chat.previewed > 0`)
	checkConversation(t, tb.name, tb.transcript(), [2]string{"count 20", countText(n)})
	if st := tb.chat(); st.State == "open" || st.Ready {
		t.Fatalf("with the relay down the page is %q, ready %v; want it not attached (the test tested nothing)", st.State, st.Ready)
	}

	p.Up()
	tb.waitReady()
	checkConversation(t, tb.name, tb.transcript(), [2]string{"count 20", countText(n)})
	if st := tb.chat(); st.Redrawn != n || st.Live != 0 || st.SessionID != "s1" {
		t.Errorf("once attached: %d chunks drawn from the device, %d delivered, session %q; want %d, 0 and the same session s1", st.Redrawn, st.Live, st.SessionID, n)
	}
	tb.prompt("count 5")
	tb.waitFor("the second count to end", lastAgentDone)
	checkConversation(t, tb.name, tb.transcript(), [2]string{"count 20", countText(n)}, [2]string{"count 5", countText(5)})
}

// A second tab opened while the relay is down draws the stored stream too,
// but the first tab holds it, so attach gives the second tab a stream of
// its own ("chat#2"): once attached it drops what it drew and shows its own
// conversation, empty.
func TestNewTabWhileTheRelayIsDownGetsItsOwnStream(t *testing.T) {
	t.Parallel()
	s := startStack(t, streamRate)
	p := relaytest.NewProxy(t, s.Addr())
	page := s.PageURL() + "#relay=" + proxiedAttachURL(p)
	one := openChat(t, newBrowser(t), "tab 1", page)
	one.page = allowing{one.page, refusedDial}
	one.prompt("count 20")
	finishCount(one, 20)
	waitStored(one, lastSeq(one))

	p.Down()
	two := openTab(t, one.ctx, "tab 2", page)
	two.page = allowing{two.page, refusedDial}
	two.waitFor("the stored conversation to be drawn", `window.__chat && __chat.previewed > 0`)
	p.Up()
	two.waitReady()
	if got := two.transcript(); len(got) != 0 {
		t.Errorf("tab 2 shows %s once attached, want its own stream's empty conversation; page state: %s", roles(got), two.snapshot())
	}
	one.waitReady()
	a, b := one.chat(), two.chat()
	if a.Stream != "chat" || b.Stream != "chat#2" {
		t.Fatalf("the tabs attached streams %q and %q, want chat and chat#2", a.Stream, b.Stream)
	}
	two.prompt("count 3")
	two.waitFor("tab 2's count to end", lastAgentDone)
	checkConversation(t, two.name, two.transcript(), [2]string{"count 3", countText(3)})
	checkConversation(t, one.name, one.transcript(), [2]string{"count 20", countText(20)})
}

// proxiedAttachURL is the relay's attach URL through p, escaped for the
// demo page's fragment. Down, p stands for a relay that cannot be reached:
// the page keeps the same URL, and with it the same stored stream (the
// stream's key holds the URL), which a relay restarted elsewhere would not.
func proxiedAttachURL(p *relaytest.Proxy) string {
	return url.QueryEscape("ws://" + p.Addr() + relayleg.AttachPath)
}

// lastSeq is the seq of the newest chunk tb shows.
func lastSeq(tb *tab) int {
	tb.t.Helper()
	var seq int
	tb.eval(`Math.max(0, ...[...document.querySelectorAll("#transcript [data-seq]")].map((s) => Number(s.dataset.seq)))`, &seq)
	return seq
}

// The Vite app reloaded while the relay is down draws the conversation this
// device kept (relay.history) at once, not an empty page; once the relay is
// back, session/load replaces it with the agent's replay, the same
// conversation in the same session, and the app goes on. In both modes.
func TestDemoAppReloadWhileTheRelayIsDown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, fragment string }{{"main", ""}, {"worker", "&worker=1"}} {
		t.Run(c.mode, func(t *testing.T) { appReloadWhileTheRelayIsDown(t, c.fragment) })
	}
}

func appReloadWhileTheRelayIsDown(t *testing.T, fragment string) {
	s := startStackOf(t, builtApp(t), streamRate, nil, logger())
	p := relaytest.NewProxy(t, s.Addr())
	tb := openTab(t, newBrowser(t), "app", s.PageURL()+"#relay="+proxiedAttachURL(p)+fragment)
	tb.page = allowing{tb.page, refusedDial}
	appReady(tb)
	const n = 5
	var stop, session string
	tb.eval(`__app.send("count `+strconv.Itoa(n)+`")`, &stop)
	tb.eval(`__app.sessionId`, &session)
	want := []appTurn{{"user", "count " + strconv.Itoa(n)}, {"agent", countText(n)}}
	if got := appTurns(tb); stop != "end_turn" || !slices.Equal(got, want) {
		t.Fatalf("before the reload: the count ended %q, the turns are %+v; want end_turn and %+v", stop, clipTurns(got), want)
	}

	appReloadWhileDown(tb, p, session, want)
	tb.eval(`__app.send("ping")`, &stop)
	want = append(want, appTurn{"user", "ping"}, appTurn{"agent", "pong"})
	if got := appTurns(tb); stop != "end_turn" || !slices.Equal(got, want) {
		t.Fatalf("a prompt after the relay came back ended %q, the turns %+v; want end_turn and %+v", stop, clipTurns(got), want)
	}
	// Again: the transcript now holds the first reload's session/load and
	// the agent's replay of the count, which must not show twice.
	appReloadWhileDown(tb, p, session, want)
}

// appReloadWhileDown reloads the app with the relay behind p down, checks
// that it draws want from this device before it attaches, then brings the
// relay back and checks that session/load of session shows want again.
func appReloadWhileDown(tb *tab, p *relaytest.Proxy, session string, want []appTurn) {
	t := tb.t
	t.Helper()
	p.Down()
	tb.do("reloading", tb.page.reload)
	tb.waitFor("the kept conversation to be drawn", `window.__app && __app.previewed > 0`)
	if got := appTurns(tb); !slices.Equal(got, want) {
		t.Errorf("with the relay down the app shows %+v, want %+v", got, want)
	}
	var state struct {
		State string
		Ready bool
	}
	tb.eval(`({state: __app.state, ready: __app.ready})`, &state)
	if state.State == "open" || state.Ready {
		t.Fatalf("with the relay down the app is %q, ready %v; want it not attached (the test tested nothing)", state.State, state.Ready)
	}
	p.Up()
	appReady(tb)
	var loaded bool
	var again string
	tb.eval(`__app.loaded`, &loaded)
	tb.eval(`__app.sessionId`, &again)
	if got := appTurns(tb); !loaded || again != session || !slices.Equal(got, want) {
		t.Errorf("once attached: loaded %v, session %q, turns %+v; want session/load of %q and %+v", loaded, again, got, session, want)
	}
}
