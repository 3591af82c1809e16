//go:build !js

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// The shipped contenox runtime stamps no seq and never answers
// session.resume (notes/contenox-v1.md). It cannot run here, so the dev
// runtime reproduces that with Config.NoResume, and these tests run the
// engine against it through the real dev relay.

// resumeWait is the tests' ResumeTimeout: the runtime never answers, so a
// short wait cannot be mistaken for a slow answer.
const resumeWait = 300 * time.Millisecond

func nonResuming(c *devruntime.Config) { c.NoResume = true }

// lastState is the collector's latest state change.
func lastState(c *clienttest.Collector) client.StateChange {
	if len(c.States) == 0 {
		return client.StateChange{}
	}
	return c.States[len(c.States)-1]
}

func evictions(c *clienttest.Collector, reason string) int {
	n := 0
	for _, e := range c.Evicted {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// prompt asks for "count n" and checks the answer: 1..n once each, in order.
func promptCount(t *testing.T, c *clienttest.Collector, a *client.Attachment, id int, session string, n int) {
	t.Helper()
	from := len(c.Snapshot())
	resp := call(t, c, a, id, "session/prompt", promptParams(session, "count "+strconv.Itoa(n)))
	if string(resp.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("prompt answered %s %s", resp.Result, resp.Error)
	}
	checkCount(t, chunks(c.Snapshot()[from:]), n)
}

// A chat works against a runtime that does not resume: the resume goes
// unanswered, the attachment says it cannot resume, the sends made
// meanwhile go out, and the connection stays up.
func TestNonResumingChat(t *testing.T) {
	s := newStack(t, nil, nonResuming)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	o.ResumeTimeout = resumeWait
	a := s.attach(o)
	session := startChat(t, c, a) // sent before the resume was given up on
	c.Wait(t, "resumable false", func(c *clienttest.Collector) bool {
		return !lastState(c).Resumable && lastState(c).State == client.Open
	})
	if a.Resumable() {
		t.Fatal("Resumable() is true against a runtime that never answered a resume")
	}
	promptCount(t, c, a, 3, session, 200)
	for _, m := range c.Snapshot() {
		if m.Seq != 0 {
			t.Fatalf("a non-resuming runtime's message carried seq %d", m.Seq)
		}
	}
	if n := s.front.Accepted(); n != 1 {
		t.Fatalf("%d connections; the unanswered resume must not drop the first", n)
	}
	c.Lock()
	defer c.Unlock()
	if len(c.Evicted) != 0 {
		t.Fatalf("evictions %+v on a first connection: nothing was missed", c.Evicted)
	}
}

// A stream's first connection has missed nothing, so its sends do not wait
// for the resume's answer: against contenox as it ships, a page's first
// ACP request would otherwise wait out ResumeTimeout on every first load.
// The wait here is longer than any of the test's, so a send held for it
// never arrives; the attachment is still resumable when the chat is done.
func TestNewStreamSendsWithoutWaitingForTheResume(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, nonResuming)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	o.ResumeTimeout = 10 * relaytest.WaitLimit
	a := s.attach(o)
	session := startChat(t, c, a)
	promptCount(t, c, a, 3, session, 20)
	if !a.Resumable() {
		t.Fatal("the resume was given up on: its wait ended before the chat")
	}
}

// A stream taken up again (a reload) may have missed something, so its
// sends wait for the resume's answer, or for its wait to end, and go after
// the loss is told: an application hears that messages are gone before
// anything it sends can be answered.
func TestReclaimedStreamSendsAfterTheResume(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, nonResuming)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	o.ResumeTimeout = resumeWait
	a := s.attach(o)
	startChat(t, c, a)
	a.Close()
	b := s.attach(o)
	send(t, b, `{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}`)
	c.Lock()
	told := evictions(c, "not_resumed")
	c.Unlock()
	if told != 1 {
		t.Fatalf("the reload's send went out with %d not_resumed losses told, want 1 before it", told)
	}
}

