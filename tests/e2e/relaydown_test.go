package e2e

import (
	"io"
	"net"
	"sync"
	"testing"

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
	g := openGate(t, s.Addr())
	tb := openChat(t, newBrowser(t), "tab", s.PageURL()+m.query+"#relay="+g.attachURL())
	tb.page = allowing{tb.page, refusedDial}
	m.check(tb)
	const n = 20
	tb.prompt("count 20")
	finishCount(tb, n)
	waitStored(tb, lastSeq(tb))

	g.shut()
	tb.do("reloading", tb.page.reload)
	tb.waitFor("the stored conversation to be drawn", `window.__chat && __chat.previewed > 0`)
	checkConversation(t, tb.name, tb.transcript(), [2]string{"count 20", countText(n)})
	if st := tb.chat(); st.State == "open" || st.Ready {
		t.Fatalf("with the relay down the page is %q, ready %v; want it not attached (the test tested nothing)", st.State, st.Ready)
	}

	g.open()
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
	g := openGate(t, s.Addr())
	url := s.PageURL() + "#relay=" + g.attachURL()
	one := openChat(t, newBrowser(t), "tab 1", url)
	one.page = allowing{one.page, refusedDial}
	one.prompt("count 20")
	finishCount(one, 20)
	waitStored(one, lastSeq(one))

	g.shut()
	two := openTab(t, one.ctx, "tab 2", url)
	two.page = allowing{two.page, refusedDial}
	two.waitFor("the stored conversation to be drawn", `window.__chat && __chat.previewed > 0`)
	g.open()
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

// lastSeq is the seq of the newest chunk tb shows.
func lastSeq(tb *tab) int {
	tb.t.Helper()
	var seq int
	tb.eval(`Math.max(0, ...[...document.querySelectorAll("#transcript [data-seq]")].map((s) => Number(s.dataset.seq)))`, &seq)
	return seq
}

// gate forwards TCP connections to the relay, and can be shut as a network
// that goes away is: shut, it cuts every connection and refuses new ones;
// opened again, it listens on the same port. A page given its address as
// the relay's keeps the same stored stream across both (the stream's key
// holds the URL), which a relay restarted elsewhere would not.
type gate struct {
	t      *testing.T
	addr   string // where it listens
	target string // the relay's address

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func openGate(t *testing.T, target string) *gate {
	t.Helper()
	g := &gate{t: t, addr: "127.0.0.1:0", target: target, conns: map[net.Conn]struct{}{}}
	g.open()
	t.Cleanup(g.shut)
	return g
}

func (g *gate) attachURL() string { return "ws://" + g.addr + relayleg.AttachPath }

// open listens (again) and forwards what it accepts.
func (g *gate) open() {
	g.t.Helper()
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		g.t.Fatalf("opening the gate: %v", err)
	}
	g.mu.Lock()
	g.ln, g.addr = ln, ln.Addr().String()
	g.mu.Unlock()
	go g.accept(ln)
}

func (g *gate) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go g.forward(c)
	}
}

// forward copies between c and a new connection to the relay until either
// side ends, or the gate shuts.
func (g *gate) forward(c net.Conn) {
	r, err := net.Dial("tcp", g.target)
	if err != nil {
		c.Close()
		return
	}
	if !g.track(c, r) {
		return
	}
	done := make(chan struct{}, 2)
	for _, p := range [][2]net.Conn{{c, r}, {r, c}} {
		go func() {
			io.Copy(p[0], p[1]) // it ends as a connection does: how is not the test's
			done <- struct{}{}
		}()
	}
	<-done
	g.untrack(c, r)
}

// track records c and r, or closes them if the gate shut meanwhile.
func (g *gate) track(conns ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		g.conns[c] = struct{}{}
	}
	return true
}

func (g *gate) untrack(conns ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(g.conns, c)
	}
}

// shut stops listening and cuts every connection.
func (g *gate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		g.ln.Close()
		g.ln = nil
	}
	for c := range g.conns {
		c.Close()
		delete(g.conns, c)
	}
}
