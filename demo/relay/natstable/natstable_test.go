package natstable_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/natstable"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// These tests run three relay nodes on a NATS server embedded in the test
// process, and speak to them with relaytest's raw peers, which do exactly
// what the test says.

const guard = 30 * time.Second

func cluster(t *testing.T, edit func(*relay.Config)) *stack.Cluster {
	t.Helper()
	return clusterLease(t, edit, 1500*time.Millisecond)
}

// clusterLease is a cluster whose nodes take a silent peer for gone after
// lease.
func clusterLease(t *testing.T, edit func(*relay.Config), lease time.Duration) *stack.Cluster {
	t.Helper()
	return startCluster(t, stack.ClusterConfig{
		Nodes: 3,
		EditTable: func(_ int, c *natstable.Config) {
			c.Heartbeat, c.Lease = 100*time.Millisecond, lease
		},
		EditRelay: func(_ int, c *relay.Config) {
			if edit != nil {
				edit(c)
			}
		},
	})
}

// startCluster starts the cluster cfg says (its nodes, their edits), with
// the tests' instance and credentials, for the test's length.
func startCluster(t *testing.T, cfg stack.ClusterConfig) *stack.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cfg.RelayOnly, cfg.Instance, cfg.ClientToken, cfg.RuntimeToken = true, "test", "client-token", "runtime-token"
	cfg.Logger = slog.New(slog.DiscardHandler)
	c, err := stack.StartCluster(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// env points relaytest's peers at node i.
func env(c *stack.Cluster, i int) *relaytest.Env {
	n := c.Node(i)
	cfg := c.Config()
	return &relaytest.Env{
		HTTPURL: n.HTTPURL(), AttachURL: n.AttachURL(), Instance: cfg.Instance,
		ClientToken: cfg.ClientToken, RuntimeToken: cfg.RuntimeToken, Key: c.PublicKey(),
		Origin: "http://127.0.0.1", Relay: n.Relay(),
	}
}

func waitRoutable(t *testing.T, c *stack.Cluster, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		relaytest.WaitFor(t, "a node to route to the runtime", func() bool { return c.Node(i).Table().Runtime(c.Config().Instance) != nil })
	}
}

func msg(b *relaytest.Browser, payload string) librelay.Frame {
	return librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Payload: []byte(payload)}
}

// readCargo reads the runtime's next frame that is not heartbeat traffic.
func readCargo(t *testing.T, rt *relaytest.Runtime) librelay.Frame {
	t.Helper()
	f, err := rt.ReadCargo()
	if err != nil {
		t.Fatalf("runtime read: %v", err)
	}
	return f
}

func readBrowser(t *testing.T, b *relaytest.Browser) librelay.Frame {
	t.Helper()
	for {
		f, err := b.Read()
		if err != nil {
			t.Fatalf("browser read: %v (close %d)", err, relaytest.CloseCode(err))
		}
		if f.Type != librelay.TypeHeartbeat {
			return f
		}
		b.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
	}
}

// routed is a runtime on node 0 and a browser attached on node 1 whose
// first frame reached the runtime. That means NATS has node 1's
// subscription of the attachment's subject (node 1 sent it first, on the
// same connection), so a frame for the browser now reaches it.
func routed(t *testing.T, c *stack.Cluster) (*relaytest.Runtime, *relaytest.Browser) {
	t.Helper()
	rt := env(c, 0).Connect(t)
	waitRoutable(t, c, 1)
	b := env(c, 1).Attach(t, "")
	if err := b.Send(msg(b, `{}`)); err != nil {
		t.Fatal(err)
	}
	readCargo(t, rt)
	return rt, b
}

