//go:build !js

package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// scripted is a real relay with a runtime peer the test drives frame by
// frame, to produce duplicates, gaps and evictions on demand.
type scripted struct {
	env *relaytest.Env
	rt  *relaytest.Runtime
	c   *clienttest.Collector
	a   *client.Attachment
}

func newScripted(t *testing.T) *scripted {
	t.Helper()
	return newScriptedWith(t, nil)
}

// newScriptedWith is newScripted with the client's options edited first.
func newScriptedWith(t *testing.T, edit func(*client.Options)) *scripted {
	t.Helper()
	return newScriptedOn(t, nil, edit)
}

// newScriptedOn is newScriptedWith on a relay whose config is edited first.
func newScriptedOn(t *testing.T, relayEdit func(*relay.Config), edit func(*client.Options)) *scripted {
	t.Helper()
	env := relaytest.Start(t, relayEdit)
	s := &scripted{env: env, rt: env.Connect(t), c: clienttest.NewCollector()}
	o := client.Options{
		URL: env.AttachURL, Instance: env.Instance,
		Credential: func(context.Context) (string, error) { return env.ClientToken, nil },
		RelayKey:   env.Key, Store: client.NewMemoryStore(), History: 1000,
		OnMessage: s.c.OnMessage, OnEvicted: s.c.OnEvicted, OnState: s.c.OnState,
	}
	if edit != nil {
		edit(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	a, err := client.Attach(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	s.a = a
	return s
}

// expectResume reads the client's next session.resume and returns its cursor
// and request id.
func (s *scripted) expectResume(t *testing.T) (uint64, string) {
	t.Helper()
	f := s.next(t)
	if f.Type != librelay.TypeResume || !f.IsRequest() {
		t.Fatalf("want session.resume, got %s %s", f.Type, f.Payload)
	}
	var r librelay.Resume
	if err := r.UnmarshalJSON(f.Payload); err != nil {
		t.Fatal(err)
	}
	return r.AfterSeq, f.ID
}

// next returns the next frame the client sent to the runtime.
func (s *scripted) next(t *testing.T) librelay.Frame {
	t.Helper()
	f, err := s.rt.ReadCargo()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (s *scripted) resumed(t *testing.T, re string, from uint64, evicted bool) {
	t.Helper()
	payload, _ := librelay.Resumed{FromSeq: from, Evicted: evicted}.MarshalJSON()
	s.send(t, librelay.Frame{Type: librelay.TypeResumed, ReplyTo: re, Payload: payload})
}

// msg sends an ACP notification carrying n, sequenced by seq.
func (s *scripted) msg(t *testing.T, seq uint64, n int) {
	t.Helper()
	s.send(t, librelay.Frame{Type: librelay.TypeACPMessage, Seq: seq,
		Payload: []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":%d}`, n))})
}

func (s *scripted) send(t *testing.T, f librelay.Frame) {
	t.Helper()
	f.Instance, f.Session = s.env.Instance, s.a.Session()
	if err := s.rt.Send(f); err != nil {
		t.Fatal(err)
	}
}

// params lists the n of each delivered message, with its seq and replay mark.
func (s *scripted) delivered() []string {
	var out []string
	for _, m := range s.c.Snapshot() {
		out = append(out, fmt.Sprintf("%s@%d", m.RPC.Params, m.Seq))
	}
	return out
}

// The delivery rules: in order only, duplicates dropped, a gap answered with
// a resume from the cursor, unsequenced frames passed through, and sequenced
// cargo that is not ACP moving the cursor without reaching the handler.
func TestDeliveryRules(t *testing.T) {
	s := newScripted(t)
	after, id := s.expectResume(t)
	if after != 0 {
		t.Fatalf("fresh attach resumed after %d, want 0", after)
	}
	s.resumed(t, id, 1, false)
	s.msg(t, 1, 1)
	s.msg(t, 2, 2)
	s.msg(t, 2, 2) // a duplicate
	s.send(t, librelay.Frame{Type: librelay.TypeACPMessage, Payload: []byte(`{"jsonrpc":"2.0","method":"n","params":0}`)})
	s.msg(t, 4, 4) // a gap: 3 is missing

	after, id = s.expectResume(t)
	if after != 2 {
		t.Fatalf("gap resumed after %d, want 2", after)
	}
	s.resumed(t, id, 3, false)
	s.msg(t, 3, 3)
	s.msg(t, 4, 4)
	s.send(t, librelay.Frame{Type: "x.custom", Seq: 5, Payload: []byte(`{}`)})
	s.msg(t, 6, 6)
	s.c.Wait(t, "seq 6", func(c *clienttest.Collector) bool { return len(c.Msgs) == 6 })

	want := []string{"1@1", "2@2", "0@0", "3@3", "4@4", "6@6"}
	if got := s.delivered(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	waitCursor(t, s.a, 6)
	for _, m := range s.c.Snapshot() {
		if m.Replay {
			t.Fatalf("seq %d marked replay on its first delivery", m.Seq)
		}
	}
}

// A resume answered with evicted content is reported with both cursors, and
// delivery carries on from where the producer can.
func TestEvictionReported(t *testing.T) {
	s := newScripted(t)
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	s.msg(t, 1, 1)
	s.msg(t, 5, 5) // a gap the producer can no longer fill
	after, id := s.expectResume(t)
	s.resumed(t, id, 10, true)
	s.msg(t, 10, 10)
	s.c.Wait(t, "seq 10", func(c *clienttest.Collector) bool { return len(c.Msgs) == 2 })

	s.c.Lock()
	ev := s.c.Evicted
	s.c.Unlock()
	if len(ev) != 1 || ev[0] != (client.Eviction{AfterSeq: after, FromSeq: 10, Reason: "evicted"}) || after != 1 {
		t.Fatalf("evictions %+v, want one from after 1 to 10", ev)
	}
	waitCursor(t, s.a, 10)
}

// The cursor moves past a message only once the handler accepted it: a
// refused message is fetched again and delivered once, in its place.
func TestHandlerRefusalRedelivers(t *testing.T) {
	s := newScripted(t)
	s.c.FailOnce[2] = true
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	for i := 1; i <= 3; i++ {
		s.msg(t, uint64(i), i)
	}
	after, id := s.expectResume(t)
	if after != 1 {
		t.Fatalf("after a refusal of seq 2 the client resumed after %d, want 1", after)
	}
	s.resumed(t, id, 2, false)
	s.msg(t, 2, 2)
	s.msg(t, 3, 3)
	s.c.Wait(t, "seq 3", func(c *clienttest.Collector) bool { return len(c.Msgs) == 3 })
	if got := s.delivered(); fmt.Sprint(got) != "[1@1 2@2 3@3]" {
		t.Fatalf("delivered %v", got)
	}
}

// Unknown control requests get exactly one unsupported_type answer; the
// relay's heartbeats get an ack.
func TestAnswersControlRequests(t *testing.T) {
	s := newScripted(t)
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	s.send(t, librelay.Frame{Type: "x.query", ID: "q1"})
	f := s.next(t)
	var e librelay.Error
	if f.Type != librelay.TypeError || f.ReplyTo != "q1" || e.UnmarshalJSON(f.Payload) != nil || e.Code != librelay.CodeUnsupportedType {
		t.Fatalf("unknown cargo request answered with %s re %q %s", f.Type, f.ReplyTo, f.Payload)
	}
}

// A sequenced request of a type the client does not handle gets its one
// unsupported_type reply like an unsequenced one (spec 000: the id, not the
// type, obliges exactly one answer). It is answered as the cursor moves
// over it, in its place in the stream, and only then: its replay after a
// Resume to an earlier cursor is not answered again.
func TestSequencedRequestAnsweredOnce(t *testing.T) {
	s := newScripted(t)
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	stream := func() {
		s.msg(t, 1, 1)
		s.send(t, librelay.Frame{Type: "x.query", ID: "q2", Seq: 2})
		s.msg(t, 3, 3)
	}
	stream()
	waitCursor(t, s.a, 3)
	marker := func() {
		t.Helper()
		if err := s.a.SendACP(context.Background(), []byte(`{"jsonrpc":"2.0","method":"marker"}`)); err != nil {
			t.Fatal(err)
		}
	}
	marker()
	f := s.next(t)
	var e librelay.Error
	if f.Type != librelay.TypeError || f.ReplyTo != "q2" || e.UnmarshalJSON(f.Payload) != nil || e.Code != librelay.CodeUnsupportedType {
		t.Fatalf("sequenced request q2 answered with %s re %q %s", f.Type, f.ReplyTo, f.Payload)
	}
	if f := s.next(t); f.Type != librelay.TypeACPMessage {
		t.Fatalf("after the reply the client sent %s %s", f.Type, f.Payload)
	}

	if err := s.a.Resume(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	_, id = s.expectResume(t)
	s.resumed(t, id, 1, false)
	stream()
	s.c.Wait(t, "the replay", func(c *clienttest.Collector) bool { return len(c.Msgs) == 4 })
	waitCursor(t, s.a, 3)
	marker()
	if f := s.next(t); f.Type != librelay.TypeACPMessage {
		t.Fatalf("the replayed request was answered again: %s re %q %s", f.Type, f.ReplyTo, f.Payload)
	}
}
