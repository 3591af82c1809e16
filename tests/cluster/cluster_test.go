package cluster_test

import (
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
)

// streamRate paces the dev agent so a stream lasts long enough (a second or
// two) for a failure to land in the middle of it.
const streamRate = 2000

// A runtime on node 0 and browsers on nodes 1 and 2: both chat with it and
// receive a whole stream, in order, exactly once.
func TestChatAcrossNodes(t *testing.T) {
	c := newCluster(t, nil)
	runRuntime(t, c, relaytest.NewProxy(t, c.Node(0).Addr()), 0)
	waitRoutable(t, c, 1, 2)
	b1 := attach(t, c, relaytest.NewProxy(t, c.Node(1).Addr()))
	b2 := attach(t, c, relaytest.NewProxy(t, c.Node(2).Addr()))
	s1, s2 := b1.startChat(), b2.startChat()
	b1.prompt(3, s1, 2000)
	b2.prompt(3, s2, 2000)
	b1.waitAnswered(3)
	b2.waitAnswered(3)
	b1.checkStream(2000)
	b2.checkStream(2000)
}

// Node 1 is killed mid-stream (its sockets and its NATS connection cut, no
// relay.error, no release): its browser redials, the hop sends it to node
// 2, it reclaims its attachment id there and resumes from its cursor, and
// is handed nothing twice and nothing less. The browser on node 2 never
// notices.
func TestBrowserNodeKilled(t *testing.T) {
	c := newCluster(t, nil)
	runRuntime(t, c, relaytest.NewProxy(t, c.Node(0).Addr()), streamRate)
	waitRoutable(t, c, 1, 2)
	b1 := attach(t, c, relaytest.NewProxy(t, c.Node(1).Addr()))
	b2 := attach(t, c, relaytest.NewProxy(t, c.Node(2).Addr()))
	s1, s2 := b1.startChat(), b2.startChat()
	id := b1.a.Session()
	b1.prompt(3, s1, 3000)
	b2.prompt(3, s2, 3000)
	relaytest.WaitFor(t, "the stream to be under way", func() bool { return b1.chunks() > 300 })

	b1.hop.Repoint(c.Node(2).Addr())
	c.Kill(1)

	b1.waitAnswered(3)
	b2.waitAnswered(3)
	b1.checkStream(3000)
	b2.checkStream(3000)
	if got := b1.a.Session(); got != id {
		t.Fatalf("attachment id %q after the move, want %q reclaimed", got, id)
	}
	if b1.hop.Accepted() < 2 {
		t.Fatal("the browser never redialled")
	}
}

// The runtime's node is killed mid-stream: the runtime redials and lands on
// node 1; the browsers on nodes 1 and 2 (and one that was on node 0, which
// redials too) all get the rest of their streams, resumed from the
// runtime's retention, each frame once. What the runtime had in flight
// through node 0 is lost; every browser is told runtime_gone once its node
// takes node 0 for gone (or at once, if a frame of its for the runtime
// reached nobody), and resumes, even when its stream ended meanwhile.
func TestRuntimeNodeKilled(t *testing.T) {
	c := newCluster(t, nil)
	rtHop := relaytest.NewProxy(t, c.Node(0).Addr())
	runRuntime(t, c, rtHop, streamRate)
	waitRoutable(t, c, 1, 2)
	b0 := attach(t, c, relaytest.NewProxy(t, c.Node(0).Addr()))
	b1 := attach(t, c, relaytest.NewProxy(t, c.Node(1).Addr()))
	b2 := attach(t, c, relaytest.NewProxy(t, c.Node(2).Addr()))
	bs := []*browser{b0, b1, b2}
	for _, b := range bs {
		b.prompt(3, b.startChat(), 3000)
	}
	relaytest.WaitFor(t, "the streams to be under way", func() bool { return b1.chunks() > 300 && b2.chunks() > 300 })

	rtHop.Repoint(c.Node(1).Addr())
	b0.hop.Repoint(c.Node(2).Addr())
	c.Kill(0)

	for _, b := range bs {
		b.waitAnswered(3)
		b.checkStream(3000)
	}
}

// The NATS server goes away mid-stream and comes back on its address. While
// it is away no frame crosses between nodes: the nodes close their sockets
// of runtimes held elsewhere (runtime_gone), their clients redial and are
// told unknown_instance until the bus is back, and the frames the runtime
// produced meanwhile stay in its retention. Once the nodes have reconnected
// and told each other what they hold, the clients attach, resume from their
// cursors, and get every frame once. The browser on the runtime's own node
// is not disturbed at all.
func TestNATSRestart(t *testing.T) {
	c := newCluster(t, nil)
	runRuntime(t, c, relaytest.NewProxy(t, c.Node(0).Addr()), streamRate)
	waitRoutable(t, c, 1, 2)
	b0 := attach(t, c, relaytest.NewProxy(t, c.Node(0).Addr()))
	b1 := attach(t, c, relaytest.NewProxy(t, c.Node(1).Addr()))
	b2 := attach(t, c, relaytest.NewProxy(t, c.Node(2).Addr()))
	bs := []*browser{b0, b1, b2}
	for _, b := range bs {
		b.prompt(3, b.startChat(), 3000)
	}
	relaytest.WaitFor(t, "the streams to be under way", func() bool { return b1.chunks() > 300 })
	before := b1.hop.Accepted()

	c.StopNATS()
	time.Sleep(300 * time.Millisecond) // an outage, not a blip: the stream goes on meanwhile
	if err := c.StartNATS(); err != nil {
		t.Fatal(err)
	}

	for _, b := range bs {
		b.waitAnswered(3)
		b.checkStream(3000)
	}
	if b1.hop.Accepted() == before {
		t.Fatal("the browser on another node than the runtime was not made to redial")
	}
	if b0.hop.Accepted() != 1 {
		t.Fatal("the browser on the runtime's node redialled")
	}
}
