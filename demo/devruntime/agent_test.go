package devruntime

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

func TestPlan(t *testing.T) {
	cases := []struct {
		prompt string
		want   []string
	}{
		{"ping", []string{"pong"}},
		{"count 3", []string{"1\n", "2\n", "3\n"}},
		{"count 0", nil},
		{"hello  big\tworld", []string{"hello", " big", " world"}},
		{"count x", []string{"count", " x"}},
		{"count 2 size 12", []string{"1 xxxxxxxxx\n", "2 xxxxxxxxx\n"}},
		{"count 1 size 1", []string{"1\n"}},
		{"", nil},
	}
	for _, c := range cases {
		p, err := plan(c.prompt)
		if err != nil {
			t.Fatalf("%q: %v", c.prompt, err)
		}
		var got []string
		for i := range p.n {
			got = append(got, p.text(i))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("%q streams %q, want %q", c.prompt, got, c.want)
		}
	}
	for _, bad := range []string{"count -1", "count 100001", "count 1 size 999999999"} {
		if _, err := plan(bad); err == nil {
			t.Fatalf("%q was accepted", bad)
		}
	}
	if p, _ := plan("count 100000 size 1024"); p.n != MaxCount || len(p.text(MaxCount-1)) != 1024 {
		t.Fatalf("count 100000 size 1024: %d chunks, last %d bytes", p.n, len(p.text(MaxCount-1)))
	}
}

// agentPeer drives a dev agent over its ACP connection with raw JSON-RPC
// lines, the way the relay's frames reach it.
type agentPeer struct {
	t     *testing.T
	in    io.Writer
	out   *bufio.Scanner
	pause *pause // the agent's, as a runtime's Pause holds it
	agent *devAgent
}

func newAgentPeer(t *testing.T, rate float64) *agentPeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	held := &pause{}
	agent := newDevAgent(rate, held)
	conn := acp.NewAgentSideConnection(agent, outW, inR)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	agent.conn = conn
	t.Cleanup(func() { inW.Close(); outR.Close() })
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20) // the browser leg's limit: larger messages fail the test
	return &agentPeer{t: t, in: inW, out: sc, pause: held, agent: agent}
}

