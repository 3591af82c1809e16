package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// The runtime's machine loses power behind its connection to node 0 (the
// hop freezes: nothing passes, nothing is closed) and a fresh runtime
// comes back, on node 0 (it takes the instance over once the frozen one
// misses the probe) or on node 1 (it takes it over at once). The fresh
// runtime knows none of the attachments and numbers its streams afresh, so
// the browsers on every node must be told, as when a runtime leaves
// (runtime_gone): each redials, resumes, learns its stream is gone
// (eviction), and its next request is answered. Left attached, a client
// drops the new runtime's frames as already seen and waits for ever.
func TestRuntimeTakeoverAcrossNodes(t *testing.T) {
	for _, newNode := range []int{0, 1} {
		t.Run(fmt.Sprint("new-runtime-on-node-", newNode), func(t *testing.T) {
			c := newCluster(t, func(_ int, c *relay.Config) { c.Limits.TakeoverWait = 2 * time.Second })
			rtHop := relaytest.NewProxy(t, c.Node(0).Addr())
			runRuntime(t, c, rtHop, 0)
			waitRoutable(t, c, 1, 2)
			var bs []*browser
			for i := range 3 {
				b := attach(t, c, relaytest.NewProxy(t, c.Node(i).Addr()))
				b.prompt(3, b.startChat(), 20)
				b.waitAnswered(3)
				bs = append(bs, b)
			}
			rtHop.Freeze()
			runRuntime(t, c, relaytest.NewProxy(t, c.Node(newNode).Addr()), 0)
			for i, b := range bs {
				b.col.Wait(t, fmt.Sprintf("the browser on node %d to learn its stream is gone", i),
					func(c *clienttest.Collector) bool { return len(c.Evicted) > 0 })
				b.call(4, "initialize", `{"protocolVersion":1}`)
			}
		})
	}
}

// The runtime is away for longer than the grace while the page keeps
// knocking, on another node than the one where its socket dropped (a load
// balancer sends each redial anywhere): each knock, refused
// unknown_instance, restarts the attachment's grace on every node, so the
// node holding it never sends the runtime acp.detach. When the runtime is
// back the page reclaims its id, resumes, and its ACP session is still
// there.
func TestKnockOnAnotherNodeKeepsGrace(t *testing.T) {
	const grace = 3 * time.Second
	c := newCluster(t, func(_ int, c *relay.Config) { c.Limits.Grace = grace })
	rtHop := relaytest.NewProxy(t, c.Node(0).Addr())
	runRuntime(t, c, rtHop, 0)
	waitRoutable(t, c, 1, 2)
	b := attach(t, c, relaytest.NewProxy(t, c.Node(2).Addr()))
	sid := b.startChat()
	b.prompt(3, sid, 5)
	b.waitAnswered(3)
	id := b.a.Session()

	b.hop.Repoint(c.Node(1).Addr()) // every redial now knocks on node 1
	rtHop.Down()
	relaytest.WaitFor(t, "the browser to knock on node 1", func() bool { return b.hop.Accepted() > 2 })
	time.Sleep(3 * grace) // the outage: the browser knocks all along
	rtHop.Up()

	resp := b.call(4, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"ping"}]}`, sid))
	if resp.Error != nil {
		t.Fatalf("the prompt in the kept session got an error: %s", resp.Error)
	}
	if got := b.a.Session(); got != id {
		t.Fatalf("attachment id %q after the outage, want %q reclaimed", got, id)
	}
	b.col.Lock()
	defer b.col.Unlock()
	if len(b.col.Evicted) > 0 {
		t.Fatalf("evicted after the outage: %+v", b.col.Evicted)
	}
}

// Two live runtimes for one instance on two nodes, as two contenox
// connectors behind a load balancer are: the one holding the instance on
// node 0 keeps it, and a newcomer on node 1 is refused instance_taken, as
// on a single relay, after node 1 asked node 0 whether its runtime answers.
// Before, the newcomer took the instance at once, the two connectors took
// it from each other for ever, and every swap ended all of the instance's
// browsers runtime_gone. The browsers here (one per node) keep their
// sockets and chats. Once the incumbent freezes (its machine lost power
// behind its connection), it no longer answers node 0's probe, and a
// runtime on node 1 takes the instance over; the browsers are then told, as
// when a runtime leaves, and resume with it.
func TestTwoRuntimesSettleAcrossNodes(t *testing.T) {
	c := newCluster(t, func(_ int, c *relay.Config) { c.Limits.TakeoverWait = 2 * time.Second })
	cfg := c.Config()
	rtHop := relaytest.NewProxy(t, c.Node(0).Addr())
	runRuntime(t, c, rtHop, 0)
	waitRoutable(t, c, 1, 2)
	var bs []*browser
	var sids []string
	for i := range 3 {
		b := attach(t, c, relaytest.NewProxy(t, c.Node(i).Addr()))
		sid := b.startChat()
		b.prompt(3, sid, 5)
		b.waitAnswered(3)
		bs, sids = append(bs, b), append(sids, sid)
	}

	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	second, _, err := relaytest.DialRuntime(ctx, c.Node(1).HTTPURL(), cfg.RuntimeToken)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Conn.Close()
	second.Timeout = guard
	f, _, err := second.Hello(cfg.Instance, librelay.ProtocolVersion)
	if err != nil {
		t.Fatalf("the second runtime's hello on node 1: %v", err)
	}
	var e librelay.Error
	if f.Type == librelay.TypeError {
		json.Unmarshal(f.Payload, &e)
	}
	if e.Code != relayleg.CodeInstanceTaken {
		t.Fatalf("the second runtime's hello on node 1 got %s %s, want relay.error %s", f.Type, f.Payload, relayleg.CodeInstanceTaken)
	}
	if f, err := second.Read(); err == nil {
		t.Fatalf("the refused runtime's connection stayed open (read %s)", f.Type)
	}

	for i, b := range bs {
		resp := b.call(4, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"ping"}]}`, sids[i]))
		if resp.Error != nil {
			t.Fatalf("the browser on node %d: its prompt after the refusal got an error: %s", i, resp.Error)
		}
		if n := b.hop.Accepted(); n != 1 {
			t.Fatalf("the browser on node %d dialled %d times: it was told the runtime had gone", i, n)
		}
		b.col.Lock()
		evicted := len(b.col.Evicted)
		b.col.Unlock()
		if evicted > 0 {
			t.Fatalf("the browser on node %d was evicted", i)
		}
	}

	rtHop.Freeze()
	runRuntime(t, c, relaytest.NewProxy(t, c.Node(1).Addr()), 0)
	for i, b := range bs {
		b.col.Wait(t, fmt.Sprintf("the browser on node %d to learn its stream is gone", i),
			func(c *clienttest.Collector) bool { return len(c.Evicted) > 0 })
		b.call(5, "initialize", `{"protocolVersion":1}`)
	}
}
