package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
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
