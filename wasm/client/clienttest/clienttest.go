//go:build !js

// Package clienttest holds the application the engine's tests attach with.
// A Collector keeps every message, eviction and state change the engine
// hands it, in order, and lets a test wait for a condition on them; the
// engine's own tests (wasm/client) and the cluster's (tests/cluster) share
// it, so that both read what was delivered the same way. It runs natively,
// beside a dev relay and runtime on loopback (demo/relay/relaytest).
package clienttest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// Received is one delivered message as a test keeps it: the engine's
// Message with its payload copied (the engine may reuse the buffer once the
// handler returns), and that payload read as JSON-RPC, with the message's
// seq.
type Received struct {
	client.Message
	RPC relaytest.RPC
}

// Collector is an application. Its exported fields are what it was handed,
// in order. The engine calls it from its own goroutine, so a test reads or
// changes them only inside Wait's condition or between Lock and Unlock.
type Collector struct {
	Msgs    []Received
	Evicted []client.Eviction
	States  []client.StateChange
	// FailOnce holds seqs the handler refuses the first time it is handed
	// them, as an application whose handler fails would.
	FailOnce map[uint64]bool

	mu      sync.Mutex
	changed chan struct{} // a token after each change, for Wait
}

// NewCollector returns an empty Collector. Pass its OnMessage, OnEvicted
// and OnState as the client.Options of the same names.
func NewCollector() *Collector {
	return &Collector{changed: make(chan struct{}, 1), FailOnce: map[uint64]bool{}}
}

// OnMessage keeps m, unless its seq is in FailOnce: then it refuses it and
// forgets the seq, so the engine's next delivery of it is kept.
func (c *Collector) OnMessage(m client.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.FailOnce[m.Seq] {
		delete(c.FailOnce, m.Seq)
		return fmt.Errorf("the application refuses seq %d once", m.Seq)
	}
	m.Payload = append([]byte(nil), m.Payload...)
	r := Received{Message: m}
	if err := json.Unmarshal(m.Payload, &r.RPC); err != nil {
		return err
	}
	r.RPC.Seq = m.Seq
	c.Msgs = append(c.Msgs, r)
	c.poke()
	return nil
}

// OnEvicted keeps e.
func (c *Collector) OnEvicted(e client.Eviction) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Evicted = append(c.Evicted, e)
	c.poke()
}

// OnState keeps s.
func (c *Collector) OnState(s client.StateChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.States = append(c.States, s)
	c.poke()
}

// Lock keeps the engine from handing the Collector anything until Unlock.
func (c *Collector) Lock() { c.mu.Lock() }

// Unlock lets the engine hand the Collector what it holds back.
func (c *Collector) Unlock() { c.mu.Unlock() }

func (c *Collector) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Wait blocks until cond holds, checking it, locked, once now and again
// after each change; it fails t after relaytest.WaitLimit, naming what it
// waited for.
func (c *Collector) Wait(t testing.TB, what string, cond func(c *Collector) bool) {
	t.Helper()
	deadline := time.After(relaytest.WaitLimit)
	for {
		c.mu.Lock()
		ok := cond(c)
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Snapshot returns a copy of the messages kept so far.
func (c *Collector) Snapshot() []Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Received(nil), c.Msgs...)
}

// Response finds the response to JSON-RPC id among the messages; call it
// inside Wait's condition or between Lock and Unlock.
func (c *Collector) Response(id int) (relaytest.RPC, bool) {
	for _, m := range c.Msgs {
		if m.RPC.Method == "" && string(m.RPC.ID) == strconv.Itoa(id) {
			return m.RPC, true
		}
	}
	return relaytest.RPC{}, false
}
