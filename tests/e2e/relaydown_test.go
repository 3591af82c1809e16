package e2e

import (
	"net/url"
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
