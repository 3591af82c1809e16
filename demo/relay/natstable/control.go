package natstable

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/relaywasm/relaywasm/demo/relay"
)

// The control subject carries, from every node to every other, in the order
// each node sent them:
//
//   - hold: the node now holds instance's runtime (epoch: when it took it).
//   - release: the node's runtime for instance is gone.
//   - claim: the node now holds the socket of (instance, session) (epoch:
//     when it took it).
//   - beat: the node is alive, and the runtimes it holds with their epochs;
//     a beat is the whole truth about its sender, so a missed hold or
//     release is mended within a heartbeat.
//   - sync: the sender (re)joined; everyone beats at once.
//   - knock: a hello naming (instance, session) was refused on the sender
//     for want of a runtime: the attachment's client is still there, and
//     the node where its socket dropped restarts its grace
//     (relay.Knocker). One per such refusal; a node of an earlier version
//     ignores it.
//
// Which node holds which runtime is the only thing nodes tell each other
// about their peers. Attachments are announced once, when claimed, so that
// an older socket elsewhere ends; no node keeps a list of another's live
// sockets, only of the sessions some node has claimed (up to maxRemembered,
// and never forgotten: a node gone or out of touch may still be about to
// see a gap), so that a request for a session nobody ever held is answered
// rather than published to nobody.
const (
	kindHold    = "hold"
	kindRelease = "release"
	kindClaim   = "claim"
	kindBeat    = "beat"
	kindSync    = "sync"
	kindKnock   = "knock"
)

type control struct {
	Kind     string   `json:"k"`
	Node     uint64   `json:"n"`
	Instance string   `json:"i,omitempty"`
	Session  string   `json:"s,omitempty"`
	Epoch    int64    `json:"e,omitempty"`
	Holds    []onHold `json:"h,omitempty"`
}

type onHold struct {
	Instance string `json:"i"`
	Epoch    int64  `json:"e"`
}

// publishControl sends c from this node; errors (no connection) are mended
// by the beats after the reconnect.
func (t *Table) publishControl(c control) {
	c.Node = t.id
	b, err := json.Marshal(c)
	if err == nil {
		t.nc.Publish(t.sub.control(), b)
	}
}

func (t *Table) beatLocked() control {
	c := control{Kind: kindBeat, Holds: make([]onHold, 0, len(t.runtimes))}
	for inst, lr := range t.runtimes {
		c.Holds = append(c.Holds, onHold{inst, lr.epoch})
	}
	return c
}

func (t *Table) publishBeat() {
	t.mu.RLock()
	c := t.beatLocked()
	t.mu.RUnlock()
	t.publishControl(c)
}

// control handles one control message from another node (NoEcho keeps this
// node's own away).
func (t *Table) control(m *nats.Msg) {
	var c control
	if json.Unmarshal(m.Data, &c) != nil || c.Node == t.id || c.Node == 0 {
		return
	}
	t.mu.Lock()
	if !t.connected || t.closed {
		t.mu.Unlock()
		return
	}
	t.nodes[c.Node] = time.Now().UnixNano()
	var fx effects
	switch c.Kind {
	case kindHold:
		t.holdLocked(c.Instance, holder{c.Node, c.Epoch}, &fx)
	case kindRelease:
		t.releaseLocked(c.Instance, holder{c.Node, c.Epoch}, &fx)
	case kindClaim:
		t.claimLocked(route{c.Instance, c.Session}, holder{c.Node, c.Epoch}, &fx)
	case kindBeat:
		held := make(map[string]bool, len(c.Holds))
		for _, h := range c.Holds {
			held[h.Instance] = true
			t.holdLocked(h.Instance, holder{c.Node, h.Epoch}, &fx)
		}
		for inst, h := range t.holders {
			if h.Node == c.Node && !held[inst] {
				t.releaseLocked(inst, h, &fx)
			}
		}
	case kindSync:
		fx.beat = true
	case kindKnock:
		fx.knocked = append(fx.knocked, route{c.Instance, c.Session})
	}
	t.mu.Unlock()
	fx.run(t)
}

// effects are what a change of the table asks of the relay; they run after
// the table's lock is released, since the relay's hooks call back into it.
type effects struct {
	superseded []relay.Endpoint
	arrived    []arrival
	gone       []string
	knocked    []route
	beat       bool
}

type arrival struct {
	instance string
	rt       relay.Endpoint
}

