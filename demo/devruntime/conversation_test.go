package devruntime

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// initialize advertises loadSession, and session/load replays the session's
// conversation (prompts as user chunks, answers as agent chunks) before it
// answers.
func TestAgentLoadSessionReplays(t *testing.T) {
	p := newAgentPeer(t, 0)
	if _, m := p.call(1, "initialize", `{"protocolVersion":1}`); !strings.Contains(string(m.Result), `"loadSession":true`) {
		t.Fatalf("initialize answered %s", m.Result)
	}
	if _, m := p.call(2, "session/new", `{"cwd":"/","mcpServers":[]}`); string(m.Result) != `{"sessionId":"s1"}` {
		t.Fatalf("session/new answered %s %s", m.Result, m.Error)
	}
	p.call(3, "session/prompt", prompt("count 3"))
	p.call(4, "session/prompt", prompt("hello world"))
	p.send(`{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"s1","cwd":"/","mcpServers":[]}}`)
	var got []string
	for {
		m := p.read()
		if m.ID != nil && *m.ID == 5 {
			if m.Error != nil || string(m.Result) != `{}` {
				t.Fatalf("session/load answered %s %s", m.Result, m.Error)
			}
			break
		}
		got = append(got, updateOf(t, m))
	}
	want := "user:count 3|agent:1\n|agent:2\n|agent:3\n|user:hello world|agent:hello|agent: world"
	if strings.Join(got, "|") != want {
		t.Fatalf("session/load replayed %q, want %q", strings.Join(got, "|"), want)
	}
	if _, m := p.call(6, "session/load", `{"sessionId":"s9","cwd":"/","mcpServers":[]}`); m.Error == nil {
		t.Fatal("session/load of an unknown session was answered without an error")
	}
}

// A "permission" prompt asks the client first (an agent→client request) and
// streams the option it chose; session/load replays that answer.
func TestAgentPermissionRequest(t *testing.T) {
	p := newAgentPeer(t, 0)
	p.chat()
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":` + prompt("permission to write") + `}`)
	req := p.read()
	var ask acp.RequestPermissionRequest
	if req.Method != "session/request_permission" || req.ID == nil || json.Unmarshal(req.Params, &ask) != nil || ask.SessionId != "s1" || len(ask.Options) != 2 {
		t.Fatalf("the agent sent %s %s, not a permission request", req.Method, req.Params)
	}
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`, *req.ID))
	if c := chunkOf(t, p.read()); c != "permission reject" {
		t.Fatalf("the turn streamed %q", c)
	}
	if m := p.read(); m.ID == nil || *m.ID != 3 || string(m.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("the prompt answered %s %s", m.Result, m.Error)
	}
}

func updateOf(t *testing.T, m rpc) string {
	t.Helper()
	var n acp.SessionNotification
	if m.Method != "session/update" || json.Unmarshal(m.Params, &n) != nil {
		t.Fatalf("unexpected message %s %s", m.Method, m.Params)
	}
	switch u := n.Update; {
	case u.AgentMessageChunk != nil:
		return "agent:" + u.AgentMessageChunk.Content.Text.Text
	case u.UserMessageChunk != nil:
		return "user:" + u.UserMessageChunk.Content.Text.Text
	}
	t.Fatalf("unexpected update %s", m.Params)
	return ""
}