// Frames cross nodes both ways, byte for byte, and in order per
// attachment.
func TestRoutesAcrossNodes(t *testing.T) {
	c := cluster(t, nil)
	rt := env(c, 0).Connect(t)
	waitRoutable(t, c, 1, 2)
	b1, b2 := env(c, 1).Attach(t, ""), env(c, 2).Attach(t, "")
	for i, b := range []*relaytest.Browser{b1, b2} {
		if err := b.Send(msg(b, `{"n": 1, "s":"\u00e9 x"}`)); err != nil {
			t.Fatal(err)
		}
		f := readCargo(t, rt)
		if f.Session != b.Session || string(f.Payload) != `{"n":1,"s":"\u00e9 x"}` {
			t.Fatalf("browser %d: runtime got %+v %s", i, f, f.Payload)
		}
	}
	const n = 2000
	for i := range n {
		for _, b := range []*relaytest.Browser{b1, b2} {
			f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: uint64(i + 1), Payload: []byte(`{}`)}
			if err := rt.Send(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, b := range []*relaytest.Browser{b1, b2} {
		for i := range n {
			if f := readBrowser(t, b); f.Seq != uint64(i+1) || f.Session != b.Session {
				t.Fatalf("frame %d: got seq %d session %q (%s %s)", i+1, f.Seq, f.Session, f.Type, f.Payload)
			}
		}
	}
}

// The runtime leaving its node ends the attachments on every node with
// runtime_gone (4502), as on one node, and a hello on any node is then
// unknown_instance.
func TestRuntimeGoneOnEveryNode(t *testing.T) {
	c := cluster(t, nil)
	rt := env(c, 0).Connect(t)
	waitRoutable(t, c, 1, 2)
	b1, b2 := env(c, 1).Attach(t, ""), env(c, 2).Attach(t, "")
	rt.Conn.Close()
	for _, b := range []*relaytest.Browser{b1, b2} {
		frames, code := b.ReadUntilClosed()
		if code != relayleg.CloseRuntimeGone || len(frames) == 0 || frames[len(frames)-1].Type != librelay.TypeError {
			t.Fatalf("closed %d after %+v; want relay.error then 4502", code, frames)
		}
	}
	relaytest.WaitFor(t, "the nodes to forget the runtime", func() bool { return c.Node(1).Table().Runtime("test") == nil })
	b, _, err := relaytest.DialBrowser(context.Background(), c.Node(1).AttachURL(), "client-token", relaytest.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, _, _ := b.Hello("test", "", librelay.ProtocolVersion)
	if f.Type != librelay.TypeError || errCode(f) != librelay.CodeUnknownInstance {
		t.Fatalf("hello with no runtime anywhere: %+v", f)
	}
	// Read to the close, which answers the relay's: a socket left unread
	// holds the node's shutdown for the close handshake's 5 s.
	if _, code := b.ReadUntilClosed(); code != relayleg.CloseUnknownInstance {
		t.Fatalf("after unknown_instance the socket closed %d, want 4404", code)
	}
}

// A second runtime connection for the instance on another node, while the
// first does not answer (nothing reads it while the second says hello, so
// the probe its node makes for the second's goes unanswered), takes the
// instance over, as on one node: the first, reading again (a laptop woken
// from sleep), is told heartbeat_timeout, as one relay tells an incumbent
// that failed its probe, and not superseded, which a dev runtime takes as
// final; a browser attached before is told runtime_gone (the newcomer knows
// none of its streams), and, attached again with its id, reaches the new
// runtime. (A first that answers keeps the instance: tests/cluster
// TestTwoRuntimesSettleAcrossNodes.)
func TestSilentRuntimeTakenOverAcrossNodes(t *testing.T) {
	c := cluster(t, func(c *relay.Config) { c.Limits.TakeoverWait = 300 * time.Millisecond })
	rt1 := env(c, 0).Connect(t)
	waitRoutable(t, c, 1, 2)
	b := env(c, 2).Attach(t, "")
	rt2 := env(c, 1).Connect(t)
	for {
		f := readCargo(t, rt1)
		if f.Type == librelay.TypeError {
			if errCode(f) != relayleg.CodeHeartbeatTimeout {
				t.Fatalf("first runtime got %s, want heartbeat_timeout", f.Payload)
			}
			break
		}
	}
	b.AnswerHeartbeats = true
	if _, code := b.ReadUntilClosed(); code != relayleg.CloseRuntimeGone {
		t.Fatalf("the browser attached before the takeover closed %d, want 4502 (runtime_gone)", code)
	}
	// Node 2 told it of the new holder, so it routes there already.
	again := env(c, 2).Attach(t, b.Session)
	again.Send(msg(again, `{"after":"takeover"}`))
	if f := readCargo(t, rt2); f.Session != b.Session || string(f.Payload) != `{"after":"takeover"}` {
		t.Fatalf("new runtime got %+v", f)
	}
}

// A second runtime connection for the instance on another node, while the
// first answers, is refused instance_taken, as on one node: the node holding
// the first probes it for the newcomer's node. The first keeps the
// instance, and a browser attached before keeps its socket and reaches it.
func TestLiveRuntimeKeepsInstanceAcrossNodes(t *testing.T) {
	c := cluster(t, nil)
	rt1 := env(c, 0).Connect(t)
	cargo := answering(rt1)
	waitRoutable(t, c, 1, 2)
	b := env(c, 2).Attach(t, "")

	rt2 := dialRuntime(t, c, 1)
	if f, _, err := rt2.Hello("test", librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeError || errCode(f) != relayleg.CodeInstanceTaken {
		t.Fatalf("the second runtime's hello got %s %s (%v), want relay.error instance_taken", f.Type, f.Payload, err)
	}
	b.Send(msg(b, `{"after":"refusal"}`))
	if f := next(t, cargo); f.Type != librelay.TypeACPMessage || f.Session != b.Session || string(f.Payload) != `{"after":"refusal"}` {
		t.Fatalf("the first runtime got %s %s, want the browser's frame", f.Type, f.Payload)
	}
}

// A live runtime whose node does not answer probes (a node of an earlier
// version during a rolling upgrade) is taken over by a newcomer on another
// node, as before probes: no reply is a runtime that did not answer, and
// NATS says at once that nobody listens, so the newcomer does not wait out
// TakeoverWait (set here past its hello's read guard).
func TestNodeThatAnswersNoProbeIsTakenOver(t *testing.T) {
	c := cluster(t, func(c *relay.Config) { c.Limits.TakeoverWait = 2 * relaytest.IOTimeout })
	rt1 := env(c, 0).Connect(t)
	cargo := answering(rt1)
	waitRoutable(t, c, 1, 2)
	if err := c.Node(0).Table().StopAnsweringProbes(); err != nil {
		t.Fatal(err)
	}
	rt2 := dialRuntime(t, c, 1)
	f, nonce, err := rt2.Hello("test", librelay.ProtocolVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := relaytest.CheckWelcome(f, c.PublicKey(), nonce, "test"); err != nil {
		t.Fatal(err)
	}
	if f := next(t, cargo); f.Type != librelay.TypeError || errCode(f) != relayleg.CodeSuperseded {
		t.Fatalf("the first runtime got %s %s, want relay.error superseded", f.Type, f.Payload)
	}
}

// Two newcomers on two nodes at once, while the incumbent on a third does
// not answer: as on one relay, the first to find it silent takes the
// instance and the other is refused instance_taken (on one relay it would
// probe the first and find it answering). Both used to be welcomed, both
// probes having failed, and one superseded when the holds settled: every
// browser of the instance was told runtime_gone twice, and the loser, a dev
// runtime, stopped for good. The incumbent, reading again, is told
// heartbeat_timeout, and a browser on its node reaches the winner.
func TestTwoNewcomersOnTwoNodesOneWelcomed(t *testing.T) {
	c := cluster(t, func(c *relay.Config) { c.Limits.TakeoverWait = time.Second })
	rt0 := env(c, 0).Connect(t) // not read while the newcomers say hello: the probe goes unanswered
	waitRoutable(t, c, 1, 2)
	var rts [2]*relaytest.Runtime
	var hellos [2]librelay.Frame
	var errs [2]error
	var wg sync.WaitGroup
	for i := range rts {
		rts[i] = dialRuntime(t, c, 1+i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			hellos[i], _, errs[i] = rts[i].Hello("test", librelay.ProtocolVersion)
		}()
	}
	wg.Wait()
	winner := -1
	for i, f := range hellos {
		switch {
		case errs[i] != nil:
			t.Fatalf("newcomer on node %d: %v", 1+i, errs[i])
		case f.Type == librelay.TypeWelcome && winner >= 0:
			t.Fatal("both newcomers were welcomed")
		case f.Type == librelay.TypeWelcome:
			winner = i
		case f.Type != librelay.TypeError || errCode(f) != relayleg.CodeInstanceTaken:
			t.Fatalf("newcomer on node %d got %s %s, want a welcome or instance_taken", 1+i, f.Type, f.Payload)
		}
	}
	if winner < 0 {
		t.Fatal("both newcomers were refused")
	}
	cargo := answering(rts[winner])
	for {
		f := readCargo(t, rt0)
		if f.Type == librelay.TypeError {
			if errCode(f) != relayleg.CodeHeartbeatTimeout {
				t.Fatalf("the incumbent got %s, want heartbeat_timeout", f.Payload)
			}
			break
		}
	}
	b := env(c, 0).Attach(t, "")
	b.Send(msg(b, `{"to":"the winner"}`))
	if f := next(t, cargo); f.Type != librelay.TypeACPMessage || string(f.Payload) != `{"to":"the winner"}` {
		t.Fatalf("the welcomed newcomer got %s %s, want the browser's frame", f.Type, f.Payload)
	}
}

// answering reads rt on its own goroutine, answering the relay's heartbeats
// (a live runtime), and hands on every other frame; the channel closes when
// the connection ends.
func answering(rt *relaytest.Runtime) <-chan librelay.Frame {
	rt.Timeout = time.Hour // the relay's heartbeats and the test's guard bound the reads
	cargo := make(chan librelay.Frame, 16)
	go func() {
		defer close(cargo)
		for {
			f, err := rt.ReadCargo()
			if err != nil {
				return
			}
			cargo <- f
		}
	}()
	return cargo
}

// next is the next frame answering handed on.
func next(t *testing.T, cargo <-chan librelay.Frame) librelay.Frame {
	t.Helper()
	select {
	case f, ok := <-cargo:
		if !ok {
			t.Fatal("the runtime's connection ended")
		}
		return f
	case <-time.After(guard):
		t.Fatal("the runtime got nothing")
	}
	panic("unreachable")
}

// dialRuntime dials node i's runtime leg, to say hello by hand.
func dialRuntime(t *testing.T, c *stack.Cluster, i int) *relaytest.Runtime {
	t.Helper()
	rt, _, err := relaytest.DialRuntime(context.Background(), c.Node(i).HTTPURL(), c.Config().RuntimeToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Conn.Close() })
	return rt
}

// The runtime's node dies and the runtime redials another node before the
// dead node's lease runs out, so the hold moves with no release: the
// frames the runtime had in flight through the dead node may be lost, and
// a stream that ended meanwhile would never show the browsers the gap. The
// browsers on the runtime's new node and on a third get runtime_gone once
// the dead node is taken for gone, as on one relay when its runtime's
// connection ends, so that their clients resume; new traffic reaches the
// new runtime. (A runtime superseded on a node that lives on is the same
// for the browsers: TestSilentRuntimeTakenOverAcrossNodes.)
func TestRuntimeMovesFromDeadNode(t *testing.T) {
	// The raw runtime answers no heartbeat: none is sent, so that nothing
	// but the move can end the sockets.
	c := clusterLease(t, func(c *relay.Config) { c.Limits.HeartbeatInterval = time.Hour }, 2*time.Second)
	env(c, 0).Connect(t)
	waitRoutable(t, c, 1, 2)
	b1, b2 := env(c, 1).Attach(t, ""), env(c, 2).Attach(t, "")
	c.Kill(0)
	rt := env(c, 1).Connect(t)
	for i, b := range []*relaytest.Browser{b1, b2} {
		b.AnswerHeartbeats = true
		if _, code := b.ReadUntilClosed(); code != relayleg.CloseRuntimeGone {
			t.Fatalf("browser on node %d closed %d, want 4502 (runtime_gone)", i+1, code)
		}
	}
	waitRoutable(t, c, 2)
	b := env(c, 2).Attach(t, b2.Session)
	b.Send(msg(b, `{"after":"move"}`))
	if f := readCargo(t, rt); f.Session != b2.Session || string(f.Payload) != `{"after":"move"}` {
		t.Fatalf("new runtime got %+v", f)
	}
}

// The runtime's node dies and no runtime comes back: a browser on another
// node that sends before the dead node's lease runs out (a client that
// reclaimed its id there and asks to resume, say) would have its frame
// published to nobody, and wait in vain for the answer. NATS tells the
// browser's node that nobody took the frame, and the browser gets
// runtime_gone at once, as on one relay when its runtime leaves; a hello
// is then unknown_instance. The lease is longer than the test's guard, so
// only that can end the socket.
func TestFrameToDeadRuntimeNode(t *testing.T) {
	c := clusterLease(t, func(c *relay.Config) { c.Limits.HeartbeatInterval = time.Hour }, time.Hour)
	env(c, 0).Connect(t)
	waitRoutable(t, c, 2)
	b := env(c, 2).Attach(t, "")
	c.Kill(0)
	resume, _ := librelay.Resume{AfterSeq: 0}.MarshalJSON()
	b.Send(librelay.Frame{Type: librelay.TypeResume, ID: "resume-1", Instance: b.Instance, Session: b.Session, Payload: resume})
	if _, code := b.ReadUntilClosed(); code != relayleg.CloseRuntimeGone {
		t.Fatalf("browser closed %d, want 4502 (runtime_gone)", code)
	}
	nb, _, err := relaytest.DialBrowser(context.Background(), c.Node(2).AttachURL(), "client-token", relaytest.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f, _, _ := nb.Hello("test", b.Session, librelay.ProtocolVersion); f.Type != librelay.TypeError || errCode(f) != librelay.CodeUnknownInstance {
		t.Fatalf("hello after the runtime's node died: %+v", f)
	}
	if _, code := nb.ReadUntilClosed(); code != relayleg.CloseUnknownInstance {
		t.Fatalf("after unknown_instance the socket closed %d, want 4404", code)
	}
}

// A browser on node 1 drops without a detach; its grace runs out on node 1
// and the runtime on node 0 gets acp.detach for it.
func TestGraceDetachAcrossNodes(t *testing.T) {
	c := cluster(t, func(c *relay.Config) { c.Limits.Grace = 200 * time.Millisecond })
	rt := env(c, 0).Connect(t)
	waitRoutable(t, c, 1)
	b := env(c, 1).Attach(t, "")
	b.WS.CloseNow()
	f := readCargo(t, rt)
	if f.Type != librelay.TypeACPDetach || f.Session != b.Session {
		t.Fatalf("runtime got %+v, want acp.detach for %s", f, b.Session)
	}
}

// An attachment reclaimed on another node is that node's now: the old node
// supersedes its live socket (4409), and its grace running out sends no
// detach, so the runtime keeps the session the client resumed elsewhere.
func TestReclaimOnAnotherNode(t *testing.T) {
	const grace = 200 * time.Millisecond
	c := cluster(t, func(c *relay.Config) { c.Limits.Grace = grace })
	rt := env(c, 0).Connect(t)
	waitRoutable(t, c, 1, 2)
	old := env(c, 1).Attach(t, "")
	// At once: node 1's claim may reach node 2 after the reclaim there, and
	// is then stale (TestStaleClaimLeavesTheNewerSocket).
	moved := env(c, 2).Attach(t, old.Session)
	if moved.Session != old.Session {
		t.Fatalf("node 2 granted %q, want %q reclaimed", moved.Session, old.Session)
	}
	if _, code := old.ReadUntilClosed(); code != relayleg.CloseSuperseded {
		t.Fatalf("old socket closed %d, want 4409", code)
	}
	// Node 1's grace for the old socket runs out, silently: a probe
	// attachment dropped on node 1 after it has the same grace, started
	// later, and its detach reaching the runtime shows that it ran out.
	probe := env(c, 1).Attach(t, "")
	probe.Send(msg(probe, `{"probe":1}`))
	probe.WS.CloseNow()
	notDetached := func(f librelay.Frame) {
		t.Helper()
		if f.Type == librelay.TypeACPDetach && f.Session == moved.Session {
			t.Fatalf("the old node detached the attachment that moved: %+v", f)
		}
	}
	for {
		f := readCargo(t, rt)
		notDetached(f)
		if f.Type == librelay.TypeACPDetach && f.Session == probe.Session {
			break
		}
	}
	moved.Send(msg(moved, `{"after":"grace"}`))
	for {
		f := readCargo(t, rt)
		notDetached(f)
		if string(f.Payload) == `{"after":"grace"}` {
			break
		}
	}
	rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: "test", Session: moved.Session, Seq: 1, Payload: []byte(`{}`)})
	if f := readBrowser(t, moved); f.Seq != 1 {
		t.Fatalf("moved attachment got %+v", f)
	}
}

// A claim is ordered by when its node took the socket. One older than the
// socket here is stale and leaves it alone: claims from two nodes may
// arrive in any order, and a client that left a node and redialled back
// here quickly had its live socket superseded by the late claim of the node
// it had left, which ended its attachment (tests/cluster
// TestChaosAcrossNodes, under load). A newer claim supersedes it.
func TestStaleClaimLeavesTheNewerSocket(t *testing.T) {
	c := cluster(t, nil)
	rt, b := routed(t, c)
	node := c.Node(1).Table()
	node.HandleControl(natstable.ClaimMessage(99, b.Instance, b.Session, time.Now().Add(-time.Second).UnixNano()))
	if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: 1, Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if f := readBrowser(t, b); f.Seq != 1 {
		t.Fatalf("after a stale claim the browser got %+v, want seq 1", f)
	}
	node.HandleControl(natstable.ClaimMessage(99, b.Instance, b.Session, time.Now().Add(time.Second).UnixNano()))
	if _, code := b.ReadUntilClosed(); code != relayleg.CloseSuperseded {
		t.Fatalf("after a newer claim the socket closed %d, want 4409", code)
	}
}

// The attachment limit is each node's: a node at its limit refuses with
// too_many_attachments (4430) while another takes the attachment.
func TestLimitsPerNode(t *testing.T) {
	c := cluster(t, func(c *relay.Config) { c.Limits.AttachmentsPerInstance = 2 })
	env(c, 0).Connect(t)
	waitRoutable(t, c, 1, 2)
	env(c, 1).Attach(t, "")
	env(c, 1).Attach(t, "")
	b, _, err := relaytest.DialBrowser(context.Background(), c.Node(1).AttachURL(), "client-token", relaytest.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Hello("test", "", librelay.ProtocolVersion)
	if _, code := b.ReadUntilClosed(); code != relayleg.CloseTooManyAttachments {
		t.Fatalf("third attachment on node 1 closed %d, want 4430", code)
	}
	env(c, 2).Attach(t, "")
}

func errCode(f librelay.Frame) string {
	var e librelay.Error
	e.UnmarshalJSON(f.Payload)
	return e.Code
}

// A runtime's request for a session no node holds gets its one reply,
// relay.error undeliverable, as on one node, instead of being published to
// nobody; a session claimed on another node is still routed there, before
// and after its browser sent anything.
func TestUnheldSessionAnsweredAcrossNodes(t *testing.T) {
	c := cluster(t, nil)
	rt := env(c, 0).Connect(t)
	waitRoutable(t, c, 1)
	b := env(c, 1).Attach(t, "")
	relaytest.WaitFor(t, "node 0 to learn of the claim on node 1", func() bool {
		return c.Node(0).Table().Attachment(b.Instance, b.Session) != nil
	})
	req := librelay.Frame{Type: librelay.TypeACPMessage, ID: "unheld", Instance: b.Instance, Session: "nobody-holds-this", Payload: []byte(`{}`)}
	if err := rt.Send(req); err != nil {
		t.Fatal(err)
	}
	if f := readCargo(t, rt); f.Type != librelay.TypeError || f.ReplyTo != "unheld" || errCode(f) != relay.CodeUndeliverable {
		t.Fatalf("want relay.error undeliverable answering %q, got %s re %q: %s", req.ID, f.Type, f.ReplyTo, f.Payload)
	}
	held := librelay.Frame{Type: librelay.TypeACPMessage, ID: "held", Instance: b.Instance, Session: b.Session, Payload: []byte(`{}`)}
	if err := rt.Send(held); err != nil {
		t.Fatal(err)
	}
	if f := readBrowser(t, b); f.ID != "held" {
		t.Fatalf("browser on node 1 got %s %q, want the runtime's request", f.Type, f.ID)
	}
}

// A browser on another node than its runtime that stops reading is shed
// with slow_consumer and close 4429 once its queue on its own node is full,
// as on one relay: the stream's window across the bus is acknowledged as
// its node hands frames on (the shed socket's frames are dropped there),
// so it never ends the socket runtime_gone instead.
func TestSlowConsumerAcrossNodes(t *testing.T) {
	c := cluster(t, func(c *relay.Config) {
		c.Limits.QueueFrames, c.Limits.QueueBytes = 64, 256<<10
		c.Limits.CloseTimeout = time.Minute // the test reads only after the flood
		c.Limits.HeartbeatInterval = time.Hour
	})
	rt := env(c, 0).Connect(t)
	waitRoutable(t, c, 1)
	slow := env(c, 1).AttachWith(t, "", relaytest.DialOptions{ReadBuf: 16 << 10})
	fast := env(c, 1).Attach(t, "")
	for _, b := range []*relaytest.Browser{slow, fast} {
		b.Send(msg(b, `"hi"`))
		readCargo(t, rt)
	}
	chunk := `"` + strings.Repeat("s", 64<<10) + `"`
	for sent := 0; sent < 8<<20; sent += len(chunk) {
		if err := rt.Send(msg(slow, chunk)); err != nil {
			t.Fatalf("runtime held up by a slow consumer on another node: %v", err)
		}
	}
	rt.Send(msg(fast, `"marker"`))
	if f := readBrowser(t, fast); string(f.Payload) != `"marker"` {
		t.Fatalf("other attachment got %s", f.Payload)
	}
	if frames, code := slow.ReadUntilClosed(); code != relayleg.CloseSlowConsumer {
		t.Fatalf("slow socket on node 1 closed %d after %d frames, want 4429", code, len(frames))
	}
}

// Frames cross the bus unvalidated (wire.go): the node writing one to its
// socket validates it, so a frame that does not encode never reaches a
// browser, and the ones around it do. A publisher playing a node sends the
// browser's node three frames: a valid one, one whose payload is not JSON,
// and a valid one; the browser gets the two valid ones, in order.
func TestInvalidFrameFromTheBusNotWritten(t *testing.T) {
	c := cluster(t, nil)
	rt, b := routed(t, c)
	// The runtime's answer shows the route works.
	if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: 1, Payload: []byte(`{"n":0}`)}); err != nil {
		t.Fatal(err)
	}
	if f := readBrowser(t, b); f.Seq != 1 {
		t.Fatalf("got %+v first", f)
	}
	nc := bus(t, c)
	subject := natstable.AttachmentSubject(b.Instance, b.Session)
	for i, payload := range []string{`{"n":1}`, `{"n":`, `{"n":3}`} {
		f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: uint64(i + 2), Payload: []byte(payload)}
		if err := nc.Publish(subject, natstable.DataMessage(99, 1, uint64(i+1), &f)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{`{"n":1}`, `{"n":3}`} {
		if f := readBrowser(t, b); string(f.Payload) != want {
			t.Fatalf("browser got %+v (payload %s), want payload %s", f, f.Payload, want)
		}
	}
}

// A socket that takes its attachment id over on the node where a loss on
// the bus ended the previous one gets the frames that follow. The new
// socket inherits the old one's subscription, and with it, before, the
// mark of the loss, which dropped every later frame for the attachment on
// that node, the replay its client's session.resume asked for included.
// The old socket here never answers its close, so it still holds the id
// when the new one takes it (a phone that lost its network).
func TestReclaimAfterALossOnTheSameNode(t *testing.T) {
	c := cluster(t, func(c *relay.Config) {
		c.Limits.CloseTimeout = time.Minute
		c.Limits.HeartbeatInterval = time.Hour
	})
	rt, b := routed(t, c)
	nc := bus(t, c)
	subject := natstable.AttachmentSubject(b.Instance, b.Session)
	for _, n := range []uint64{1, 3} { // a node's stream whose counter 2 the bus lost
		if err := nc.Publish(subject, natstable.DataMessage(99, 1, n, ptr(msg(b, `{}`)))); err != nil {
			t.Fatal(err)
		}
	}
	toldOfALoss(t, b) // the loss ended b; it holds the id until its close times out

	nb := env(c, 1).Attach(t, b.Session)
	if nb.Session != b.Session {
		t.Fatalf("the id was not reclaimed: got %s", nb.Session)
	}
	if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: 1, Payload: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	if f, err := readWithin(nb, 5*time.Second); err != nil || f.Seq != 1 {
		t.Fatalf("the socket that took the id over got %+v (%v), want seq 1", f, err)
	}
}

func ptr[T any](v T) *T { return &v }

// readWithin is the browser's next frame that is not a heartbeat, or an
// error when none comes within d.
func readWithin(b *relaytest.Browser, d time.Duration) (librelay.Frame, error) {
	type read struct {
		f   librelay.Frame
		err error
	}
	got := make(chan read, 1)
	go func() {
		for {
			f, err := b.Read()
			if err == nil && f.Type == librelay.TypeHeartbeat {
				b.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
				continue
			}
			got <- read{f, err}
			return
		}
	}()
	select {
	case r := <-got:
		return r.f, r.err
	case <-time.After(d):
		return librelay.Frame{}, errors.New("nothing within " + d.String())
	}
}

// A frame the runtime's node published just before it lost NATS, which
// the bus never got (held in a network that went silent, then lost with
// the connection), is one the node believes went out: Send saw no error,
// so no tail is owed (payTail). Back on the bus within the lease, the node
// tells the browsers' nodes how far each stream went (Table.sendTails), so
// a socket that missed frames is told (runtime_gone) and its client
// resumes. Before, the browser's node learnt of the loss only from a later
// frame: when the lost frame ended an answer, the client waited for ever.
func TestRuntimeNodeBlipTellsTheBrowser(t *testing.T) {
	var p *relaytest.Proxy
	c := twoNodes(t, func(i int, tc *natstable.Config) {
		if i == 0 { // the runtime's node reaches NATS through a proxy the test breaks
			p = proxied(t, tc)
		}
	})
	b, send := flowing(t, c)
	node := c.Node(0).Table()
	p.Freeze()
	send(2) // the last frame of an answer
	relaytest.WaitFor(t, "node 0 to publish seq 2", func() bool { return node.Sent(b.Instance, b.Session) == 2 })
	// The connection dies with seq 2 held in the frozen network (or still
	// in the client's buffer, which a new connection does not carry over).
	p.Down()
	p.Thaw()
	p.Up()
	// Within the lease: node 1 never takes node 0 for gone.
	toldOfALoss(t, b)
}

// A tail (a node back on the bus saying how far a stream went) that
// follows every frame changes nothing, and one past the last frame seen
// ends the socket runtime_gone, even when the socket had nothing of that
// stream yet: what went astray may have been the answer to its resume.
func TestTailShowsWhatWasLost(t *testing.T) {
	c := cluster(t, nil)
	_, b := routed(t, c)
	nc := bus(t, c)
	subject := natstable.AttachmentSubject(b.Instance, b.Session)
	publish := func(data []byte) {
		t.Helper()
		if err := nc.Publish(subject, data); err != nil {
			t.Fatal(err)
		}
	}
	publish(natstable.DataMessage(99, 1, 1, ptr(msg(b, `{"n":1}`))))
	publish(natstable.TailMessage(99, 1, 2))
	publish(natstable.DataMessage(99, 1, 3, ptr(msg(b, `{"n":3}`))))
	for _, want := range []string{`{"n":1}`, `{"n":3}`} {
		if f := readBrowser(t, b); string(f.Payload) != want {
			t.Fatalf("browser got %+v (payload %s), want payload %s", f, f.Payload, want)
		}
	}
	publish(natstable.TailMessage(98, 1, 7)) // another node's stream, six frames of it unseen
	if f := readBrowser(t, b); f.Type != librelay.TypeError || errCode(f) != relayleg.CodeRuntimeGone {
		t.Fatalf("browser got %+v (payload %s), want relay.error runtime_gone", f, f.Payload)
	}
}

// bus is a connection to c's NATS of the test's own, standing in for a
// node: it publishes what the test makes.
func bus(t *testing.T, c *stack.Cluster) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// twoNodes is a cluster of two nodes (routed's runtime's and browser's)
// whose tables edit edits.
func twoNodes(t *testing.T, edit func(i int, tc *natstable.Config)) *stack.Cluster {
	t.Helper()
	return startCluster(t, stack.ClusterConfig{
		Nodes: 2,
		EditTable: func(i int, tc *natstable.Config) {
			tc.Heartbeat, tc.Lease = 100*time.Millisecond, 3*time.Second
			edit(i, tc)
		},
	})
}

// proxied points a node's table at NATS through a proxy the test breaks.
// flowing routes a browser on node 1 to a runtime on node 0 (routed), and
// returns it with a func that sends its stream's frame seq from the
// runtime, once seq 1 has reached it.
func flowing(t *testing.T, c *stack.Cluster) (*relaytest.Browser, func(seq uint64)) {
	t.Helper()
	rt, b := routed(t, c)
	send := func(seq uint64) {
		t.Helper()
		if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: seq, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	if f := readBrowser(t, b); f.Seq != 1 {
		t.Fatalf("got %+v, want seq 1", f)
	}
	return b, send
}

func proxied(t *testing.T, tc *natstable.Config) *relaytest.Proxy {
	p := relaytest.NewProxy(t, strings.TrimPrefix(tc.URL, "nats://"))
	tc.URL = "nats://" + p.Addr()
	return p
}

// toldOfALoss reads the browser's frames until relay.error runtime_gone,
// and fails when none comes within 3 s.
func toldOfALoss(t *testing.T, b *relaytest.Browser) {
	t.Helper()
	for {
		f, err := readWithin(b, 3*time.Second)
		if err != nil {
			t.Fatalf("the browser was not told of the loss: %v", err)
		}
		if f.Type == librelay.TypeError {
			if errCode(f) != relayleg.CodeRuntimeGone {
				t.Fatalf("browser got %s, want relay.error runtime_gone", f.Payload)
			}
			return
		}
	}
}

// A frame its stream drops because the browser's node left the window
// full past StallTimeout (that node's bus connection stalled) takes its
// counter, and the browser's node learns of it: once the window has room,
// the stream sends the tail it owes. Before, only a later frame showed the
// skip, and when the dropped frame ended an answer the client waited for
// ever.
func TestStalledWindowDropTellsTheBrowser(t *testing.T) {
	_, b, p := stalledWindow(t)
	p.Thaw()
	for seq := uint64(2); seq <= 5; seq++ {
		if f, err := readWithin(b, 3*time.Second); err != nil || f.Seq != seq {
			t.Fatalf("got %+v (%v), want seq %d", f, err, seq)
		}
	}
	toldOfALoss(t, b)
}

// stalledWindow starts two nodes whose streams keep a window of 4 frames
// (StallTimeout 200 ms), node 1's bus link through a proxy, and a browser
// on node 1 attached to a runtime on node 0 (flowing). Once node 0 has
// heard node 1's ack, the proxy freezes node 1's link, and the runtime
// sends seq 2 to 6: 2 to 5 fill the window, 6 (an answer's last) is
// dropped, the window stalled. It returns with the link still frozen.
func stalledWindow(t *testing.T) (*stack.Cluster, *relaytest.Browser, *relaytest.Proxy) {
	t.Helper()
	var p *relaytest.Proxy
	c := twoNodes(t, func(i int, tc *natstable.Config) {
		tc.Window, tc.StallTimeout = 4, 200*time.Millisecond
		if i == 1 {
			p = proxied(t, tc)
		}
	})
	b, send := flowing(t, c)
	node := c.Node(0).Table()
	relaytest.WaitFor(t, "node 0 to hear node 1's ack", func() bool { return node.Consumed(b.Instance, b.Session) })
	p.Freeze()
	for seq := uint64(2); seq <= 6; seq++ {
		send(seq)
	}
	relaytest.WaitFor(t, "node 0 to drop seq 6", func() bool { return node.Sent(b.Instance, b.Session) == 6 })
	return c, b, p
}

// A node's claim of a socket comes on the control subject and its acks on
// its ack subject, which the runtime's node handles apart, so the claim can
// come after the first ack. The claim of the node that consumes the stream
// already leaves the consumer known; before, the stream forgot it, and its
// window with it, until the next ack (under a loaded make test
// TestStalledWindowDropTellsTheBrowser waited 60 s for an ack that had come
// and been forgotten). A claim from another node still makes the stream
// wait for nobody until that node acknowledges.
func TestLateClaimKeepsTheConsumer(t *testing.T) {
	c := twoNodes(t, func(int, *natstable.Config) {})
	b, _ := flowing(t, c)
	node := c.Node(0).Table()
	relaytest.WaitFor(t, "node 0 to hear node 1's ack", func() bool { return node.Consumed(b.Instance, b.Session) })
	consumer, err := strconv.ParseUint(c.Node(1).Table().Node(), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	node.HandleControl(natstable.ClaimMessage(consumer, b.Instance, b.Session, time.Now().UnixNano()))
	if !node.Consumed(b.Instance, b.Session) {
		t.Fatal("node 1's late claim made node 0 forget that node 1 consumes the stream")
	}
	node.HandleControl(natstable.ClaimMessage(99, b.Instance, b.Session, time.Now().UnixNano()))
	if node.Consumed(b.Instance, b.Session) {
		t.Fatal("another node's claim left the stream counting on node 1")
	}
}

// The claim of the node that consumes the stream, with the window full and
// stalled: the socket it announces may have taken over, on that node, from
// one that stopped reading there (no release comes then), and it
// acknowledges only frames that reach it, which the stalled window drops.
// The stream forgets the consumer, as for another node's claim, and sends
// again.
func TestClaimOverAStalledWindowForgetsTheConsumer(t *testing.T) {
	c, b, p := stalledWindow(t)
	node := c.Node(0).Table()
	consumer, err := strconv.ParseUint(c.Node(1).Table().Node(), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	node.HandleControl(natstable.ClaimMessage(consumer, b.Instance, b.Session, time.Now().UnixNano()))
	consumed := node.Consumed(b.Instance, b.Session)
	p.Thaw()
	if consumed {
		t.Fatal("node 1's claim over a stalled window left the stream counting on node 1, which acknowledges nothing the window drops")
	}
}

// Frames NATS drops on the browser's node because the subscription passed
// its pending limits (the node's dispatcher for the instance was behind)
// are a loss at once: NATS reports the drop (nats.ErrSlowConsumer) to the
// connection's error handler, and the socket gets runtime_gone. Before,
// only a later frame showed the skip, and when the dropped ones ended an
// answer the client waited for ever.
func TestDropsPastPendingLimitsTellTheBrowser(t *testing.T) {
	c := twoNodes(t, func(i int, tc *natstable.Config) {
		if i == 1 {
			tc.PendingFrames = 4
		}
	})
	rt, b := routed(t, c)
	node := c.Node(1).Table()
	release := node.StallDispatcher(b.Instance)
	defer release()
	for seq := uint64(1); seq <= 8; seq++ { // 1 to 4 wait in the dispatcher's channel; the rest are dropped
		if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: seq, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	relaytest.WaitFor(t, "NATS to drop frames on node 1", func() bool { return node.Dropped(b.Instance, b.Session) > 0 || node.Gaps() > 0 })
	release()
	toldOfALoss(t, b)
}

// An id that moved to another node is not detached by the node it left
// when that node makes room for a newcomer at the instance's limit: the
// old node still counts it (its grace has not run out), and ending it
// there must stay silent, as its grace running out does, or the runtime
// ends the session resumed on the other node.
func TestYieldingAMovedAttachmentDetachesNothing(t *testing.T) {
	c := cluster(t, func(c *relay.Config) {
		c.Limits.Grace = time.Minute
		c.Limits.AttachmentsPerInstance = 1
	})
	rt := env(c, 0).Connect(t)
	waitRoutable(t, c, 1, 2)
	old := env(c, 1).Attach(t, "")
	moved := env(c, 2).Attach(t, old.Session)
	if moved.Session != old.Session {
		t.Fatalf("node 2 granted %q, want %q reclaimed", moved.Session, old.Session)
	}
	if _, code := old.ReadUntilClosed(); code != relayleg.CloseSuperseded {
		t.Fatalf("old socket closed %d, want 4409", code)
	}
	newcomer := env(c, 1).Attach(t, "") // node 1 is at its limit: the moved id yields
	newcomer.Send(msg(newcomer, `{"newcomer":1}`))
	for {
		f := readCargo(t, rt)
		if f.Type == librelay.TypeACPDetach && f.Session == moved.Session {
			t.Fatalf("node 1 detached the attachment that moved to node 2: %+v", f)
		}
		if string(f.Payload) == `{"newcomer":1}` {
			break
		}
	}
}
