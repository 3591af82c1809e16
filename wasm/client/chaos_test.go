//go:build !js

package client_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// chaosFrames is how long a stream the chaos tests push through the cuts.
const chaosFrames = 10_000

// streamRate paces the dev agent so the stream lasts long enough (about four
// seconds) for the cuts to land in the middle of it.
const streamRate = 2500

// Nothing is lost: while the runtime streams 10,000 sequenced frames, a proxy
// cuts the client's connection at random moments at least 20 times and the
// relay process restarts once with the same key. The handler sees every seq
// exactly once, in order, and the transcript matches what it saw.
func TestChaosNothingLost(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("streams for several seconds")
	}
	s := newStack(t, nil, func(c *devruntime.Config) { c.AgentRate = streamRate })
	c := clienttest.NewCollector()
	store := client.NewMemoryStore()
	a := s.attach(s.options(store, c))
	session := startChat(t, c, a)
	send(t, a, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":`+promptParams(session, "count 10000")+`}`)

	cuts := chaos(t, s, c, func() bool { _, done := c.Response(3); return done })
	if cuts < 20 {
		t.Fatalf("only %d cuts landed before the stream ended; want at least 20", cuts)
	}
	msgs := c.Snapshot()
	last := msgs[len(msgs)-1].Seq
	checkSeqs(t, msgs, 1, last)
	checkCount(t, chunks(msgs), chaosFrames)

	hist, err := a.History(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := inboundSeqs(hist), deliveredSeqs(msgs); !slices.Equal(got, want) {
		t.Fatalf("transcript holds %d received frames, the handler saw %d", len(got), len(want))
	}
}

// The same with reloads: at random moments the client is dropped without a
// detach and a new one attaches with the same Store and name. Across all
// clients together every frame is delivered exactly once, in order.
func TestChaosReloads(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("streams for several seconds")
	}
	s := newStack(t, nil, func(c *devruntime.Config) { c.AgentRate = streamRate })
	c := clienttest.NewCollector() // one application, outliving its clients
	store := client.NewMemoryStore()
	o := s.options(store, c)
	a := s.attach(o)
	session := startChat(t, c, a)
	send(t, a, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":`+promptParams(session, "count 10000")+`}`)

	reloads, seen := 0, 0
	done := func() bool { _, ok := c.Response(3); return ok }
	for !locked(c, done) {
		time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
		progressed(t, c, &seen)
		a.Close() // the page goes away: no detach
		a = s.attach(o)
		reloads++
	}
	c.Wait(t, "the end of the stream", func(c *clienttest.Collector) bool { return done() })
	if reloads < 10 {
		t.Fatalf("only %d reloads landed during the stream", reloads)
	}
	msgs := c.Snapshot()
	checkSeqs(t, msgs, 1, msgs[len(msgs)-1].Seq)
	checkCount(t, chunks(msgs), chaosFrames)
}

// When the client is away for longer than the runtime retains, the resume
// reports the eviction rather than skipping silently: every delivered seq is
// contiguous except across the one reported gap.
func TestChaosEvictionReported(t *testing.T) {
	const retain = 50
	s := newStack(t, nil, func(c *devruntime.Config) { c.AgentRate = 1000; c.RetainFrames = retain })
	c := clienttest.NewCollector()
	a := s.attach(s.options(client.NewMemoryStore(), c))
	session := startChat(t, c, a)
	send(t, a, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":`+promptParams(session, "count 2000")+`}`)
	c.Wait(t, "the first chunk", func(c *clienttest.Collector) bool { return len(chunks(c.Msgs)) > 0 })

	// The client is away while more frames go by than the runtime retains,
	// so the gap cannot be replayed. A raw socket that takes the client's
	// id meanwhile watches them go, so the client comes back only once they
	// have.
	s.front.Down()
	c.Wait(t, "the client to notice the cut", func(*clienttest.Collector) bool { return a.State() != client.Open })
	awayFrom := a.Cursor()
	watch := s.env.Attach(t, a.Session())
	for {
		f, err := watch.Read()
		if err != nil {
			t.Fatalf("watching the stream while the client is away: %v", err)
		}
		if f.Type == librelay.TypeHeartbeat {
			watch.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
		}
		if f.Seq > awayFrom+2*retain {
			break
		}
	}
	watch.WS.CloseNow()
	s.front.Up()

	c.Wait(t, "an eviction", func(c *clienttest.Collector) bool { return len(c.Evicted) > 0 })
	c.Wait(t, "the end of the stream", func(c *clienttest.Collector) bool { _, ok := c.Response(3); return ok })
	c.Lock()
	ev := c.Evicted[0]
	c.Unlock()
	if ev.Reason != "evicted" || ev.FromSeq <= ev.AfterSeq+1 {
		t.Fatalf("eviction %+v: want a reported gap", ev)
	}
	var prev uint64
	for _, m := range c.Snapshot() {
		if prev != 0 && m.Seq != prev+1 && !(prev == ev.AfterSeq && m.Seq == ev.FromSeq) {
			t.Fatalf("seq %d followed %d without a reported eviction", m.Seq, prev)
		}
		prev = m.Seq
	}
}

// chaos cuts the client's connection at random moments until done, and
// restarts the relay once along the way; it returns the number of cuts.
func chaos(t *testing.T, s *stack, c *clienttest.Collector, done func() bool) int {
	t.Helper()
	cuts, restarted, seen := 0, false, 0
	for !locked(c, done) {
		time.Sleep(time.Duration(20+rand.IntN(130)) * time.Millisecond)
		progressed(t, c, &seen)
		if !restarted && cuts == 10 {
			s.restartRelay()
			restarted = true
		} else {
			s.front.Cut()
		}
		cuts++
	}
	c.Wait(t, "the end of the stream", func(*clienttest.Collector) bool { return done() })
	if !restarted {
		t.Fatal("the stream ended before the relay restart")
	}
	return cuts
}

// progressed waits until the handler got more than *seen messages (or the
// stream ended), then sets *seen to how many it got. Between two cuts the
// client must be able to make some progress: on a machine so loaded that a
// resume takes longer than the pause, cuts at a fixed pace would starve it
// for ever, which tests the machine, not the engine.
func progressed(t *testing.T, c *clienttest.Collector, seen *int) {
	t.Helper()
	c.Wait(t, "progress between cuts", func(c *clienttest.Collector) bool {
		_, done := c.Response(3)
		if done || len(c.Msgs) > *seen {
			*seen = len(c.Msgs)
			return true
		}
		return false
	})
}

func locked(c *clienttest.Collector, cond func() bool) bool {
	c.Lock()
	defer c.Unlock()
	return cond()
}

func inboundSeqs(hist []client.Entry) []uint64 {
	var out []uint64
	for _, e := range hist {
		if !e.Out {
			out = append(out, e.Seq)
		}
	}
	return out
}

func deliveredSeqs(msgs []clienttest.Received) []uint64 {
	var out []uint64
	for _, m := range msgs {
		out = append(out, m.Seq)
	}
	return out
}
