//go:build !js

package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// A page back from being hidden probes its socket, which may be dead while
// it looks open (a phone's, iOS keeping readyState OPEN). A message sent
// while the probe's heartbeat waits for its ack is held, not written to that
// socket: when the check fails and the client redials, it goes out on the
// new connection instead of counting as sent and vanishing with the old one
// (sends are never replayed).
func TestConnSendHeldWhileProbing(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	// Only the probe sends a heartbeat in the test's time; its ack is
	// waited for briefly, since the proxy will never pass it.
	o.Heartbeat = client.Heartbeat{Interval: time.Hour, Timeout: 500 * time.Millisecond}
	a := s.attach(o)
	startChat(t, c, a)

	s.front.Freeze() // the socket goes silent, telling neither end
	a.Probe()
	sent := make(chan error, 1)
	go func() {
		sent <- a.SendACP(context.Background(), []byte(`{"jsonrpc":"2.0","id":31,"method":"initialize","params":{"protocolVersion":1}}`))
	}()
	c.Wait(t, "the probe's heartbeat timed out", func(c *clienttest.Collector) bool {
		last := lastState(c)
		return last.State == client.Reconnecting && errors.Is(last.Err, client.ErrHeartbeatTimeout)
	})
	s.front.Cut() // what the frozen socket held is dropped with it
	s.front.Thaw()
	if err := <-sent; err != nil {
		t.Logf("SendACP failed (%v): the message was not taken for sent", err)
		return
	}
	c.Wait(t, "the answer to the message sent during the probe", func(c *clienttest.Collector) bool {
		_, ok := c.Response(31)
		return ok
	})
}
