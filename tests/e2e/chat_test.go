package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
)

// countText is what the dev agent streams for "count n".
func countText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

// checkConversation fails unless the page shows exactly these prompts, each
// followed by its finished answer, every chunk once and in order.
func checkConversation(t *testing.T, name string, got []item, want ...[2]string) {
	t.Helper()
	if len(got) != 2*len(want) {
		t.Fatalf("%s: the transcript has %d elements (%s), want %d", name, len(got), roles(got), 2*len(want))
	}
	for i, w := range want {
		user, agent := got[2*i], got[2*i+1]
		if user.Role != "user" || user.Text != w[0] {
			t.Errorf("%s: element %d is %s %q, want the prompt %q", name, 2*i, user.Role, clip(user.Text), w[0])
		}
		if agent.Role != "agent" || agent.ID != user.ID {
			t.Errorf("%s: element %d is %s answering %q, want the answer to prompt %s", name, 2*i+1, agent.Role, agent.ID, user.ID)
		}
		if !agent.Done || agent.Stop != "end_turn" {
			t.Errorf("%s: the answer to %q ended=%v with %q, want end_turn", name, w[0], agent.Done, agent.Stop)
		}
		if agent.Text != w[1] {
			t.Errorf("%s: the answer to %q is %s, want %s", name, w[0], describe(agent.Text), describe(w[1]))
		}
		checkSeqs(t, name, agent.Seqs)
	}
}

// checkSeqs fails unless the chunks' seqs rise by one: nothing shown twice,
// nothing skipped, nothing out of order.
func checkSeqs(t *testing.T, name string, seqs []int) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Errorf("%s: chunk %d has seq %d after seq %d", name, i, seqs[i], seqs[i-1])
			return
		}
	}
}

// describe summarises a long answer for a failure message.
func describe(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) <= 6 {
		return strconv.Quote(s)
	}
	return strconv.Quote(strings.Join(lines[:3], "\n")+"\n…\n"+strings.Join(lines[len(lines)-3:], "\n")) +
		" (" + strconv.Itoa(len(lines)) + " lines)"
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func roles(items []item) string {
	var r []string
	for _, it := range items {
		r = append(r, it.Role)
	}
	return strings.Join(r, ", ")
}

// A prompt gets its streamed answer, and a second prompt its own. The page
// is opened the way the demo prints it, pinning the relay's key.
func TestPromptGetsStreamedAnswer(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0)
	tb := openChat(t, newBrowser(t), "tab", s.PinnedPageURL())

	tb.waitFor("the empty conversation's suggestions", `!document.getElementById("empty").hidden`)
	if st := tb.chat(); st.State != "open" || st.SessionID != "s1" {
		t.Fatalf("ready with state %q and ACP session %q, want open and s1", st.State, st.SessionID)
	}
	tb.prompt("ping")
	tb.waitFor("the answer to ping", lastAgentDone)
	const sentence = "streamed through a relay to a runtime with no public address"
	tb.prompt(sentence)
	tb.waitFor("the echoed sentence", lastAgentDone)
	tb.prompt("count 100")
	tb.waitFor("the count", lastAgentDone)
	checkConversation(t, "tab", tb.transcript(), [2]string{"ping", "pong"}, [2]string{sentence, sentence}, [2]string{"count 100", countText(100)})
	// The page lays a long answer out in runs of chunks (app.js, RUN_CHUNKS):
	// they must not show, each number on a line of its own, evenly spaced.
	var steps []float64
	tb.eval(`(() => {
		const tops = [...[...document.querySelectorAll("#transcript [data-role=agent]")].pop().querySelectorAll("[data-seq]")]
			.map((s) => s.getBoundingClientRect().top);
		return tops.slice(1).map((top, i) => top - tops[i]);
	})()`, &steps)
	for i, d := range steps {
		if d <= 0 || math.Abs(d-steps[0]) > 0.5 {
			t.Fatalf("line %d of the count is %.1f px below the one before, the first %.1f px: want every line one line below the last", i+2, d, steps[0])
		}
	}
	var emptyHidden bool
	tb.eval(`document.getElementById("empty").hidden`, &emptyHidden)
	if !emptyHidden {
		t.Error("the empty-conversation panel is still shown beside the conversation")
	}
}