func (fx *effects) run(t *Table) {
	t.superseded(fx.superseded, "another relay node took over this route")
	for _, a := range fx.arrived {
		t.callHooks(func(h *relay.Hooks) { h.RuntimeArrived(a.instance, a.rt) })
	}
	for _, inst := range fx.gone {
		t.callHooks(func(h *relay.Hooks) { h.RuntimeGone(inst) })
	}
	for _, k := range fx.knocked {
		t.callHooks(func(h *relay.Hooks) {
			if h.Knocked != nil {
				h.Knocked(k.instance, k.session)
			}
		})
	}
	if fx.beat {
		t.publishBeat()
	}
}

// holdLocked records that h holds instance's runtime, unless a newer hold is
// known. A runtime here that h supersedes is dropped and ended.
//
// A hold that replaces another one, here or elsewhere, on the same node (a
// new connection: a new epoch) or on another, is a new runtime connection
// for the instance: the instance's sockets here get runtime_gone, as on a
// single relay when a runtime takes an instance over. It is typically the
// same runtime back behind a connection that died unseen (a machine that
// lost power or slept, a NAT that lost the mapping; or its node died and it
// redialled elsewhere before the lease ran out here): it numbers its
// streams afresh and knows none of their attachments, and whatever the old
// connection had in flight to this node's sockets may be lost. A client
// left attached would drop the new runtime's frames as already seen, and
// wait for ever for frames it cannot know it missed; told, it redials and
// resumes from its cursor, or learns it cannot.
func (t *Table) holdLocked(instance string, h holder, fx *effects) {
	if lr := t.runtimes[instance]; lr != nil {
		if !h.newer(holder{t.id, lr.epoch}) {
			return // ours is newer: our hold tells that node to let go
		}
		t.dropRuntimeLocked(instance, lr)
		fx.superseded = append(fx.superseded, lr.ep)
		fx.gone = append(fx.gone, instance) // its own leave no longer finds it the holder, and tells nobody
	}
	cur, ok := t.holders[instance]
	if ok && (cur == h || !h.newer(cur)) {
		return
	}
	if ok {
		fx.gone = append(fx.gone, instance)
	}
	t.holders[instance] = h
	s := t.toRuntime[instance]
	if s == nil {
		s = t.newStream(t.sub.runtime(instance), instance, true)
		t.toRuntime[instance] = s
	}
	s.heldBy(t.sub.unheard(t.id, s.no, h)) // the same subject, another consumer
	fx.arrived = append(fx.arrived, arrival{instance, s})
}

// releaseLocked forgets h's hold on instance, if it is still the one known.
func (t *Table) releaseLocked(instance string, h holder, fx *effects) {
	if cur, ok := t.holders[instance]; !ok || cur != h {
		return
	}
	delete(t.holders, instance)
	if s := t.toRuntime[instance]; s != nil {
		delete(t.toRuntime, instance)
		t.dropStream(s)
	}
	fx.gone = append(fx.gone, instance)
}

// unheard: a frame this node published to a runtime's subject reached no
// subscriber at all (NATS's "503" on the frame's reply subject, which names
// the stream and the hold it was sent under). The holder subscribes before
// it announces its hold and lets go only once it has heard a newer one, so
// nobody subscribing means the holder died (or let the runtime go) before
// any other node took it: the frame is lost, and whatever socket here sent
// it, a session.resume say, waits in vain for its answer, and would take
// the silence for a runtime that cannot resume. So the instance's sockets
// here get runtime_gone now, as on one relay when its runtime leaves,
// rather than when the lease runs out: the hold, if it is still the one
// known, is released. If another has come since, the sockets were told
// runtime_gone when it came (holdLocked). A holder that is in fact alive
// (its subscription was being re-established) is learnt again from its
// next beat; it costs a redial, never content.
func (t *Table) unheard(m *nats.Msg) {
	if len(m.Data) != 0 || m.Header.Get("Status") != "503" {
		return
	}
	no, h, ok := parseUnheard(m.Subject)
	if !ok {
		return
	}
	var fx effects
	t.mu.Lock()
	if s := t.streams[no]; s != nil && s.toRuntime && t.connected && !t.closed {
		if cur, ok := t.holders[s.instance]; ok && cur == h {
			t.log.Info("a runtime's node takes no frames for it; taking the runtime for gone", "instance", s.instance, "peer", nodeToken(h.Node))
			t.releaseLocked(s.instance, h, &fx)
		}
	}
	t.mu.Unlock()
	fx.run(t)
}