type rpc struct {
	ID     *int            `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (p *agentPeer) send(msg string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, msg+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

func (p *agentPeer) read() rpc {
	p.t.Helper()
	if !p.out.Scan() {
		p.t.Fatalf("agent output ended: %v", p.out.Err())
	}
	var m rpc
	if err := json.Unmarshal(p.out.Bytes(), &m); err != nil {
		p.t.Fatalf("agent wrote %q: %v", p.out.Bytes(), err)
	}
	return m
}

// call sends a request and returns the chunk texts streamed before its
// response, and the response.
func (p *agentPeer) call(id int, method, params string) ([]string, rpc) {
	p.t.Helper()
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	return p.until(id)
}

// until reads up to the response to the request id, and returns the chunk
// texts streamed before it, and the response.
func (p *agentPeer) until(id int) ([]string, rpc) {
	p.t.Helper()
	var chunks []string
	for {
		m := p.read()
		if m.ID != nil && *m.ID == id && m.Method == "" {
			return chunks, m
		}
		chunks = append(chunks, chunkOf(p.t, m))
	}
}

func chunkOf(t *testing.T, m rpc) string {
	var n acp.SessionNotification
	if m.Method != "session/update" || json.Unmarshal(m.Params, &n) != nil || n.Update.AgentMessageChunk == nil {
		t.Fatalf("unexpected message %s %s", m.Method, m.Params)
	}
	return n.Update.AgentMessageChunk.Content.Text.Text
}

func (p *agentPeer) chat() {
	p.t.Helper()
	if _, m := p.call(1, "initialize", `{"protocolVersion":1}`); !strings.Contains(string(m.Result), `"protocolVersion":1`) {
		p.t.Fatalf("initialize answered %s %s", m.Result, m.Error)
	}
	if _, m := p.call(2, "session/new", `{"cwd":"/","mcpServers":[]}`); string(m.Result) != `{"sessionId":"s1"}` {
		p.t.Fatalf("session/new answered %s %s", m.Result, m.Error)
	}
}

func prompt(text string) string {
	return fmt.Sprintf(`{"sessionId":"s1","prompt":[{"type":"text","text":%q}]}`, text)
}

func TestAgentEchoesWordByWord(t *testing.T) {
	p := newAgentPeer(t, 0)
	p.chat()
	chunks, resp := p.call(3, "session/prompt", prompt("the quick  brown fox"))
	if strings.Join(chunks, "|") != "the| quick| brown| fox" || string(resp.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("streamed %q then %s", chunks, resp.Result)
	}
}

func TestAgentCount(t *testing.T) {
	p := newAgentPeer(t, 0)
	p.chat()
	chunks, resp := p.call(3, "session/prompt", prompt("count 500"))
	if len(chunks) != 500 || string(resp.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("streamed %d chunks then %s", len(chunks), resp.Result)
	}
	for i, c := range chunks {
		if c != strconv.Itoa(i+1)+"\n" {
			t.Fatalf("chunk %d is %q", i, c)
		}
	}
}

func TestAgentRejectsBadCount(t *testing.T) {
	p := newAgentPeer(t, 0)
	p.chat()
	if chunks, resp := p.call(3, "session/prompt", prompt("count 100001")); len(chunks) != 0 || resp.Error == nil {
		t.Fatalf("count 100001 streamed %d chunks and answered %s", len(chunks), resp.Result)
	}
}

// While paused the agent holds its stream between chunks but still answers
// (an echo goes round while a count is held), and released it sends every
// chunk, in order.
func TestAgentPause(t *testing.T) {
	p := newAgentPeer(t, 0)
	p.chat()
	if _, m := p.call(3, "session/prompt", prompt("count 1")); string(m.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("count 1 answered %s %s", m.Result, m.Error)
	}
	release := p.pause.hold(0)
	p.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":` + prompt("count 5") + `}`)
	for id := 5; id < 10; id++ { // unpaused, five chunks would come before these answers
		if chunks, m := p.call(id, EchoMethod, `{"n":1}`); len(chunks) != 0 || string(m.Result) != `{"n":1}` {
			t.Fatalf("paused, the agent streamed %q before answering the echo with %s", chunks, m.Result)
		}
	}
	release()
	release() // a second call is harmless
	if chunks, _ := p.until(4); strings.Join(chunks, "") != "1\n2\n3\n4\n5\n" {
		t.Fatalf("released, the agent streamed %q", chunks)
	}
}

// Paused from a turn's chunk number 2 on, the agent sends the turn's first
// two chunks and holds before the third (a turn with fewer is not held),
// and released it sends the rest, in order.
func TestAgentPauseAt(t *testing.T) {
	p := newAgentPeer(t, 0)
	p.chat()
	release := p.pause.hold(2)
	if chunks, m := p.call(3, "session/prompt", prompt("count 2")); strings.Join(chunks, "") != "1\n2\n" || string(m.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("count 2, paused from its third chunk, streamed %q and answered %s %s", chunks, m.Result, m.Error)
	}
	p.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":` + prompt("count 5") + `}`)
	var chunks []string
	for len(chunks) < 2 {
		chunks = append(chunks, chunkOf(t, p.read()))
	}
	for id := 5; id < 10; id++ { // unpaused, the third chunk would come before these answers
		if more, m := p.call(id, EchoMethod, `{"n":1}`); len(more) != 0 || string(m.Result) != `{"n":1}` {
			t.Fatalf("paused from the third chunk, the agent streamed %q after %q before answering the echo with %s", more, chunks, m.Result)
		}
	}
	release()
	rest, _ := p.until(4)
	if chunks = append(chunks, rest...); strings.Join(chunks, "") != "1\n2\n3\n4\n5\n" {
		t.Fatalf("paused from the third chunk and released, the agent streamed %q", chunks)
	}
}

