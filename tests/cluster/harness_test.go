package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/natstable"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// guard bounds every wait (relaytest.WaitLimit).
const guard = relaytest.WaitLimit

// cluster is three relay nodes on an embedded NATS, no runtime of the
// stack's own: each test runs its runtime through a hop it can re-point.
func newCluster(t *testing.T, editRelay func(int, *relay.Config)) *stack.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	c, err := stack.StartCluster(ctx, stack.ClusterConfig{
		Nodes: 3, RelayOnly: true, Logger: slog.New(slog.DiscardHandler),
		EditTable: func(_ int, c *natstable.Config) {
			// Quick to take a killed node for gone; the loaded test machine
			// can delay a beat, which costs a redial, never content.
			c.Heartbeat, c.Lease = 100*time.Millisecond, 1500*time.Millisecond
			c.ReconnectWait = 50 * time.Millisecond
		},
		EditRelay: func(i int, c *relay.Config) {
			if editRelay != nil {
				editRelay(i, c)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runRuntime runs the dev runtime dialling through hop.
func runRuntime(t *testing.T, c *stack.Cluster, hop *relaytest.Proxy, rate float64) *devruntime.Runtime {
	t.Helper()
	cfg := c.Config()
	rt, err := devruntime.New(devruntime.Config{
		Relay: "http://" + hop.Addr(), Instance: cfg.Instance, Credential: cfg.RuntimeToken,
		RelayKey: c.PublicKey(), AgentRate: rate, Logger: slog.New(slog.DiscardHandler),
		BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-rt.Connected():
	case <-time.After(guard):
		t.Fatal("the runtime was not welcomed")
	}
	return rt
}

// waitRoutable waits until node knows a runtime for the cluster's instance:
// another node's hold reaches it within a round trip on the bus.
func waitRoutable(t *testing.T, c *stack.Cluster, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		relaytest.WaitFor(t, fmt.Sprintf("node %d to route to the runtime", i), func() bool {
			return c.Node(i).Table().Runtime(c.Config().Instance) != nil
		})
	}
}

// browser is one client engine attached through its own hop, with the
// application that records what it is handed.
type browser struct {
	t   *testing.T
	hop *relaytest.Proxy
	col *clienttest.Collector
	a   *client.Attachment
}

func attach(t *testing.T, c *stack.Cluster, hop *relaytest.Proxy) *browser {
	t.Helper()
	col := clienttest.NewCollector()
	cfg := c.Config()
	o := client.Options{
		URL: "ws://" + hop.Addr() + relayleg.AttachPath, Instance: cfg.Instance,
		Credential: func(context.Context) (string, error) { return cfg.ClientToken, nil },
		RelayKey:   c.PublicKey(), Name: "test", Store: client.NewMemoryStore(), History: 1 << 20,
		OnMessage: col.OnMessage, OnEvicted: col.OnEvicted,
		Backoff: client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		// The dev runtime answers every session.resume. On a machine starved
		// by other work (the browser suites beside this one) an answer can
		// take longer than the default 3s, and the client would report the
		// stream as not resumed; a resume that is truly lost still is, well
		// within the guard.
		ResumeTimeout: guard / 3,
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	a, err := client.Attach(ctx, o)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return &browser{t: t, hop: hop, col: col, a: a}
}

func (b *browser) send(msg string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := b.a.SendACP(ctx, []byte(msg)); err != nil {
		b.t.Fatalf("SendACP: %v", err)
	}
}

func (b *browser) call(id int, method, params string) relaytest.RPC {
	b.t.Helper()
	b.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	var resp relaytest.RPC
	b.col.Wait(b.t, method+" response", func(c *clienttest.Collector) bool {
		var ok bool
		resp, ok = c.Response(id)
		return ok
	})
	return resp
}

// startChat initializes ACP and opens an ACP session.
func (b *browser) startChat() string {
	b.t.Helper()
	b.call(1, "initialize", `{"protocolVersion":1}`)
	resp := b.call(2, "session/new", `{"cwd":"/","mcpServers":[]}`)
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		b.t.Fatalf("session/new answered %s %s", resp.Result, resp.Error)
	}
	return r.SessionID
}

// prompt asks the dev agent to count to n (one chunk per number) as
// request id.
func (b *browser) prompt(id int, session string, n int) {
	b.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"count %d"}]}}`, id, session, n))
}

func (b *browser) answered(id int) bool {
	b.col.Lock()
	defer b.col.Unlock()
	_, ok := b.col.Response(id)
	return ok
}

func (b *browser) waitAnswered(id int) {
	b.t.Helper()
	b.col.Wait(b.t, "the answer to "+strconv.Itoa(id), func(c *clienttest.Collector) bool { _, ok := c.Response(id); return ok })
}

// checkStream fails unless the browser was handed every seq from 1 on
// exactly once, in order, with the count's n chunks among them, and no
// eviction.
func (b *browser) checkStream(n int) {
	b.t.Helper()
	b.col.Lock()
	defer b.col.Unlock()
	if len(b.col.Evicted) > 0 {
		b.t.Fatalf("evicted: %+v", b.col.Evicted)
	}
	want := uint64(1)
	var texts []string
	for _, m := range b.col.Msgs {
		if m.Seq != want {
			b.t.Fatalf("handed seq %d where %d was due", m.Seq, want)
		}
		want++
		if text, ok := relaytest.ChunkText(m.RPC); ok {
			texts = append(texts, text)
		}
	}
	var count []string
	for _, text := range texts {
		if len(count) > 0 || text == "1\n" {
			count = append(count, text)
		}
	}
	if len(count) != n {
		b.t.Fatalf("got %d counting chunks, want %d", len(count), n)
	}
	for i, text := range count {
		if text != strconv.Itoa(i+1)+"\n" {
			b.t.Fatalf("chunk %d is %q", i+1, text)
		}
	}
}

func (b *browser) chunks() int {
	b.col.Lock()
	defer b.col.Unlock()
	n := 0
	for _, m := range b.col.Msgs {
		if _, ok := relaytest.ChunkText(m.RPC); ok {
			n++
		}
	}
	return n
}

// checkTranscript fails unless the client's transcript holds the received
// seqs the application was handed, in the same order.
func (b *browser) checkTranscript() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	hist, err := b.a.History(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	var got []uint64
	for _, e := range hist {
		if !e.Out {
			got = append(got, e.Seq)
		}
	}
	b.col.Lock()
	defer b.col.Unlock()
	if len(got) != len(b.col.Msgs) {
		b.t.Fatalf("transcript holds %d received frames, the application was handed %d", len(got), len(b.col.Msgs))
	}
	for i, m := range b.col.Msgs {
		if got[i] != m.Seq {
			b.t.Fatalf("transcript entry %d is seq %d, the application was handed %d", i, got[i], m.Seq)
		}
	}
}
