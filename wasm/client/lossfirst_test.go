//go:build !js

package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// A loss told just before a batch (here cursor_evicted: the runtime
// restarted, and the stream starts again at seq 1) is in the Store before
// the batch after it is delivered, with the cursor gone back, not only in
// the commit made once the handler took the batch: where a Store's commits
// reach it after the application has the batch (jsbridge's worker mode,
// the worker's commits crossing to the page), a page gone in between
// stores what it took itself (relay.js commitTail), which knows only the
// messages: the transcript lacked the loss, and the jump was shown whole
// after a reload; the cursor stayed at the old stream's (the next page
// would resume from there). Without a transcript the cursor alone is
// committed first. A batch after no such entry costs no commit of its own.
func TestLossStoredBeforeTheMessagesAfterIt(t *testing.T) {
	for _, history := range []int{1000, 0} {
		t.Run(map[int]string{1000: "transcript", 0: "cursor only"}[history], func(t *testing.T) {
			t.Parallel()
			lossStoredFirst(t, history)
		})
	}
}

func lossStoredFirst(t *testing.T, history int) {
	store := &countingStore{MemoryStore: client.NewMemoryStore()}
	tr := &coalescing{Transport: client.DefaultTransport}
	type seen struct {
		commits int  // the Store's commits when the batch was delivered
		lost    bool // the Store had the cursor_evicted loss then
		cursor  uint64
	}
	var (
		delivered atDelivery[seen] // message n -> what the Store had at its delivery
		s         *scripted
		key       client.Key
	)
	s = newScriptedWith(t, func(o *client.Options) {
		o.Store, o.Transport, o.History = store, tr, history
		key = client.Key{URL: o.URL, Instance: o.Instance, Name: client.DefaultName}
		o.OnMessages = delivered.handler(func() *clienttest.Collector { return s.c }, func(ctx context.Context) (seen, error) {
			h, err := store.History(ctx, key)
			if err != nil {
				return seen{}, err
			}
			saved, err := store.Load(ctx, key)
			if err != nil {
				return seen{}, err
			}
			return seen{
				commits: store.count(),
				lost:    slices.ContainsFunc(h, func(e client.Entry) bool { return e.Lost != nil && e.Lost.Reason == client.EvictedCursor }),
				cursor:  saved.Cursor,
			}, nil
		})
	})
	_, id := s.expectResume(t)
	s.resumed(t, id, 1, false)
	s.msg(t, 1, 1)
	s.msg(t, 2, 2)
	waitDelivered(t, s.c, 2)
	waitStored(t, store, key, 2)
	before := store.count()
	s.msg(t, 3, 3) // a batch after no loss
	waitDelivered(t, s.c, 3)
	waitStored(t, store, key, 3)

	// A frame past the next seq: the client resumes from 3, and the
	// runtime, restarted, no longer knows the stream. Its answer and the
	// first message of the stream started again reach the client in one
	// read, as the browser hands over what arrived while the page was busy.
	s.msg(t, 5, 5)
	after, id := s.expectResume(t)
	if after != 3 {
		t.Fatalf("the gap resumed after %d, want 3", after)
	}
	tr.holdUntil([]byte(`"params":10`))
	s.send(t, librelay.NewError(librelay.Frame{Type: librelay.TypeResume, ID: id}, librelay.CodeCursorEvicted, "restarted"))
	s.msg(t, 1, 10)
	waitDelivered(t, s.c, 4)

	plain, first := delivered.at(3), delivered.at(10)
	if plain.commits != before {
		t.Errorf("a batch after no loss was delivered after %d commits of its own, want none", plain.commits-before)
	}
	if first.cursor != 0 {
		t.Errorf("the first message of the stream started again was delivered with the Store's cursor at %d, want 0", first.cursor)
	}
	if history > 0 && !first.lost {
		t.Errorf("the first message of the stream started again was delivered before the Store had the cursor_evicted loss")
	}
	waitStored(t, store, key, 1)
	// Once the stream started again is stored, a batch after it is a plain
	// one again: no commit of its own before it.
	before = store.count()
	s.msg(t, 2, 11)
	waitDelivered(t, s.c, 5)
	waitStored(t, store, key, 2)
	if at := delivered.at(11).commits; at != before {
		t.Errorf("a batch after the restarted stream was stored cost %d commits of its own before its delivery, want none", at-before)
	}
	if history > 0 {
		if got, want := storedHistory(t, store, key), "1 2 3 [cursor_evicted] 10 11"; got != want {
			t.Fatalf("stored: %s, want %s", got, want)
		}
	}
}

// atDelivery keeps, for each message delivered, what a look at the Store
// read as its batch was delivered, before the handler took any of it, by
// the message's params (a number in these tests).
type atDelivery[T any] struct {
	mu sync.Mutex
	by map[int]T
}

// handler is an OnMessages that looks at the Store as each batch is
// delivered, keeps what it read for every message of the batch, and hands
// the batch to the Collector c returns (a func: the one a test's peer
// makes may not exist yet when its options are set).
func (a *atDelivery[T]) handler(c func() *clienttest.Collector, look func(context.Context) (T, error)) func(context.Context, []client.Message) (int, error) {
	return func(ctx context.Context, batch []client.Message) (int, error) {
		v, err := look(ctx)
		if err != nil {
			return 0, err
		}
		a.mu.Lock()
		if a.by == nil {
			a.by = map[int]T{}
		}
		for _, m := range batch {
			var rpc struct{ Params int }
			_ = json.Unmarshal(m.Payload, &rpc)
			a.by[rpc.Params] = v
		}
		a.mu.Unlock()
		for i, m := range batch {
			if err := c().OnMessage(m); err != nil {
				return i, err
			}
		}
		return len(batch), nil
	}
}

