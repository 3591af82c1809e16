package e2e

import (
	"strings"
	"testing"
)

// One message over the browser leg's limit (1 MiB, the dev relay's) written
// to att.stream() must not end the SDK's connection: the SDK takes a failed
// write for a dead transport and closes, failing every request pending and
// every one after. The stream answers such a message in its place instead.

// checkOpen requires the SDK's connection to be open still: not closed, and
// a request on it answered.
func checkOpen(tb *tab) {
	tb.t.Helper()
	var closed string
	tb.eval(`__acp.closed ? JSON.stringify(__acp.closed) : ""`, &closed)
	if closed != "" {
		tb.t.Fatalf("the SDK's connection closed: %s", closed)
	}
	if a := prompted(tb, "ping"); a.StopReason != "end_turn" || a.Chunks != 1 {
		tb.t.Fatalf("a prompt after it ended %+v, want end_turn after 1 chunk", a)
	}
}

// A prompt of 1.1 MB (a pasted log): its request fails with an error
// response naming frame_too_large, and the connection goes on.
func TestStreamTooLargeRequest(t *testing.T) {
	t.Parallel()
	_, tb := sdkPage(t, 0)
	var a struct {
		answer
		Data struct {
			Code string `json:"code"`
		} `json:"data"`
	}
	tb.eval(`__acp.opened.then(c => c.request("session/prompt", {sessionId: __acp.sessionId, prompt: [{type: "text", text: "x".repeat(1100000)}]}))
		.then(r => ({stopReason: r.stopReason}), e => ({code: String(e.code), message: e.message, data: e.data}))`, &a)
	if a.Code != "-32603" || a.Data.Code != "frame_too_large" || !strings.Contains(a.Message, "frame_too_large") || !strings.Contains(a.Message, "1048576") {
		t.Fatalf("the big prompt ended %+v, want error -32603 naming frame_too_large and the limit", a)
	}
	checkOpen(tb)
}

// The app's answer to the runtime's fs/read_text_file is a 2 MiB file: the
// runtime gets an error response for its request instead, its turn goes on
// (saying the read failed), and the SDK's connection stays.
func TestStreamTooLargeResponse(t *testing.T) {
	t.Parallel()
	_, tb := sdkPage(t, 0)
	tb.eval(`__acp.fileSize = 100`, nil)
	if a := prompted(tb, "readfile small"); a.StopReason != "end_turn" {
		t.Fatalf("the small read's turn ended %+v", a)
	}
	tb.eval(`__acp.fileSize = 2 << 20`, nil)
	tb.eval(`__acp.promptLater("readfile big")`, nil)
	sdkWait(tb, "the big read's turn to end", `__acp.answers.length === 1 || __acp.closed`)
	var a []answer
	tb.eval(`__acp.answers`, &a)
	if a[0].StopReason != "end_turn" {
		t.Fatalf("the big read's turn ended %+v, want end_turn", a[0])
	}
	c := conversation(tb)
	if last := c[len(c)-1].Text; last != "read 100 bytes" && !(strings.HasPrefix(last, "read failed") && strings.Contains(last, "frame_too_large")) {
		t.Fatalf("the agent said %q after the big read, want the read failed with frame_too_large", last)
	}
	checkEntries(t, "the conversation", c, turn("readfile small", "read 100 bytes"), turn("readfile big", c[len(c)-1].Text))
	checkOpen(tb)
}

// A notification over the limit is dropped, with a console error naming its
// method and size, and the connection goes on.
func TestStreamTooLargeNotification(t *testing.T) {
	t.Parallel()
	_, tb := sdkPage(t, 0)
	tb.eval(`__acp.errors = [], console.error = (...a) => __acp.errors.push(a.join(" "))`, nil)
	var got string
	tb.eval(`__acp.opened.then(c => c.notify("_relaywasm/big", {x: "x".repeat(1100000)})).then(() => "sent", e => "failed: " + e.message)`, &got)
	if got != "sent" {
		t.Fatalf("the big notification's write: %s", got)
	}
	var logged []string
	tb.eval(`__acp.errors`, &logged)
	if len(logged) != 1 || !strings.Contains(logged[0], "_relaywasm/big") || !strings.Contains(logged[0], "frame_too_large") || !strings.Contains(logged[0], "1048576") {
		t.Fatalf("the console said %q, want one error naming the method, frame_too_large and the limit", logged)
	}
	checkOpen(tb)
}

// demo/app: a prompt too large to send (a pasted log) is noted as not sent,
// and the app goes on; it used to stay disabled, saying "error:
// frame_too_large", until reloaded.
func TestDemoAppTooLargePrompt(t *testing.T) {
	t.Parallel()
	tb := appPage(t, 0, "")
	var stop *string
	tb.eval(`__app.send("x".repeat(1100000))`, &stop)
	var st struct {
		Error *struct{ Code, Message string }
		Ready bool
		Note  string
	}
	tb.eval(`({error: __app.error, ready: __app.ready, note: [...document.querySelectorAll(".note")].map(e => e.textContent).join("\n")})`, &st)
	if stop != nil || st.Error != nil || !st.Ready || !strings.Contains(st.Note, "not sent") || !strings.Contains(st.Note, "1048576") {
		t.Fatalf("after a prompt too large: stop %v, error %+v, ready %v, notes %q; want no stop, no error, ready, a note that it was not sent", stop, st.Error, st.Ready, st.Note)
	}
	tb.eval(`__app.send("ping")`, &stop)
	if stop == nil || *stop != "end_turn" {
		t.Fatalf("a ping after it ended %v, want end_turn", stop)
	}
}
