//go:build !js

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// A page that opened its connection again and went away (a reload) before
// the resume's answer was awaited to its end leaves the place where that
// connection opened in the transcript, with no loss for it yet. Against a
// runtime that does not resume, the next page's not_resumed says what was
// sent while the first was away is gone too: History marks both jumps, the
// one the first page showed unmarked (it went away before it knew) and the
// next page's own.
func TestUnansweredPlaceBeforeAReloadIsMarked(t *testing.T) {
	t.Parallel()
	p := newPages(t)
	p.unsequenced(t, 1, 2)
	p.reload(t, guard) // the connection opens again; its resume is not answered
	p.expectResume(t)
	p.unsequenced(t, 5, 6) // 3 and 4 were sent while the page was away
	p.reload(t, resumeWait)
	p.expectResume(t)
	p.c.Wait(t, "the reload's loss reported", func(c *clienttest.Collector) bool { return evictions(c, "not_resumed") == 1 })
	p.unsequenced(t, 9)
	if got, want := p.history(t), "1 2 [not_resumed] 5 6 [not_resumed] 9"; got != want {
		t.Fatalf("History: %s, want %s", got, want)
	}
}

// A place whose resume was answered, after the place was stored, lost
// nothing the runtime did not tell: the next page's not_resumed marks only
// its own place.
func TestAnsweredPlaceIsNotMarked(t *testing.T) {
	t.Parallel()
	p := newPages(t)
	p.unsequenced(t, 1, 2)
	p.reload(t, guard)
	_, id := p.expectResume(t)
	p.unsequenced(t, 3, 4) // stored, with the place before them, before the answer
	p.resumed(t, id, 0, false)
	p.sendAfterResume(t)
	p.reload(t, resumeWait)
	p.expectResume(t)
	p.c.Wait(t, "the reload's loss reported", func(c *clienttest.Collector) bool { return evictions(c, "not_resumed") == 1 })
	p.unsequenced(t, 9)
	if got, want := p.history(t), "1 2 3 4 sent [not_resumed] 9"; got != want {
		t.Fatalf("History: %s, want %s", got, want)
	}
}

// A place stored before its connection dropped, unanswered, is closed by
// the answer to the next connection's resume: a not_resumed loss after
// that (its runtime overdue) marks only what came after the answer.
func TestAnswerClosesAPlaceOfAnEarlierConnection(t *testing.T) {
	t.Parallel()
	answerClosesAnEarlierPlace(t, func(p *pages) { p.front.Cut() })
}

// answerClosesAnEarlierPlace stores a place, has goAway end its connection
// (or page) before its resume is answered, answers the next connection's
// resume, and checks that a later not_resumed loss marks only what came
// after that answer.
func answerClosesAnEarlierPlace(t *testing.T, goAway func(*pages)) {
	t.Helper()
	p := newPages(t)
	p.unsequenced(t, 1, 2)
	p.reload(t, guard)
	p.expectResume(t)
	p.unsequenced(t, 3, 4) // the place, stored; then gone unanswered
	goAway(p)
	_, id := p.expectResume(t)
	p.resumed(t, id, 0, false)
	p.sendAfterResume(t)
	p.unsequenced(t, 5)
	p.reload(t, resumeWait)
	p.expectResume(t)
	p.c.Wait(t, "the reload's loss reported", func(c *clienttest.Collector) bool { return evictions(c, "not_resumed") == 1 })
	p.unsequenced(t, 9)
	if got, want := p.history(t), "1 2 3 4 sent 5 [not_resumed] 9"; got != want {
		t.Fatalf("History: %s, want %s", got, want)
	}
}

// A place a page left open when it went away unanswered is closed by the
// next page's answered resume, though that page stored no place of its
// own (the answer came before anything it delivered): a not_resumed loss a
// later page is told marks only its own place, not that one, where the
// answered resume lost nothing (the Store kept Saved.PlaceOpen).
func TestAnswerClosesAPlaceAnEarlierPageLeft(t *testing.T) {
	t.Parallel()
	answerClosesAnEarlierPlace(t, func(p *pages) { p.reload(t, guard) })
}

