//go:build !js

// The engine's tests run natively, against a real dev relay and dev runtime
// on loopback; its browser build is tested by tests/browser.

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// guard bounds every wait in these tests (relaytest.WaitLimit).
const guard = relaytest.WaitLimit

// stack is a real dev relay and dev runtime on loopback, with the client and
// the runtime each reaching the relay through a proxy the test can cut.
type stack struct {
	t     *testing.T
	env   *relaytest.Env
	front *relaytest.Proxy // client → relay
	back  *relaytest.Proxy // runtime → relay
	rt    *devruntime.Runtime
	stop  func() // stops rt and waits for it
}

func newStack(t *testing.T, editRelay func(*relay.Config), editRuntime func(*devruntime.Config)) *stack {
	t.Helper()
	env := relaytest.Start(t, editRelay)
	host := strings.TrimPrefix(env.HTTPURL, "http://")
	s := &stack{t: t, env: env, front: relaytest.NewProxy(t, host), back: relaytest.NewProxy(t, host)}
	s.startRuntime(editRuntime)
	return s
}

// startRuntime runs the dev runtime, dialling the relay through the back
// proxy.
func (s *stack) startRuntime(edit func(*devruntime.Config)) {
	s.rt, s.stop = s.env.RunRuntime(s.t, func(c *devruntime.Config) {
		c.Relay = "http://" + s.back.Addr()
		if edit != nil {
			edit(c)
		}
	})
}

// restartRuntime replaces the runtime with a new process that knows
// nothing of the streams the old one produced.
func (s *stack) restartRuntime(edit func(*devruntime.Config)) {
	s.stop()
	s.startRuntime(edit)
}

// url is the relay's browser leg as the client reaches it.
func (s *stack) url() string { return "ws://" + s.front.Addr() + relayleg.AttachPath }

// restartRelay stops the relay process and starts a new one with the same
// key, as an operator restarting it would; both proxies follow it.
func (s *stack) restartRelay() {
	s.env.Restart(s.t)
	host := strings.TrimPrefix(s.env.HTTPURL, "http://")
	s.front.Repoint(host)
	s.back.Repoint(host)
	s.front.Cut() // what the old relay left half-open
	s.back.Cut()
}

// options are the client options for this stack: pinned key, fast backoff.
func (s *stack) options(store client.Store, c *clienttest.Collector) client.Options {
	return client.Options{
		URL: s.url(), Instance: s.env.Instance,
		Credential: func(context.Context) (string, error) { return s.env.ClientToken, nil },
		RelayKey:   s.env.Key,
		Name:       "test",
		Store:      store,
		History:    1 << 20,
		OnMessage:  c.OnMessage,
		OnEvicted:  c.OnEvicted,
		OnState:    c.OnState,
		Backoff:    client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	}
}

func (s *stack) attach(o client.Options) *client.Attachment {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	a, err := client.Attach(ctx, o)
	if err != nil {
		s.t.Fatalf("attach: %v", err)
	}
	s.t.Cleanup(func() { a.Close() })
	return a
}

// call sends a JSON-RPC request and waits for c to be handed its response.
func call(t testing.TB, c *clienttest.Collector, a *client.Attachment, id int, method, params string) relaytest.RPC {
	t.Helper()
	send(t, a, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	var resp relaytest.RPC
	c.Wait(t, method+" response", func(c *clienttest.Collector) bool {
		var ok bool
		resp, ok = c.Response(id)
		return ok
	})
	return resp
}

// startChat initializes ACP and opens a session, returning its id.
func startChat(t testing.TB, c *clienttest.Collector, a *client.Attachment) string {
	t.Helper()
	call(t, c, a, 1, "initialize", `{"protocolVersion":1}`)
	resp := call(t, c, a, 2, "session/new", `{"cwd":"/","mcpServers":[]}`)
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		t.Fatalf("session/new answered %s %s", resp.Result, resp.Error)
	}
	return r.SessionID
}

func promptParams(session, text string) string {
	return fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}`, session, text)
}

func send(t testing.TB, a *client.Attachment, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := a.SendACP(ctx, []byte(msg)); err != nil {
		t.Fatalf("SendACP: %v", err)
	}
}

// chunks returns the agent_message_chunk texts among msgs, in order.
func chunks(msgs []clienttest.Received) []string {
	var out []string
	for _, m := range msgs {
		if text, ok := relaytest.ChunkText(m.RPC); ok {
			out = append(out, text)
		}
	}
	return out
}

// checkSeqs fails unless msgs carry seq from..to exactly once each, in order.
func checkSeqs(t testing.TB, msgs []clienttest.Received, from, to uint64) {
	t.Helper()
	want := from
	for _, m := range msgs {
		if m.Seq == 0 {
			continue
		}
		if m.Seq != want {
			t.Fatalf("delivered seq %d where %d was due", m.Seq, want)
		}
		want++
	}
	if want != to+1 {
		t.Fatalf("delivered seqs %d..%d, want up to %d", from, want-1, to)
	}
}

// checkCount fails unless texts are "1\n" … "n\n", each once, in order.
func checkCount(t testing.TB, texts []string, n int) {
	t.Helper()
	if len(texts) != n {
		t.Fatalf("got %d chunks, want %d", len(texts), n)
	}
	for i, text := range texts {
		if text != strconv.Itoa(i+1)+"\n" {
			t.Fatalf("chunk %d is %q", i+1, text)
		}
	}
}

// settle waits until the cursor has caught up with the last sequenced
// message the handler accepted, and returns it. The engine moves the cursor
// once the handler has returned, a moment after the handler saw the
// message, so a test that reads the cursor right after a message arrived
// would race the engine.
func settle(t testing.TB, c *clienttest.Collector, a *client.Attachment) uint64 {
	t.Helper()
	var last uint64
	for _, m := range c.Snapshot() {
		if m.Seq > 0 {
			last = m.Seq
		}
	}
	waitCursor(t, a, last)
	return last
}

// waitCursor waits until the cursor is want.
func waitCursor(t testing.TB, a *client.Attachment, want uint64) {
	t.Helper()
	relaytest.WaitFor(t, fmt.Sprintf("cursor %d (it is %d)", want, a.Cursor()), func() bool { return a.Cursor() == want })
}
