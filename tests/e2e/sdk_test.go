package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// The official ACP SDK (@agentclientprotocol/sdk 2.4.0, installed from the
// committed lockfile by `make acpsdk`, which `make test` runs) over
// att.stream(), in the page tests/acpsdk/index.html: the SDK's own files,
// loaded through an import map, no bundler. The page (tests/acpsdk/page.js)
// is a small ACP client app; window.__acp is what these tests drive and read.

// sdkDir is the npm project: the page, and node_modules after npm ci.
var sdkDir = filepath.Join(repoRoot, "tests", "acpsdk")

func needSDK(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err != nil {
		t.Fatal("the ACP SDK is not installed in tests/acpsdk: run `make acpsdk` (npm ci from the committed lockfile)")
	}
}

// sdkPage starts the stack serving the SDK page, with the agent streaming
// rate chunks per second (0: as fast as it can), and opens the page, which
// attaches, connects the SDK, initializes and opens a session by itself.
func sdkPage(t *testing.T, rate float64) (*stack.Stack, *tab) {
	t.Helper()
	needSDK(t)
	s := startStackServing(t, sdkDir, rate)
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL())
	sdkReady(tb)
	return s, tb
}

func sdkReady(tb *tab) {
	tb.t.Helper()
	sdkWait(tb, "the SDK page to be ready", `__acp.ready || __acp.error`)
	var failed string
	tb.eval(`__acp.error ? JSON.stringify(__acp.error) : ""`, &failed)
	if failed != "" {
		tb.t.Fatalf("%s: the SDK page failed to start: %s", tb.name, failed)
	}
}

// sdkWait polls a JavaScript expression, which may be a Promise, until it is
// true; on the deadline it fails with a summary of window.__acp.
func sdkWait(tb *tab, what, expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		var ok bool
		// A name the page has not defined yet is "not yet": WebKit may run
		// the page's module after the load event.
		tb.eval(`(async () => { try { return Boolean(await (`+expr+`)) } catch (e) { if (e instanceof ReferenceError) return false; throw e } })()`, &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var state string
			tb.eval(sdkSummary, &state)
			tb.t.Fatalf("%s: still waiting for %s; page: %s", tb.name, what, state)
		}
		time.Sleep(pollEvery)
	}
}

const sdkSummary = `JSON.stringify({ready: __acp.ready, error: __acp.error, reads: __acp.reads, limit: __acp.limit,
	read: __acp.read.length, conversation: __acp.conversation.length, others: __acp.others.length,
	answers: __acp.answers, closed: __acp.closed, states: __acp.states.slice(-5), state: __acp.att?.state})`

// entry is one line of the conversation the page shows.
type entry struct {
	Role string `json:"role"`
	Text string `json:"text"`
}

// answer is how a prompt of the page ended.
type answer struct {
	Text       string `json:"text"`
	StopReason string `json:"stopReason"`
	Chunks     int    `json:"chunks"` // chunks the conversation had gained by then
	Code       string `json:"code"`   // the error's code when it failed
	Message    string `json:"message"`
}

func prompted(tb *tab, text string) answer {
	tb.t.Helper()
	var a answer
	tb.eval(fmt.Sprintf(`__acp.prompt(%q)`, text), &a)
	return a
}

func conversation(tb *tab) []entry {
	tb.t.Helper()
	var c []entry
	tb.eval(`__acp.conversation`, &c)
	return c
}

// turn is the conversation lines of one prompt and its answer.
func turn(prompt string, chunks ...string) []entry {
	e := []entry{{"user", prompt}}
	for _, c := range chunks {
		e = append(e, entry{"agent", c})
	}
	return e
}

func countChunks(n int) []string {
	c := make([]string, n)
	for i := range c {
		c[i] = strconv.Itoa(i+1) + "\n"
	}
	return c
}

// checkEntries compares a conversation with what it should be, line by line,
// so a chunk missing, doubled or out of order is named.
func checkEntries(t *testing.T, what string, got []entry, want ...[]entry) {
	t.Helper()
	var all []entry
	for _, w := range want {
		all = append(all, w...)
	}
	for i := range min(len(got), len(all)) {
		if got[i] != all[i] {
			t.Fatalf("%s: line %d is %s %q, want %s %q (%d lines, want %d)", what, i, got[i].Role, got[i].Text, all[i].Role, all[i].Text, len(got), len(all))
		}
	}
	if len(got) != len(all) {
		t.Fatalf("%s: %d lines, want %d", what, len(got), len(all))
	}
}