// claimLocked: another node now holds k's socket. A socket for it here is
// superseded; an attachment that was here is remembered as moved, so that
// its grace running out here sends no detach. A claim older than the socket
// here is stale, and changes nothing: claims from different nodes may
// arrive in any order, and a client that redials quickly, back to this
// node, may have left the other node's socket before its claim got here
// (tests/cluster TestChaosAcrossNodes: the client's live socket was
// superseded, and the attachment ended). That node supersedes its own
// older socket when this node's claim reaches it. A claim with no epoch
// is from a node of an earlier version, during a rolling upgrade, and wins
// as every claim did then.
func (t *Table) claimLocked(k route, h holder, fx *effects) {
	now := time.Now().UnixNano()
	if la := t.atts[k]; la != nil && h.Epoch != 0 && la.since.newer(h) {
		return
	}
	t.claimedLocked(k, h.Node)
	if la := t.atts[k]; la != nil {
		delete(t.atts, k)
		la.releaseLocked(t, k.instance)
		fx.superseded = append(fx.superseded, la.ep)
		t.moved[k] = now
	} else if _, ok := t.recent[k]; ok {
		delete(t.recent, k)
		t.moved[k] = now
	}
	if s := t.toAtt[k]; s != nil {
		s.claimedBy(h.Node)
	}
}

// beat is the node's clock: it beats, expires the nodes not heard from
// within the lease, forgets what is too old to matter, and sends the tails
// its streams owe (stream.payTail).
func (t *Table) beat() {
	defer t.wg.Done()
	tick := time.NewTicker(t.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case now := <-tick.C:
			t.clock.Store(now.Unix())
			t.publishBeat()
			t.expire(now)
		}
	}
}

func (t *Table) expire(now time.Time) {
	var fx effects
	t.mu.Lock()
	if t.connected {
		for node, seen := range t.nodes {
			if now.UnixNano()-seen > int64(t.cfg.Lease) {
				t.log.Info("relay node not heard from within the lease; taking it for gone", "peer", nodeToken(node))
				t.nodeGoneLocked(node, &fx)
			}
		}
	}
	forget := now.Add(-t.cfg.Remember).UnixNano()
	for k, at := range t.moved {
		if at < forget {
			delete(t.moved, k)
		}
	}
	for k, at := range t.recent {
		if at < forget {
			delete(t.recent, k)
		}
	}
	var owing []*stream
	for k, s := range t.toAtt {
		if s.idle(now.Unix(), 60) {
			delete(t.toAtt, k)
			t.dropStream(s)
		} else if t.connected && s.owes() {
			owing = append(owing, s)
		}
	}
	t.mu.Unlock()
	fx.run(t)
	for _, s := range owing {
		s.payTail()
	}
}

// nodeGoneLocked forgets a node: its runtimes are gone, and streams it
// consumed have no consumer. (The sockets of an instance whose runtime had
// moved away from it were told runtime_gone when it moved: holdLocked.)
func (t *Table) nodeGoneLocked(node uint64, fx *effects) {
	delete(t.nodes, node)
	for inst, h := range t.holders {
		if h.Node == node {
			t.releaseLocked(inst, h, fx)
		}
	}
	for _, s := range t.streams {
		s.forget(node)
	}
}

// disconnected: this node lost the bus. Every runtime held elsewhere is
// unreachable now, so their sockets here get runtime_gone and their clients
// redial (to this node or another) and resume once the route is back;
// frames of this node's own runtimes to other nodes are dropped meanwhile,
// and those nodes' clients resume the same way, told at the next frame or
// at the tail sent once the bus is back (reconnected).
func (t *Table) disconnected(err error) {
	<-t.ready
	var fx effects
	t.mu.Lock()
	if !t.connected || t.closed {
		t.mu.Unlock()
		return
	}
	t.connected = false
	t.log.Warn("lost the NATS connection", "err", err)
	for node := range t.nodes {
		t.nodeGoneLocked(node, &fx)
	}
	for _, s := range t.streams {
		s.forget(0)
	}
	t.mu.Unlock()
	fx.run(t)
}

// reconnected: this node has the bus (again). NATS has restored its
// subscriptions; it says what it holds and asks the others to do the same,
// and tells the nodes holding its streams' attachments how far each stream
// went (stream.tail), so that the sockets whose frames it lost meanwhile
// get runtime_gone there and their clients resume. The other nodes did not
// see this node go if it was back within the lease.
func (t *Table) reconnected() {
	<-t.ready
	t.mu.Lock()
	was := t.connected
	t.connected = !t.closed
	t.mu.Unlock()
	if was {
		return
	}
	t.log.Info("connected to NATS", "url", t.nc.ConnectedUrlRedacted())
	t.publishBeat()
	t.publishControl(control{Kind: kindSync})
	t.sendTails()
}

// sendTails sends a tail on every stream to an attachment elsewhere.
func (t *Table) sendTails() {
	t.mu.RLock()
	tails := make([]*stream, 0, len(t.toAtt))
	for _, s := range t.toAtt {
		tails = append(tails, s)
	}
	t.mu.RUnlock()
	for _, s := range tails {
		s.tail()
	}
}