// A credential the relay refuses (given in the URL's fragment, where the page
// reads its settings) ends in a clear error rather than a spinner: the state
// says so, a banner explains it, and the composer is disabled.
func TestRefusedCredential(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0)
	tb := openTab(t, newBrowser(t), "tab", s.PageURL()+"#token=not-the-dev-token")

	tb.waitFor("the refusal to show", `__chat.state === "error" && !document.getElementById("banner").hidden`)
	var got struct {
		Kind, Text, Status string
		Code               string
		PromptDisabled     bool
	}
	tb.eval(`({
		kind: document.getElementById("banner").dataset.kind,
		text: document.getElementById("banner").textContent,
		status: document.getElementById("status-text").textContent,
		code: __chat.error?.code ?? "",
		promptDisabled: document.getElementById("prompt").disabled,
	})`, &got)
	if got.Kind != "error" || got.Code != "unauthorized" || !strings.Contains(got.Text, "refused the credential") {
		t.Errorf("banner %q of kind %q for error %q, want an error banner about the refused credential", got.Text, got.Kind, got.Code)
	}
	if got.Status != "Error" || !got.PromptDisabled {
		t.Errorf("status %q, composer disabled: %v; want Error and disabled", got.Status, got.PromptDisabled)
	}
	tb.viewport(1280, 800, false)
	// The picture is for people (out/); this test checks the page, and a
	// screenshot that times out on a loaded machine is not its failure.
	if err := writeShot(tb, "refused.png"); err != nil {
		t.Logf("no screenshot refused.png: %v", err)
	}
}

// A page pinning a key the relay does not hold refuses the relay: the
// state says so and the error names the failed proof, so the key the demo
// puts in the page's URL is really checked.
func TestWrongRelayKeyRefused(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0)
	other, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tb := openTab(t, newBrowser(t), "tab", s.PageURL()+"#key="+url.QueryEscape(librelay.FormatPublicKey(other)))

	tb.waitFor("the refusal to show", `__chat.state === "error" && !document.getElementById("banner").hidden`)
	var code string
	tb.eval(`__chat.error?.code ?? ""`, &code)
	if code != "bad_relay_signature" {
		t.Errorf("pinning another key ended in error %q, want bad_relay_signature", code)
	}
}

// The Stop button cancels the answer being streamed (session/cancel): the
// answer ends as cancelled, says so, and the next prompt is answered.
func TestStopAnswer(t *testing.T) {
	t.Parallel()
	s := startStack(t, 50)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL())

	tb.prompt("count 1000")
	tb.waitFor("the answer to be under way", lastAgentChunks+" >= 5")
	stopCount(tb, 1000)
	var note string
	tb.eval(`document.querySelector("#transcript [data-role=agent] .note")?.textContent ?? ""`, &note)
	if note != "Stopped" {
		t.Errorf("the stopped answer is noted %q, want Stopped", note)
	}
	var stopShown bool
	tb.eval(`!document.getElementById("stop").hidden`, &stopShown)
	if stopShown {
		t.Error("the Stop button is still shown with no answer running")
	}
	tb.prompt("ping")
	tb.waitFor("the next answer", lastAgentDone)
	if got := tb.transcript(); len(got) != 4 || got[3].Text != "pong" {
		t.Errorf("after Stop, a new prompt got %s, want pong", roles(got))
	}
}

// The Enter that confirms an input method's word (Japanese, Chinese,
// Korean) does not send the prompt. WebKit (Safari, every iOS webview)
// ends the composition before that Enter's keydown, so isComposing is
// already false there, and marks the keydown with keyCode 229 alone
// (WebKit bug 165004): the demo page sent a half-typed prompt at every word
// confirmed with Enter. No engine here has an input method to drive, so
// the page is given the keydown WebKit makes; the next Enter, a real one,
// sends the prompt.
func TestEnterConfirmingAWordDoesNotSend(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL())
	tb.waitFor("the empty conversation's suggestions", `!document.getElementById("empty").hidden`)

	var sent int
	tb.eval(`(() => {
		const p = document.getElementById("prompt");
		p.value = "こんにちは";
		p.dispatchEvent(new InputEvent("input", { bubbles: true }));
		p.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", keyCode: 229, bubbles: true, cancelable: true }));
		return document.querySelectorAll("#transcript [data-role=user]").length;
	})()`, &sent)
	var left string
	tb.eval(`document.getElementById("prompt").value`, &left)
	if sent != 0 || left != "こんにちは" {
		t.Fatalf("after the Enter that confirms a word: %d prompts sent, %q left in the composer; want none sent, the word left", sent, left)
	}
	tb.eval(`document.getElementById("prompt").value = ""`, nil)
	tb.prompt("こんにちは")
}