// sentIDs are the wire ids of the requests the page sent, oldest first, from
// the attachment's transcript.
func sentIDs(tb *tab) []string {
	tb.t.Helper()
	var ids []string
	tb.eval(`__acp.att.history().then(h => h.filter(e => e.out && e.message.method).map(e => String(e.message.id)))`, &ids)
	return ids
}

// prefixOf is the part of a wire id that names its stream ("rw-…-").
func prefixOf(id string) string {
	return id[:strings.LastIndexByte(id, '-')+1]
}

// initialize → session/new → prompt → chunks → end_turn, through the SDK,
// with the agent advertising session/load; requests go out with ids of the
// stream's own and come back to the SDK with its.
func TestSDKChat(t *testing.T) {
	t.Parallel()
	_, tb := sdkPage(t, 0)
	var load bool
	tb.eval(`__acp.init.agentCapabilities?.loadSession === true`, &load)
	if !load {
		t.Error("initialize did not advertise loadSession")
	}
	a := prompted(tb, "hello big world")
	if a.StopReason != "end_turn" || a.Chunks != 3 {
		t.Fatalf("the prompt ended %+v, want end_turn after 3 chunks", a)
	}
	checkEntries(t, "the conversation", conversation(tb), turn("hello big world", "hello", " big", " world"))
	ids := sentIDs(tb)
	if len(ids) != 3 {
		t.Fatalf("the transcript holds %d requests sent, want 3: %q", len(ids), ids)
	}
	for i, id := range ids {
		if !strings.HasPrefix(id, "rw-") || prefixOf(id) != prefixOf(ids[0]) || id != prefixOf(ids[0])+strconv.Itoa(i) {
			t.Errorf("request %d went out with id %q, want the stream's own (%q…)", i, id, prefixOf(ids[0]))
		}
	}
}

// A reload in the middle of a count of 8 s, while the SDK has read its
// first 2 s of chunks and the stream holds the rest unread. The reloaded
// page's SDK gets the stream from the first chunk it had not read on
// (nothing lost, nothing it had read), numbers its requests from 0 again,
// rebuilds the conversation with session/load, and its own prompt (id 2, as
// the old page's count was) is answered by its own response: the old page's
// response to its id 2 goes to onMessage and history(), never to the SDK
// (with a plain adapter it answered the new prompt, or the SDK logged a
// response to an unknown request; either fails this test).
func TestSDKReloadMidTurn(t *testing.T) {
	t.Parallel()
	n, held := countLasting(8*time.Second), countLasting(2*time.Second)
	_, tb := sdkPage(t, streamRate)
	tb.eval(fmt.Sprintf(`__acp.setLimit(__acp.reads + %d), __acp.promptLater("count %d")`, held, n), nil)
	sdkWait(tb, fmt.Sprintf("the SDK to have read %d chunks", held), fmt.Sprintf(`__acp.read.length === %d`, held))
	var last string
	tb.eval(`__acp.read.at(-1)`, &last)
	if last != strconv.Itoa(held)+"\n" {
		t.Fatalf("the last chunk read before the reload is %q", last)
	}
	before := sentIDs(tb)
	// The Store writes the cursor a commit window after it moves, and at
	// pagehide at once, but only once a write in flight has completed, which
	// a page going away may never see (jsbridge's Store; reported). So the
	// reload waits for the Store to have written what the engine holds (a
	// read, history(), writes the queued commits first): the write at
	// pagehide is then the only one, and must store the cursor right after
	// the last chunk the SDK read (stream.js's PAUSED makes the engine
	// accept the chunks before the one held, in the batch of which the SDK
	// read only the first; att.cursor says so at once, relay.wasm counts
	// them when the batch ends, or at pagehide).
	var stored, accepted int
	tb.eval(`__acp.att.history().then(() => __acp.storedCursor())`, &stored)
	tb.eval(`__acp.att.cursor`, &accepted)
	if stored == 0 || stored > accepted {
		t.Fatalf("before the reload the Store holds cursor %d, the attachment %d", stored, accepted)
	}

	tb.run(chromedp.Reload())
	sdkReady(tb)
	var first string
	tb.eval(`__acp.read[0]`, &first)
	if first != strconv.Itoa(held+1)+"\n" {
		t.Fatalf("after the reload the SDK read %q first, want %q: the first chunk the old page had not read", first, strconv.Itoa(held+1)+"\n")
	}
	sdkWait(tb, "the old turn to end", fmt.Sprintf(`__acp.conversation.some(e => e.text === "%d\n") && __acp.others.some(m => m.result?.stopReason)`, n))

	a := prompted(tb, "count 3")
	if a.StopReason != "end_turn" || a.Chunks != 3 {
		t.Fatalf("the reloaded page's prompt ended %+v, want end_turn after its own 3 chunks", a)
	}
	checkEntries(t, "the conversation after session/load", conversation(tb), turn("count "+strconv.Itoa(n), countChunks(n)...), turn("count 3", countChunks(3)...))

	after := sentIDs(tb)
	if len(after) != len(before)+3 {
		t.Fatalf("the transcript holds %d requests sent, want %d before the reload and 3 after", len(after), len(before))
	}
	if got := after[len(before):]; prefixOf(got[0]) == prefixOf(before[0]) || got[2] != prefixOf(got[0])+"2" {
		t.Errorf("the reloaded page's requests went out as %q, after the old page's %q: want a prefix of their own", got, before)
	}
	var others []struct {
		ID     string `json:"id"`
		Result struct {
			StopReason string `json:"stopReason"`
		} `json:"result"`
	}
	tb.eval(`__acp.others.filter(m => !("method" in m))`, &others)
	if len(others) != 1 || others[0].ID != before[2] || others[0].Result.StopReason != "end_turn" {
		t.Errorf("onMessage got the responses %+v, want only the old page's count (id %q, end_turn)", others, before[2])
	}
	var kept bool
	tb.eval(fmt.Sprintf(`__acp.att.history().then(h => h.some(e => !e.out && e.message.id === %q && e.message.result?.stopReason === "end_turn"))`, before[2]), &kept)
	if !kept {
		t.Error("history() does not hold the old page's response")
	}
}

