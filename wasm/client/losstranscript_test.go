//go:build !js

package client_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// A loss is in the transcript where it happened, so a page redrawn from
// History shows it after any number of reloads. Against a runtime that
// does not resume, a drop in the middle of an answer loses what was sent
// while the client was away: the loss goes between the last message before
// the drop and the first after it, although it is told (OnEvicted) only
// when the resume's wait ends, after the messages delivered since the
// connection opened. A reload then loses again, after everything before
// it.
func TestLossIsInTheTranscript(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, func(c *devruntime.Config) { c.NoResume, c.AgentRate = true, 500 })
	c := clienttest.NewCollector()
	store := client.NewMemoryStore()
	o := s.options(store, c)
	o.ResumeTimeout = resumeWait
	var mu sync.Mutex
	opens, before, beforeTold := 0, -1, -1 // messages delivered when the second connection opened, and when its loss was told
	was := client.Connecting
	o.OnState = func(sc client.StateChange) {
		if sc.State == client.Open && was != client.Open { // not a change of Resumable alone
			n := len(c.Snapshot())
			mu.Lock()
			if opens++; opens == 2 {
				before = n
			}
			mu.Unlock()
		}
		was = sc.State
		c.OnState(sc)
	}
	o.OnEvicted = func(e client.Eviction) {
		n := len(c.Snapshot())
		mu.Lock()
		if beforeTold < 0 {
			beforeTold = n
		}
		mu.Unlock()
		c.OnEvicted(e)
	}
	a := s.attach(o)
	session := startChat(t, c, a)
	c.Wait(t, "resumable false", func(c *clienttest.Collector) bool { return !lastState(c).Resumable })

	dropMidCount(t, s, c, a, session)
	mu.Lock()
	at := before
	t.Logf("%d messages before the drop; %d more delivered before the loss was told", before, beforeTold-before)
	mu.Unlock()

	// The engine commits a batch after its handler returns: the turn's end
	// is delivered before it is in the transcript.
	c.Lock()
	told := c.Evicted[0]
	received := len(c.Msgs)
	c.Unlock()
	var h []client.Entry
	relaytest.WaitFor(t, "the transcript to hold every message delivered", func() bool {
		h = history(t, s, store)
		return receivedIn(h) >= received
	})
	losses := lossesIn(h)
	if len(losses) != 1 {
		t.Fatalf("the transcript holds %d losses after one drop, want 1", len(losses))
	}
	if got := *h[losses[0]].Lost; got != told {
		t.Fatalf("the transcript's loss is %+v, OnEvicted told %+v", got, told)
	}
	if n := receivedIn(h[:losses[0]]); n != at {
		t.Fatalf("the loss follows %d received messages, want the %d delivered before the connection opened again", n, at)
	}
	if n := receivedIn(h); n != received {
		t.Fatalf("the transcript holds %d received messages, %d were delivered", n, received)
	}

	// A reload: the first loss stays where it was, the reload's own goes
	// after everything before it.
	a.Close()
	kept := history(t, s, store)
	b := s.attach(o)
	c.Wait(t, "the reload's loss reported", func(c *clienttest.Collector) bool { return evictions(c, "not_resumed") == 2 })
	promptCount(t, c, b, 4, session, 50)
	relaytest.WaitFor(t, "the reload's loss in the transcript", func() bool {
		h = history(t, s, store)
		return len(lossesIn(h)) >= 2
	})
	if len(h) <= len(kept) || !reflect.DeepEqual(h[:len(kept)], kept) {
		t.Fatal("the reload changed the transcript it found")
	}
	if l := h[len(kept)].Lost; l == nil || l.Reason != client.EvictedNotResumed {
		t.Fatalf("the reload's first entry is %+v, want its not_resumed loss", h[len(kept)])
	}
	if got := lossesIn(h); len(got) != 2 {
		t.Fatalf("the transcript holds %d losses after a drop and a reload, want 2", len(got))
	}
}

