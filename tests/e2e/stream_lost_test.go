package e2e

import (
	"bufio"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// A session/prompt whose response is lost (its turn ended while the page
// was offline, against a runtime that does not resume, as contenox ships:
// not_resumed) must not keep the requests of later turns of its session
// open. It did: the stream took the dead prompt for a turn still running,
// and every later request for one that might be of it, so for the rest of
// the session a permission dialog stayed on screen after its turn ended
// (the user pressed Stop), and a reloaded page was asked it again.

// lostPromptThenCancel has the page's first stream send a prompt whose
// response goes out while the page is offline and is lost, opens a new
// stream on the same attachment (session/load), and there asks a
// permission and cancels its turn (session/cancel) with the dialog open,
// against a runtime that sends no $/cancel_request: only the turn's end can
// close the dialog.
func lostPromptThenCancel(t *testing.T) *tab {
	t.Helper()
	needSDK(t)
	var tap *lineTap
	s := startFreshStack(t, stack.Config{
		WebDir: sdkDir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) {
			c.NoCancelRequest, c.NoResume = true, true
			tap = newLineTap(t, c.Relay)
			c.Relay = "http://" + tap.addr()
		},
	})
	t.Cleanup(func() { s.Close() })
	p, tb := sdkBehindProxy(t, s)
	release := s.Runtime().PauseAt(1)
	t.Cleanup(release)
	tb.eval(`__acp.promptLater("count 2")`, nil)
	sdkWait(tb, "the first chunk", `__acp.conversation.some(e => e.role === "agent")`)
	p.Down()
	sdkWait(tb, "the page to see the drop", `__acp.att.state !== "open"`)
	release() // the turn ends while the page is offline
	tap.wait(t, `"stopReason"`, "the runtime's response to the prompt")
	p.Up()
	sdkWait(tb, "the SDK's connection to end with the loss", `__acp.closed`)
	var answered, lost bool
	tb.eval(`__acp.att.history().then(h => h.some(e => !e.out && e.message?.result?.stopReason))`, &answered)
	tb.eval(`__acp.att.history().then(h => h.some(e => e.lost?.reason === "not_resumed"))`, &lost)
	if answered || !lost {
		t.Fatalf("the transcript holds a prompt's response %t, a not_resumed loss %t: want the response lost", answered, lost)
	}

	tb.eval(teeStreams, nil)
	tb.eval(`__acp.holding.length = 0, __acp.asked.length = 0, __acp.answers.length = 0, __acp.connect(),
		__acp.initialize().then(() => __acp.load(__acp.sessionId)).then(() => __acp.loaded = true)`, nil)
	sdkWait(tb, "the session loaded on a new stream", `__acp.loaded`)
	cancelTurn(tb, false)
	return tb
}

// The live stream: the dialog goes away with its turn, the SDK told once.
func TestStreamLostPromptResponseTurnEnds(t *testing.T) {
	t.Parallel()
	tb := lostPromptThenCancel(t)
	sdkWait(tb, "the dialog to go away with its turn", `__acp.holding.length === 0`)
	cancels, asked := sdkCancels(tb)
	if len(cancels) != 1 || cancels[0] != asked {
		t.Fatalf("the SDK read $/cancel_request for %v, want one for %s, the permission request", cancels, asked)
	}
}

// A reload after that turn ended: the reloaded page's SDK is not asked the
// ended turn's permission again (it is asked nothing before a prompt of its
// own has been answered, and the transcript's requests come first).
func TestStreamReloadLostPromptResponse(t *testing.T) {
	t.Parallel()
	tb := lostPromptThenCancel(t)
	// The runtime numbers nothing (seq 0): the cursor stays 0, and the
	// stored transcript is what the reloaded page goes by.
	sdkWait(tb, "the stored transcript to hold the cancelled turn's end", `import("/relay.js").then(m => m.loadRelay())
		.then(r => r.history({url: __acp.url, instance: __acp.instance, name: __acp.att.name}))
		.then(h => h.some(e => !e.out && e.message?.result?.stopReason === "cancelled"))`)
	tb.do("reloading", tb.page.reload)
	sdkReady(tb)
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" {
		t.Fatalf("a prompt after the reload ended %+v, want end_turn", a)
	}
	var asked int
	tb.eval(`__acp.asked.length`, &asked)
	if asked != 0 {
		t.Fatalf("the reloaded page's SDK was asked %d permissions, want none: their turns had ended", asked)
	}
}

// lineTap is a TCP hop between the runtime and the relay that keeps the
// lines the runtime sends (the runtime leg is an HTTP upgrade, then one
// JSON frame a line, cargo as raw JSON), so that a test can wait until the
// runtime has sent something it cannot see otherwise: a response that goes
// to a page that is offline, and is lost.
type lineTap struct {
	ln    net.Listener
	up    string
	mu    sync.Mutex
	lines []string
}

// newLineTap listens on a loopback port and forwards to the relay at
// relayURL (the runtime's Config.Relay, plain http).
func newLineTap(t *testing.T, relayURL string) *lineTap {
	t.Helper()
	u, err := url.Parse(relayURL)
	if err != nil || u.Scheme != "http" {
		t.Fatalf("lineTap: the runtime dials %q, want a plain http relay", relayURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lt := &lineTap{ln: ln, up: u.Host}
	t.Cleanup(func() { ln.Close() })
	go lt.serve()
	return lt
}

func (lt *lineTap) addr() string { return lt.ln.Addr().String() }

func (lt *lineTap) serve() {
	for {
		c, err := lt.ln.Accept()
		if err != nil {
			return
		}
		go lt.pipe(c)
	}
}

// pipe forwards one connection both ways, reading the runtime's bytes
// line by line as they go up.
func (lt *lineTap) pipe(down net.Conn) {
	defer down.Close()
	up, err := net.Dial("tcp", lt.up)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		io.Copy(down, up)
		down.Close()
	}()
	r := bufio.NewReaderSize(down, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := up.Write(line); werr != nil {
				return
			}
			lt.mu.Lock()
			lt.lines = append(lt.lines, string(line))
			lt.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// wait waits until the runtime has sent (and the tap passed on) a line
// holding word.
func (lt *lineTap) wait(t *testing.T, word, what string) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(pollEvery) {
		lt.mu.Lock()
		n := len(lt.lines)
		found := false
		for _, l := range lt.lines {
			found = found || strings.Contains(l, word)
		}
		lt.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s: the runtime sent %d lines, none holding %s", what, n, word)
		}
	}
}
