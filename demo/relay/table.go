package relay

import (
	"sync"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// Endpoint is one end of a route: an instance's runtime connection or one
// attachment's browser socket. Send encodes f for its leg and queues it; it
// reports false when the endpoint is gone or could not take the frame. f is
// passed by value so that the frame a reader parsed stays on its stack: a
// pointer passed through an interface would cost an allocation per frame.
// Send may wait for room (that is how backpressure crosses the relay) but
// never longer than the endpoint's own bound.
type Endpoint interface {
	Send(f librelay.Frame) bool
}

// Table is where the relay looks up the far end of a route; it is consulted
// once per frame and knows nothing of frames' contents. The in-memory table
// serves one process. When one relay is not enough, a table whose endpoints
// publish to a message bus (natstable: NATS subjects per instance and per
// (instance, session)) lets a runtime and a browser on different nodes
// meet; it tells the relay what happens on other nodes through Hooks, and
// attachment ids already verify on any node sharing the attachment key.
//
// Set* install an endpoint and return the one it replaced, if any; Remove*
// remove ep only if it is still the one installed, so a late cleanup of a
// replaced endpoint cannot remove its successor.
type Table interface {
	Runtime(instance string) Endpoint
	SetRuntime(instance string, ep Endpoint) (replaced Endpoint)
	RemoveRuntime(instance string, ep Endpoint) bool

	Attachment(instance, session string) Endpoint
	SetAttachment(instance, session string, ep Endpoint) (replaced Endpoint)
	RemoveAttachment(instance, session string, ep Endpoint) bool
}

// Watcher is a Table shared by several relay nodes (natstable, on NATS): it
// learns of what happens on the other nodes, and New hands it the Hooks
// through which it tells this node's relay.
type Watcher interface {
	Watch(Hooks)
}

// Hooks are what a shared table tells the relay about other nodes. They are
// called from the table's own goroutines, never with its locks held.
type Hooks struct {
	// RuntimeArrived: instance's runtime is now reached through rt, on
	// another node; the relay sends it the detaches it owes for instance.
	RuntimeArrived func(instance string, rt Endpoint)
	// RuntimeGone: instance's runtime is no longer reachable (it left its
	// node, that node is gone, this node lost the bus, or a new connection
	// replaced it); the instance's sockets here get runtime_gone, as when a
	// runtime on this node leaves or is replaced.
	RuntimeGone func(instance string)
	// Knocked: a hello naming instance's attachment session was refused on
	// another node for want of a runtime; the attachment's grace restarts
	// here if it is in its grace here (Relay.knocked).
	Knocked func(instance, session string)
	// End closes ep, one of this node's endpoints, with relay.error code:
	// superseded when another node took over its route (the table has
	// removed it), runtime_gone when frames on the way to it were lost, so
	// that its client resumes. A runtime connection superseded after it
	// failed a probe another node asked for is told heartbeat_timeout
	// instead, as one relay tells it (endFromAfar).
	End func(ep Endpoint, code, message string)
	// Probe: another node, before it takes over instance's runtime, asks
	// whether ep, this node's runtime connection for it, is alive. The
	// relay probes it as it probes a local incumbent (takeover.go) and
	// reports whether it answered before deadline. It may wait that long.
	Probe func(ep Endpoint, deadline time.Time) bool
}

// Prober is a shared table that can ask the node holding an instance's
// runtime whether that runtime answers a probe (Hooks.Probe there), so that
// a newcomer on this node settles with an incumbent on another as it would
// with one on this node. rt is the endpoint Runtime returned; ProbeRuntime
// reports false, and the newcomer takes the instance over, when the holder
// does not answer by deadline (its node gone, its runtime frozen, the bus
// in trouble), when rt is no longer the instance's runtime here, or when
// the holder's node is of a version that does not answer probes.
type Prober interface {
	ProbeRuntime(instance string, rt Endpoint, deadline time.Time) bool
}

// Mover is a shared table that knows when an attachment that left this node
// was reclaimed on another since: its grace running out here then ends the
// id here and sends no acp.detach.
type Mover interface {
	MovedAway(instance, session string) bool
}

func movedAway(t Table, k route) bool {
	m, ok := t.(Mover)
	return ok && m.MovedAway(k.instance, k.session)
}

// Knocker is a shared table that tells the other nodes of a knock (a hello
// refused unknown_instance naming an attachment id, Relay.knocked): the
// attachment's grace runs on the node where its socket dropped, and a load
// balancer sends the client's redials anywhere.
type Knocker interface {
	Knock(instance, session string)
}

func (r *Relay) hooks() Hooks {
	return Hooks{RuntimeArrived: r.payOwed, RuntimeGone: r.runtimeGone, Knocked: r.restartGrace, End: endEndpoint, Probe: probeLocal}
}

// probeLocal answers another node's Probe for one of this relay's runtime
// connections; it shares the probe of any takeover already under way here.
// A connection that did not answer is reported alive to every newcomer but
// the first (yield, takeover.go).
func probeLocal(ep Endpoint, deadline time.Time) bool {
	c, ok := ep.(*runtimeConn)
	return ok && (c.contest.answeredBy(c, deadline) || !c.yield())
}

// endEndpoint closes one of the relay's own endpoints for a shared table.
// A browser socket superseded (its id reclaimed on another node) lets its
// attachment go at once, its grace starting, rather than once its
// goroutine ends after the close: a newcomer's hello in between, at the
// instance's limit, found the moved id still held by a live socket and was
// refused too_many_attachments, though its client had seen the close
// (TestYieldingAMovedAttachmentDetachesNothing, under -race, once).
func endEndpoint(ep Endpoint, code, message string) {
	switch c := ep.(type) {
	case *runtimeConn:
		c.endFromAfar(code, message)
	case *browserConn:
		c.closeWith(code, message, code != relayleg.CodeSuperseded)
		if code == relayleg.CodeSuperseded {
			c.r.release(c, false)
		}
	}
}

// route is an (instance, session) key; session "" is the instance's runtime.
type route struct{ instance, session string }

// memTable is the one-process Table: a map behind a read-write lock, read on
// every frame and written only when a peer comes or goes.
type memTable struct {
	mu sync.RWMutex
	m  map[route]Endpoint
}

// NewMemTable returns an empty in-memory Table.
func NewMemTable() Table { return &memTable{m: make(map[route]Endpoint)} }

func (t *memTable) get(k route) Endpoint {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[k]
}

func (t *memTable) set(k route, ep Endpoint) Endpoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.m[k]
	t.m[k] = ep
	return old
}

func (t *memTable) remove(k route, ep Endpoint) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[k] != ep {
		return false
	}
	delete(t.m, k)
	return true
}

func (t *memTable) Runtime(instance string) Endpoint { return t.get(route{instance, ""}) }

func (t *memTable) SetRuntime(instance string, ep Endpoint) Endpoint {
	return t.set(route{instance, ""}, ep)
}

func (t *memTable) RemoveRuntime(instance string, ep Endpoint) bool {
	return t.remove(route{instance, ""}, ep)
}

func (t *memTable) Attachment(instance, session string) Endpoint {
	if session == "" {
		return nil
	}
	return t.get(route{instance, session})
}

func (t *memTable) SetAttachment(instance, session string, ep Endpoint) Endpoint {
	return t.set(route{instance, session}, ep)
}

func (t *memTable) RemoveAttachment(instance, session string, ep Endpoint) bool {
	return t.remove(route{instance, session}, ep)
}