func history(t *testing.T, s *stack, store client.Store) []client.Entry {
	t.Helper()
	h, err := store.History(context.Background(), client.Key{URL: s.url(), Instance: s.env.Instance, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return client.PlaceLosses(h)
}

// lossesIn returns the indexes of h's losses.
func lossesIn(h []client.Entry) []int {
	var at []int
	for i, e := range h {
		if e.Lost != nil {
			at = append(at, i)
			if e.Out || e.Seq != 0 || len(e.Payload) != 0 {
				panic("a loss entry with a message's fields")
			}
		}
	}
	return at
}

// receivedIn counts h's received messages.
func receivedIn(h []client.Entry) int {
	n := 0
	for _, e := range h {
		if !e.Out && e.Lost == nil {
			n++
		}
	}
	return n
}

// PlaceLosses moves a not_resumed loss back into every place still open
// before it, and leaves the marks out: a place an answer followed (the
// resume was answered), one still open at the end (its resume's outcome
// not known yet), an answer; a loss whose place was trimmed away stays
// where it was told. A place recorded before answers were (FromSeq 0, the
// first cases) is read as it was then: one another place follows took no
// loss.
func TestPlaceLosses(t *testing.T) {
	msg := func(s string) client.Entry { return client.Entry{Payload: []byte(s)} }
	place := func() client.Entry { return client.Entry{Lost: &client.Eviction{}} }
	open := func() client.Entry { return client.Entry{Lost: &client.Eviction{FromSeq: 1}} }
	answered := func() client.Entry { return client.Entry{Lost: &client.Eviction{FromSeq: 2}} }
	lost := func(reason string) client.Entry { return client.Entry{Lost: &client.Eviction{Reason: reason}} }
	for _, c := range []struct {
		name     string
		in, want []client.Entry
	}{
		{"moved back", []client.Entry{msg("a"), place(), msg("b"), msg("c"), lost("not_resumed"), msg("d")},
			[]client.Entry{msg("a"), lost("not_resumed"), msg("b"), msg("c"), msg("d")}},
		{"a place no loss took", []client.Entry{msg("a"), place(), msg("b"), place(), msg("c"), lost("not_resumed")},
			[]client.Entry{msg("a"), msg("b"), lost("not_resumed"), msg("c")}},
		{"a place at the end", []client.Entry{msg("a"), lost("not_resumed"), msg("b"), place(), msg("c")},
			[]client.Entry{msg("a"), lost("not_resumed"), msg("b"), msg("c")}},
		{"the place trimmed away", []client.Entry{msg("b"), lost("not_resumed"), msg("c")},
			[]client.Entry{msg("b"), lost("not_resumed"), msg("c")}},
		{"another loss stays where told", []client.Entry{place(), msg("a"), lost("evicted"), msg("b")},
			[]client.Entry{msg("a"), lost("evicted"), msg("b")}},
		{"two places unanswered", []client.Entry{msg("a"), open(), msg("b"), open(), msg("c"), lost("not_resumed"), msg("d")},
			[]client.Entry{msg("a"), lost("not_resumed"), msg("b"), lost("not_resumed"), msg("c"), msg("d")}},
		{"a place answered", []client.Entry{msg("a"), open(), msg("b"), answered(), open(), msg("c"), lost("not_resumed")},
			[]client.Entry{msg("a"), msg("b"), lost("not_resumed"), msg("c")}},
		{"an answer closes every place before it", []client.Entry{open(), msg("a"), open(), msg("b"), answered(), msg("c"), lost("not_resumed")},
			[]client.Entry{msg("a"), msg("b"), msg("c"), lost("not_resumed")}},
		{"places open at the end", []client.Entry{msg("a"), lost("not_resumed"), open(), msg("b"), open(), msg("c")},
			[]client.Entry{msg("a"), lost("not_resumed"), msg("b"), msg("c")}},
		{"a loss closes the places it fills", []client.Entry{open(), msg("a"), lost("not_resumed"), open(), msg("b"), lost("not_resumed")},
			[]client.Entry{lost("not_resumed"), msg("a"), lost("not_resumed"), msg("b")}},
		{"an old place another follows", []client.Entry{place(), msg("a"), open(), msg("b"), lost("not_resumed")},
			[]client.Entry{msg("a"), lost("not_resumed"), msg("b")}},
		{"an old place before an answer", []client.Entry{place(), msg("a"), answered(), msg("b"), lost("not_resumed")},
			[]client.Entry{msg("a"), msg("b"), lost("not_resumed")}},
	} {
		if got := client.PlaceLosses(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %s, want %s", c.name, describeEntries(got), describeEntries(c.want))
		}
	}
}

func describeEntries(h []client.Entry) string {
	s := ""
	for _, e := range h {
		switch {
		case e.Lost == nil:
			s += string(e.Payload) + " "
		case e.Lost.Reason == "":
			s += fmt.Sprintf("[mark %d] ", e.Lost.FromSeq)
		default:
			s += "[" + e.Lost.Reason + "] "
		}
	}
	return s
}
