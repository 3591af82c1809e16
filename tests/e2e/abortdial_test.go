package e2e

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// An attach aborted while its dial is under way rejects with canceled at
// once, not when handshakeTimeoutMs runs out, and gives its stream's name
// back: an attach of the same name made after it (a React remount) gets
// that name, not name#2. The dial hangs either in the token function (a
// Promise that never settles) or in the socket's opening (a relay that
// accepts TCP and never answers the upgrade). handshakeTimeoutMs is ten
// minutes, longer than the test's waits, so an attach that waits it out
// fails the test; no time is measured.
func TestAbortEndsADialUnderWay(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct{ name, query string }{{"main", "?main"}, {"worker", ""}} {
		t.Run(mode.name+", token pending", func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			tb := abortDialPage(t, s.PageURL()+mode.query, mode.name)
			startAbortedAttach(tb, s.AttachURL(), `() => { __abort.asked = true; return new Promise(() => {}); }`)
			tb.waitFor("the token function to be asked", `__abort.asked`)
			abortedThenSameName(tb, s.AttachURL())
		})
		t.Run(mode.name+", socket opening", func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			mute, accepted := startMuteRelay(t)
			tb := abortDialPage(t, s.PageURL()+mode.query, mode.name)
			// Firefox reports the abandoned socket as an error of the
			// page, at times of a later page of the same browser; and it
			// reported here, once, a socket to /v1/attach refused and one
			// interrupted, which this page's attach to the stack does not
			// do while the test looks (another test's page, it seems, in
			// the same browser).
			tb.page = allowing{allowing{allowing{tb.page, mutePath}, refusedDial}, interruptedDial}
			startAbortedAttach(tb, "ws://"+mute+mutePath, `"dev-token"`)
			select {
			case <-accepted:
			case <-time.After(waitLimit):
				t.Fatal("the page never dialled the mute relay")
			}
			abortedThenSameName(tb, s.AttachURL())
		})
	}
}

// abortDialPage opens the worker page at url and waits for it to be ready
// with relay.wasm in mode.
func abortDialPage(t *testing.T, url, mode string) *tab {
	t.Helper()
	tb := openTab(t, newBrowser(t), "abort dial", url)
	workerReady(tb, mode)
	return tb
}

// startAbortedAttach has tb's page attach the stream "abort" at url with
// token (a JavaScript expression), an AbortSignal and a handshake limit of
// ten minutes, keeping the attach's outcome in __abort.
func startAbortedAttach(tb *tab, url, token string) {
	tb.t.Helper()
	tb.eval(`(async () => {
		const { loadRelay } = await import("/relay.js");
		const relay = await loadRelay({ worker: location.search !== "?main" });
		const ctrl = new AbortController();
		window.__abort = { relay, ctrl };
		relay.attach({
			url: `+strconv.Quote(url)+`, instance: "demo", token: `+token+`, name: "abort",
			onMessage() {}, signal: ctrl.signal, handshakeTimeoutMs: 600000,
		}).then((a) => (__abort.attached = a.name), (e) => (__abort.error = e.code));
	})(), true`, nil)
}

// abortedThenSameName aborts the attach startAbortedAttach made, waits for
// it to reject with canceled, then attaches the same name at url and
// checks that it gets that name.
func abortedThenSameName(tb *tab, url string) {
	tb.t.Helper()
	tb.eval(`__abort.ctrl.abort(), true`, nil)
	tb.waitFor("the aborted attach to settle", `__abort.error !== undefined || __abort.attached !== undefined`)
	var first struct{ Error, Attached string }
	tb.eval(`({ error: __abort.error, attached: __abort.attached })`, &first)
	if first.Error != "canceled" {
		tb.t.Fatalf("the aborted attach ended with %+v, want it rejected with canceled", first)
	}
	var name string
	tb.eval(`(async () => {
		const a = await __abort.relay.attach({ url: `+strconv.Quote(url)+`, instance: "demo", token: "dev-token", name: "abort", onMessage() {} });
		const name = a.name;
		await a.close();
		return name;
	})()`, &name)
	if name != "abort" {
		tb.t.Fatalf("the attach after the aborted one got the stream %q, want %q", name, "abort")
	}
}

// mutePath is the path the mute relay is dialled at, to know its socket in
// the engines' reports.
const mutePath = "/v1/attach-mute"

// startMuteRelay listens on loopback, accepts connections and holds them
// open without a byte in answer (a relay whose upgrade never comes), and
// returns its address and a channel that receives once a connection is
// accepted. The connections close when the test ends.
func startMuteRelay(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln := listenLoopback(t)
	accepted := make(chan struct{}, 1)
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String(), accepted
}