// A relay restart cuts the socket in the middle of a count: the SDK sees
// every chunk once, in order, and its prompt answered; its connection never
// closed.
func TestSDKSocketCut(t *testing.T) {
	t.Parallel()
	n := countLasting(4 * time.Second)
	s, tb := sdkPage(t, streamRate)
	tb.eval(fmt.Sprintf(`__acp.promptLater("count %d")`, n), nil)
	sdkWait(tb, "the count to be under way", fmt.Sprintf(`__acp.read.length >= %d`, interruptAfter))
	restartRelay(tb, s)
	sdkWait(tb, "the count to be answered", `__acp.answers.length === 1`)
	var a []answer
	tb.eval(`__acp.answers`, &a)
	if a[0].StopReason != "end_turn" || a[0].Chunks != n {
		t.Fatalf("the prompt ended %+v, want end_turn after %d chunks", a[0], n)
	}
	checkEntries(t, "the conversation", conversation(tb), turn("count "+strconv.Itoa(n), countChunks(n)...))
	var cut []struct {
		Reads int `json:"reads"`
	}
	tb.eval(`__acp.states.filter(s => s.state === "reconnecting")`, &cut)
	if len(cut) == 0 || cut[0].Reads >= n {
		t.Fatalf("the attachment reconnected %+v, want once mid-stream", cut)
	}
	var closed bool
	tb.eval(`__acp.closed !== null`, &closed)
	if closed {
		t.Fatal("the SDK's connection closed")
	}
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" || a.Chunks != 1 {
		t.Fatalf("a prompt after the cut ended %+v", a)
	}
}

