package cluster_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// The engine's chaos test across nodes: while the runtime on node 0 streams
// 10,000 sequenced frames, the browser's connection is cut at random
// moments at least 20 times, each redial landing on a node picked at random
// (the runtime's own or another), and one of the nodes is killed and
// restarted along the way. The application is handed every seq exactly
// once, in order, and the transcript matches. The attachment never ends:
// on a loaded machine a node once superseded the client's live socket on
// the late claim of the node it had just left, and the loop cut and waited
// for an answer until the package's timeout (natstable
// TestStaleClaimLeavesTheNewerSocket); it now fails at once, or after
// twice the wait limit without an answer.
func TestChaosAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("streams for several seconds")
	}
	c := newCluster(t, nil)
	runRuntime(t, c, relaytest.NewProxy(t, c.Node(0).Addr()), 2500)
	waitRoutable(t, c, 1, 2)
	b := attach(t, c, relaytest.NewProxy(t, c.Node(1).Addr()))
	b.prompt(3, b.startChat(), 10_000)

	cuts, killed := 0, false
	deadline := time.Now().Add(2 * guard)
	for !b.answered(3) {
		if err := b.a.Err(); err != nil {
			t.Fatalf("the attachment ended after %d cuts (%d chunks in): %v (code %s)", cuts, b.chunks(), err, client.Code(err))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer after %d cuts (%d chunks in, the connection %s)", cuts, b.chunks(), b.a.State())
		}
		time.Sleep(time.Duration(20+rand.IntN(130)) * time.Millisecond)
		b.hop.Repoint(c.Node(rand.IntN(3)).Addr())
		if !killed && cuts == 10 {
			b.hop.Repoint(c.Node(2).Addr())
			c.Kill(1)
			if err := c.Restart(1); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
		b.hop.Cut()
		cuts++
	}
	b.waitAnswered(3)
	if cuts < 20 || !killed {
		t.Fatalf("only %d cuts landed before the stream ended (node killed: %v); want at least 20 and the kill", cuts, killed)
	}
	b.checkStream(10_000)
	b.checkTranscript()
}
