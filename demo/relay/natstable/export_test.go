package natstable

import (
	"encoding/json"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/librelay"
)

// DataMessage is a data message as node would publish it: what a node on
// the bus could send, for tests that play one.
func DataMessage(node, stream, n uint64, f *librelay.Frame) []byte {
	return appendFrame(appendHeader(nil, header{node, stream, n}), f)
}

// TailMessage is the tail node would publish on a stream whose last frame
// took counter n-1 (stream.tail).
func TailMessage(node, stream, n uint64) []byte {
	return appendHeader(nil, header{node, stream, n})
}

// AttachmentSubject is the subject of an attachment's frames under the
// default prefix.
func AttachmentSubject(instance, session string) string {
	return subjects{prefix: "relay"}.attachment(instance, session)
}

// ClaimMessage is a claim as node would publish it on the control subject:
// it holds (instance, session)'s socket since epoch.
func ClaimMessage(node uint64, instance, session string, epoch int64) []byte {
	b, _ := json.Marshal(control{Kind: kindClaim, Node: node, Instance: instance, Session: session, Epoch: epoch})
	return b
}

// HandleControl hands t a control message as its subscription would, and
// returns once t has acted on it.
func (t *Table) HandleControl(data []byte) { t.control(&nats.Msg{Data: data}) }

// Consumed reports whether t's stream to (instance, session) on another
// node knows its consumer (that node acknowledged a frame), so that Send
// waits for room in its window.
func (t *Table) Consumed(instance, session string) bool {
	s := t.streamTo(instance, session)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consumer != 0
}

// Sent is the counter t's stream to (instance, session) has reached:
// frames published and dropped, and tails.
func (t *Table) Sent(instance, session string) uint64 {
	s := t.streamTo(instance, session)
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

func (t *Table) streamTo(instance, session string) *stream {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.toAtt[route{instance, session}]
}

// Dropped counts the messages NATS dropped, past the pending limits, of
// the subscription of (instance, session)'s socket here; 0 when none is
// held here.
func (t *Table) Dropped(instance, session string) int {
	t.mu.RLock()
	la := t.atts[route{instance, session}]
	t.mu.RUnlock()
	if la == nil || la.in == nil {
		return 0
	}
	n, _ := la.in.sub.Dropped()
	return max(n, 0)
}

// StallDispatcher holds up the dispatcher of instance's sockets here, as a
// node too busy to keep up would, until release: it hands it a message
// whose handling waits, and returns once the dispatcher has taken it.
// Messages for the instance's sockets pile up in the dispatcher's channel
// meanwhile, and past PendingFrames NATS drops them.
func (t *Table) StallDispatcher(instance string) (release func()) {
	t.mu.RLock()
	d := t.disp[instance]
	t.mu.RUnlock()
	taken, stall := make(chan struct{}), make(chan struct{})
	sub := new(nats.Subscription)
	in := &inbound{t: t, pubs: make(map[pubKey]*pubState), target: func() relay.Endpoint {
		close(taken)
		<-stall
		return nil
	}}
	d.mu.Lock()
	d.ins[sub] = in
	d.mu.Unlock()
	f := librelay.Frame{Type: librelay.TypeACPMessage}
	d.ch <- &nats.Msg{Sub: sub, Data: appendFrame(appendHeader(nil, header{1, 1, 1}), &f)}
	<-taken
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stall)
			d.mu.Lock()
			delete(d.ins, sub)
			d.mu.Unlock()
		})
	}
}

// StopAnsweringProbes makes t a node of an earlier version as other nodes
// see it when they would take its runtimes over: nothing answers on its
// probe subject.
func (t *Table) StopAnsweringProbes() error {
	if err := t.probeSub.Unsubscribe(); err != nil {
		return err
	}
	return t.nc.Flush()
}