// session/cancel ends a running turn, which answers "cancelled".
func TestAgentCancel(t *testing.T) {
	p := newAgentPeer(t, 1000)
	p.chat()
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":` + prompt("count 100000") + `}`)
	if c := chunkOf(t, p.read()); c != "1\n" {
		t.Fatalf("first chunk %q", c)
	}
	p.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`)
	for {
		m := p.read()
		if m.ID != nil && *m.ID == 3 {
			if string(m.Result) != `{"stopReason":"cancelled"}` {
				t.Fatalf("cancelled turn answered %s %s", m.Result, m.Error)
			}
			return
		}
	}
}

// A prompt on a session with a running turn cancels that turn.
func TestAgentNewPromptCancelsTurn(t *testing.T) {
	p := newAgentPeer(t, 1000)
	p.chat()
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":` + prompt("count 100000") + `}`)
	p.read()
	p.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":` + prompt("ping") + `}`)
	answered := map[int]string{}
	for len(answered) < 2 {
		if m := p.read(); m.ID != nil {
			answered[*m.ID] = string(m.Result)
		}
	}
	if answered[3] != `{"stopReason":"cancelled"}` || answered[4] != `{"stopReason":"end_turn"}` {
		t.Fatalf("answers %v", answered)
	}
}

// Under Config.RefuseOverlap a prompt on a session with a running turn is
// refused at once, and the running turn goes on: its permission request
// is still awaited, and its answer ends the turn.
func TestAgentRefuseOverlap(t *testing.T) {
	p := newAgentPeer(t, 1000)
	p.agent.refuseOverlap = true
	p.chat()
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":` + prompt("permission to write") + `}`)
	asked := p.read()
	if asked.Method != "session/request_permission" || asked.ID == nil {
		t.Fatalf("the permission turn sent %s %s first", asked.Method, asked.Params)
	}
	// until fails on anything but a chunk before the refusal: a
	// $/cancel_request, or the first turn's end.
	p.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":` + prompt("ping") + `}`)
	if _, m := p.until(4); string(m.Result) != `{"stopReason":"refusal"}` {
		t.Fatalf("the overlapping prompt answered %s %s", m.Result, m.Error)
	}
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, *asked.ID))
	chunks, m := p.until(3)
	if string(m.Result) != `{"stopReason":"end_turn"}` || len(chunks) != 1 || chunks[0] != "permission allow" {
		t.Fatalf("the first turn said %q and ended %s %s, want \"permission allow\" and end_turn", chunks, m.Result, m.Error)
	}
}

func TestAgentEchoExtension(t *testing.T) {
	p := newAgentPeer(t, 0)
	_, m := p.call(7, EchoMethod, `{"a":[1,"x",{"b":null}]}`)
	if string(m.Result) != `{"a":[1,"x",{"b":null}]}` {
		t.Fatalf("echo answered %s %s", m.Result, m.Error)
	}
	if _, m := p.call(8, "_relaywasm/unknown", `{}`); m.Error == nil {
		t.Fatal("an unknown extension method was answered")
	}
}

// An echoed word longer than MaxEchoChunk is split into chunks of at most
// that many bytes, so even a prompt whose every character encoding/json
// escapes (`<` is written as \u003c, six bytes) comes back as messages well
// under the relay's 1 MiB browser-leg limit, and all of it comes back.
func TestAgentEchoBounded(t *testing.T) {
	p := newAgentPeer(t, 0)
	p.chat()
	word := strings.Repeat("<", 180_000)
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":%s}`, prompt("hi "+word+" é")))
	var got strings.Builder
	for {
		if !p.out.Scan() {
			t.Fatalf("agent output ended: %v (a message over the 1 MiB scanner)", p.out.Err())
		}
		line := p.out.Bytes()
		if len(line) > 6*MaxEchoChunk+1024 {
			t.Fatalf("a %d-byte message, over 6 × MaxEchoChunk", len(line))
		}
		var m rpc
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if m.ID != nil && *m.ID == 3 {
			break
		}
		got.WriteString(chunkOf(t, m))
	}
	if got.String() != "hi "+word+" é" {
		t.Fatalf("echoed %d bytes, want the %d of the prompt", got.Len(), len("hi "+word+" é"))
	}
}
