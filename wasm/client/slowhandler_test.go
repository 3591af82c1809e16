//go:build !js

package client_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// holdingApp is an application whose handler can be held: while held, a
// delivery waits until it is released or its ctx ends, as a page waiting
// on a person (or a Promise) does.
type holdingApp struct {
	c       *clienttest.Collector
	held    atomic.Pointer[chan struct{}] // closed to release
	holding chan struct{}                 // receives when a held delivery begins
}

// newHoldingApp is a holdingApp delivering to c, not holding yet.
func newHoldingApp(c *clienttest.Collector) *holdingApp {
	h := &holdingApp{c: c, holding: make(chan struct{}, 1)}
	h.hold()()
	return h
}

// hold makes the next deliveries wait; the function it returns releases them.
func (h *holdingApp) hold() (release func()) {
	ch := make(chan struct{})
	h.held.Store(&ch)
	return func() { close(ch) }
}

// holdAnswer has the next deliveries wait, prompts "ping" (id 3) and returns
// once its answer's delivery is held; the function it returns releases it.
func (h *holdingApp) holdAnswer(t *testing.T, a *client.Attachment, session string) (release func()) {
	t.Helper()
	release = h.hold()
	send(t, a, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":`+promptParams(session, "ping")+`}`)
	<-h.holding
	return release
}

func (h *holdingApp) onMessages(ctx context.Context, batch []client.Message) (int, error) {
	held := *h.held.Load()
	select {
	case <-held:
	default:
		h.holding <- struct{}{}
		select {
		case <-held:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	for i, m := range batch {
		if err := h.c.OnMessage(m); err != nil {
			return i, err
		}
	}
	return len(batch), nil
}

// A handler that does not return costs the cursor and nothing else: while
// it holds a delivery the client answers the relay's heartbeats (here the
// relay probes a silent browser every 100 ms), sends go out and are
// answered by the runtime, and the cursor waits. Released, it gets what
// arrived meanwhile in order. Held again, Close ends the attachment at once
// (the handler's ctx ends) and the stored cursor is the one before the hold.
func TestSlowHandlerCostsNothing(t *testing.T) {
	s := newStack(t, func(cfg *relay.Config) {
		cfg.Limits.HeartbeatInterval, cfg.Limits.HeartbeatTimeout = 100*time.Millisecond, 5*time.Second
	}, nil)
	c := clienttest.NewCollector()
	h := newHoldingApp(c)
	store := client.NewMemoryStore()
	rec := &recorder{Transport: client.DefaultTransport}
	o := s.options(store, c)
	o.Transport = rec
	o.OnMessage, o.OnMessages = nil, h.onMessages
	o.Heartbeat = client.Heartbeat{Interval: time.Hour} // silent: the relay probes
	a := s.attach(o)
	session := startChat(t, c, a)
	before := settle(t, c, a)

	release := h.holdAnswer(t, a, session)
	acks := len(rec.ofType(librelay.TypeAck))
	relaytest.WaitFor(t, "heartbeats answered while the handler holds", func() bool { return len(rec.ofType(librelay.TypeAck)) >= acks+5 })
	send(t, a, `{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":`+promptParams(session, "count 3")+`}`)
	if a.Cursor() != before {
		t.Fatalf("cursor %d moved past %d while the handler held", a.Cursor(), before)
	}
	if s.front.Accepted() != 1 || a.State() != client.Open {
		t.Fatalf("state %v after %d dials while the handler held", a.State(), s.front.Accepted())
	}
	release()
	c.Wait(t, "both answers", func(c *clienttest.Collector) bool { _, ok := c.Response(4); _, ok3 := c.Response(3); return ok && ok3 })
	checkSeqs(t, c.Snapshot(), 1, settle(t, c, a))

	// Held again, Close and Detach do not wait for it.
	held := settle(t, c, a)
	h.hold()
	send(t, a, `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":`+promptParams(session, "ping")+`}`)
	<-h.holding
	a.Close()
	if saved, _ := store.Load(context.Background(), a.Key()); saved.Cursor != held {
		t.Fatalf("stored cursor %d after a Close during a held delivery, want %d", saved.Cursor, held)
	}
	b := s.attach(o)
	<-h.holding
	detached := make(chan error, 1)
	go func() { detached <- b.Detach(context.Background()) }()
	select {
	case err := <-detached:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("Detach waited for the held handler")
	}
}

// A message sent while the handler holds a delivery is in the stored
// transcript by the time SendACP returns, with the cursor from before the
// held batch: a page that goes away then (in worker mode, before the
// engine's later commit would have reached its store) keeps what it sent.
// Released, the held messages follow it, each once.
func TestSendDuringHeldDeliveryIsStored(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	h := newHoldingApp(c)
	store := client.NewMemoryStore()
	o := s.options(store, c)
	o.OnMessage, o.OnMessages = nil, h.onMessages
	o.History = 1000
	a := s.attach(o)
	session := startChat(t, c, a)
	before := settle(t, c, a)

	release := h.holdAnswer(t, a, session)
	const held = `{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":` // sent during the hold
	send(t, a, held+promptParams(session, "count 3")+`}`)
	outs := func() (n int, last bool) {
		h, err := store.History(context.Background(), a.Key())
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range h {
			if e.Out && strings.HasPrefix(string(e.Payload), held) {
				n++
				last = i == len(h)-1
			}
		}
		return n, last
	}
	if n, last := outs(); n != 1 || !last {
		t.Fatalf("the message sent during the held delivery is in the stored transcript %d times (last: %v), want once, last", n, last)
	}
	if saved, _ := store.Load(context.Background(), a.Key()); saved.Cursor != before {
		t.Fatalf("stored cursor %d during the held delivery, want %d", saved.Cursor, before)
	}
	release()
	c.Wait(t, "both answers", func(c *clienttest.Collector) bool { _, ok := c.Response(4); _, ok3 := c.Response(3); return ok && ok3 })
	settle(t, c, a)
	if n, _ := outs(); n != 1 {
		t.Fatalf("after the release the message sent during the hold is stored %d times, want once", n)
	}
}
