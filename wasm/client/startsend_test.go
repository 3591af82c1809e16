//go:build !js

package client_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// StartSendACP, the non-blocking send the browser bridge uses, reports what
// SendACP would return: a written message (which the runtime answers), a
// message withdrawn before it was taken (never written: the runtime does
// not answer it), and one sent after Detach.
func TestStartSendACP(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	a := s.attach(s.options(client.NewMemoryStore(), c))
	startChat(t, c, a)

	outcome := func() (chan error, func(error)) {
		ch := make(chan error, 2) // a second outcome would be a bug, and is checked
		return ch, func(err error) { ch <- err }
	}
	sent, done := outcome()
	a.StartSendACP([]byte(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}`), done)
	if err := <-sent; err != nil {
		t.Fatalf("StartSendACP while open: %v", err)
	}
	c.Wait(t, "the answer", func(c *clienttest.Collector) bool { _, ok := c.Response(3); return ok })

	// While the connection is down the message waits in the queue, so
	// withdrawing it ends it with the given error, and it never leaves.
	s.front.Down()
	c.Wait(t, "reconnecting", func(c *clienttest.Collector) bool { return c.States[len(c.States)-1].State == client.Reconnecting })
	queued, done := outcome()
	withdraw := a.StartSendACP([]byte(`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":1}}`), done)
	relaytest.WaitFor(t, "the queued send", func() bool { return a.Queued() == 1 })
	withdraw(context.Canceled)
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("withdrawn send: %v", err)
	}
	s.front.Up()
	c.Wait(t, "open again", func(c *clienttest.Collector) bool { return c.States[len(c.States)-1].State == client.Open })
	call(t, c, a, 5, "initialize", `{"protocolVersion":1}`) // answered after anything sent before it
	if _, ok := c.Response(4); ok {
		t.Fatal("the withdrawn message was sent")
	}
	withdraw(context.Canceled) // too late: no second outcome
	if len(queued) != 0 {
		t.Fatalf("a second outcome for the withdrawn send: %v", <-queued)
	}

	if err := a.Detach(context.Background()); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	late, done := outcome()
	a.StartSendACP([]byte(`{"jsonrpc":"2.0","method":"n"}`), done)
	if err := <-late; !errors.Is(err, client.ErrDetached) {
		t.Fatalf("StartSendACP after Detach: %v", err)
	}
	bad, done := outcome()
	a.StartSendACP([]byte(` `), done)
	if err := <-bad; !errors.Is(err, client.ErrBadPayload) {
		t.Fatalf("StartSendACP of nothing: %v", err)
	}
	if len(sent)+len(late)+len(bad) != 0 {
		t.Fatal("a second outcome for one send")
	}
}

// OnState and OnEvicted run on the attachment's goroutine, so a callback
// that sends does it with StartSendACP, which does not wait for that
// goroutine (Options says so): here an eviction's callback asks the
// runtime for the state the application lost, and the request goes out.
func TestStartSendACPFromCallback(t *testing.T) {
	var att atomic.Pointer[client.Attachment]
	sent := make(chan error, 1)
	s := newScriptedWith(t, func(o *client.Options) {
		collect := o.OnEvicted
		o.OnEvicted = func(e client.Eviction) {
			collect(e)
			att.Load().StartSendACP([]byte(`{"jsonrpc":"2.0","method":"refetch"}`), func(err error) { sent <- err })
		}
	})
	att.Store(s.a)
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	s.msg(t, 1, 1)
	s.msg(t, 5, 5) // a gap the runtime can no longer fill
	_, id = s.expectResume(t)
	s.resumed(t, id, 5, true)
	if f := s.next(t); f.Type != librelay.TypeACPMessage || !strings.Contains(string(f.Payload), "refetch") {
		t.Fatalf("the callback's send: got %s %s", f.Type, f.Payload)
	}
	if err := <-sent; err != nil {
		t.Fatalf("StartSendACP from OnEvicted: %v", err)
	}
	s.msg(t, 5, 5)
	s.c.Wait(t, "seq 5", func(c *clienttest.Collector) bool { return len(c.Msgs) == 2 })
}