// A drop mid-stream and a reload against a runtime that does not resume:
// what arrived is never delivered twice, what was sent while the client
// was away is gone and the loss is reported (not_resumed), and the chat
// goes on on the same ACP session.
func TestNonResumingDropAndReload(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, func(c *devruntime.Config) { c.NoResume, c.AgentRate = true, 500 })
	c := clienttest.NewCollector()
	store := client.NewMemoryStore()
	o := s.options(store, c)
	o.ResumeTimeout = resumeWait
	a := s.attach(o)
	session := startChat(t, c, a)
	c.Wait(t, "resumable false", func(c *clienttest.Collector) bool { return !lastState(c).Resumable })

	from := dropMidCount(t, s, c, a, session)
	checkIncreasing(t, chunks(c.Snapshot()[from:]), 1000)

	// A reload: a new Attachment with the same Store and Name.
	a.Close()
	b := s.attach(o)
	if b.Session() != a.Session() {
		t.Fatalf("the reload got attachment id %q, want %q back", b.Session(), a.Session())
	}
	c.Wait(t, "the reload's loss reported", func(c *clienttest.Collector) bool { return evictions(c, "not_resumed") == 2 })
	promptCount(t, c, b, 4, session, 50)
	c.Lock()
	defer c.Unlock()
	for _, e := range c.Evicted {
		if e.Reason != "not_resumed" || e.AfterSeq != 0 || e.FromSeq != 0 {
			t.Fatalf("eviction %+v", e)
		}
	}
}

// dropMidCount cuts the connection in the middle of an answer of 1000
// chunks (two seconds at the stack's agent rate, 500 a second), prompt id 3,
// and waits for its not_resumed loss, the attachment's first, and for the
// end of the turn. It returns where the answer starts among c's messages.
func dropMidCount(t *testing.T, s *stack, c *clienttest.Collector, a *client.Attachment, session string) int {
	t.Helper()
	from := len(c.Snapshot())
	send(t, a, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":`+promptParams(session, "count 1000")+`}`)
	c.Wait(t, "the stream under way", func(c *clienttest.Collector) bool { return len(chunks(c.Msgs[from:])) >= 100 })
	s.front.Cut()
	c.Wait(t, "the loss reported", func(c *clienttest.Collector) bool { return evictions(c, "not_resumed") == 1 })
	c.Wait(t, "the end of the turn", func(c *clienttest.Collector) bool { _, ok := c.Response(3); return ok })
	return from
}

// checkIncreasing fails unless texts are counts "k\n" from 1..n, each at
// most once and in order: some may be missing (lost while away), none twice.
func checkIncreasing(t *testing.T, texts []string, n int) {
	t.Helper()
	last := 0
	for _, text := range texts {
		k, err := strconv.Atoi(text[:len(text)-1])
		if err != nil || k <= last || k > n {
			t.Fatalf("chunk %q after %d", text, last)
		}
		last = k
	}
	if len(texts) == 0 {
		t.Fatal("no chunk arrived")
	}
	t.Logf("%d of %d chunks arrived; %d were sent while the client was away", len(texts), n, n-len(texts))
}

// A runtime that starts resuming (here: replaced by one that does) is
// noticed on the next connection: the resume is answered, the attachment
// is resumable again, and the stream is sequenced from then on.
func TestNonResumingRuntimeStartsResuming(t *testing.T) {
	s := newStack(t, nil, nonResuming)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	o.ResumeTimeout = resumeWait
	a := s.attach(o)
	startChat(t, c, a)
	c.Wait(t, "resumable false", func(c *clienttest.Collector) bool { return !lastState(c).Resumable })

	s.restartRuntime(nil) // the default dev runtime: seq and resume
	c.Wait(t, "resumable true", func(c *clienttest.Collector) bool { return lastState(c).Resumable })
	relaytest.WaitFor(t, "Resumable()", a.Resumable)
	n := len(c.Snapshot())
	call(t, c, a, 11, "initialize", `{"protocolVersion":1}`)
	if m := c.Snapshot()[n]; m.Seq != 1 {
		t.Fatalf("first message from the resuming runtime has seq %d", m.Seq)
	}
	// Sequenced now: a drop is resumed, and nothing is reported lost.
	c.Lock()
	lost, opens := evictions(c, "not_resumed"), countState(c, client.Open)
	c.Unlock()
	s.front.Cut()
	c.Wait(t, "open again", func(c *clienttest.Collector) bool { return countState(c, client.Open) > opens })
	resp := call(t, c, a, 12, "session/new", `{"cwd":"/","mcpServers":[]}`)
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		t.Fatalf("session/new answered %s %s", resp.Result, resp.Error)
	}
	promptCount(t, c, a, 13, r.SessionID, 20)
	c.Lock()
	defer c.Unlock()
	if evictions(c, "not_resumed") != lost {
		t.Fatalf("a drop against a resuming runtime was reported as a loss: %+v", c.Evicted)
	}
}