// at is what the Store had when message n was delivered.
func (a *atDelivery[T]) at(n int) T {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.by[n]
}

// waitDelivered waits until the application has n messages.
func waitDelivered(t *testing.T, c *clienttest.Collector, n int) {
	t.Helper()
	c.Wait(t, fmt.Sprintf("%d messages", n), func(c *clienttest.Collector) bool { return len(c.Msgs) >= n })
}

// waitStored waits until the Store's cursor of k is at cursor.
func waitStored(t *testing.T, store client.Store, k client.Key, cursor uint64) {
	t.Helper()
	relaytest.WaitFor(t, fmt.Sprintf("cursor %d stored", cursor), func() bool {
		saved, err := store.Load(context.Background(), k)
		return err == nil && saved.Cursor == cursor
	})
}

// storedHistory is k's History as Attachment.History reads it: each
// message's n, each loss's reason.
func storedHistory(t *testing.T, store client.Store, k client.Key) string {
	t.Helper()
	h, err := store.History(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range client.PlaceLosses(h) {
		if e.Lost != nil {
			out = append(out, "["+e.Lost.Reason+"]")
			continue
		}
		var m relaytest.RPC
		_ = json.Unmarshal(e.Payload, &m)
		out = append(out, string(m.Params))
	}
	return strings.Join(out, " ")
}

// countingStore is a MemoryStore that counts its commits.
type countingStore struct {
	*client.MemoryStore
	commits atomic.Int64
}

func (s *countingStore) Commit(ctx context.Context, k client.Key, saved client.Saved, entries []client.Entry, keep int) error {
	s.commits.Add(1)
	return s.MemoryStore.Commit(ctx, k, saved, entries, keep)
}

func (s *countingStore) count() int { return int(s.commits.Load()) }

// coalescing is a Transport whose connections can be told to hand over
// what arrives in one Read until a message holding a word has come
// (holdUntil): the browser hands the engine every message that arrived
// while the page was busy at once, which a test cannot time on a loopback
// socket, where each frame tends to come on its own.
type coalescing struct {
	client.Transport
	mu   sync.Mutex
	word []byte // while not nil, a Read waits for a message holding it
}

func (c *coalescing) holdUntil(word []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.word = word
}

func (c *coalescing) Dial(ctx context.Context, url string, protocols []string) (client.Conn, error) {
	conn, err := c.Transport.Dial(ctx, url, protocols)
	if err != nil {
		return nil, err
	}
	return &coalescingConn{Conn: conn, c: c}, nil
}

type coalescingConn struct {
	client.Conn
	c *coalescing
}

func (cc *coalescingConn) Read(ctx context.Context) ([][]byte, error) {
	var out [][]byte
	for {
		msgs, err := cc.Conn.Read(ctx)
		for _, m := range msgs {
			out = append(out, bytes.Clone(m)) // the Conn's slices last until its next Read
		}
		if err != nil {
			return out, err
		}
		cc.c.mu.Lock()
		word := cc.c.word
		held := word != nil && !slices.ContainsFunc(out, func(m []byte) bool { return bytes.Contains(m, word) })
		if !held {
			cc.c.word = nil
		}
		cc.c.mu.Unlock()
		if !held {
			return out, nil
		}
	}
}

// A place a connection left open in the Store (its resume unanswered while
// it delivered) is closed in the Store before the first message after the
// resume's answer is delivered: the page that stores what it took itself
// (relay.js commitTail) copies whether a place is open from the Store's
// last commit, and stored the place as still open, where the next page's
// not_resumed loss would go, though the runtime had answered there.
func TestPlaceClosedBeforeTheMessagesAfterTheAnswer(t *testing.T) {
	t.Parallel()
	tr := &coalescing{Transport: client.DefaultTransport}
	var open atDelivery[bool] // message n -> a place open in the Store at its delivery
	c := clienttest.NewCollector()
	var p *pages
	p = newPagesWith(t, guard, c, func(o *client.Options) {
		o.Transport = tr
		key := client.Key{URL: o.URL, Instance: o.Instance, Name: client.DefaultName}
		o.OnMessages = open.handler(func() *clienttest.Collector { return c }, func(ctx context.Context) (bool, error) {
			saved, err := p.store.Load(ctx, key)
			return saved.PlaceOpen, err
		})
	})
	p.unsequenced(t, 1, 2)
	p.reload(t, guard)
	_, id := p.expectResume(t)
	p.unsequenced(t, 3) // delivered before the answer: the place is stored, open
	// The answer and the next message come in one Read, as the browser
	// hands over what arrived while the page was busy.
	tr.holdUntil([]byte(`"params":4`))
	p.resumed(t, id, 0, false)
	p.unsequenced(t, 4)
	before, after := open.at(3), open.at(4)
	if !before {
		t.Fatalf("the message delivered before the resume's answer found no place open in the Store: the test tested nothing")
	}
	if after {
		t.Errorf("the first message after the resume's answer was delivered with the Store's place still open")
	}
	if got, want := p.history(t), "1 2 3 4"; got != want {
		t.Fatalf("History: %s, want %s", got, want)
	}
}