// Messages a handler refused before the connection dropped are held and
// delivered again on the next connection, before anything newer, and the
// place where it opened is after them. A handler slow to take them then
// has the not_resumed loss told during that delivery: it is recorded after
// the place, not before the held messages, so History marks the loss once,
// where the connection opened, and a later reload's loss does not fill that
// place again.
func TestLossDuringHeldDeliveryIsMarkedOnce(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		opens int
		told  = make(chan struct{})
	)
	c := clienttest.NewCollector()
	p := newPagesWith(t, resumeWait, c, func(o *client.Options) {
		o.OnState = func(sc client.StateChange) {
			mu.Lock()
			c.Lock()
			if sc.State == client.Open && (len(c.States) == 0 || c.States[len(c.States)-1].State != client.Open) {
				opens++
			}
			c.Unlock()
			mu.Unlock()
			c.OnState(sc)
		}
		o.OnEvicted = func(e client.Eviction) {
			c.Lock()
			first := e.Reason == client.EvictedNotResumed && evictions(c, e.Reason) == 0
			c.Unlock()
			if first {
				close(told)
			}
			c.OnEvicted(e)
		}
		o.OnMessage = func(m client.Message) error {
			if n := string(m.Payload); !strings.Contains(n, `"params":2}`) && !strings.Contains(n, `"params":3}`) {
				return c.OnMessage(m)
			}
			mu.Lock()
			reopened := opens > 1
			mu.Unlock()
			if !reopened {
				return errRefused // held, until the connection opens again
			}
			select { // slow: the resume's wait ends during this delivery
			case <-told:
			case <-time.After(guard):
			}
			return c.OnMessage(m)
		}
	})
	p.unsequenced(t, 1)
	for n := 2; n <= 3; n++ {
		p.send(t, librelay.Frame{Type: librelay.TypeACPMessage,
			Payload: fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"n","params":%d}`, n)})
	}
	// The client answers a request it does not handle as it reads it: once
	// the answer is in, it has read the messages before it.
	p.send(t, librelay.Frame{Type: "x.query", ID: "q1"})
	for f := p.next(t); f.ReplyTo != "q1"; f = p.next(t) {
	}
	p.front.Cut()
	p.c.Wait(t, "the loss reported", func(c *clienttest.Collector) bool { return evictions(c, "not_resumed") == 1 })
	p.sent += 2
	p.unsequenced(t, 5)
	p.reload(t, resumeWait)
	p.c.Wait(t, "the reload's loss reported", func(c *clienttest.Collector) bool { return evictions(c, "not_resumed") == 2 })
	p.unsequenced(t, 9)
	if got, want := p.history(t), "1 2 3 [not_resumed] 5 [not_resumed] 9"; got != want {
		t.Fatalf("History: %s, want %s", got, want)
	}
}

// pages are the pages of one stream, reloaded one after another, against
// a scripted runtime peer that stamps no seq: each reload is a new
// Attachment on the same Store. The pages reach the relay through a proxy
// the test can cut.
type pages struct {
	*scripted
	front *relaytest.Proxy
	store *client.MemoryStore
	edit  func(*client.Options)
	sent  int
}

func newPages(t *testing.T) *pages {
	t.Helper()
	return newPagesWith(t, guard, clienttest.NewCollector(), nil)
}

// newPagesWith is newPages with the first page waiting resumeTimeout for a
// resume's answer, c as the application, and every page's options edited
// by edit, if not nil.
func newPagesWith(t *testing.T, resumeTimeout time.Duration, c *clienttest.Collector, edit func(*client.Options)) *pages {
	t.Helper()
	env := relaytest.Start(t, nil)
	p := &pages{
		scripted: &scripted{env: env, rt: env.Connect(t), c: c},
		front:    relaytest.NewProxy(t, strings.TrimPrefix(env.HTTPURL, "http://")),
		store:    client.NewMemoryStore(),
		edit:     edit,
	}
	p.attach(t, resumeTimeout)
	p.expectResume(t) // a stream's first connection: nothing to lose
	return p
}

// reload closes the page's attachment and attaches again, on the same
// stream, waiting resumeTimeout for the resume's answer.
func (p *pages) reload(t *testing.T, resumeTimeout time.Duration) {
	t.Helper()
	was := p.a.Session()
	p.a.Close()
	p.attach(t, resumeTimeout)
	if p.a.Session() != was {
		t.Fatalf("the reload got attachment id %q, want %q back", p.a.Session(), was)
	}
}

// attach attaches a page, waiting resumeTimeout for a resume's answer.
func (p *pages) attach(t *testing.T, resumeTimeout time.Duration) {
	t.Helper()
	env := p.env
	o := client.Options{
		URL: p.url(), Instance: env.Instance,
		Credential: func(context.Context) (string, error) { return env.ClientToken, nil },
		RelayKey:   env.Key, Store: p.store, History: 1000, ResumeTimeout: resumeTimeout,
		OnMessage: p.c.OnMessage, OnEvicted: p.c.OnEvicted, OnState: p.c.OnState,
		Backoff: client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	}
	if p.edit != nil {
		p.edit(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	a, err := client.Attach(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	p.a = a
}

func (p *pages) url() string { return "ws://" + p.front.Addr() + relayleg.AttachPath }

// unsequenced has the runtime send a message for each of ns, unsequenced,
// and waits until the Store holds them.
func (p *pages) unsequenced(t *testing.T, ns ...int) {
	t.Helper()
	for _, n := range ns {
		p.send(t, librelay.Frame{Type: librelay.TypeACPMessage,
			Payload: fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"n","params":%d}`, n)})
	}
	p.sent += len(ns)
	relaytest.WaitFor(t, fmt.Sprintf("%d messages stored", p.sent), func() bool {
		return receivedIn(p.raw(t)) == p.sent
	})
}

