//go:build !js

package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// A transport may keep the payloads of its frames itself and hand the
// engine a Ref and an empty Payload, as jsbridge's does in relay.js
// (ModeParseHold), letting a payload go once an entry of a frame read after
// it has been committed: the engine records and commits entries in the
// order it read their frames, across connections. Here the Store takes each
// entry's payload by its Ref and drops every payload read before it, and
// fails the test for an entry whose payload was dropped so, while a proxy
// cuts the connection (during deliveries too), the handler refuses
// messages, and the attachment closes at the end; the transcript must
// still be every message delivered, byte for byte. (A connection's close is
// no such point: the engine closes a socket that breaks during a delivery
// at once, and commits what that delivery accepted after.)
func TestHeldPayloadsOutliveTheirCommits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("streams for a few seconds")
	}
	s := newStack(t, nil, func(c *devruntime.Config) { c.AgentRate = streamRate })
	c := clienttest.NewCollector()
	for seq := uint64(40); seq < 8000; seq += 800 {
		c.FailOnce[seq] = true
	}
	tr := &holdTransport{inner: client.DefaultTransport, held: map[uint64][]byte{}}
	store := &holdStore{MemoryStore: client.NewMemoryStore(), tr: tr}
	o := s.options(store, c)
	o.Transport = tr
	o.OnMessage = nil
	o.OnMessages = onMessagesVia(t, c, func(m client.Message) ([]byte, error) {
		if m.Ref == 0 {
			return m.Payload, nil
		}
		if p, ok := tr.payload(m.Ref); ok {
			return p, nil
		}
		return nil, fmt.Errorf("message seq %d: its payload is gone before delivery", m.Seq)
	})
	a := s.attach(o)
	session := startChat(t, c, a)
	send(t, a, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":`+promptParams(session, "count 8000")+`}`)
	if cuts := chaos(t, s, c, func() bool { _, done := c.Response(3); return done }); cuts < 5 {
		t.Fatalf("only %d cuts landed before the stream ended; want at least 5", cuts)
	}
	a.Close()
	<-a.Done()

	if err := store.failure(); err != nil {
		t.Fatal(err)
	}
	if tr.refs() == 0 {
		t.Fatal("no frame came with a Ref: the test tested nothing")
	}
	hist, err := store.History(context.Background(), client.Key{URL: o.URL, Instance: o.Instance, Name: o.Name})
	if err != nil {
		t.Fatal(err)
	}
	msgs := c.Snapshot()
	var got, want [][]byte
	for _, e := range hist {
		if !e.Out && e.Lost == nil { // a place for a loss (a cut) is no message
			got = append(got, e.Payload)
		}
	}
	for _, m := range msgs {
		want = append(want, m.Payload)
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("the transcript holds %d received payloads, the handler saw %d, and they differ", len(got), len(want))
	}
}

// holdTransport keeps the payload of every acp.message its connections
// read, by Ref, numbered in the order they were read, until the Store
// takes it or one read after it.
type holdTransport struct {
	inner client.Transport

	mu   sync.Mutex
	next uint64
	held map[uint64][]byte
}

func (tr *holdTransport) Dial(ctx context.Context, url string, protocols []string) (client.Conn, error) {
	c, err := tr.inner.Dial(ctx, url, protocols)
	if err != nil {
		return nil, err
	}
	return &holdConn{Conn: c, tr: tr}, nil
}

// hold keeps payload and returns its Ref.
func (tr *holdTransport) hold(payload []byte) uint64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.next++
	tr.held[tr.next] = payload
	return tr.next
}

func (tr *holdTransport) payload(ref uint64) ([]byte, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	p, ok := tr.held[ref]
	return p, ok
}

// take returns the payload of ref and lets it go, with every payload held
// before it.
func (tr *holdTransport) take(ref uint64) ([]byte, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	p, ok := tr.held[ref]
	for r := range tr.held {
		if r <= ref {
			delete(tr.held, r)
		}
	}
	return p, ok
}

func (tr *holdTransport) refs() uint64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.next
}

type holdConn struct {
	client.Conn
	tr *holdTransport
}

func (c *holdConn) Read(context.Context) ([][]byte, error) {
	return nil, errors.New("Read called on a RefFrameReader")
}

func (c *holdConn) ReadRefFrames(ctx context.Context) ([]client.RefFrame, error) {
	msgs, err := c.Conn.Read(ctx)
	var frames []client.RefFrame
	for _, m := range msgs {
		f, perr := librelay.ParseFrame(m)
		if perr != nil {
			continue
		}
		rf := client.RefFrame{Frame: f}
		if f.Type == librelay.TypeACPMessage {
			rf.Ref = c.tr.hold(f.Payload)
			rf.Payload = nil
		}
		frames = append(frames, rf)
	}
	return frames, err
}

// holdStore is a MemoryStore that takes a received entry's payload by its
// Ref, as jsbridge's Store does in relay.js.
type holdStore struct {
	*client.MemoryStore
	tr *holdTransport

	mu  sync.Mutex
	err error // the first entry whose payload was gone
}

func (s *holdStore) Commit(ctx context.Context, k client.Key, saved client.Saved, entries []client.Entry, keep int) error {
	for i, e := range entries {
		if e.Out || e.Lost != nil || len(e.Payload) > 0 { // a loss (or its place) has no payload
			continue
		}
		if e.Ref == 0 {
			s.fail(fmt.Errorf("entry seq %d: no payload and no Ref", e.Seq))
			continue
		}
		p, ok := s.tr.take(e.Ref)
		if !ok {
			s.fail(fmt.Errorf("entry seq %d committed after an entry read after it", e.Seq))
		}
		entries[i].Payload = p
	}
	return s.MemoryStore.Commit(ctx, k, saved, entries, keep)
}

func (s *holdStore) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *holdStore) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