// The frame's trace id crosses both ways: what the client sends carries
// the one given to SendACP, one that is not a trace id is refused before
// anything is sent, and what arrives carries its trace in Message.Trace.
func TestTrace(t *testing.T) {
	s := newScripted(t)
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	ctx := context.Background()
	if err := s.a.SendACP(ctx, []byte(`{"jsonrpc":"2.0","method":"x"}`), client.WithTrace("turn-7_a")); err != nil {
		t.Fatal(err)
	}
	if f := s.next(t); f.Type != librelay.TypeACPMessage || f.Trace != "turn-7_a" {
		t.Fatalf("sent %s with trace %q", f.Type, f.Trace)
	}
	if err := s.a.SendACP(ctx, []byte(`{}`), client.WithTrace("not a trace")); !errors.Is(err, client.ErrBadOptions) {
		t.Fatalf("a bad trace id: %v", err)
	}
	s.send(t, librelay.Frame{Type: librelay.TypeACPMessage, Seq: 1, Trace: "t-1", Payload: []byte(`{"jsonrpc":"2.0","method":"n","params":1}`)})
	s.c.Wait(t, "seq 1", func(c *clienttest.Collector) bool { return len(c.Msgs) == 1 })
	if m := s.c.Snapshot()[0]; m.Trace != "t-1" {
		t.Fatalf("delivered with trace %q, want t-1", m.Trace)
	}
}

// A runtime that refuses session.resume instead of ignoring it does not
// resume either: unsupported_type is what one that does not handle the
// type answers (librelay.Unsupported), and a code the client knows nothing
// of says no more. Either releases the sends at once and keeps the
// connection, as an unanswered resume does after ResumeTimeout (here far
// off, so only the refusal can release them); a redial would only be
// refused again, with the sends held for ever.
func TestResumeRefusedMeansNotResuming(t *testing.T) {
	for _, code := range []string{librelay.CodeUnsupportedType, "some_future_code"} {
		t.Run(code, func(t *testing.T) {
			s := newScriptedWith(t, func(o *client.Options) { o.ResumeTimeout = guard })
			_, id := s.expectResume(t)
			sent := make(chan error, 1)
			go func() { sent <- s.a.SendACP(context.Background(), []byte(`{"jsonrpc":"2.0","method":"hi"}`)) }()
			s.send(t, librelay.NewError(librelay.Frame{Type: librelay.TypeResume, ID: id}, code, "no resume here"))
			if f := s.next(t); f.Type != librelay.TypeACPMessage {
				t.Fatalf("after the refusal the client sent %s %s, want the queued acp.message", f.Type, f.Payload)
			}
			if err := <-sent; err != nil {
				t.Fatalf("SendACP: %v", err)
			}
			s.c.Wait(t, "resumable false", func(c *clienttest.Collector) bool { return !lastState(c).Resumable })
			if s.a.Resumable() || s.a.State() != client.Open {
				t.Fatalf("resumable %v in state %v", s.a.Resumable(), s.a.State())
			}
			s.c.Lock()
			defer s.c.Unlock()
			if n := countState(s.c, client.Reconnecting); n != 0 {
				t.Fatalf("reconnected %d times: the refusal dropped the connection (%+v)", n, s.c.States)
			}
		})
	}
}