// The agent asks the client (session/request_permission, an agent→client
// request): the SDK's handler gets it through the stream and its answer goes
// back through it, with the agent's own id.
func TestSDKPermissionRequest(t *testing.T) {
	t.Parallel()
	_, tb := sdkPage(t, 0)
	for _, choice := range []string{"allow", "reject"} {
		tb.eval(fmt.Sprintf(`__acp.permission = %q`, choice), nil)
		if a := prompted(tb, "permission to write"); a.StopReason != "end_turn" || a.Chunks != 1 {
			t.Fatalf("%s: the prompt ended %+v", choice, a)
		}
		var c []entry
		tb.eval(`__acp.conversation.slice(-1)`, &c)
		if len(c) != 1 || c[0].Text != "permission "+choice {
			t.Fatalf("%s: the agent answered %+v", choice, c)
		}
	}
	var asked []string
	tb.eval(`__acp.asked.map(p => p.sessionId + ":" + p.options.map(o => o.optionId).join(","))`, &asked)
	if len(asked) != 2 || asked[0] != "s1:allow,reject" {
		t.Fatalf("the SDK's handler was asked %q", asked)
	}
	var matched bool
	tb.eval(`__acp.att.history().then(h => {
		const asks = h.filter(e => !e.out && e.message.method === "session/request_permission");
		const replies = h.filter(e => e.out && !e.message.method && e.message.result?.outcome);
		return asks.length === 2 && replies.length === 2 && asks.every((a, i) => a.message.id === replies[i].message.id);
	})`, &matched)
	if !matched {
		t.Fatal("the transcript does not hold two permission requests each answered with its own id")
	}
}

// The runtime restarts and forgets the stream: the readable errors with the
// RelayError, so the SDK's connection closes with its code and the prompt
// under way rejects with it. The attachment stays: a new stream starts a new
// ACP session on it. The count is long (40 s at streamRate) because the
// restart, not its end, is what stops it, as in TestEvictionStartsNewSession:
// with every suite of make test run at once (a trial of another schedule),
// Firefox's page had read fewer than interruptAfter chunks of a count of 4 s
// when the runtime had sent it all, and the prompt ended before the restart.
func TestSDKEvictionClosesConnection(t *testing.T) {
	t.Parallel()
	s, tb := sdkPage(t, streamRate)
	tb.eval(fmt.Sprintf(`__acp.promptLater("count %d")`, countLasting(40*time.Second)), nil)
	sdkWait(tb, "the count to be under way", fmt.Sprintf(`__acp.read.length >= %d`, interruptAfter))
	restartRuntime(t, s)
	sdkWait(tb, "the SDK connection to close", `__acp.closed !== null && __acp.answers.length === 1`)
	var closed, a []answer
	tb.eval(`[__acp.closed]`, &closed)
	tb.eval(`__acp.answers`, &a)
	if closed[0].Code != "cursor_evicted" || a[0].Code != "cursor_evicted" {
		t.Fatalf("the connection closed with %+v and the prompt ended %+v, want cursor_evicted for both", closed[0], a[0])
	}
	var session string
	tb.eval(`(async () => { __acp.connect(); await __acp.initialize(); return __acp.newSession(); })()`, &session)
	if a := prompted(tb, "ping"); session != "s1" || a.StopReason != "end_turn" {
		t.Fatalf("after the eviction: session %q, prompt %+v", session, a)
	}
}

