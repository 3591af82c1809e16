package devruntime

import (
	"context"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// MaxTurns bounds how many turns of one session session/load replays: the
// newest ones. Benchmarks prompt thousands of times on one session.
const MaxTurns = 10_000

// PermissionWord is the first word of a prompt the agent answers by asking
// the client first (session/request_permission, an agent→client request);
// the turn then streams one chunk naming the outcome: "permission <optionId>"
// or "permission cancelled".
const PermissionWord = "permission"

// conversation is what one session has said, kept so session/load can replay
// it: each turn's prompt and the chunks of its answer sent so far. A turn's
// chunks are recomputed from its plan, so `count 100000 size 1024` costs no
// memory here.
//
// Sending a chunk and counting it happen under mu, and so does a replay: a
// chunk is either in a replay or streamed after it, never both, never neither.
type conversation struct {
	mu    sync.Mutex
	turns []*spoken
}

// spoken is one turn of a conversation.
type spoken struct {
	prompt string
	plan   chunkPlan
	sent   int
}

// begin adds a turn that will say plan's chunks.
func (c *conversation) begin(prompt string, plan chunkPlan) *spoken {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp := &spoken{prompt: prompt, plan: plan}
	if len(c.turns) == MaxTurns {
		c.turns = append(c.turns[:0], c.turns[1:]...)
	}
	c.turns = append(c.turns, sp)
	return sp
}

// say sends chunk i of the turn's plan and counts it as said.
func (c *conversation) say(ctx context.Context, conn *acp.AgentSideConnection, id acp.SessionId, sp *spoken, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: id, Update: acp.UpdateAgentMessageText(sp.plan.text(i))}); err != nil {
		return err
	}
	sp.sent = i + 1
	return nil
}

// replay sends the conversation so far as session/update notifications: each
// prompt as a user_message_chunk, then the chunks of its answer said so far.
// Chunks of a turn still running follow live, after the replay.
func (c *conversation) replay(ctx context.Context, conn *acp.AgentSideConnection, id acp.SessionId) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sp := range c.turns {
		if err := conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: id, Update: acp.UpdateUserMessageText(sp.prompt)}); err != nil {
			return err
		}
		for i := range sp.sent {
			if err := conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: id, Update: acp.UpdateAgentMessageText(sp.plan.text(i))}); err != nil {
				return err
			}
		}
	}
	return nil
}

// LoadSession replays a session of this attachment's agent (session/load):
// a reloaded page that kept its sessionId rebuilds its conversation from it.
func (a *devAgent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	c := a.conversation(p.SessionId)
	if c == nil && a.loadForgets {
		return acp.LoadSessionResponse{}, nil
	}
	if c == nil {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": "unknown session " + string(p.SessionId)})
	}
	return acp.LoadSessionResponse{}, c.replay(ctx, a.conn, p.SessionId)
}

func (a *devAgent) conversation(id acp.SessionId) *conversation {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.talks[id]
}

// askPermission is a PermissionWord prompt's plan: it asks the client, and
// the answer is one chunk naming the option chosen.
func (a *devAgent) askPermission(ctx context.Context, id acp.SessionId, prompt string) (chunkPlan, error) {
	title := prompt
	resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: id,
		ToolCall:  acp.ToolCallUpdate{ToolCallId: "permission", Title: &title},
		Options: []acp.PermissionOption{
			{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	if err != nil {
		return chunkPlan{}, err
	}
	text := "permission cancelled"
	if s := resp.Outcome.Selected; s != nil {
		text = "permission " + string(s.OptionId)
	}
	return chunkPlan{n: 1, text: func(int) string { return text }}, nil
}

func isPermission(prompt string) bool {
	f := strings.Fields(prompt)
	return len(f) > 0 && f[0] == PermissionWord
}