// sendAfterResume sends a message and waits for the runtime to have it: a
// reclaimed stream's sends wait for the resume's answer, so it has been
// taken.
func (p *pages) sendAfterResume(t *testing.T) {
	t.Helper()
	send(t, p.a, `{"jsonrpc":"2.0","method":"after"}`)
	if f := p.next(t); f.Type != librelay.TypeACPMessage {
		t.Fatalf("the client sent %s %s, want the acp.message", f.Type, f.Payload)
	}
}

func (p *pages) raw(t *testing.T) []client.Entry {
	t.Helper()
	h, err := p.store.History(context.Background(), client.Key{URL: p.url(), Instance: p.env.Instance, Name: client.DefaultName})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// history is the stream's History: each message's n, each loss's reason,
// "sent" for each message sent.
func (p *pages) history(t *testing.T) string {
	t.Helper()
	var out []string
	for _, e := range client.PlaceLosses(p.raw(t)) {
		if e.Lost != nil {
			out = append(out, "["+e.Lost.Reason+"]")
			continue
		}
		if e.Out {
			out = append(out, "sent")
			continue
		}
		var m relaytest.RPC
		if err := json.Unmarshal(e.Payload, &m); err != nil {
			out = append(out, string(e.Payload))
			continue
		}
		out = append(out, string(m.Params))
	}
	return strings.Join(out, " ")
}

// The place where a connection took the stream up again is in the Store
// before the first message after it is delivered, not only in the commit
// made once the handler took that message: where a Store's commits reach
// it after the application has the batch (jsbridge's worker mode, the
// worker's commits crossing to the page), a page gone in between stores
// what it took itself, without the place (tests/e2e
// TestWorkerPlaceStoredWhenThePageCommitsItself). Stored once, before the
// messages.
func TestPlaceStoredBeforeTheMessagesAfterIt(t *testing.T) {
	t.Parallel()
	var placed atDelivery[bool] // message n -> a place stored when it was delivered
	c := clienttest.NewCollector()
	p := newPagesWith(t, guard, c, func(o *client.Options) {
		store, key := o.Store, client.Key{URL: o.URL, Instance: o.Instance, Name: client.DefaultName}
		o.OnMessages = placed.handler(func() *clienttest.Collector { return c }, func(ctx context.Context) (bool, error) {
			h, err := store.History(ctx, key)
			return slices.ContainsFunc(h, func(e client.Entry) bool { return e.Lost != nil && e.Lost.Reason == "" }), err
		})
	})
	p.unsequenced(t, 1, 2)
	p.reload(t, guard) // the connection opens again; its resume is not answered
	p.expectResume(t)
	p.unsequenced(t, 3, 4)
	if !placed.at(3) {
		t.Errorf("the first message after the place was delivered before the Store had the place")
	}
	var got []string
	for _, e := range p.raw(t) {
		switch {
		case e.Lost != nil:
			got = append(got, fmt.Sprintf("[place %d]", e.Lost.FromSeq))
		default:
			var m relaytest.RPC
			_ = json.Unmarshal(e.Payload, &m)
			got = append(got, string(m.Params))
		}
	}
	if s, want := strings.Join(got, " "), "1 2 [place 1] 3 4"; s != want {
		t.Fatalf("stored: %s, want %s", s, want)
	}
}
