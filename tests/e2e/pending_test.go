package e2e

import (
	"slices"
	"strconv"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// An attach still pending (the relay unreachable since the page loaded)
// hears the browser's offline and online events as an attachment does:
// offline, it says so and holds its redials; back online, it redials at
// once and attach resolves. Its backoff is an hour, and so is the hold
// offline, so nothing but the online event explains the redial. (Before,
// only attachments that had attached heard the events: the pending attach
// waited out its backoff, up to 30 s by default, and never showed offline.)
// An online event alone (the page loaded offline, so the attach never
// heard it was) redials it at once too.
func TestPendingAttachHearsOfflineAndOnline(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, query string }{{"main", "?main"}, {"worker", ""}} {
		t.Run(c.name+", offline then online", func(t *testing.T) {
			tb, p := pendingAttach(t, c.name, c.query)
			setOffline(tb, true)
			tb.waitFor("the pending attach to show offline", `__pending.states.includes("offline") || __pending.error !== undefined`)
			p.Up()
			setOffline(tb, false)
			got := pendingAttached(tb)
			if !slices.Contains(got.States, "offline") {
				t.Fatalf("the pending attach went through %v, never offline", got.States)
			}
		})
	}
	t.Run("main, online alone", func(t *testing.T) {
		tb, p := pendingAttach(t, "main", "?main")
		var retryIn float64
		tb.eval(`__pending.retryInMs`, &retryIn)
		if retryIn < 5*60*1000 {
			t.Logf("the attach's backoff drew %v ms: short enough that it may have redialled by itself", retryIn)
		}
		p.Up()
		tb.eval(`dispatchEvent(new Event("online")), true`, nil)
		pendingAttached(tb)
	})
}

// pendingAttach opens the worker page in mode, behind a relay that cannot
// be reached, and has it attach with a backoff of an hour; it returns once
// the attach has failed its first dial and waits to redial.
func pendingAttach(t *testing.T, mode, query string) (*tab, *relaytest.Proxy) {
	t.Helper()
	s := startStackServing(t, workerDir, 0)
	p := relaytest.NewProxy(t, s.Addr())
	p.Down()
	tb := openTab(t, networkEmulating(t), "pending", s.PageURL()+query)
	tb.page = allowing{tb.page, refusedDial}
	workerReady(tb, mode)
	attachURL := "ws://" + p.Addr() + relayleg.AttachPath
	tb.eval(`(async () => {
		const { loadRelay } = await import("/relay.js");
		const relay = await loadRelay({ worker: location.search !== "?main" });
		window.__pending = { states: [] };
		const hour = 3600000;
		relay.attach({
			url: `+strconv.Quote(attachURL)+`, instance: "demo", token: "dev-token", name: "pending",
			onMessage() {},
			onState(state, info) {
				__pending.states.push(state);
				if (state === "reconnecting") __pending.retryInMs = info.retryInMs;
			},
			backoff: { initialMs: hour, maxMs: hour },
		}).then((a) => (__pending.attached = a.state), (e) => (__pending.error = e.code + ": " + e.message));
	})(), true`, nil)
	tb.waitFor("the attach to fail its first dial", `window.__pending && __pending.states.includes("reconnecting")`)
	return tb, p
}

type pendingState struct {
	States   []string
	Attached string
	Error    string
}

// pendingAttached waits for pendingAttach's attach to settle, and fails the
// test unless it attached.
func pendingAttached(tb *tab) pendingState {
	tb.t.Helper()
	tb.waitFor("the attach to resolve", `__pending.attached !== undefined || __pending.error !== undefined`)
	var got pendingState
	tb.eval(`__pending`, &got)
	if got.Error != "" || got.Attached != "open" {
		tb.t.Fatalf("attach ended with %q, state %q; want it attached, open (states %v)", got.Error, got.Attached, got.States)
	}
	return got
}
