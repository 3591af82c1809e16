package e2e

import "testing"

// A permission request open when the runtime is taken over by a new process
// (its machine restarted behind a connection that died unseen), against a
// runtime that does not resume (contenox as it ships): the stream ends with
// not_resumed, and the app's new stream must not offer the old request
// again. The new process numbers its requests from the start, so the app's
// answer to the old one (id 1) would answer the new process's own request
// of that id, a permission the user never saw. The new process's request
// that follows is asked, once, and its answer ends its turn.
func TestStreamStaleRequestAfterTakeover(t *testing.T) {
	t.Parallel()
	needSDK(t)
	hop, s := stackBehindHop(t, sdkDir, true)
	tb := openTab(t, newBrowser(t), "sdk", s.PageURL())
	sdkReady(tb)
	tb.eval(`__acp.hold = true, __acp.promptLater("permission to write")`, nil)
	sdkWait(tb, "the permission request", `__acp.asked.length === 1`)

	// The runtime's connection dies unseen, and a new process takes over.
	hop.Freeze()
	runFreshRuntime(t, s, true)
	sdkWait(tb, "the SDK's connection to end with the loss", `__acp.closed`)

	// What demo/app does then: a new stream, initialize, a new session. The
	// stream offers what it offers before anything live, so once
	// initialize is answered the old request would have been asked.
	var session string
	tb.eval(`__acp.holding.length = 0, __acp.hold = false, __acp.connect(), __acp.initialize().then(() => __acp.newSession())`, &session)
	var asked int
	tb.eval(`__acp.asked.length`, &asked)
	if asked != 1 {
		t.Fatalf("the new stream's SDK was asked %d permissions in all, want only the first stream's: the old process's request was offered again", asked)
	}
	if a := prompted(tb, "permission to read"); a.StopReason != "end_turn" {
		t.Fatalf("the new process's permission turn ended %+v, want end_turn", a)
	}
	tb.eval(`__acp.asked.length`, &asked)
	if asked != 2 {
		t.Fatalf("the SDK was asked %d permissions in all, want 2 (the new process's asked once)", asked)
	}
}
