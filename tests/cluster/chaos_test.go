package cluster_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
)

// The engine's chaos test across nodes: while the runtime on node 0 streams
// 10,000 sequenced frames, the browser's connection is cut at random
// moments at least 20 times, each redial landing on a node picked at random
// (the runtime's own or another), and one of the nodes is killed and
// restarted along the way. The application is handed every seq exactly
// once, in order, and the transcript matches.
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
	for !b.answered(3) {
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