// A stream opened, closed and opened again on one attachment. Closing the
// SDK's connection cancels the readable, which ends the stream and not the
// attachment; a response to the first stream's request that arrives after
// goes to onMessage, and the second stream's SDK, numbering from 0 again,
// gets only its own.
func TestSDKStreamReopened(t *testing.T) {
	t.Parallel()
	_, tb := sdkPage(t, 0)
	var code string
	tb.eval(`(() => { try { __acp.att.stream(); return "" } catch (e) { return e.code } })()`, &code)
	if code != "stream_open" {
		t.Errorf("a second stream() while one is open gave %q, want stream_open", code)
	}
	tb.eval(`(() => { try { __acp.att.stream({signal: "x"}); return "" } catch (e) { return e.code } })()`, &code)
	if code != "bad_options" {
		t.Errorf("stream({signal: \"x\"}) gave %q, want bad_options: its options are checked first", code)
	}
	tb.eval(`__acp.setLimit(__acp.reads), __acp.promptLater("count 50")`, nil)
	// The first chunk must have reached the read that was waiting before the
	// SDK's connection closes: on a loaded machine the count's first chunk
	// can come after end(), which then cancels that read too.
	sdkWait(tb, "the first chunk to reach the SDK's read that was already waiting", `__acp.read.length > 0`)
	tb.eval(`__acp.end(), __acp.connection`, nil)
	var st struct {
		Closed answer   `json:"closed"`
		State  string   `json:"state"`
		Ans    []answer `json:"answers"`
	}
	tb.eval(`({closed: __acp.closed, state: __acp.att.state, answers: __acp.answers})`, &st)
	if st.Closed.Code != "done" || st.State != "open" {
		t.Fatalf("after the SDK's connection closed: %+v, want it done and the attachment open", st)
	}
	first := sentIDs(tb)
	sdkWait(tb, "the first stream's answer to reach onMessage", `__acp.others.some(m => m.result?.stopReason === "end_turn")`)
	var split [2]int // chunks the SDK read, chunks onMessage got
	tb.eval(`[__acp.read.length, __acp.others.filter(m => m.method === "session/update").length]`, &split)

	tb.eval(`__acp.setLimit(Infinity), __acp.connect(), __acp.initialize()`, nil)
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" || a.Chunks != 1 {
		t.Fatalf("the second stream's prompt ended %+v", a)
	}
	ids := sentIDs(tb)[len(first):]
	if len(ids) != 2 || prefixOf(ids[0]) == prefixOf(first[0]) || ids[0] != prefixOf(ids[0])+"0" {
		t.Fatalf("the second stream sent %q after the first's %q: want ids of its own from 0", ids, first)
	}
	if split != [2]int{1, 49} {
		t.Errorf("of the first stream's 50 chunks the SDK read %d and onMessage got %d, want 1 (the gate's read already waiting) and 49", split[0], split[1])
	}
}

// att.stream() type-checks as the SDK's own Stream: tsc --noEmit on
// tests/acpsdk/sample.ts, a small app using both, with the SDK's types from
// npm and relay.d.ts.
func TestSDKTypes(t *testing.T) {
	t.Parallel()
	needSDK(t)
	tsc := exec.Command(filepath.Join("node_modules", ".bin", "tsc"), "--noEmit", "-p", ".")
	tsc.Dir = sdkDir
	if out, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc --noEmit: %v\n%s", err, out)
	}
}

// How a stream ends, at the Stream's own level (what the SDK does with it is
// above): a write fails with sendACP's code; cancelling the readable ends the
// stream only; closing the writable closes the attachment, whose readable
// then errors with closed, and the stored stream stays resumable: attached
// again, the page loads its session and gets its conversation back.
func TestSDKStreamEnds(t *testing.T) {
	t.Parallel()
	_, tb := sdkPage(t, 0)
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" {
		t.Fatalf("ping ended %+v", a)
	}
	tb.eval(`__acp.end(), __acp.connection`, nil)
	var got struct {
		Write    string `json:"write"`    // a write of what is not JSON
		Open     string `json:"open"`     // the attachment after the readable was cancelled
		Read     string `json:"read"`     // a read after the writable was closed
		Closed   string `json:"closed"`   // the attachment after that
		Cursor   int    `json:"cursor"`   // its cursor when it closed
		Attached int    `json:"attached"` // the cursor of the attachment made again
	}
	tb.eval(`(async () => {
		const code = (p) => p.then(() => "", (e) => e?.code ?? String(e));
		let s = __acp.att.stream();
		const write = await code(s.writable.getWriter().write({ jsonrpc: "2.0", id: 9, method: "x", params: 1n }));
		await s.readable.cancel();
		const open = __acp.att.state;
		s = __acp.att.stream();
		const r = s.readable.getReader();
		await s.writable.getWriter().close();
		const read = await code(r.read());
		const closed = __acp.att.state, cursor = __acp.att.cursor;
		await __acp.attach();
		return { write, open, read, closed, cursor, attached: __acp.att.cursor };
	})()`, &got)
	if got.Write != "bad_payload" || got.Open != "open" || got.Read != "closed" || got.Closed != "closed" || got.Cursor == 0 || got.Attached != got.Cursor {
		t.Fatalf("got %+v; want a write rejected with bad_payload, the attachment open after cancel, a read rejected with closed after the writable closed, the attachment closed, and attached again at the same cursor", got)
	}
	tb.eval(`__acp.connect(), __acp.initialize().then(() => __acp.load("s1"))`, nil)
	checkEntries(t, "the conversation loaded after attaching again", conversation(tb), turn("ping", "pong"))
}
