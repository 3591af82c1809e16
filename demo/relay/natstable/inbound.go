package natstable

import (
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// inbound is one subscription of this node's: the subject of a runtime or
// of an attachment it holds, each handled in the order its messages were
// published. A runtime's subject has a goroutine of its own (NATS's, for an
// async subscription); the subjects of one instance's attachments on this
// node share one (a dispatcher), as the frames of one instance share the
// runtime connection's reader on a single relay, which no socket makes
// wait: one whose send queue is full is shed at once
// (relay.Limits.QueueFrames), so a slow browser holds up no other. One
// goroutine that stays busy while frames flow costs far less than a
// goroutine per attachment woken for every frame.
type inbound struct {
	t   *Table
	sub *nats.Subscription
	// target is the local endpoint messages are handed to; nil drops them.
	target func() relay.Endpoint
	// onGap, when set, is told once that frames were lost on the way.
	onGap func()
	// toRuntime: the subject is a runtime's, whose frames come from
	// attachments on other nodes; each names its sender's session.
	toRuntime bool

	mu   sync.Mutex
	pubs map[pubKey]*pubState // per publishing stream: how far it came
	// lost: a loss was reported (onGap), and the socket told is ending, so
	// frames are dropped until another socket takes the subscription over.
	lost bool
	buf  []byte
}

type pubKey struct{ node, stream uint64 }

type pubState struct {
	n, acked uint64
}

// maxPublishers bounds the streams an inbound remembers; past it, it starts
// over (a stream it forgets is taken as new, so a loss exactly then could go
// unseen). One node holds one stream per route it publishes to, so this is
// the number of nodes by the times the route changed hands.
const maxPublishers = 1024

// subscribe subscribes a runtime's subject.
func (t *Table) subscribe(subject string, target func() relay.Endpoint, onGap func()) (*inbound, error) {
	in := &inbound{t: t, target: target, onGap: onGap, toRuntime: true, pubs: make(map[pubKey]*pubState)}
	sub, err := t.nc.Subscribe(subject, in.handle)
	if err != nil {
		return nil, err
	}
	sub.SetPendingLimits(t.cfg.PendingFrames, t.cfg.PendingBytes)
	in.sub = sub
	return in, nil
}

// dispatcher runs the handlers of one instance's attachment subjects on
// this node, from one channel NATS delivers into. When the channel is full
// NATS drops, and the attachments' inbounds see the gap.
type dispatcher struct {
	ch    chan *nats.Msg
	done  chan struct{}
	users int // under the table's mu

	mu  sync.Mutex
	ins map[*nats.Subscription]*inbound
}

// dispatcherLocked returns instance's dispatcher, starting it if none runs;
// with t.mu held.
func (t *Table) dispatcherLocked(instance string) *dispatcher {
	d := t.disp[instance]
	if d == nil {
		d = &dispatcher{ch: make(chan *nats.Msg, t.cfg.PendingFrames), done: make(chan struct{}), ins: make(map[*nats.Subscription]*inbound)}
		t.disp[instance] = d
		go d.run()
	}
	d.users++
	return d
}

// leaveLocked gives back a use of instance's dispatcher; the last one ends it.
func (t *Table) leaveLocked(instance string, d *dispatcher, sub *nats.Subscription) {
	d.mu.Lock()
	delete(d.ins, sub)
	d.mu.Unlock()
	if d.users--; d.users == 0 {
		close(d.done)
		delete(t.disp, instance)
	}
}

func (d *dispatcher) run() {
	for {
		select {
		case m := <-d.ch:
			d.mu.Lock()
			in := d.ins[m.Sub]
			d.mu.Unlock()
			if in != nil {
				in.handle(m)
			}
		case <-d.done:
			return
		}
	}
}

// subscribeVia subscribes an attachment's subject through d.
func (t *Table) subscribeVia(d *dispatcher, subject string, target func() relay.Endpoint, onGap func()) (*inbound, error) {
	in := &inbound{t: t, target: target, onGap: onGap, pubs: make(map[pubKey]*pubState)}
	d.mu.Lock()
	defer d.mu.Unlock()
	sub, err := t.nc.ChanSubscribe(subject, d.ch)
	if err != nil {
		return nil, err
	}
	in.sub = sub
	d.ins[sub] = in
	return in, nil
}

func (in *inbound) handle(m *nats.Msg) {
	h, body, ok := parseHeader(m.Data)
	if !ok {
		return
	}
	in.mu.Lock()
	k := pubKey{h.node, h.stream}
	p := in.pubs[k]
	if p == nil {
		if len(in.pubs) >= maxPublishers {
			clear(in.pubs)
		}
		p = &pubState{}
		in.pubs[k] = p
	}
	// A tail (no frame) shows a loss even to a receiver that has had nothing
	// of the stream yet: whatever it published went astray, or was for a
	// socket before this one, whose client resumed; its redial costs only
	// latency.
	tail := len(body) == 0
	gap := p.n != 0 && h.n != p.n+1 || tail && p.n == 0 && h.n > 1
	first := p.n == 0
	if h.n > p.n {
		p.n = h.n
	}
	report := gap && in.loseLocked()
	lost := in.lost
	in.mu.Unlock()

	if gap {
		in.t.log.Warn("frames lost on the bus", "subject", m.Subject, "from", nodeToken(h.node), "counter", h.n)
		in.t.gaps.Add(1)
	}
	if report {
		in.onGap()
	}
	if !lost && !tail {
		if ep := in.target(); ep != nil {
			if f, ok := parseFrame(body); ok {
				if in.toRuntime && f.Session != "" {
					in.t.sawFrom(route{f.Instance, f.Session}, h.node)
				}
				ep.Send(f)
			}
		}
	}
	if first || h.n%uint64(in.t.ackEvery) == 0 {
		in.ack(k, p, h.n, false)
	}
}

// loseLocked marks a loss; true when it is the onGap's to report, once;
// with in.mu held.
func (in *inbound) loseLocked() bool {
	if in.lost || in.onGap == nil {
		return false
	}
	in.lost = true
	return true
}

// dropped: NATS dropped messages of this subscription on this node, past
// its pending limits (an instance's dispatcher, or a runtime's handler,
// behind). It is a loss as a skip of the counter is, told now: before, it
// showed only at the stream's next frame, and a client whose last frames
// those were (the end of an answer) waited for ever. NATS tells once per
// run of drops; the skip a later frame shows counts again in Gaps.
func (in *inbound) dropped() {
	in.mu.Lock()
	report := in.loseLocked()
	in.mu.Unlock()
	in.t.log.Warn("frames dropped past a subscription's pending limits", "subject", in.sub.Subject)
	in.t.gaps.Add(1)
	if report {
		in.onGap()
	}
}

// slowConsumer: NATS reported that it dropped messages of sub
// (nats.ErrSlowConsumer); the inbound it is, if it is still one of this
// node's, takes it as a loss.
func (t *Table) slowConsumer(sub *nats.Subscription) {
	if in := t.inboundOf(sub); in != nil {
		in.dropped()
	}
}

// inboundOf is sub's inbound, found by the runtime or attachment its
// subject names, so that no index of subscriptions is kept for a rare
// report; nil for a subscription this node has let go since, or one that
// is no inbound's (control, acks).
func (t *Table) inboundOf(sub *nats.Subscription) *inbound {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var in *inbound
	if k, ok := t.sub.parseAttachment(sub.Subject); ok && t.atts[k] != nil {
		in = t.atts[k].in
	} else if inst, ok := t.sub.parseRuntime(sub.Subject); ok && t.runtimes[inst] != nil {
		in = t.runtimes[inst].in
	}
	if in == nil || in.sub != sub {
		return nil
	}
	return in
}

// takenOver: a new socket on this node took the attachment over from the
// one a loss ended, and with it this subscription. The loss is not the new
// socket's to pay for: its client resumes from its own cursor as it
// attaches, which brings back what was lost. So frames are handed on again,
// and a later loss is reported again, to the new socket; before, every
// frame for it on this node was dropped, its resume's replay included.
func (in *inbound) takenOver() {
	in.mu.Lock()
	in.lost = false
	in.mu.Unlock()
}

// ack tells the publisher how far its stream was handed on.
func (in *inbound) ack(k pubKey, p *pubState, n uint64, released bool) {
	in.mu.Lock()
	p.acked = n
	in.buf = appendAck(in.buf[:0], ack{stream: k.stream, n: n, node: in.t.id, released: released})
	b := in.buf
	in.mu.Unlock()
	in.t.nc.Publish(in.t.sub.ack(k.node), b)
}

// release unsubscribes and tells every publisher seen that this node no
// longer takes their stream.
func (in *inbound) release() {
	in.sub.Unsubscribe()
	in.mu.Lock()
	pubs := make(map[pubKey]uint64, len(in.pubs))
	for k, p := range in.pubs {
		pubs[k] = p.n
	}
	in.mu.Unlock()
	for k, n := range pubs {
		in.t.nc.Publish(in.t.sub.ack(k.node), appendAck(nil, ack{stream: k.stream, n: n, node: in.t.id, released: true}))
	}
}

// lostFrames is the gap report of an attachment's inbound: its socket is
// closed with runtime_gone so its client redials and resumes from its
// cursor, which recovers what the bus lost from the runtime's retention.
func (t *Table) lostFrames(ep relay.Endpoint) {
	if h := t.hooks.Load(); h != nil && h.End != nil {
		h.End(ep, relayleg.CodeRuntimeGone, "frames were lost between relay nodes; resume")
	}
}
